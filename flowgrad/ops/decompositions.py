"""Spectral decompositions with NumPy's names and semantics (batched over leading axes):
eigh, eigvalsh, svd, svdvals, and the matrix and vector norms (some are singular values).
pinv and lstsq, built on the SVD, are in least_squares.py.

Where a decomposition is not unique (equal eigenvalues or singular values, the extra columns
of a full SVD, the vectors of a zero singular value) the rules differentiate every function
that does not depend on the arbitrary choice, and raise GradientError for one that does: its
derivative does not exist. The checks run inside kernels (SpectralGaps, SafeReciprocal,
GaugeFree), so they hold in tf.jit replays and under tf.vmap too."""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import batching as V
from .. import engine as E
from ..arg_checks import as_number, choice, describe
from ..errors import ArgumentError, GradientError, LinAlgError, ShapeError
from ._core import as_float, export, flag, norm_axis, primitive
from .creation import eye, tensor
from .linalg import mat_mul
from .logical import where
from .shape import reshape, transpose

if TYPE_CHECKING:
    from ..tensor import Tensor, TensorLike

_INF = float("inf")
# NOTE: a gap |w_j - w_i| below this many ulps of max|w| (times the size) is a coincidence to
# rounding: the computed copies of a repeated eigenvalue differ by ulps, 1/gap is noise
_GAP_ULPS = 32


def _mT(x):
    """x with its last two axes swapped."""
    perm = list(range(x.rank))
    perm[-2:] = perm[-1], perm[-2]
    return transpose(x, perm)


def _diag(d):
    """The diagonal matrices of the vectors d[..., k]."""
    return d[..., None, :] * eye(d.shape[-1], dtype=d.dtype)


def _symmetric_kernel(B, a, uplo):
    """The symmetric matrix NumPy's eigh reads from a: the triangle ``uplo`` mirrored."""
    if uplo == "L":
        return B.tril(a) + B.mT(B.tril(a, k=-1))
    return B.triu(a) + B.mT(B.triu(a, k=1))


def _triangle_grad(g, uplo):
    """The gradient w.r.t. a of a function of the symmetric matrix read from a's triangle
    ``uplo``, given its gradient g (symmetric) w.r.t. that matrix: each off-diagonal entry
    of the triangle stands for two entries of the matrix, the other triangle is not read."""
    n = g.shape[-1]
    mask = np.tril(np.full((n, n), 2.0), -1) if uplo == "L" else np.triu(np.full((n, n), 2.0), 1)
    return g * tensor(mask + np.eye(n), dtype=g.dtype)


def check_finite(B, a, fn):
    """In a kernel: raise LinAlgError, naming ``fn``, when the array a holds NaN or Inf."""
    # (NumPy's svd raises LinAlgError here; its eigh returns NaN or even finite garbage)
    if not bool(B.all(B.isfinite(a))):
        raise LinAlgError(f"{fn}: the matrix contains NaN or Inf (shape {list(a.shape)}): it "
                          f"has no decomposition. Find where the non-finite values come from "
                          f"(tf.debug.check_numerics) and pass finite values.")


# ---------------------------------------------------------------- the checks' kernels

@primitive("SpectralGaps", save_y=True, batched_vjp=True, vmap=V.leading)
def _gaps(B, w, x, *cotangents, sums, fn):
    """F[..., i, j] = 1/(w_j - w_i) (``sums``: 1/(w_i + w_j)) off the diagonal, 0 on it and
    where the two values coincide to rounding. There the rule's term is x_ij - x_ji times F
    (x: the rotation part of the cotangent, sized by ``cotangents``); it must vanish, else
    the derivative does not exist (GradientError)."""
    k = w.shape[-1]
    d = w[..., None, :] + w[..., :, None] if sums else w[..., None, :] - w[..., :, None]
    if k == 0:
        return d
    eps = float(B.finfo(w.dtype).eps)
    scale = B.max(B.abs(w), axis=-1, keepdims=True)[..., None]
    diagonal = B.eye(k, dtype=B.bool)
    degenerate = (B.abs(d) <= _GAP_ULPS * k * eps * scale) & ~diagonal
    void = degenerate | diagonal
    f = B.where(void, 0, 1 / B.where(void, 1, d))
    if bool(B.any(degenerate)):
        size = 0.0
        for c in cotangents or (x,):
            size = B.maximum(size, B.max(B.abs(c), axis=(-2, -1)) if c.size else 0.0)
        size = B.asarray(size, dtype=w.dtype)[..., None, None]
        bad = degenerate & (B.abs(x - B.mT(x)) > eps ** 0.5 * size)
        if bool(B.any(bad)):
            _raise_degenerate(B, w, bad, sums, fn)
    return f


