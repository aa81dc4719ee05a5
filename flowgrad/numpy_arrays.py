"""NumPy's functions that rearrange arrays, on tensors (NEP 18): reshaping, axes, stacking
and splitting, flips and rotations, repeats and rolls, padding, diagonals and triangles.

Each handler has NumPy's signature and semantics and is written with flowgrad's shape ops
(transpose, reshape, concat, slices, gather, pad, where): all are linear, so every order of
derivative is exact. Index maps that depend only on shapes (np.repeat's, np.pad's
reflections) are computed with NumPy on indices, never on the values.
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .arg_checks import norm_axis
from .errors import ArgumentError, ShapeError
from .numpy_functions import along, axis_index, cast_to, flat, no_more, refuse, registrar
from .ops._core import OPS, as_tensor
from .tensor import Tensor

FUNCTIONS: dict[Callable, Callable] = {}     # NumPy function -> handler with its signature


_implements = registrar(FUNCTIONS)


def _tensor(x, fname, arg="a"):
    return as_tensor(x, fname, arg)


def _tensors(arrays, fname, dtype=None):
    """A sequence of arrays as tensors; NumPy arrays and numbers take the widest float
    dtype among the tensors (so float32 stays float32 beside a float64 NumPy array)."""
    arrays = list(arrays)
    like = None
    for a in arrays:
        if isinstance(a, Tensor) and a.dtype in ("float32", "float64") and like != "float64":
            like = a.dtype
    out = [as_tensor(a, fname, f"arrays[{i}]", like) for i, a in enumerate(arrays)]
    return [cast_to(t, dtype, fname) for t in out] if dtype is not None else out


def _ints(v):
    return np.asarray(v.numpy() if isinstance(v, Tensor) else v)


# ---------------------------------------------------------------- shapes and axes
@_implements(np.reshape)
def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    refuse("np.reshape", order=(order, "C"))
    return OPS["reshape"](a, newshape if shape is None else shape)


@_implements(np.ravel)
def _ravel(a, order="C"):
    refuse("np.ravel", order=(order, "C"))
    return flat(a)


@_implements(np.transpose)
def _transpose(a, axes=None):
    return OPS["transpose"](a, None if axes is None else list(axes))


@_implements(np.squeeze)
def _squeeze(a, axis=None):
    return OPS["squeeze"](a, None if axis is None else
                          ([axis] if isinstance(axis, int) else list(axis)))


@_implements(np.expand_dims)
def _expand_dims(a, axis):
    if isinstance(axis, (tuple, list)):
        # NumPy's tuple form: the new axes' places in the result
        rank = a.rank + len(axis)
        axes = sorted(norm_axis(k, rank, "np.expand_dims") for k in axis)
        if len(set(axes)) != len(axes):
            raise ArgumentError(f"np.expand_dims: axis {tuple(axis)} repeats an axis")
        shape = list(a.shape)
        for k in axes:
            shape.insert(k, 1)
        return OPS["reshape"](a, shape)
    return OPS["expand_dims"](a, axis)


@_implements(np.broadcast_to)
def _broadcast_to(array, shape, subok=False):
    return OPS["broadcast_to"](array, [shape] if isinstance(shape, int) else list(shape))


@_implements(np.moveaxis)
def moveaxis(a: Any, source: Any, destination: Any) -> Tensor:
    """NumPy's moveaxis on a tensor: the ``source`` axes moved to ``destination``, the
    others kept in order.

    >>> import numpy as np, flowgrad as tf
    >>> np.moveaxis(tf.zeros([2, 3, 4]), 0, -1).shape
    (3, 4, 2)
    """
    x = _tensor(a, "np.moveaxis")
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise ArgumentError(f"np.moveaxis: {len(src)} source axes and {len(dst)} "
                            f"destinations; give as many of each.")
    src = [axis_index(s, x.rank, "np.moveaxis", "source") for s in src]
    dst = [axis_index(d, x.rank, "np.moveaxis", "destination") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ArgumentError(f"np.moveaxis: repeated axis in source {source!r} or destination "
                            f"{destination!r}.")
    order = [i for i in range(x.rank) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x if order == list(range(x.rank)) else OPS["transpose"](x, order)


@_implements(np.swapaxes)
def _swapaxes(a, axis1, axis2):
    x = _tensor(a, "np.swapaxes")
    i = axis_index(axis1, x.rank, "np.swapaxes", "axis1")
    j = axis_index(axis2, x.rank, "np.swapaxes", "axis2")
    perm = list(range(x.rank))
    perm[i], perm[j] = j, i
    return x if i == j else OPS["transpose"](x, perm)


@_implements(np.rollaxis)
def _rollaxis(a, axis, start=0):
    x = _tensor(a, "np.rollaxis")
    n = x.rank
    ax = axis_index(axis, n, "np.rollaxis")
    start = operator.index(start)
    if not -n <= start <= n:
        raise ShapeError(f"np.rollaxis(..., start={start}): start must be in [{-n}, {n}] for "
                         f"a tensor of rank {n}.")
    start = start + n if start < 0 else start
    if ax < start:
        start -= 1
    if ax == start:
        return x
    order = [i for i in range(n) if i != ax]
    order.insert(start, ax)
    return OPS["transpose"](x, order)


def _atleast(arys, rank, fname):
    out = []
    for a in arys:
        x = _tensor(a, fname)
        if x.rank < rank:
            # NumPy's shapes: a vector is a row of a matrix, and the middle of a 3-D array
            shape = {0: [1, 1, 1], 1: [1, x.size, 1], 2: list(x.shape) + [1]}[x.rank] \
                if rank == 3 else [1] * (rank - x.rank) + list(x.shape)
            x = OPS["reshape"](x, shape)
        out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


@_implements(np.atleast_1d)
def _atleast_1d(*arys):
    return _atleast(arys, 1, "np.atleast_1d")


@_implements(np.atleast_2d)
def _atleast_2d(*arys):
    return _atleast(arys, 2, "np.atleast_2d")


@_implements(np.atleast_3d)
def _atleast_3d(*arys):
    return _atleast(arys, 3, "np.atleast_3d")


# ---------------------------------------------------------------- joining
@_implements(np.concatenate)
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    refuse("np.concatenate", out=(out, None), casting=(casting, "same_kind"))
    arrays = _tensors(arrays, "np.concatenate", dtype)
    return OPS["concat"]([flat(a) for a in arrays], 0) if axis is None else \
        OPS["concat"](arrays, axis)


@_implements(np.stack)
def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    refuse("np.stack", out=(out, None), casting=(casting, "same_kind"))
    return OPS["stack"](_tensors(arrays, "np.stack", dtype), axis)


def _join(fname, rank, axis):
    def h(tup, *, dtype=None, casting="same_kind"):
        refuse(fname, casting=(casting, "same_kind"))
        ts = _tensors(tup, fname, dtype)
        ts = [_atleast([t], rank, fname) for t in ts]
        ax = axis if axis >= 0 or not ts else (0 if ts[0].rank == 1 else 1)
        return OPS["concat"](ts, ax)
    return h


FUNCTIONS[np.vstack] = _join("np.vstack", 2, 0)
FUNCTIONS[np.hstack] = _join("np.hstack", 1, -1)        # -1: axis 0 for vectors, else 1
if hasattr(np, "row_stack"):          # (deprecated in NumPy 2.0)
    FUNCTIONS[np.row_stack] = _join("np.row_stack", 2, 0)


@_implements(np.dstack)
def _dstack(tup):
    return OPS["concat"]([_atleast([t], 3, "np.dstack")
                          for t in _tensors(tup, "np.dstack")], 2)


@_implements(np.column_stack)
def _column_stack(tup):
    ts = []
    for t in _tensors(tup, "np.column_stack"):
        ts.append(OPS["reshape"](t, [t.size, 1]) if t.rank < 2 else t)
    return OPS["concat"](ts, 1)


@_implements(np.append)
def _append(arr, values, axis=None):
    a, v = _tensors([arr, values], "np.append")
    if axis is None:
        return OPS["concat"]([flat(a), flat(v)], 0)
    return OPS["concat"]([a, v], axis_index(axis, a.rank, "np.append"))


# ---------------------------------------------------------------- splitting
@_implements(np.array_split)
def _array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "np.array_split", even=False)


@_implements(np.split)
def _np_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "np.split", even=True)


def _split(ary, sections, axis, fname, even):
    x = _tensor(ary, fname, "ary")
    if x.rank == 0:
        raise ShapeError(f"{fname} of a scalar: give a tensor with at least one axis.")
    ax = axis_index(axis, x.rank, fname)
    n = x.shape[ax]
    sections = _ints(sections) if isinstance(sections, Tensor) else sections
    if np.ndim(sections) == 0:
        k = operator.index(sections)
        if k <= 0:
            raise ArgumentError(f"{fname}(ary, {k}): the number of sections must be larger "
                                f"than 0.")
        if even and n % k:
            raise ShapeError(f"{fname}(ary, {k}, axis={axis}): axis {ax} has {n} entries, "
                             f"which do not divide into {k} equal sections (np.array_split "
                             f"allows unequal ones).")
        each, extra = divmod(n, k)
        bounds = np.cumsum([0] + [each + 1] * extra + [each] * (k - extra)).tolist()
    else:
        bounds = [0] + [operator.index(i) for i in sections] + [n]
    return [along(x, ax, lo, hi) for lo, hi in itertools.pairwise(bounds)]


def _split_on(fname, axis, min_rank):
    def h(ary, indices_or_sections):
        x = _tensor(ary, fname, "ary")
        if x.rank < min_rank:
            raise ShapeError(f"{fname} works on tensors of {min_rank} or more axes; got shape "
                             f"{x.shape}.")
        ax = axis if axis >= 0 else (1 if x.rank > 1 else 0)
        return _split(x, indices_or_sections, ax, fname, even=True)
    return h


FUNCTIONS[np.hsplit] = _split_on("np.hsplit", -1, 1)    # -1: axis 1, or 0 for vectors
FUNCTIONS[np.vsplit] = _split_on("np.vsplit", 0, 2)
FUNCTIONS[np.dsplit] = _split_on("np.dsplit", 2, 3)


# ---------------------------------------------------------------- flips, rotations
@_implements(np.flip)
def _flip(m, axis=None):
    return OPS["reverse"](m, axis)


@_implements(np.flipud)
def _flipud(m):
    x = _tensor(m, "np.flipud", "m")
    if x.rank < 1:
        raise ShapeError("np.flipud: the input must have at least 1 axis; got a scalar.")
    return OPS["reverse"](x, [0])


@_implements(np.fliplr)
def _fliplr(m):
    x = _tensor(m, "np.fliplr", "m")
    if x.rank < 2:
        raise ShapeError(f"np.fliplr: the input must have at least 2 axes; got shape "
                         f"{x.shape}.")
    return OPS["reverse"](x, [1])


@_implements(np.rot90)
def _rot90(m, k=1, axes=(0, 1)):
    x = _tensor(m, "np.rot90", "m")
    axes = tuple(axes)
    if len(axes) != 2:
        raise ArgumentError(f"np.rot90(..., axes={axes!r}): give exactly 2 axes.")
    i, j = (axis_index(a, x.rank, "np.rot90", "axes") for a in axes)
    if i == j:
        raise ArgumentError(f"np.rot90(..., axes={axes!r}): the two axes must differ.")
    k = operator.index(k) % 4
    if k == 0:
        return x
    if k == 2:
        return OPS["reverse"](x, [i, j])
    perm = list(range(x.rank))
    perm[i], perm[j] = j, i
    if k == 1:
        return OPS["transpose"](OPS["reverse"](x, [j]), perm)
    return OPS["reverse"](OPS["transpose"](x, perm), [j])


# ---------------------------------------------------------------- repeats, rolls, takes
def _gather(x, index, ax, fname):
    idx = OPS["tensor"](np.asarray(index, dtype=np.int32))
    return OPS["gather"](x, idx, ax)


@_implements(np.repeat)
def _repeat(a, repeats, axis=None):
    x = _tensor(a, "np.repeat")
    if axis is None:
        x, axis = flat(x), 0
    ax = axis_index(axis, x.rank, "np.repeat")
    n = x.shape[ax]
    reps = _ints(repeats)
    if reps.dtype.kind not in "iu" or reps.ndim > 1:
        raise ArgumentError(f"np.repeat(..., repeats={repeats!r}): repeats is an integer "
                            f"or a vector of integers.")
    if reps.ndim == 1 and reps.size not in (1, n):
        raise ShapeError(f"np.repeat: {reps.size} repeats for an axis of {n} entries; give "
                         f"one, or one per entry.")
    if (reps < 0).any():
        raise ArgumentError("np.repeat: repeats must be non-negative.")
    return _gather(x, np.repeat(np.arange(n), np.broadcast_to(reps, (n,))), ax, "np.repeat")


@_implements(np.roll)
def _roll(a, shift, axis=None):
    x = _tensor(a, "np.roll")
    if axis is None:
        return OPS["reshape"](_roll(flat(x), shift, 0), list(x.shape))
    shifts, axes = np.broadcast_arrays(_ints(shift), np.asarray(axis))
    total = {}
    for s, ax in zip(shifts.ravel().tolist(), axes.ravel().tolist()):
        ax = axis_index(ax, x.rank, "np.roll")
        total[ax] = total.get(ax, 0) + operator.index(s)
    for ax, s in total.items():
        n = x.shape[ax]
        if n and s % n:
            x = _gather(x, (np.arange(n) - s) % n, ax, "np.roll")
    return x


@_implements(np.take)
def _take(a, indices, axis=None, out=None, mode="raise"):
    refuse("np.take", out=(out, None))
    x = _tensor(a, "np.take")
    if axis is None:
        x, axis = flat(x), 0
    ax = axis_index(axis, x.rank, "np.take")
    n = x.shape[ax]
    idx = _ints(indices)
    if idx.dtype.kind not in "iu":
        raise ArgumentError(f"np.take: indices must be integers; got {idx.dtype}.")
    if mode == "wrap":
        idx = idx % max(n, 1)
    elif mode == "clip":
        idx = np.clip(idx, 0, max(n - 1, 0))
    elif mode == "raise":
        if idx.size and not (-n <= idx.min() and idx.max() < n):
            raise ShapeError(f"np.take: an index in {indices!r} is out of bounds for axis {ax} "
                             f"with {n} entries.")
        idx = idx % max(n, 1)
    else:
        raise ArgumentError(f"np.take(..., mode={mode!r}): mode is 'raise', 'wrap' or "
                            f"'clip'.")
    return _gather(x, idx, ax, "np.take")


@_implements(np.tile)
def _tile(A, reps):
    a = A if isinstance(A, Tensor) else OPS["tensor"](A)
    reps = [reps] if isinstance(reps, int) else list(reps)
    while a.rank < len(reps):
        a = OPS["expand_dims"](a, 0)
    return OPS["tile"](a, [1] * (a.rank - len(reps)) + reps)


# ---------------------------------------------------------------- padding
_PAD_INDEXED = ("edge", "reflect", "symmetric", "wrap")


@_implements(np.pad)
def _pad(array, pad_width, mode="constant", **kwargs):
    """np.pad's 'constant' mode (a value per side and axis), and the modes that copy
    entries: 'edge', 'reflect', 'symmetric', 'wrap' (a gather of the entries they copy,
    whose gradient adds the copies back)."""
    x = _tensor(array, "np.pad", "array")
    try:
        widths = np.broadcast_to(_ints(pad_width), (x.rank, 2))
    except ValueError:
        raise ShapeError(f"np.pad: pad_width {pad_width!r} does not fit a tensor of shape "
                         f"{x.shape}; give one int, a (before, after) pair, or a pair per "
                         f"axis.") from None
    if widths.dtype.kind not in "iu" or (widths < 0).any():
        raise ArgumentError(f"np.pad: pad_width {pad_width!r} must be non-negative integers.")
    if mode == "constant":
        values = kwargs.pop("constant_values", 0)
        no_more("np.pad", kwargs)
        return _pad_constant(x, widths.tolist(), values)
    if mode not in _PAD_INDEXED:
        raise ArgumentError(f"np.pad(..., mode={mode!r}) on a flowgrad tensor: flowgrad pads "
                            f"with 'constant', 'edge', 'reflect', 'symmetric' or 'wrap'; "
                            f"compute other modes from tf.pad and slices of the tensor.")
    if mode in ("reflect", "symmetric"):
        refuse("np.pad", reflect_type=(kwargs.pop("reflect_type", "even"), "even"))
    no_more("np.pad", kwargs)
    for ax, (lo, hi) in enumerate(widths.tolist()):
        if lo or hi:
            try:
                src = np.pad(np.arange(x.shape[ax]), (lo, hi), mode=mode)
            except ValueError as e:
                raise ShapeError(f"np.pad(..., mode={mode!r}): axis {ax} of shape {x.shape}: "
                                 f"{e}") from None
            x = _gather(x, src, ax, "np.pad")
    return x


def _pad_constant(x, widths, values):
    if isinstance(values, Tensor) or np.ndim(values) == 0:
        if not isinstance(values, Tensor):
            return OPS["pad"](x, widths, float(values))
        # a tensor value: differentiable in it too
        c = cast_to(values, x.dtype, "np.pad")
        if c.rank != 0:
            raise ArgumentError("np.pad: a tensor constant_values must be a scalar; give "
                                "numbers for one value per side and axis.")
        inside = OPS["pad"](OPS["ones_like"](x), widths, 0.0)
        return OPS["add"](OPS["pad"](x, widths, 0.0), OPS["mul"](OPS["sub"](1.0, inside), c))
    vals = np.broadcast_to(np.asarray(values, dtype=float), (x.rank, 2)).tolist()
    # axis by axis, as NumPy: a corner takes the value of the last axis padded
    for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(widths, vals)):
        for w, v, side in ((lo, vlo, 0), (hi, vhi, 1)):
            if w:
                pw = [[0, 0] for _ in range(x.rank)]
                pw[ax][side] = w
                x = OPS["pad"](x, pw, v)
    return x


# ---------------------------------------------------------------- diagonals, triangles
@_implements(np.diagonal)
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """NumPy's diagonal on a tensor: the entries ``[i, i + offset]`` of the (axis1, axis2)
    planes, along a new last axis.

    >>> import numpy as np, flowgrad as tf
    >>> np.diagonal(tf.tensor([[1, 2], [3, 4]]), 1).array_sync()
    [2.0]
    """
    x = _tensor(a, "np.diagonal")
    if x.rank < 2:
        raise ShapeError(f"np.diagonal needs at least 2 axes; got shape {x.shape}.")
    i = axis_index(axis1, x.rank, "np.diagonal", "axis1")
    j = axis_index(axis2, x.rank, "np.diagonal", "axis2")
    if i == j:
        raise ArgumentError(f"np.diagonal(..., axis1={axis1}, axis2={axis2}): the two axes "
                            f"must differ.")
    x = moveaxis(x, [i, j], [-2, -1])
    n, m = x.shape[-2:]
    offset = operator.index(offset)
    rows = np.arange(max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m)))
    rows = rows if offset >= 0 else rows - offset
    cols = rows + offset
    x = OPS["reshape"](x, list(x.shape[:-2]) + [n * m])
    return _gather(x, rows * m + cols, x.rank - 1, "np.diagonal")


@_implements(np.diag)
def _diag(v, k=0):
    x = _tensor(v, "np.diag", "v")
    k = operator.index(k)
    if x.rank == 2:
        return diagonal(x, k)
    if x.rank != 1:
        raise ShapeError(f"np.diag takes a vector (to make a matrix) or a matrix (to take a "
                         f"diagonal); got shape {x.shape}.")
    n = x.shape[0]
    size = n + abs(k)
    # a gather from [0, v...]: entry 0 fills the matrix, i + 1 the diagonal
    index = np.zeros((size, size), dtype=np.int32)
    i = np.arange(n)
    index[i + max(-k, 0), i + max(k, 0)] = i + 1
    return _gather(OPS["pad"](x, [[1, 0]], 0.0), index, 0, "np.diag")


def _triangle(fname, lower):
    def h(m, k=0):
        x = _tensor(m, fname, "m")
        if x.rank == 0:
            raise ShapeError(f"{fname} needs at least 1 axis; got a scalar.")
        k = operator.index(k)
        shape = x.shape[-2:]
        n, m = shape[0], shape[-1]          # (a vector is every row of a square matrix)
        keep = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
        # a select, not a product: inf and NaN outside the triangle become 0, as in NumPy
        return OPS["where"](OPS["tensor"](keep), x, OPS["zeros_like"](x))
    return h


FUNCTIONS[np.tril] = _triangle("np.tril", True)
FUNCTIONS[np.triu] = _triangle("np.triu", False)
