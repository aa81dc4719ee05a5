"""NumPy's products and linear algebra on tensors (NEP 18).

``np.dot``, ``np.matmul``, ``np.inner``, ``np.vdot``, ``np.outer``, ``np.tensordot``,
``np.kron``, ``np.cross``, ``np.trace`` and ``np.einsum`` (its string and operand/sublist
forms) with NumPy's shapes and values, written with transpose / reshape / mat_mul / einsum:
differentiable to any order. ``np.linalg.*`` calls go to the ``tf.linalg`` function of the
same name, looked up when called; while flowgrad has none, the call takes the unmapped path
(computed on the values outside a gradient, a clear GradientError inside one).
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ArgumentError, ShapeError
from .numpy_arrays import diagonal, moveaxis
from .numpy_functions import (axis_index, cast_to, flat, no_more, refuse, registrar,
                              unmapped)
from .ops._core import NAMESPACES, OPS, binary_args
from .tensor import Tensor

FUNCTIONS: dict[Callable, Callable] = {}     # NumPy function -> handler with its signature


_implements = registrar(FUNCTIONS)


# ---------------------------------------------------------------- products
# np.dot, np.matmul, np.inner, np.vdot, np.outer, np.tensordot with NumPy's semantics (shapes
# and values), written with transpose / reshape / mat_mul: differentiable to any order.

def _contract(a, b, axes_a, axes_b, fname):
    """Sum over a's ``axes_a`` paired with b's ``axes_b``; the result's axes are a's other
    axes, then b's (np.tensordot). One mat_mul of a (rows, k) by a (k, cols) matrix."""
    for i, j in zip(axes_a, axes_b):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"{fname}: shapes {a.shape} and {b.shape} not aligned: "
                             f"{a.shape[i]} (dim {i}) != {b.shape[j]} (dim {j}).")
    free_a = [i for i in range(a.rank) if i not in axes_a]
    free_b = [j for j in range(b.rank) if j not in axes_b]
    k = math.prod(a.shape[i] for i in axes_a)
    a2 = _matrix(a, free_a + list(axes_a), math.prod(a.shape[i] for i in free_a), k)
    b2 = _matrix(b, list(axes_b) + free_b, k, math.prod(b.shape[j] for j in free_b))
    y = OPS["mat_mul"](a2, b2)
    shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b)
    return y if y.shape == shape else OPS["reshape"](y, list(shape))


def _matrix(x, perm, rows, cols):
    if perm != list(range(x.rank)):
        x = OPS["transpose"](x, perm)
    return x if x.shape == (rows, cols) else OPS["reshape"](x, [rows, cols])


@_implements(np.dot)
def _dot(a, b, out=None):
    """NumPy's dot: a scalar multiplies; otherwise dot(a, b)[i.., k.., m] =
    sum(a[i.., :] * b[k.., :, m]) (the last axis of a with the one before last of b, or
    b's only axis) -- not matmul's batching."""
    refuse("np.dot", out=(out, None))
    a, b = binary_args(a, b, "np.dot")
    if a.rank == 0 or b.rank == 0:
        return OPS["mul"](a, b)
    return _contract(a, b, [a.rank - 1], [max(b.rank - 2, 0)], "np.dot")


def matmul(a: Any, b: Any) -> Tensor:
    """NumPy's matmul on tensors: batch axes broadcast; a vector operand gets an axis for
    the product, removed from the result; scalars are refused (as NumPy does).

    >>> import numpy as np, flowgrad as tf
    >>> np.matmul(tf.ones([3]), tf.ones([5, 3, 4])).shape
    (5, 4)
    """
    a, b = binary_args(a, b, "np.matmul")
    for i, t in enumerate((a, b)):
        if t.rank == 0:
            raise ShapeError(f"np.matmul: operand {i} is a scalar (shape ()); matmul needs "
                             f"at least one axis (use np.multiply or * for a scalar).")
    n, m = a.shape[-1], b.shape[0 if b.rank == 1 else -2]
    if n != m:
        raise ShapeError(f"np.matmul: shapes {a.shape} and {b.shape}: the last axis of the "
                         f"first ({n}) does not match the "
                         f"{'only' if b.rank == 1 else 'second to last'} axis of the second "
                         f"({m}).")
    if a.rank >= 2 and b.rank >= 2:
        return OPS["mat_mul"](a, b)
    if b.rank == 1:                 # (.., k, n) . (n,): a's last axis against b
        return _contract(a, b, [a.rank - 1], [0], "np.matmul")
    y = OPS["mat_mul"](OPS["reshape"](a, [1, n]), b)        # (n,) @ (.., n, m)
    return OPS["squeeze"](y, [y.rank - 2])