_UNDEFINED = ("so {vectors} are any orthonormal basis of one subspace, and the function "
              "differentiated depends on which. Differentiate a function of the {values} "
              "({fix}), or one that does not depend on the basis chosen ({inv} with g equal on "
              "equal values), or separate the {values}. (Each call is checked alone: decompose a "
              "matrix once and reuse the result.)")


def _raise_degenerate(B, w, bad, sums, fn):
    idx = tuple(int(i) for i in np.argwhere(B.to_numpy(bad))[0])
    wn = B.to_numpy(w)
    i, j = idx[-2:]
    lead = idx[:-2][len(idx) - 1 - wn.ndim:] if wn.ndim > 1 else ()
    wb = wn[tuple(min(a, n - 1) for a, n in zip(lead, wn.shape))]   # (w may broadcast)
    at = f" (matrix {list(idx[:-2])} of the batch)" if len(idx) > 2 else ""
    if fn == "eigh":
        raise GradientError(
            f"eigh: the gradient through the eigenvectors is undefined{at}: eigenvalues {i} "
            f"and {j} coincide ({wb[i]:.6g} and {wb[j]:.6g}), " + _UNDEFINED.format(
                vectors="their eigenvectors", values="eigenvalues", fix="eigvalsh",
                inv="e.g. the projector V diag(g(w)) V^T"))
    what = "are both zero" if sums else "coincide"
    raise GradientError(
        f"svd: the gradient through the singular vectors is undefined{at}: singular values "
        f"{i} and {j} {what} ({wb[i]:.6g} and {wb[j]:.6g}), " + _UNDEFINED.format(
            vectors="their singular vectors", values="singular values", fix="svdvals, norm",
            inv="U diag(g(S)) Vh"))


@_gaps.def_vjp
def _(df, w, x, *rest, sums, fn):
    f = rest[-1]        # (rest: the cotangents given for scale, then the output)
    # F = 1/d with d_ij = w_j -+ w_i: dF = -F^2 dd; the coincident entries are constant 0
    m = -df * f * f
    dw = m.sum(-2) + m.sum(-1) if sums else m.sum(-2) - m.sum(-1)
    return [dw] + [None] * len(rest)


@primitive("SafeReciprocal", save_y=True, batched_vjp=True, vmap=V.leading)
def _safe_reciprocal(B, s, r, g, *, fn):
    """1/s, and 0 where s is zero to rounding; there the column of r (the part of a singular
    vector cotangent g outside the singular vectors' span) must vanish, else the derivative
    does not exist (GradientError)."""
    k = s.shape[-1]
    if k == 0:
        return s
    eps = float(B.finfo(s.dtype).eps)
    tol = _GAP_ULPS * max(r.shape[-2], k) * eps * B.max(B.abs(s), axis=-1, keepdims=True)
    zero = B.abs(s) <= tol
    out = B.where(zero, 0, 1 / B.where(zero, 1, s))
    if bool(B.any(zero)):
        size = B.max(B.abs(g), axis=(-2, -1)) if g.size else B.asarray(0.0, dtype=s.dtype)
        col = B.sqrt(B.sum(r * r, axis=-2))
        bad = zero & (col > eps ** 0.5 * size[..., None])
        if bool(B.any(bad)):
            i = int(np.argwhere(B.to_numpy(bad))[0][-1])
            raise GradientError(
                f"svd: the gradient through the singular vectors is undefined: singular value "
                f"{i} is zero (deficient rank), so its vector is any unit vector orthogonal to "
                f"the others, and the function differentiated depends on which. Differentiate "
                f"a function of the singular values (svdvals, norm), or use a full-rank matrix.")
    return out


@_safe_reciprocal.def_vjp
def _(dy, s, r, g, y, fn):
    return -dy * y * y, None, None


@primitive("GaugeFree", view=True, batched_vjp=True, vmap=V.leading)
def _gauge_free(B, y, x, g, *, fn, what):
    """y itself, once x (the cotangent g of freely chosen columns, projected on them) is
    symmetric: a function of such columns must not depend on their rotation."""
    if x.size:
        eps = float(B.finfo(x.dtype).eps)
        size = B.max(B.abs(g), axis=(-2, -1), keepdims=True)
        if bool(B.any(B.abs(x - B.mT(x)) > eps ** 0.5 * size)):
            raise GradientError(
                f"{fn}: the gradient through {what} is undefined: they are any orthonormal "
                f"basis of the complement of the others, not a function of the matrix, and the "
                f"function differentiated depends on which. Use full_matrices=False, or only "
                f"the first min(m, n).")
    return y


