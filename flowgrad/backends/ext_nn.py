"""Array-API extensions used by the kernels of linear algebra, nn, losses, images and
spatial ops (see ext.py):

- ``mT``: the standard's ``matrix_transpose``; NumPy: the ``.mT`` view, without
  ``np.matrix_transpose``'s Python layers (0.08 us against 0.6 us, on every transposed
  mat_mul). The attribute itself is standard, but CuPy < 14 lacks it.
- ``einsum``: a contraction in canonical form (letters only, explicit output; a label of
  length 1 broadcasts against its other lengths). Generic: diagonals with ``take``, then
  pairwise ``matmul`` of reshaped operands; NumPy and CuPy: their ``einsum``.
- ``householder_qr``: QR with TF.js's signs (each r[j, j] opposite to its Householder
  pivot). Generic: TF.js's algorithm, batched; NumPy: LAPACK, its signs fixed up.
- ``take_adjoint``: the adjoint of ``take(x, idx, axis)`` for a sorted idx (image resize
  gradients). Generic: a product with the one-hot matrix of idx; NumPy: ``add.reduceat``.
- ``mirror_pad``: reflect/symmetric padding. Generic: ``take`` of mirrored indices;
  NumPy and CuPy: their ``pad``.
- ``diagflat``: the n x n matrix with the n entries of x on its diagonal. Generic: a
  ``where`` on an identity mask; NumPy: a strided write into zeros (20x faster).

The generic versions never write into an array, so they run on any array API library.

>>> import numpy as np, flowgrad.backends as bk
>>> bk.namespace("numpy").take_adjoint(np.array([1., 2., 3.]), np.array([0, 0, 2]), 0, 3)
array([3., 0., 3.])
"""
import operator

# ---------------------------------------------------------------- matrix transpose

def mT(B, x):
    """x with its last two axes swapped."""
    return B.matrix_transpose(x)


# ---------------------------------------------------------------- einsum