@_implements(np.inner)
def _inner(a, b):
    """NumPy's inner: the last axes of a and b, summed (a scalar multiplies)."""
    a, b = binary_args(a, b, "np.inner")
    if a.rank == 0 or b.rank == 0:
        return OPS["mul"](a, b)
    return _contract(a, b, [a.rank - 1], [b.rank - 1], "np.inner")


@_implements(np.vdot)
def _vdot(a, b):
    """NumPy's vdot (real numbers): the flattened a and b, multiplied and summed."""
    a, b = binary_args(a, b, "np.vdot")
    if a.size != b.size:
        raise ShapeError(f"np.vdot: a (shape {a.shape}) has {a.size} elements and b (shape "
                         f"{b.shape}) {b.size}: vdot needs as many in both.")
    return _contract(flat(a), flat(b), [0], [0], "np.vdot")


@_implements(np.outer)
def _outer(a, b, out=None):
    refuse("np.outer", out=(out, None))
    a, b = binary_args(a, b, "np.outer")
    return _contract(flat(a), flat(b), [], [], "np.outer")


@_implements(np.tensordot)
def _tensordot(a, b, axes=2):
    """NumPy's tensordot: ``axes=N`` sums a's last N axes with b's first N; ``axes=(p, q)``
    sums a's axes p with b's axes q (each an int or a sequence)."""
    a, b = binary_args(a, b, "np.tensordot")
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(a.rank, b.rank):
            raise ShapeError(f"np.tensordot(a, b, axes={n}): a (shape {a.shape}) and b "
                             f"(shape {b.shape}) have no {n} axes to sum over.")
        pa, pb = list(range(a.rank - n, a.rank)), list(range(n))
    else:
        try:
            pa, pb = ([p] if isinstance(p, (int, np.integer)) else [int(i) for i in p]
                      for p in axes)
        except (TypeError, ValueError):
            raise ArgumentError(f"np.tensordot(a, b, axes={axes!r}): axes must be an int or "
                                f"a pair (axes of a, axes of b).") from None
        pa, pb = _axes(pa, a, "a", axes), _axes(pb, b, "b", axes)
        if len(pa) != len(pb):
            raise ShapeError(f"np.tensordot(a, b, axes={axes!r}): {len(pa)} axes of a "
                             f"against {len(pb)} of b.")
    return _contract(a, b, pa, pb, "np.tensordot")


def _axes(axes, t, name, given):
    out = []
    for i in axes:
        if not -t.rank <= i < t.rank or i % t.rank in out:
            raise ArgumentError(f"np.tensordot(a, b, axes={given!r}): axis {i} of {name} "
                                f"(shape {t.shape}) is out of range or repeated.")
        out.append(i % t.rank)
    return out


@_implements(np.kron)
def _kron(a, b):
    """NumPy's kron: the block matrix of a[i..] * b, for operands of any rank (the shorter
    shape gets leading ones)."""
    a, b = binary_args(a, b, "np.kron")
    nd = max(a.rank, b.rank)
    sa = [1] * (nd - a.rank) + list(a.shape)
    sb = [1] * (nd - b.rank) + list(b.shape)
    # a's axes interleaved with b's: y[i0, j0, i1, j1, ..] = a[i0, i1, ..] * b[j0, j1, ..]
    y = OPS["mul"](OPS["reshape"](a, [d for n in sa for d in (n, 1)]),
                   OPS["reshape"](b, [d for n in sb for d in (1, n)]))
    return OPS["reshape"](y, [m * n for m, n in zip(sa, sb)])


