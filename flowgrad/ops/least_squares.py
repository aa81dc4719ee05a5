"""Least squares with NumPy's names and semantics (batched over leading axes): the
Moore-Penrose pseudo-inverse ``pinv`` and the least-squares solution ``lstsq``, both from the
singular value decomposition (their singular values are decompositions.py's svdvals)."""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import as_number
from ..errors import ArgumentError, ShapeError
from ._core import as_float, cast, export, flag, primitive
from .decompositions import as_matrix, check_finite, svdvals, symmetric_from_lower
from .linalg import mat_mul
from .shape import reshape

if TYPE_CHECKING:
    from ..tensor import Tensor, TensorLike


# ---------------------------------------------------------------- pinv

@primitive("Pinv", save_y=True, batched_vjp=True, vmap=V.leading)
def _pinv(B, a, rcond):
    check_finite(B, a, "pinv")
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return B.zeros(a.shape[:-2] + (n, m), dtype=a.dtype)
    u, s, vh = B.linalg.svd(a, full_matrices=False)
    keep = s > rcond * B.max(s, axis=-1, keepdims=True)
    inv = B.where(keep, 1 / B.where(keep, s, 1), 0)
    return B.matmul(B.mT(vh) * inv[..., None, :], B.mT(u))


@_pinv.def_vjp
def _(dp, a, p, rcond):
    # d(A+) = -A+ dA A+ + A+ A+^T dA^T (1 - A A+) + (1 - A+ A) dA^T A+^T A+ (Golub and
    # Pereyra; along directions that keep the rank, the only ones where A+ is continuous)
    pt, dpt = p.mT, dp.mT
    t1 = -mat_mul(pt, mat_mul(dp, pt))
    t2 = mat_mul(dpt - mat_mul(a, mat_mul(p, dpt)), mat_mul(p, pt))
    t3 = mat_mul(mat_mul(pt, p), dpt - mat_mul(mat_mul(dpt, p), a))
    return t1 + t2 + t3


def _rcond(value, name, fn):
    v = as_number(value, name, fn)     # (one number: a cutoff per matrix is not supported)
    if np.isnan(v):
        raise ArgumentError(f"{fn}: {name} (the cutoff for small singular values, relative "
                            f"to the largest) must be a number, got nan")
    return v


_NO_VALUE = object()


@export(namespace="linalg")
def pinv(a: TensorLike, rcond: float | None = None, hermitian: bool = False, *,
         rtol: float | None = _NO_VALUE) -> Tensor:
    """The Moore-Penrose pseudo-inverse of a matrix (or a batch), as NumPy's
    ``linalg.pinv``: from the SVD, singular values <= ``rcond`` times the largest taken
    as zero. ``rcond`` defaults to 1e-15 (NumPy's); ``rtol`` is its array-API spelling
    (``rtol=None``: max(m, n) * eps of the dtype). ``hermitian=True`` reads the lower
    triangle of a symmetric a.

    Differentiable (the Golub-Pereyra formula): the pseudo-inverse is continuous only along
    changes that keep the rank, so at a rank-deficient a the gradient is that of the
    rank-preserving directions.

    >>> import flowgrad as tf
    >>> tf.linalg.pinv(tf.tensor([[1.0, 2.0]], dtype="float64")).print()
    Tensor
        [[0.2],
         [0.4]]
    """
    a = as_matrix(a, "pinv")
    if rcond is not None and rtol is not _NO_VALUE:
        raise ArgumentError("pinv: `rtol` and `rcond` are the same cutoff (the array API's "
                            "and NumPy's names); give only one of them.")
    if rcond is None and rtol is _NO_VALUE:
        cut = 1e-15
    elif rcond is None and rtol is None:
        cut = max(a.shape[-2:]) * float(np.finfo(dtypes.NP[a.dtype]).eps)
    else:
        cut = _rcond(rcond if rcond is not None else rtol,
                     "rcond" if rcond is not None else "rtol", "pinv")
    if flag(hermitian, "hermitian", "pinv"):
        a = symmetric_from_lower(as_matrix(a, "pinv", square=True))
    return E.run_kernel(_pinv, (a,), {"rcond": cut})