def einsum(B, equation, *operands):
    """``equation`` (canonical: 'ab,bc->ac') applied to ``operands`` of one dtype."""
    lhs, out = equation.split("->")
    sizes = {}
    for t, a in zip(lhs.split(","), operands):
        for c, n in zip(t, a.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    ops = [_einsum_prepare(B, t, a, sizes) for t, a in zip(lhs.split(","), operands)]
    t, a = ops[0]
    for k in range(1, len(ops)):
        keep = set(out).union(*(u for u, _ in ops[k + 1:]))
        t, a = _einsum_pair(B, t, a, *ops[k], keep, sizes)
    t, a = _einsum_sum(B, t, a, set(out))
    if t != out:
        a = B.permute_dims(a, tuple(t.index(c) for c in out))
    # a fresh array, never an input (tensors own their buffers)
    return B.asarray(a, copy=True) if any(a is x for x in operands) else a


def _einsum_prepare(B, t, a, sizes):
    """Operand ``a`` with labels ``t`` with its diagonals taken (a label repeated in t) and
    its broadcast axes (length 1 where the label is longer elsewhere) dropped."""
    while len(set(t)) < len(t):
        c = next(c for c in t if t.count(c) > 1)
        i = t.index(c)
        j = t.index(c, i + 1)
        rest = [k for k in range(len(t)) if k not in (i, j)]
        a = B.permute_dims(a, tuple(rest) + (i, j))
        n = a.shape[-1]
        a = B.reshape(a, a.shape[:-2] + (n * n,))
        a = B.take(a, B.arange(n, dtype=B.int64) * (n + 1), axis=-1)
        t = "".join(t[k] for k in rest) + c
    drop = tuple(k for k, c in enumerate(t) if a.shape[k] == 1 and sizes[c] != 1)
    if drop:
        a = B.reshape(a, tuple(n for k, n in enumerate(a.shape) if k not in drop))
        t = "".join(c for k, c in enumerate(t) if k not in drop)
    return t, a


def _einsum_sum(B, t, a, keep):
    """``a`` summed over its labels not in ``keep``."""
    axes = tuple(k for k, c in enumerate(t) if c not in keep)
    if not axes:
        return t, a
    return "".join(c for c in t if c in keep), B.sum(a, axis=axes, dtype=a.dtype)


def _einsum_pair(B, ta, a, tb, b, keep, sizes):
    """The contraction of two operands over their shared labels not in ``keep``."""
    ta, a = _einsum_sum(B, ta, a, keep | set(tb))
    tb, b = _einsum_sum(B, tb, b, keep | set(ta))
    batch = [c for c in ta if c in tb and c in keep]
    inner = [c for c in ta if c in tb and c not in keep]
    only_a = [c for c in ta if c not in tb]
    only_b = [c for c in tb if c not in ta]
    t = "".join(batch + only_a + only_b)
    if not inner:         # a broadcast product: no matmul needed
        a = _einsum_align(B, ta, a, batch + only_a + [None] * len(only_b))
        b = _einsum_align(B, tb, b, batch + [None] * len(only_a) + only_b)
        return t, a * b
    size = [_prod(sizes[c] for c in g) for g in (batch, only_a, inner, only_b)]
    a = B.reshape(_einsum_align(B, ta, a, batch + only_a + inner), (size[0], size[1], size[2]))
    b = B.reshape(_einsum_align(B, tb, b, batch + inner + only_b), (size[0], size[2], size[3]))
    return t, B.reshape(B.matmul(a, b), tuple(sizes[c] for c in t))


def _einsum_align(B, t, a, order):
    """``a`` permuted to the labels ``order``, with a length-1 axis for each None."""
    perm = tuple(t.index(c) for c in order if c is not None)
    if perm != tuple(range(len(perm))):
        a = B.permute_dims(a, perm)
    if None in order:
        it = iter(a.shape)
        a = B.reshape(a, tuple(1 if c is None else next(it) for c in order))
    return a


def _prod(ns):
    p = 1
    for n in ns:
        p *= n
    return p


def _einsum_numpy(equation, *operands, optimize=None):
    import numpy as np
    if optimize is None:
        optimize = len(operands) > 1
    out = np.asarray(np.einsum(equation, *operands, optimize=optimize))
    if any(np.may_share_memory(out, a) for a in operands):
        out = out.copy()          # NumPy returns views for transposes and diagonals
    return out.astype(operands[0].dtype, copy=False)


def _einsum_cupy(equation, *operands):
    import cupy
    out = cupy.einsum(equation, *operands)
    if any(out is a or cupy.may_share_memory(out, a) for a in operands):
        out = out.copy()
    return out.astype(operands[0].dtype, copy=False)


# ---------------------------------------------------------------- QR

def householder_qr(B, x, full_matrices=False):
    """(q, r) of the matrices x[..., m, n] by TF.js's Householder algorithm (its signs);
    an all-zero column is left alone (TF.js gives NaN)."""
    m, n = x.shape[-2:]
    lead = x.shape[:-2]
    q = B.broadcast_to(B.eye(m, dtype=x.dtype), lead + (m, m))
    r = x
    for j in range(min(m, n)):
        col = r[..., j:, j:j + 1]
        nrm = B.sqrt(B.sum(col * col, axis=-2, keepdims=True))
        pivot = r[..., j:j + 1, j:j + 1]
        s = 1 - 2 * B.astype(pivot > 0, x.dtype)          # -1 where the pivot is > 0
        zero = nrm == 0
        u1 = B.where(zero, 1.0, pivot - s * nrm)
        w = B.concat([B.ones(lead + (1, 1), dtype=x.dtype), col[..., 1:, :] / u1], axis=-2)
        tw = B.where(zero, 0.0, -s * u1 / B.where(zero, 1.0, nrm)) * w
        low = r[..., j:, :]
        r = B.concat([r[..., :j, :], low - tw @ (B.matrix_transpose(w) @ low)], axis=-2)
        right = q[..., :, j:]
        q = B.concat([q[..., :, :j], right - (right @ w) @ B.matrix_transpose(tw)], axis=-1)
    r = B.triu(r)
    if not full_matrices and m > n:
        q, r = q[..., :, :n], r[..., :n, :]
    return q, r


def _householder_qr_numpy(x, full_matrices=False):
    import numpy as np
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    _, tau = np.linalg.qr(x, mode="raw")
    # TF.js's Householder QR gives r[j, j] the sign opposite to its pivot at every step.
    # LAPACK does too, except where the column below the pivot is already zero (tau = 0:
    # no reflection; always the last step of a square or wide matrix) and where the pivot
    # is exactly 0 (tau = 1): there TF.js's row j of r and column j of q are negated.
    # NOTE: after an exactly zero pivot TF.js's reflector differs from LAPACK's, so the
    # signs of later rows can differ from TF.js's (still a valid QR); an all-zero column
    # (rank deficient) gives NaN in TF.js, a valid factorization here.
    k = tau.shape[-1]
    beta = np.diagonal(r, axis1=-2, axis2=-1)[..., :k]
    d = np.where(((tau == 0) | (tau == 1)) & (beta != 0), -1, 1).astype(x.dtype)
    q = q.copy()
    q[..., :, :k] *= d[..., None, :]
    r = r * np.concatenate([d, np.ones(r.shape[:-2] + (r.shape[-2] - k,), x.dtype)],
                           axis=-1)[..., :, None]
    return q.astype(x.dtype, copy=False), r.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- scatter of a take

def take_adjoint(B, v, idx, axis, n):
    """The adjoint of ``take(x, idx, axis=axis)`` for x of length n along axis: slot
    idx[i] sums v's slice i. Generic: v times the one-hot matrix of idx (fine for the
    lengths of image axes)."""
    onehot = B.astype(B.arange(n, dtype=idx.dtype)[:, None] == idx[None, :], v.dtype)
    out = B.matmul(B.moveaxis(v, axis, -1), B.matrix_transpose(onehot))
    return B.moveaxis(out, -1, axis)


def _take_adjoint_numpy(v, idx, axis, n):
    # NOTE: idx is sorted here (resize taps): equal neighbours are summed by reduceat
    import numpy as np
    first = np.concatenate(([True], idx[1:] != idx[:-1]))
    starts = np.flatnonzero(first)
    shape = list(v.shape)
    shape[axis] = n
    out = np.zeros(shape, dtype=v.dtype)
    key = [slice(None)] * v.ndim
    key[axis] = idx[starts]
    out[tuple(key)] = np.add.reduceat(v, starts, axis=axis)
    return out


# ---------------------------------------------------------------- mirror padding

def mirror_pad(B, x, paddings, mode):
    """x padded with its mirror image ('reflect': without the border entry, 'symmetric':
    with it); ``paddings`` holds one (before, after) pair per axis."""
    edge = 0 if mode == "reflect" else 1
    for ax, (lo, hi) in enumerate(paddings):
        if lo or hi:
            n = x.shape[ax]
            p = B.arange(-lo, n + hi, dtype=B.int64)
            p = B.where(p < 0, -p - edge, p)
            p = B.where(p >= n, 2 * n - 2 + edge - p, p)
            x = B.take(x, p, axis=ax)
    return x


def _mirror_pad_numpy(x, paddings, mode):
    import numpy as np
    return np.pad(x, paddings, mode=mode)


def _mirror_pad_cupy(x, paddings, mode):
    import cupy
    return cupy.pad(x, paddings, mode=mode)


# ---------------------------------------------------------------- diagonal matrices

def diagflat(B, x):
    """The n x n matrix with the n entries of x (any shape, row-major) on its diagonal and
    zeros elsewhere."""
    n = _prod(x.shape)
    on = B.arange(n)[:, None] == B.arange(n)[None, :]
    return B.where(on, B.reshape(x, (n, 1)), B.zeros((), dtype=x.dtype))


def _diagflat_numpy(x):
    import numpy as np
    n = x.size
    out = np.zeros(n * n, dtype=x.dtype)
    out[::n + 1] = x.reshape(-1)
    return out.reshape(n, n)


def _diagflat_cupy(x):
    import cupy
    return cupy.diagflat(x)


# ---------------------------------------------------------------- what ext.py collects

# the generic implementations, f(B, ...), each under its own name
EXTENSIONS = (mT, einsum, householder_qr, take_adjoint, mirror_pad, diagflat)
# the backends' own implementations, f(...) without B: (backend, extension) -> f
OVERRIDES = {
    ("numpy", "mT"): operator.attrgetter("mT"),
    ("numpy", "einsum"): _einsum_numpy,
    ("cupy", "einsum"): _einsum_cupy,
    ("numpy", "householder_qr"): _householder_qr_numpy,
    ("numpy", "take_adjoint"): _take_adjoint_numpy,
    ("numpy", "mirror_pad"): _mirror_pad_numpy,
    ("cupy", "mirror_pad"): _mirror_pad_cupy,
    ("numpy", "diagflat"): _diagflat_numpy,
    ("cupy", "diagflat"): _diagflat_cupy,
}