@_implements(np.cross)
def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """NumPy's cross product of 3-vectors along ``axisa`` / ``axisb`` (a 2-vector has z = 0;
    two 2-vectors give the z component alone), the result's vectors along ``axisc``."""
    a, b = binary_args(a, b, "np.cross")
    if axis is not None:
        axisa = axisb = axisc = axis
    if a.rank == 0 or b.rank == 0:
        raise ShapeError(f"np.cross: shapes {a.shape} and {b.shape}: both operands need an "
                         f"axis of 2 or 3 components.")
    a = moveaxis(a, axis_index(axisa, a.rank, "np.cross", "axisa"), -1)
    b = moveaxis(b, axis_index(axisb, b.rank, "np.cross", "axisb"), -1)
    na, nb = a.shape[-1], b.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError(f"np.cross: the vector axes have {na} and {nb} components; each "
                         f"must have 2 or 3 (choose them with axisa, axisb or axis).")
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = OPS["sub"](OPS["mul"](a0, b1), OPS["mul"](a1, b0))
    if na == 2 and nb == 2:
        return z
    if na == 3 and nb == 3:
        a2, b2 = a[..., 2], b[..., 2]
        x = OPS["sub"](OPS["mul"](a1, b2), OPS["mul"](a2, b1))
        y = OPS["sub"](OPS["mul"](a2, b0), OPS["mul"](a0, b2))
    elif na == 2:
        b2 = b[..., 2]
        x, y = OPS["mul"](a1, b2), OPS["neg"](OPS["mul"](a0, b2))
    else:
        a2 = a[..., 2]
        x, y = OPS["neg"](OPS["mul"](a2, b1)), OPS["mul"](a2, b0)
    lead = list(np.broadcast_shapes(x.shape, y.shape, z.shape))
    c = OPS["stack"]([OPS["broadcast_to"](t, lead) for t in (x, y, z)], -1)
    return moveaxis(c, -1, axis_index(axisc, c.rank, "np.cross", "axisc"))


@_implements(np.trace)
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    refuse("np.trace", out=(out, None))
    return OPS["sum"](diagonal(cast_to(a, dtype, "np.trace"), offset, axis1, axis2), -1)


# ---------------------------------------------------------------- einsum
@_implements(np.einsum)
def _einsum(*operands, out=None, optimize=False, **kw):
    """np.einsum("ij,jk->ik", a, b) and its operand/sublist form
    np.einsum(a, [0, 1], b, [1, 2], [0, 2]) (Ellipsis in a sublist is '...')."""
    refuse("np.einsum", out=(out, None), dtype=(kw.pop("dtype", None), None),
           order=(kw.pop("order", "K"), "K"), casting=(kw.pop("casting", "safe"), "safe"))
    no_more("np.einsum", kw)
    if not operands:
        raise ArgumentError("np.einsum: no operands given.")
    if isinstance(operands[0], str):
        return OPS["einsum"](operands[0], *operands[1:])
    ops = list(operands)
    output = ops.pop() if len(ops) % 2 else None
    arrays, subs = ops[0::2], ops[1::2]
    spec = ",".join(_labels(s, i) for i, s in enumerate(subs))
    if output is not None:
        spec += "->" + _labels(output, "output")
    return OPS["einsum"](spec, *arrays)


def _labels(sublist, which):
    # NumPy's own mapping: 0..25 -> 'A'..'Z', 26..51 -> 'a'..'z' (so the implicit output,
    # labels sorted by code, is in the order of the integers)
    out = []
    try:
        items = list(sublist)
    except TypeError:
        items = [sublist]
    for s in items:
        if s is Ellipsis:
            out.append("...")
            continue
        try:
            i = int(s) if not isinstance(s, (bool, float, str)) else None
        except TypeError:
            i = None
        if i is None or not 0 <= i < 52:
            raise ArgumentError(f"np.einsum: sublist {which} holds {s!r}; a subscript is an "
                                f"integer in [0, 52) or Ellipsis.")
        out.append(chr(ord("A") + i) if i < 26 else chr(ord("a") + i - 26))
    return "".join(out)