@primitive("FullRankResiduals", vmap=V.leading)
def _full_rank_residuals(B, r, rank, *, n):
    # NumPy: residuals only where the solution is unique (rank n, more rows than columns)
    return r if bool(B.all(rank == n)) else r[..., :0]


@_full_rank_residuals.def_vjp
def _(dy, r, rank, n):
    # (a kernel, not a Python test on shapes: a tf.jit replay decides afresh)
    return E.run_kernel(_full_rank_residuals_grad, (dy, r, rank), {"n": n}), None


@primitive("FullRankResidualsGrad", batched_vjp=True, vmap=V.leading)
def _full_rank_residuals_grad(B, dy, r, rank, *, n):
    full = bool(B.all(rank == n)) and dy.shape[-1:] == r.shape[-1:]
    return dy if full else B.zeros(dy.shape[:-1] + r.shape[-1:], dtype=r.dtype)


@_full_rank_residuals_grad.def_vjp
def _(ddx, dy, r, rank, n):
    return E.run_kernel(_full_rank_residuals, (ddx, rank), {"n": n}), None, None


class LstsqResult(NamedTuple):
    """``lstsq``'s result (NumPy's four values, by name too)."""
    x: Tensor
    residuals: Tensor
    rank: Tensor
    s: Tensor


@export(namespace="linalg")
def lstsq(a: TensorLike, b: TensorLike, rcond: float | None = None) -> LstsqResult:
    """The least-squares solution x of a x = b, as NumPy's ``linalg.lstsq``: a result
    ``(x, residuals, rank, s)``.

    a is [..., m, n] (NumPy: 2-D; flowgrad batches leading axes) and b [..., m, k] or [m]
    (then x is [n]). x = pinv(a) b, the minimum-norm solution; singular values <= ``rcond``
    times the largest count as zero (default: max(m, n) * eps of the dtype). ``residuals``:
    the squared 2-norm of each column of a x - b, of shape [..., k] ([1] for a vector b),
    and empty unless m > n and a has full rank n (every matrix of a batch). ``rank``: an
    int32 tensor; ``s``: the singular values of a.

    Gradients flow through x, residuals and s (those of pinv and svdvals).

    >>> import flowgrad as tf
    >>> a = tf.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]], dtype="float64")
    >>> x, res, rank, s = tf.linalg.lstsq(a, tf.tensor([1.0, 2.0, 2.0], dtype="float64"))
    >>> x.numpy().round(6).tolist(), res.numpy().round(6).tolist(), int(rank.item())
    ([1.166667, 0.5], [0.166667], 2)
    """
    a = as_matrix(a, "lstsq")
    b = as_float(b, "lstsq", "b", a.dtype)
    dt = dtypes.promote(a.dtype, b.dtype, "lstsq")
    a, b = cast(a, dt), cast(b, dt)
    m, n = a.shape[-2:]
    vector = b.rank == 1
    if b.rank == 0 or b.shape[-1 if vector else -2] != m:
        raise ShapeError(f"lstsq: b must have {m} rows like a (shape {list(a.shape)}): a "
                         f"vector [{m}] or a matrix [..., {m}, k], got shape {list(b.shape)}")
    eps = float(np.finfo(dtypes.NP[dt]).eps)
    cut = eps * max(m, n) if rcond is None else _rcond(rcond, "rcond", "lstsq")
    cut = eps if cut < 0 else cut       # (LAPACK's gelsd: a negative rcond means eps)
    bm = reshape(b, (m, 1)) if vector else b
    x = mat_mul(E.run_kernel(_pinv, (a,), {"rcond": cut}), bm)
    s = svdvals(a)
    rank = (s > s[..., :1] * cut).cast("int32").sum(-1)
    e = mat_mul(a, x) - bm
    res = (e * e).sum(-2)
    res = E.run_kernel(_full_rank_residuals, (res, rank), {"n": n}) if m > n else res[..., :0]
    return LstsqResult(x[..., 0] if vector else x, res, rank, s)