@_gauge_free.def_vjp
def _(dy, y, x, g, fn, what):
    return dy, None, None


def as_matrix(a, fn, arg="a", square=False):
    """a as a float tensor of rank >= 2 (``square``: with equal last two axes), else a
    ShapeError naming ``fn`` and ``arg``."""
    a = as_float(a, fn, arg)
    if a.rank < 2 or square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{fn}: {arg} must be a {'square ' * square}matrix or a batch of them "
                         f"(shape [..., {'n, n' if square else 'm, n'}]), got shape "
                         f"{list(a.shape)}" + ("" if a.rank >= 2 else "; reshape a vector to "
                                               "[n, 1] or [1, n]"))
    return a


def _uplo(UPLO, fn):
    return choice(UPLO, "UPLO", fn, ("L", "U"), f"{fn}: UPLO must be 'L' (read the lower "
                  f"triangle) or 'U' (the upper), got {describe(UPLO)}")


# ---------------------------------------------------------------- eigh, eigvalsh

@primitive("Eigh", multi=True, save_y=True, batched_vjp=True, vmap=V.leading)
def _eigh(B, a, UPLO):
    check_finite(B, a, "eigh")
    w, v = B.linalg.eigh(_symmetric_kernel(B, a, UPLO))
    return w, v


@_eigh.def_vjp
def _(dys, a, w, v, UPLO):
    dw, dv = dys
    vt = _mT(v)
    # S = V diag(w) V^T: dw = diag(V^T dS V), V^T dV = F o (V^T dS V), F_ij = 1/(w_j - w_i);
    # for symmetric dS only the antisymmetric part of X = V^T dV-bar counts
    x = mat_mul(vt, dv)
    f = E.run_kernel(_gaps, (w, x, dv), {"sums": False, "fn": "eigh"})
    inner = _diag(dw) + f * (x - _mT(x)) * 0.5
    return _triangle_grad(mat_mul(v, mat_mul(inner, vt)), UPLO)


@primitive("Eigvalsh", batched_vjp=True, vmap=V.leading)
def _eigvalsh(B, a, UPLO):
    check_finite(B, a, "eigvalsh")
    return B.linalg.eigvalsh(_symmetric_kernel(B, a, UPLO))


@_eigvalsh.def_vjp
def _(dw, a, UPLO):
    # dw_i = v_i^T dS v_i, defined even where eigenvalues coincide (for a function of them)
    _, v = E.run_kernel(_eigh, (a,), {"UPLO": UPLO})
    return _triangle_grad(mat_mul(v * dw[..., None, :], _mT(v)), UPLO)


class EighResult(NamedTuple):
    """``eigh``'s result, as NumPy's: a = eigenvectors·diag(eigenvalues)·eigenvectorsᵀ."""
    eigenvalues: Tensor
    eigenvectors: Tensor