# ---------------------------------------------------------------- np.linalg
def _linalg(name):
    return NAMESPACES.get("linalg", {}).get(name)


def _accepts(f):
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None                   # takes any keyword
    return set(params)


# np.linalg function -> how many leading parameters are passed on by position
_FORWARDED = {"solve": 2, "inv": 1, "det": 1, "slogdet": 1, "cholesky": 1, "eigh": 1,
              "eigvalsh": 1, "svd": 1, "svdvals": 1, "pinv": 1, "lstsq": 2,
              "matrix_power": 2, "qr": 1, "eig": 1, "eigvals": 1, "matrix_rank": 1,
              "cond": 1, "tensorinv": 1, "tensorsolve": 2}


def _forwarded(name, npos):
    np_func = getattr(np.linalg, name)
    sig = inspect.signature(np_func)
    fname = f"np.linalg.{name}"

    def h(*args, **kwargs):
        try:
            given = dict(sig.bind(*args, **kwargs).arguments)
        except TypeError as e:
            raise ArgumentError(f"{fname}: {e}.") from None
        target = name
        if name == "svd" and given.get("compute_uv", True) is False:
            target = "svdvals"        # NumPy's singular values alone
            given.pop("compute_uv")
            given.pop("full_matrices", None)
        f = _linalg(target)
        if f is None:
            return unmapped(fname, np_func, args, kwargs, None)
        pos = [given.pop(p) for p in list(sig.parameters)[:npos] if p in given]
        accepted = _accepts(f)
        if name == "qr" and accepted is not None and "mode" not in accepted:
            return _qr(f, pos, given.pop("mode", "reduced"), given, fname)
        kw = {}
        for k, v in given.items():
            if accepted is None or k in accepted:
                kw[k] = v
            else:
                refuse(fname, **{k: (v, sig.parameters[k].default)})
        return f(*pos, **kw)
    h.__name__ = name
    return h


def _qr(f, pos, mode, given, fname):
    """np.linalg.qr's modes on a tf.linalg.qr that takes TF's full_matrices."""
    no_more(fname, given)
    if mode not in ("reduced", "complete", "r"):
        raise ArgumentError(f"{fname}(..., mode={mode!r}) on a flowgrad tensor: flowgrad "
                            f"computes the modes 'reduced', 'complete' and 'r'.")
    q, r = f(*pos, full_matrices=mode == "complete")
    return r if mode == "r" else (q, r)


for _name, _npos in _FORWARDED.items():
    FUNCTIONS[getattr(np.linalg, _name)] = _forwarded(_name, _npos)


def _euclidean(x, ord, axis):
    """Whether np.linalg.norm(x, ord, axis) is the Euclidean / Frobenius norm."""
    rank = np.ndim(x) if not isinstance(x, Tensor) else x.rank
    vector = isinstance(axis, (int, np.integer)) or (axis is None and rank == 1)
    matrix = (axis is not None and not vector and len(axis) == 2) or (axis is None
                                                                    and rank == 2)
    return ord is None or (ord == 2 and vector and not isinstance(ord, str)) or \
        (ord == "fro" and matrix)


