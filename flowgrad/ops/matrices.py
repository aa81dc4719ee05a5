"""Square-matrix functions with NumPy's names and semantics (batched over leading axes):
linear systems, inverses, determinants, Cholesky, triangular parts, trace, powers.

Each is a primitive whose gradient is written with flowgrad ops (so every order works), or a
composite of such ops. The rules take the stable routes: solves rather than inverses, and
triangular solves for triangular factors (Cholesky, QR). A singular matrix (or one that is
not positive definite, for Cholesky) raises ``LinAlgError`` naming the op and the batch
entries, where NumPy would raise a bare ``numpy.linalg.LinAlgError``; it is one too, so
``except np.linalg.LinAlgError`` in code written for NumPy keeps working.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import LinAlgError, ShapeError
from ._core import (
    OPS,
    as_float,
    as_floats,
    as_int,
    as_tensor,
    batch_axes_broadcast,
    cast,
    export,
    flag,
    no_strings,
    primitive,
    scalar_of,
)
from .creation import eye, tensor
from .logical import where
from .reduce import sum as _sum
from .shape import broadcast_to, reshape, transpose

if TYPE_CHECKING:
    from ..tensor import Tensor, TensorLike


# ---------------------------------------------------------------- helpers

def _mm(a, b, transpose_a=False, transpose_b=False):
    # mat_mul lives in linalg.py, which imports this module: looked up in the op table
    return OPS["mat_mul"](a, b, transpose_a, transpose_b)


def _mT(x):
    """x with its last two axes swapped."""
    perm = list(range(x.rank))
    perm[-2:] = perm[-1], perm[-2]
    return transpose(x, perm)


def _trailing(t, k=2):
    """t with k axes of length 1 appended (a per-matrix value against its matrices)."""
    return reshape(t, tuple(t.shape) + (1,) * k)


def _matrices(x, fn, arg="a", square=True):
    """Check that x is a (stack of) matrices, square when asked."""
    if x.rank < 2:
        raise ShapeError(f"{fn}: {arg} must be a matrix or a stack of matrices (rank >= 2, "
                         f"the last two axes), got shape {list(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{fn}: {arg} must be square in its last two axes, got shape "
                         f"{list(x.shape)} ({x.shape[-2]}x{x.shape[-1]})")
    return x


def _float_pair(fn, a, b):
    """a and b as float tensors of one dtype (float64 if either is)."""
    a, b = as_floats(fn, a=a, b=b)
    if a.dtype != b.dtype:
        dt = dtypes.promote(a.dtype, b.dtype, fn)
        a, b = (a if a.dtype == dt else cast(a, dt)), (b if b.dtype == dt else cast(b, dt))
    return a, b


def _rhs(a, b, fn):
    """b as a stack of right-hand sides (..., M, K) for a (..., M, M), and whether it was a
    vector (NumPy 2: b is a vector only when b.ndim == 1)."""
    n = a.shape[-1]
    if b.rank == 0:
        raise ShapeError(f"{fn}: b must be a vector of length {n} or a stack of {n}-row "
                         f"matrices (..., {n}, K), got a scalar")
    if b.rank == 1:
        if b.shape[0] != n:
            raise ShapeError(f"{fn}: a is {n}x{n} but the vector b has length {b.shape[0]}; "
                             f"they must match")
        return reshape(b, (n, 1)), True
    if b.shape[-2] != n:
        raise ShapeError(f"{fn}: a is {n}x{n} but b has {b.shape[-2]} rows (shape "
                         f"{list(b.shape)}); b must be (..., {n}, K) — a 1-D b of length {n} "
                         f"is a vector (NumPy 2's rule: b is a vector only when b.ndim == 1)")
    ba, bb = a.shape[:-2], b.shape[:-2]
    if not batch_axes_broadcast(ba, bb):
        raise ShapeError(f"{fn}: the batch shapes {list(ba)} of a (shape {list(a.shape)}) "
                         f"and {list(bb)} of b (shape {list(b.shape)}) do not broadcast")
    return b, False


def _pair_rule(prim, inputs, attrs, levels):
    """tf.vmap of a kernel of two stacks of matrices whose batch axes broadcast (solves):
    both aligned to one rank, so that their batch axes line up."""
    rank = max(len(t.shape) for t in inputs)
    return prim.fwd(E.B, *[V.physical(t, levels, rank) for t in inputs], **attrs)


def _entries(B, bad):
    """The batch indices where the boolean array ``bad`` is set (for messages)."""
    flags = np.asarray(B.to_numpy(B.astype(bad, B.dtypes["int32"])))
    return [tuple(int(i) for i in ix) for ix in np.argwhere(flags)]


def _at(entries, batch):
    if not batch:
        return ""
    shown = ", ".join(str(list(e)) for e in entries[:4]) + (", ..." if len(entries) > 4 else "")
    s = "y" if len(entries) == 1 else "ies"
    return f" at batch entr{s} {shown} (of the batch shape {list(batch)})"


_SINGULAR_FIX = {
    "solve": "check it for linearly dependent rows or columns, or regularize it (a + eps*I); "
             "tf.linalg.lstsq gives a least-squares solution",
    "inv": "check it for linearly dependent rows or columns, or regularize it (a + eps*I); "
           "tf.linalg.pinv gives the pseudo-inverse, and solve(a, b) is better than inv(a) @ b",
    "det": "the gradient there is the cofactor matrix, which flowgrad computes through a^-T "
           "and so only away from singular matrices; keep a invertible (a + eps*I)",
    "slogdet": "log|det(a)| is -inf there and has no gradient; keep a invertible "
               "(a + eps*I)",
    "triangular_solve": "a triangular matrix is singular when its diagonal (of the triangle "
                        "used: lower=...) has a zero",
}


def _singular(B, a, op, fix):
    """The LinAlgError for the singular matrices among ``a`` (None when none is: the
    backend's error then came from elsewhere)."""
    sign, _ = B.linalg.slogdet(a)
    bad = _entries(B, sign == 0)
    if not bad:
        return None
    n = a.shape[-1]
    return LinAlgError(f"{op}: the {n}x{n} matrix{_at(bad, a.shape[:-2])} is singular (its LU "
                       f"factorization has a zero pivot): {_SINGULAR_FIX[fix]}.")


# ---------------------------------------------------------------- solve

@primitive("MatrixSolve", save_y=True, batched_vjp=True, vmap=_pair_rule)
def _solve(B, a, b, op="solve(a, b)", fix="solve"):
    try:
        return B.linalg.solve(a, b)
    except ValueError as e:
        err = _singular(B, a, op, fix)
        if err is None:
            raise
        raise err from e


@_solve.def_vjp
def _(dx, a, b, x, op="solve(a, b)", fix="solve", needs=(True, True)):
    # x = a⁻¹b: db = a⁻ᵀdx, da = -db·xᵀ (the engine sums broadcast batch axes)
    db = E.run_kernel(_solve, (_mT(a), dx), {"op": op, "fix": fix})
    return (-_mm(db, x, False, True) if needs[0] else None), db


@export(namespace="linalg")
def solve(a: TensorLike, b: TensorLike) -> Tensor:
    """The solution x of the linear system a·x = b, as NumPy 2's ``linalg.solve``.

    ``a``: [..., M, M]; ``b``: a vector [M] or a stack of matrices [..., M, K] (b is a
    vector only when it is 1-D); batch axes broadcast. Differentiable in a and b (the rule
    solves with aᵀ: no inverse is formed). A singular a raises LinAlgError.

    >>> import flowgrad as tf
    >>> x = tf.linalg.solve([[3.0, 1.0], [1.0, 2.0]], [9.0, 8.0])
    >>> x.numpy().round(5).tolist()
    [2.0, 3.0]
    """
    a, b = _float_pair("solve", a, b)
    _matrices(a, "solve")
    b2, vector = _rhs(a, b, "solve")
    x = E.run_kernel(_solve, (a, b2))
    return reshape(x, x.shape[:-1]) if vector else x


# ---------------------------------------------------------------- triangular solve

@primitive("MatrixTriangularSolve", save_y=True, batched_vjp=True, vmap=_pair_rule)
def _triangular_solve(B, a, b, lower=True, adjoint=False, unit_diagonal=False):
    n = a.shape[-1]
    t = B.tril(a) if lower else B.triu(a)
    on_diagonal = B.astype(B.eye(n, dtype=a.dtype), B.bool)
    if unit_diagonal:
        t = B.where(on_diagonal, B.asarray(1, dtype=a.dtype), t)
    else:
        zero = B.any(B.linalg.diagonal(t) == 0, axis=-1)
        if B.any(zero):
            bad = _entries(B, zero)
            raise LinAlgError(
                f"triangular_solve(a, b): the {n}x{n} {'lower' if lower else 'upper'} "
                f"triangular matrix{_at(bad, a.shape[:-2])} is singular (a zero on its "
                f"diagonal): {_SINGULAR_FIX['triangular_solve']}.")
    if adjoint:
        t = B.mT(t)
    # NOTE: the array API has no triangular solver: an LU solve of the triangle (O(n³)
    # where substitution is O(n²)); with partial pivoting it is as backward stable
    return B.linalg.solve(t, b)


def _triangle(x, lower, strict):
    """The triangle a triangular solve reads (its gradient lives there only)."""
    if lower:
        return tril(x, -1 if strict else 0)
    return triu(x, 1 if strict else 0)


@_triangular_solve.def_vjp
def _(dx, a, b, x, lower=True, adjoint=False, unit_diagonal=False, needs=(True, True)):
    # x = t⁻¹b: db = t⁻ᵀdx, dt = -db·xᵀ; x = t⁻ᵀb: db = t⁻¹dx, dt = -x·dbᵀ
    db = E.run_kernel(_triangular_solve, (a, dx), {
        "lower": lower, "adjoint": not adjoint, "unit_diagonal": unit_diagonal})
    if not needs[0]:
        return None, db
    dt = _mm(x, db, False, True) if adjoint else _mm(db, x, False, True)
    return -_triangle(dt, lower, unit_diagonal), db


@export(namespace="linalg")
def triangular_solve(a: TensorLike, b: TensorLike, lower: bool = True, adjoint: bool = False,
                     unit_diagonal: bool = False) -> Tensor:
    """The solution x of t·x = b for the triangular part t of ``a`` (TF's
    ``linalg.triangular_solve``, SciPy's ``solve_triangular``).

    ``lower=True`` reads a's lower triangle, ``lower=False`` its upper one (the other is
    ignored, and gets no gradient); ``adjoint=True`` solves tᵀ·x = b;
    ``unit_diagonal=True`` takes t's diagonal as ones (a's diagonal is not read). Shapes as
    in ``solve``: b is [M] (a vector) or [..., M, K]; batch axes broadcast. Differentiable
    in a and b, by triangular solves. A zero on t's diagonal raises LinAlgError.

    >>> import flowgrad as tf
    >>> l = tf.tensor([[2.0, 0.0], [1.0, 4.0]])
    >>> tf.linalg.triangular_solve(l, [4.0, 10.0]).numpy().round(5).tolist()
    [2.0, 2.0]
    >>> tf.linalg.triangular_solve(l, [4.0, 8.0], adjoint=True).numpy().round(5).tolist()
    [1.0, 2.0]
    """
    fn = "triangular_solve"
    a, b = _float_pair(fn, a, b)
    _matrices(a, fn)
    attrs = {"lower": flag(lower, "lower", fn), "adjoint": flag(adjoint, "adjoint", fn),
             "unit_diagonal": flag(unit_diagonal, "unit_diagonal", fn)}
    b2, vector = _rhs(a, b, fn)
    x = E.run_kernel(_triangular_solve, (a, b2), attrs)
    return reshape(x, x.shape[:-1]) if vector else x


# ---------------------------------------------------------------- inverse

@primitive("MatrixInverse", save_y=True, batched_vjp=True, vmap=V.leading)
def _inv(B, a):
    try:
        return B.linalg.inv(a)
    except ValueError as e:
        err = _singular(B, a, "inv(a)", "inv")
        if err is None:
            raise
        raise err from e


@_inv.def_vjp
def _(dy, a, y):
    return -_mm(_mm(y, dy, True, False), y, False, True)       # -a⁻ᵀ·dy·a⁻ᵀ


@export(namespace="linalg")
def inv(a: TensorLike) -> Tensor:
    """The inverse of a square matrix (or of each in a stack [..., M, M]).

    Differentiable (d inv = -inv·da·inv). To apply an inverse, ``solve(a, b)`` is cheaper
    and more accurate than ``inv(a) @ b``. A singular a raises LinAlgError.

    >>> import flowgrad as tf
    >>> tf.linalg.inv([[2.0, 0.0], [0.0, 4.0]]).numpy().round(5).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    a = _matrices(as_float(a, "inv", "a"), "inv")
    return E.run_kernel(_inv, (a,))


def _inv_t(a, dtype, fn):
    """a⁻ᵀ by a solve (for the determinants' rules)."""
    n = a.shape[-1]
    return E.run_kernel(_solve, (_mT(a), eye(n, dtype=dtype)),
                        {"op": f"the gradient of {fn}(a)", "fix": fn})


# ---------------------------------------------------------------- determinants

@primitive("MatrixDeterminant", save_y=True, batched_vjp=True, vmap=V.leading)
def _det(B, a):
    return B.linalg.det(a)


@_det.def_vjp
def _(dy, a, y):
    # d det = det·tr(a⁻¹ da): the gradient is det·a⁻ᵀ (by a solve)
    return _trailing(dy * y) * _inv_t(a, dy.dtype, "det")


@export(namespace="linalg")
def det(a: TensorLike) -> Tensor:
    """The determinant of a square matrix (or of each in a stack [..., M, M]).

    Differentiable: the gradient det(a)·a⁻ᵀ is computed by a solve, so it needs an
    invertible a (at a singular a it raises LinAlgError, although the gradient, the
    cofactor matrix, exists there). For a log-determinant, ``slogdet`` does not overflow.

    >>> import flowgrad as tf
    >>> round(tf.linalg.det([[1.0, 2.0], [3.0, 4.0]]).item(), 5)
    -2.0
    """
    a = _matrices(as_float(a, "det", "a"), "det")
    return E.run_kernel(_det, (a,))


class SlogdetResult(NamedTuple):
    """``slogdet``'s result, as NumPy's: det(a) = sign·exp(logabsdet)."""
    sign: Tensor
    logabsdet: Tensor


@primitive("LogMatrixDeterminant", multi=True, batched_vjp=True, vmap=V.leading)
def _slogdet(B, a):
    sign, logabsdet = B.linalg.slogdet(a)
    return sign, logabsdet


@_slogdet.def_vjp
def _(dys, a):
    # sign is piecewise constant: no gradient; d log|det| = tr(a⁻¹ da), i.e. a⁻ᵀ
    dl = dys[1]
    return _trailing(dl) * _inv_t(a, dl.dtype, "slogdet")


@export(namespace="linalg")
def slogdet(a: TensorLike) -> SlogdetResult:
    """The sign and the log of the absolute value of the determinant of a square matrix
    (or of each in a stack [..., M, M]), as NumPy's ``linalg.slogdet``: a named pair
    ``(sign, logabsdet)`` with det(a) = sign·exp(logabsdet), without det's overflow.

    A singular a gives sign 0 and logabsdet -inf, as in NumPy. logabsdet is differentiable
    (its gradient a⁻ᵀ is computed by a solve: an invertible a is needed); sign is piecewise
    constant and has no gradient (zero).

    >>> import flowgrad as tf
    >>> sign, logabsdet = tf.linalg.slogdet([[1.0, 2.0], [3.0, 4.0]])
    >>> sign.item(), round(logabsdet.item(), 5)
    (-1.0, 0.69315)
    """
    a = _matrices(as_float(a, "slogdet", "a"), "slogdet")
    sign, logabsdet = E.run_kernel(_slogdet, (a,))
    return SlogdetResult(sign, logabsdet)


# ---------------------------------------------------------------- Cholesky

@primitive("Cholesky", save_y=True, batched_vjp=True, vmap=V.leading)
def _cholesky(B, a):
    try:
        return B.linalg.cholesky(a)
    except ValueError as e:
        bad = []
        for ix in np.ndindex(*a.shape[:-2]):        # (the error path: one at a time)
            try:
                B.linalg.cholesky(a[ix])
            except ValueError:
                bad.append(ix)
        if not bad:
            raise
        n = a.shape[-1]
        raise LinAlgError(
            f"cholesky(a): the {n}x{n} matrix{_at(bad, a.shape[:-2])} is not positive "
            f"definite (its lower triangle read as a symmetric matrix): Cholesky needs a "
            f"symmetric positive-definite matrix. If it should be one, add a small multiple "
            f"of the identity (a + eps*I) against rounding; a Gram matrix x·xᵀ with fewer "
            f"columns than rows is only semi-definite.") from e


def _phi(x):
    """The lower triangle of x with its diagonal halved (Murray's Φ)."""
    n = x.shape[-1]
    return tril(x) - 0.5 * (x * eye(n, dtype=x.dtype))


@_cholesky.def_vjp
def _(dl, a, l):
    # a = l·lᵀ (Murray 2016): with p = Φ(lᵀ·dl), the symmetric gradient is the symmetric
    # part of g = l⁻ᵀ·p·l⁻¹ (two triangular solves). Only the lower triangle is read, so the
    # derivative lands there: an entry below the diagonal stands for itself and its mirror
    # (as eigh's rule, and what a finite difference of one entry sees)
    p = _phi(_mm(l, dl, True, False))
    lower_t = {"lower": True, "adjoint": True, "unit_diagonal": False}
    y = E.run_kernel(_triangular_solve, (l, p), lower_t)                 # l⁻ᵀ·p
    g = _mT(E.run_kernel(_triangular_solve, (l, _mT(y)), lower_t))       # y·l⁻¹
    s = g + _mT(g)
    return 0.5 * (tril(s) + tril(s, -1))


@export(namespace="linalg")
def cholesky(a: TensorLike, upper: bool = False) -> Tensor:
    """The lower triangular l with l·lᵀ = a, for a symmetric positive-definite matrix
    (or each in a stack [..., M, M]), as NumPy's ``linalg.cholesky`` (``upper=True``: the
    upper triangular lᵀ instead).

    Only a's lower triangle is read (as NumPy), and the gradient is the derivative of that
    (Murray 2016, by triangular solves): it lies on the lower triangle, an entry below the
    diagonal counting for itself and its mirror, so a finite difference of any single entry
    agrees (eigh's rule is the same). Along symmetric perturbations it equals PyTorch's and
    JAX's symmetric gradient (their sum with its transpose, halved off the diagonal). A
    matrix that is not positive definite raises LinAlgError.

    >>> import flowgrad as tf
    >>> tf.linalg.cholesky([[4.0, 2.0], [2.0, 5.0]]).numpy().round(5).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    a = _matrices(as_float(a, "cholesky", "a"), "cholesky")
    l = E.run_kernel(_cholesky, (a,))
    return _mT(l) if flag(upper, "upper", "cholesky") else l


# ---------------------------------------------------------------- powers

@export(namespace="linalg")
def matrix_power(a: TensorLike, n: int) -> Tensor:
    """a raised to the integer power n (each matrix of a stack [..., M, M]), as NumPy's
    ``linalg.matrix_power``: by repeated squaring; n = 0 gives the identity (a constant:
    no gradient), n < 0 powers of inv(a). Differentiable (a composite of products).

    >>> import flowgrad as tf
    >>> a = tf.tensor([[1.0, 1.0], [0.0, 1.0]])
    >>> tf.linalg.matrix_power(a, 3).numpy().tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    >>> tf.linalg.matrix_power(a, -2).numpy().round(5).tolist()
    [[1.0, -2.0], [0.0, 1.0]]
    """
    fn = "matrix_power"
    a = as_tensor(a, fn, "a")
    no_strings(a, fn, "a")
    n = as_int(n, "n", fn)
    if a.dtype not in (dtypes.float32, dtypes.float64) and (n < 0 or a.dtype == dtypes.bool_):
        a = as_float(a, fn, "a")        # (an inverse needs floats)
    _matrices(a, fn)
    if n == 0:
        return broadcast_to(eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    out = None
    while True:
        if n & 1:
            out = a if out is None else _mm(out, a)
        n >>= 1
        if not n:
            return out
        a = _mm(a, a)


# ---------------------------------------------------------------- trace, triangles

@export(namespace="linalg")
def trace(x: TensorLike, offset: int = 0) -> Tensor:
    """The sum of the diagonal of the last two axes (``offset`` > 0: a diagonal above the
    main one, < 0: below), as NumPy's ``linalg.trace``: [..., M, N] gives [...].
    Differentiable (the gradient is 1 on that diagonal).

    >>> import flowgrad as tf
    >>> tf.linalg.trace([[1.0, 2.0], [3.0, 4.0]]).item()
    5.0
    >>> tf.linalg.trace([[1.0, 2.0], [3.0, 4.0]], offset=1).item()
    2.0
    """
    fn = "trace"
    x = as_tensor(x, fn)
    no_strings(x, fn)
    if x.dtype == dtypes.bool_:
        x = cast(x, dtypes.int32)
    _matrices(x, fn, "x", square=False)
    k = as_int(offset, "offset", fn)
    m, n = x.shape[-2:]
    on = tensor(np.eye(m, n, k, dtype=bool), dtype="bool")
    # (where, not a product with the mask: an inf off the diagonal must not give NaN)
    return _sum(where(on, x, scalar_of(0, x.dtype)), [-2, -1])


@primitive("MatrixTril", batched_vjp=True, vmap=V.leading)
def _tril(B, x, k=0):
    return B.tril(x, k=k)


@_tril.def_vjp
def _(dy, x, k=0):
    return E.run_kernel(_tril, (dy,), {"k": k})


@primitive("MatrixTriu", batched_vjp=True, vmap=V.leading)
def _triu(B, x, k=0):
    return B.triu(x, k=k)


@_triu.def_vjp
def _(dy, x, k=0):
    return E.run_kernel(_triu, (dy,), {"k": k})


def _triangle_args(x, k, fn):
    x = as_tensor(x, fn)
    no_strings(x, fn)
    _matrices(x, fn, "x", square=False)
    return x, {"k": as_int(k, "k", fn)}


@export(namespace="linalg")
def tril(x: TensorLike, k: int = 0) -> Tensor:
    """x with the entries above its k-th diagonal set to 0, on the last two axes, as
    NumPy's ``tril`` (k = 0: the main diagonal, k < 0 below it, k > 0 above it).

    >>> import flowgrad as tf
    >>> tf.linalg.tril([[1, 2], [3, 4]]).numpy().tolist()
    [[1, 0], [3, 4]]
    >>> tf.linalg.tril([[1, 2], [3, 4]], -1).numpy().tolist()
    [[0, 0], [3, 0]]
    """
    x, attrs = _triangle_args(x, k, "tril")
    return E.run_kernel(_tril, (x,), attrs)


@export(namespace="linalg")
def triu(x: TensorLike, k: int = 0) -> Tensor:
    """x with the entries below its k-th diagonal set to 0, on the last two axes, as
    NumPy's ``triu`` (k = 0: the main diagonal, k < 0 below it, k > 0 above it).

    >>> import flowgrad as tf
    >>> tf.linalg.triu([[1, 2], [3, 4]]).numpy().tolist()
    [[1, 2], [0, 4]]
    >>> tf.linalg.triu([[1, 2], [3, 4]], 1).numpy().tolist()
    [[0, 2], [0, 0]]
    """
    x, attrs = _triangle_args(x, k, "triu")
    return E.run_kernel(_triu, (x,), attrs)