@export(namespace="linalg")
def eigh(a: TensorLike, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a real symmetric matrix (or a batch: the
    last two axes), as NumPy's ``linalg.eigh``: a result ``(eigenvalues, eigenvectors)``
    with ``a = V diag(w) V^T``, the columns of V orthonormal.

    Only the triangle ``UPLO`` ('L' lower, 'U' upper) is read, as in NumPy, and the gradient
    is that of this function (zero on the other triangle). Gradients through the eigenvectors
    grow as 1/(w_j - w_i); where eigenvalues coincide a function that does not depend on the
    basis chosen in their eigenspace is still differentiated, one that does raises
    GradientError.

    >>> import flowgrad as tf
    >>> w, v = tf.linalg.eigh(tf.tensor([[2.0, 1.0], [1.0, 2.0]], dtype="float64"))
    >>> w.print()
    Tensor
        [1, 3]
    >>> bool(((v * w.expand_dims(0)) @ v.transpose() - [[2, 1], [1, 2]]).abs().max() < 1e-12)
    True
    """
    a = as_matrix(a, "eigh", square=True)
    w, v = E.run_kernel(_eigh, (a,), {"UPLO": _uplo(UPLO, "eigh")})
    return EighResult(w, v)


@export(namespace="linalg")
def eigvalsh(a: TensorLike, UPLO: str = "L") -> Tensor:
    """Eigenvalues (ascending) of a real symmetric matrix (or a batch), as NumPy's
    ``linalg.eigvalsh``. Reads the triangle ``UPLO`` only. Its gradient V diag(dw) V^T is
    defined everywhere, repeated eigenvalues included (a subgradient where they cross).

    >>> import flowgrad as tf
    >>> a = tf.tensor([[2.0, 1.0], [1.0, 2.0]], dtype="float64")
    >>> tf.linalg.eigvalsh(a).print()
    Tensor
        [1, 3]
    >>> tf.grad(lambda a: tf.linalg.eigvalsh(a)[1])(a).print()
    Tensor
        [[0.5, 0  ],
         [1  , 0.5]]
    """
    a = as_matrix(a, "eigvalsh", square=True)
    return E.run_kernel(_eigvalsh, (a,), {"UPLO": _uplo(UPLO, "eigvalsh")})


# ---------------------------------------------------------------- svd, svdvals

@primitive("Svd", multi=True, save_y=True, batched_vjp=True, vmap=V.leading)
def _svd(B, a, full_matrices):
    check_finite(B, a, "svd")
    u, s, vh = B.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


def _free_columns(q, dq, k, what):
    """q's first k columns q1 and their cotangent, with that of the others q2 (any
    orthonormal basis of the complement) folded in: q2's motion along q1 is fixed by q1's
    (q1^T dq2 = -dq1^T q2); its rotation within the complement must not matter."""
    q1, q2, dq1, dq2 = q[..., :, :k], q[..., :, k:], dq[..., :, :k], dq[..., :, k:]
    eff = dq1 - mat_mul(q2, mat_mul(dq2, q1, True, False))
    x = mat_mul(q2, dq2, True, False)
    return q1, E.run_kernel(_gauge_free, (eff, x, dq2), {"fn": "svd", "what": what})


@_svd.def_vjp
def _(dys, a, u, s, vh, full_matrices):
    du, ds, dvh = dys
    m, n = a.shape[-2:]
    k = min(m, n)
    v, dv = _mT(vh), _mT(dvh)
    if full_matrices and m > k:
        u, du = _free_columns(u, du, k, f"U's last {m - k} columns")
    if full_matrices and n > k:
        v, dv = _free_columns(v, dv, k, f"Vh's last {n - k} rows")
    # a = U S V^T. With dP = U^T da V: dS = diag(dP); the rotations U^T dU and V^T dV solve
    # 2x2 systems in (dP_ij, dP_ji) with determinant s_j^2 - s_i^2 = (s_j - s_i)(s_j + s_i).
    # Split so: only the rotation common to U and V (X + Y's antisymmetric part) meets
    # 1/(s_j - s_i), which is what a basis-independent function leaves zero at equal values
    x = mat_mul(u, du, True, False)
    y = mat_mul(v, dv, True, False)
    xy, x_y = x + y, x - y
    fm = E.run_kernel(_gaps, (s, xy, du, dv), {"sums": False, "fn": "svd"})
    fp = E.run_kernel(_gaps, (s, x_y, du, dv), {"sums": True, "fn": "svd"})
    inner = _diag(ds) + ((xy - _mT(xy)) * fm + (x_y - _mT(x_y)) * fp) * 0.5
    da = mat_mul(u, mat_mul(inner, v, False, True))
    # the parts of dU, dV outside the span of U, V (tall or wide a): (1 - UU^T) dU S^-1 V^T
    if m > k:
        r = du - mat_mul(u, x)
        inv = E.run_kernel(_safe_reciprocal, (s, r, du), {"fn": "svd"})
        da = da + mat_mul(r * inv[..., None, :], v, False, True)
    if n > k:
        r = dv - mat_mul(v, y)
        inv = E.run_kernel(_safe_reciprocal, (s, r, dv), {"fn": "svd"})
        da = da + mat_mul(u, r * inv[..., None, :], False, True)
    return da


@primitive("Svdvals", batched_vjp=True, vmap=V.leading)
def _svdvals(B, a):
    check_finite(B, a, "svdvals")
    return B.linalg.svdvals(a)


@_svdvals.def_vjp
def _(ds, a):
    # ds_i = u_i^T da v_i: defined even where singular values coincide
    u, _, vh = E.run_kernel(_svd, (a,), {"full_matrices": False})
    return mat_mul(u * ds[..., None, :], vh)


def symmetric_from_lower(a):
    """The symmetric matrix read from a's lower triangle (as NumPy's hermitian=True)."""
    n = a.shape[-1]
    low = tensor(np.tril(np.ones((n, n))), dtype=a.dtype)
    return a * low + _mT(a * tensor(np.tril(np.ones((n, n)), -1), dtype=a.dtype))


class SVDResult(NamedTuple):
    """``svd``'s result, as NumPy's: a = U·diag(S)·Vh."""
    U: Tensor
    S: Tensor
    Vh: Tensor


@export(namespace="linalg")
def svd(a: TensorLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> SVDResult | Tensor:
    """The singular value decomposition a = U diag(S) Vh of a matrix (or a batch: the last
    two axes), as NumPy's ``linalg.svd``: a result ``(U, S, Vh)``, S descending.

    For a of shape [..., m, n] and k = min(m, n): U is [..., m, m] and Vh [..., n, n]
    (``full_matrices=True``, NumPy's default) or [..., m, k] and [..., k, n]. With
    ``compute_uv=False`` only S is returned (as ``svdvals``). ``hermitian=True`` takes a as
    symmetric and reads its lower triangle, as NumPy does.

    Gradients: through S always (U diag(dS) Vh); through U and Vh they grow as 1/(s_j - s_i).
    Where the vectors are not unique (equal singular values, a zero one of a non-square a,
    the last |m - n| columns of a full U or Vh) a function that does not depend on their
    choice is still differentiated, one that does raises GradientError.

    >>> import flowgrad as tf
    >>> a = tf.tensor([[3.0, 0.0], [4.0, 5.0]], dtype="float64")
    >>> u, s, vh = tf.linalg.svd(a)
    >>> s.numpy().round(6).tolist()
    [6.708204, 2.236068]
    >>> bool(((u * s.expand_dims(0)) @ vh - a).abs().max() < 1e-12)
    True
    """
    a = as_matrix(a, "svd")
    full_matrices = flag(full_matrices, "full_matrices", "svd")
    if flag(hermitian, "hermitian", "svd"):
        a = symmetric_from_lower(as_matrix(a, "svd", square=True))
    if not flag(compute_uv, "compute_uv", "svd"):
        return E.run_kernel(_svdvals, (a,))
    u, s, vh = E.run_kernel(_svd, (a,), {"full_matrices": full_matrices})
    return SVDResult(u, s, vh)


@export(namespace="linalg")
def svdvals(x: TensorLike) -> Tensor:
    """The singular values of a matrix (or a batch), descending: NumPy's
    ``linalg.svdvals``. Differentiable everywhere (U diag(dS) Vh; a subgradient where
    singular values are equal).

    >>> import flowgrad as tf
    >>> x = tf.tensor([[3.0, 0.0], [4.0, 5.0]], dtype="float64")
    >>> tf.linalg.svdvals(x).numpy().round(6).tolist()
    [6.708204, 2.236068]
    >>> tf.grad(lambda x: tf.linalg.svdvals(x).sum())(tf.eye(2)).print()
    Tensor
        [[1, 0],
         [0, 1]]
    """
    return E.run_kernel(_svdvals, (as_matrix(x, "svdvals", "x"),))


# ---------------------------------------------------------------- norm

def _root(s, p):
    """s ** (1/p) for s >= 0, whose gradient at s = 0 is 0 (a subgradient of the norm at
    0, as PyTorch's) rather than 0 * inf = NaN."""
    pos = s > 0
    safe = where(pos, s, 1.0)
    return where(pos, safe.sqrt() if p == 2 else safe.pow(1.0 / p), 0.0)


def _vector_norm(x, ord, axis):
    if ord is None or ord == 2:
        return _root((x * x).sum(axis), 2)
    if ord == _INF:
        return x.abs().max(axis)
    if ord == -_INF:
        return x.abs().min(axis)
    if ord == 0:
        return (x != 0).cast(x.dtype).sum(axis)
    if ord == 1:
        return x.abs().sum(axis)
    a = x.abs()
    if ord < 0:     # NOTE: a zero entry makes the sum inf and the norm 0, as NumPy's
        return a.pow(float(ord)).sum(axis).pow(1.0 / ord)
    return _root(a.pow(float(ord)).sum(axis), ord)


def _matrix_norm(x, ord, row, col):
    """The matrix norm over axes (row, col); those axes are gone from the result."""
    if ord in (None, "fro"):
        return _root((x * x).sum([row, col]), 2)
    if ord in (1, -1, _INF, -_INF):
        # 1: the largest column sum of |x| (summed over rows); inf: the largest row sum
        over, then = (row, col) if ord in (1, -1) else (col, row)
        sums = x.abs().sum(over, True)
        best = sums.max(then, True) if ord > 0 else sums.min(then, True)
        return reshape(best, tuple(d for i, d in enumerate(x.shape) if i not in (row, col)))
    rest = [i for i in range(x.rank) if i not in (row, col)]
    s = E.run_kernel(_svdvals, (transpose(x, rest + [row, col]),))
    if ord == "nuc":
        return s.sum(-1)
    return s[..., 0] if ord == 2 else s[..., -1]


@export(namespace="linalg")
def norm(x: TensorLike, ord: float | str | None = None,
         axis: int | tuple[int, int] | None = None, keepdims: bool = False) -> Tensor:
    """Vector and matrix norms, as NumPy's ``linalg.norm`` (``tf.norm`` is TF.js's).

    ``axis`` None: the 2-norm of x flattened when ``ord`` is None, else x must be 1-D (a
    vector norm) or 2-D (a matrix norm). An int: vector norms along it; a pair (row, col):
    matrix norms over those axes. Vector ``ord``: None/2, 1, inf (max |x|), -inf (min |x|),
    0 (the count of non-zeros), any other p: sum(|x|^p)^(1/p). Matrix ``ord``: None/'fro',
    'nuc' (sum of singular values), 2 / -2 (largest / smallest singular value), 1 / -1
    (largest / smallest column sum of |x|), inf / -inf (the same of row sums).

    Differentiable (ord 0 has gradient zero); at x = 0 the 2- and p-norms get the
    subgradient 0. The singular-value norms use svdvals' gradient.

    >>> import flowgrad as tf
    >>> x = tf.tensor([[1.0, -2.0], [3.0, 4.0]], dtype="float64")
    >>> round(tf.linalg.norm(x).item(), 6), round(tf.linalg.norm(x, "nuc").item(), 6)
    (5.477226, 7.071068)
    >>> tf.linalg.norm(x, 1, axis=1).print()
    Tensor
        [3, 7]
    """
    x = as_float(x, "norm")
    keepdims = flag(keepdims, "keepdims", "norm")
    given = ord
    if ord is not None and not isinstance(ord, str):
        ord = as_number(ord, "ord", "linalg.norm")      # (or 'fro', 'nuc')
    if axis is None:
        if ord is None:
            out = _vector_norm(reshape(x, (x.size,)), None, 0)
            return reshape(out, (1,) * x.rank) if keepdims else out
        if x.rank not in (1, 2):
            raise ShapeError(f"linalg.norm: with ord={given!r} and axis=None, x must be 1-D "
                             f"or 2-D, got shape {list(x.shape)}: give axis (an int for "
                             f"vector norms, a pair for matrix norms)")
        axes = tuple(range(x.rank))
    elif isinstance(axis, (list, tuple)):
        axes = tuple(norm_axis(a, x.rank, "linalg.norm") for a in axis)
    else:
        axes = (norm_axis(axis, x.rank, "linalg.norm"),)
    if len(axes) == 1 and isinstance(ord, str):
        raise ArgumentError(f"linalg.norm: invalid norm order {given!r} for vectors (use "
                            f"None, 2, 1, inf, -inf, 0 or any other number)")
    if len(axes) == 2 and axes[0] == axes[1]:
        raise ArgumentError(f"linalg.norm: duplicate axes given: {list(axis)}")
    if len(axes) == 2 and ord not in (None, "fro", "nuc", 2, -2, 1, -1, _INF, -_INF):
        raise ArgumentError(f"linalg.norm: invalid norm order {given!r} for matrices (use "
                            f"None, 'fro', 'nuc', 2, -2, 1, -1, inf or -inf)")
    if len(axes) not in (1, 2):
        raise ArgumentError(f"linalg.norm: axis must be an int or a pair of ints, got "
                            f"{describe(axis)}")
    if any(x.shape[a] == 0 for a in axes) and (ord is None or isinstance(ord, str) or ord > 0):
        out = (x * 0).sum(list(axes))       # (the norm of nothing, as NumPy's: 0)
    else:
        out = _vector_norm(x, ord, axes[0]) if len(axes) == 1 else _matrix_norm(x, ord, *axes)
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out