@_implements(np.linalg.norm)
def _norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: tf.linalg.norm (every ord) where flowgrad has it; the Euclidean and
    Frobenius norms otherwise."""
    f = _linalg("norm")
    if f is not None:
        return _call_norm(f, x, ord, axis, keepdims)
    if _euclidean(x, ord, axis):
        return OPS["euclidean_norm"](x, axis if axis is None or isinstance(axis, int)
                                     else list(axis), keepdims)
    return unmapped("np.linalg.norm", np.linalg.norm, (x,),
                    {"ord": ord, "axis": axis, "keepdims": keepdims}, None)


def _call_norm(f, x, ord, axis, keepdims):
    accepted = _accepts(f)
    kw = {"keepdims": keepdims} if accepted is None or "keepdims" in accepted else \
        {"keep_dims": keepdims}
    return f(x, ord=ord, axis=axis, **kw)


@_implements(np.linalg.vector_norm)
def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    if axis is None or not isinstance(axis, (int, np.integer)):
        # NumPy's vector norm over several axes: of the entries of those axes, together
        axes = list(range(x.rank)) if axis is None else \
            [axis_index(a, x.rank, "np.linalg.vector_norm") for a in axis]
        rest = [i for i in range(x.rank) if i not in axes]
        y = moveaxis(x, axes, list(range(len(rest), x.rank)))
        y = OPS["reshape"](y, [x.shape[i] for i in rest] + [-1])
        n = _norm(y, ord, -1, False)
        if keepdims:
            n = OPS["reshape"](n, [1 if i in axes else s for i, s in enumerate(x.shape)])
        return n
    return _norm(x, ord, axis, keepdims)


@_implements(np.linalg.matrix_norm)
def _matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return _norm(x, ord, (-2, -1), keepdims)


@_implements(np.linalg.trace)
def _linalg_trace(x, /, *, offset=0, dtype=None):
    return OPS["sum"](diagonal(cast_to(x, dtype, "np.linalg.trace"), offset, -2, -1), -1)


@_implements(np.linalg.diagonal)
def _linalg_diagonal(x, /, *, offset=0):
    return diagonal(x, offset, -2, -1)


@_implements(np.linalg.matrix_transpose)
def _matrix_transpose(x, /):
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    if x.rank < 2:
        raise ShapeError(f"np.linalg.matrix_transpose needs at least 2 axes; got shape "
                         f"{x.shape}.")
    return moveaxis(x, -1, -2)


@_implements(np.linalg.outer)
def _linalg_outer(x1, x2, /):
    a, b = binary_args(x1, x2, "np.linalg.outer")
    if a.rank != 1 or b.rank != 1:
        raise ShapeError(f"np.linalg.outer takes two vectors; got shapes {a.shape} and "
                         f"{b.shape} (np.outer flattens its operands).")
    return _outer(a, b)


@_implements(np.linalg.cross)
def _linalg_cross(x1, x2, /, *, axis=-1):
    a, b = binary_args(x1, x2, "np.linalg.cross")
    for t in (a, b):
        if t.rank == 0 or t.shape[axis_index(axis, t.rank, "np.linalg.cross")] != 3:
            raise ShapeError(f"np.linalg.cross: shapes {a.shape} and {b.shape}: both need 3 "
                             f"components along axis {axis} (np.cross takes 2 too).")
    return _cross(a, b, axis=axis)


@_implements(np.linalg.vecdot)
def _linalg_vecdot(x1, x2, /, *, axis=-1):
    a, b = binary_args(x1, x2, "np.linalg.vecdot")
    p = OPS["mul"](a, b)
    return OPS["sum"](p, axis_index(axis, p.rank, "np.linalg.vecdot"))


FUNCTIONS[np.linalg.matmul] = lambda x1, x2, /: matmul(x1, x2)
FUNCTIONS[np.linalg.tensordot] = lambda x1, x2, /, *, axes=2: _tensordot(x1, x2, axes)


@_implements(np.linalg.multi_dot)
def _multi_dot(arrays, *, out=None):
    refuse("np.linalg.multi_dot", out=(out, None))
    ts = list(arrays)
    if len(ts) < 2:
        raise ArgumentError(f"np.linalg.multi_dot: {len(ts)} arrays given; give at least 2.")
    for i, t in enumerate(ts[1:-1], 1):
        if np.ndim(t) != 2:
            raise ShapeError(f"np.linalg.multi_dot: arrays[{i}] has shape {np.shape(t)}; all "
                             f"but the first and last must be matrices.")
    y = ts[0]
    for t in ts[1:]:
        y = matmul(y, t)
    return y
