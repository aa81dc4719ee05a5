"""Array-API extensions used by the kernels of creation, reductions, scans, shapes and
indexing (see ext.py): constant padding, and the scatters the standard lacks (segment sums,
bincount, row replacement). Each generic version uses the standard alone; NumPy and CuPy
override them with their native calls.

>>> import numpy as np, flowgrad.backends as bk
>>> bk.namespace("numpy").segment_sum(np.array([1., 2., 3.]), np.array([0, 2, 0]), 3)
array([4., 0., 2.])
"""


# ---------------------------------------------------------------- reductions

def summable(B, x):
    """x as an array that ``B.sum`` / ``B.prod`` take with ``dtype=int32``: the standard
    sums numbers only, so bools become int32."""
    return B.astype(x, B.dtypes["int32"]) if x.dtype == B.dtypes["bool"] else x


def _same(x):
    return x


# ---------------------------------------------------------------- pad

def pad(B, x, widths, value=0):
    """x surrounded by ``value``: ``widths`` holds one (before, after) pair per axis."""
    shape = tuple(b + n + a for (b, a), n in zip(widths, x.shape))
    out = B.full(shape, _scalar(B, value, x.dtype), dtype=x.dtype)
    out[tuple(slice(b, b + n) for (b, _), n in zip(widths, x.shape))] = x
    return out


def _scalar(B, value, dtype):
    """value as the Python scalar a ``dtype`` array takes (the standard refuses NumPy
    scalars and bools in numeric arrays)."""
    if dtype == B.dtypes["bool"]:
        return bool(value)
    if dtype == B.dtypes["int32"]:
        return int(value)
    return float(value)


def _pad_numpy(x, widths, value=0):
    # NOTE: np.pad costs ~10 us of Python per call; full + copy into the middle is ~3 us
    import numpy as np
    shape = tuple(b + n + a for (b, a), n in zip(widths, x.shape))
    out = np.full(shape, value, dtype=x.dtype)
    out[tuple(slice(b, b + n) for (b, _), n in zip(widths, x.shape))] = x
    return out


def _pad_cupy(x, widths, value=0):
    import cupy
    return cupy.pad(x, widths, constant_values=value)


# ---------------------------------------------------------------- segment sums

def segment_sum(B, values, ids, n):
    """Rows of ``values`` (shape (N, ...)) summed by segment: ``out[s] = sum of values[j]
    where ids[j] == s``, for the 1-D integer ``ids`` in [0, n); shape (n, ...).

    Generic: a stable sort by id, then a segmented Hillis-Steele scan (log2 N passes of
    where + add: an inf or NaN stays in its own segment), whose last entry per segment is
    read back with searchsorted."""
    N = ids.shape[0]
    rest = values.shape[1:]
    if N == 0 or n == 0:
        return B.zeros((n,) + rest, dtype=values.dtype)
    order = B.argsort(ids, stable=True)
    sid = B.take(ids, order)
    v = B.take(values, order, axis=0)
    ones = (1,) * len(rest)
    zero = B.zeros((), dtype=v.dtype)
    k = 1
    while k < N:
        same = B.reshape(sid[k:] == sid[:-k], (N - k,) + ones)
        v = B.concat([v[:k, ...], v[k:, ...] + B.where(same, v[:-k, ...], zero)], axis=0)
        k *= 2
    segs = B.arange(n, dtype=sid.dtype)
    last = B.clip(B.searchsorted(sid, segs, side="right") - 1, 0, N - 1)
    hit = B.take(sid, last) == segs
    return B.where(B.reshape(hit, (n,) + ones), B.take(v, last, axis=0), zero)


def _segment_sum_numpy(values, ids, n):
    import numpy as np
    out = np.zeros((n,) + values.shape[1:], dtype=values.dtype)
    np.add.at(out, ids, values)
    return out


def _segment_sum_cupy(values, ids, n):
    import cupy
    import cupyx
    out = cupy.zeros((n,) + values.shape[1:], dtype=values.dtype)
    cupyx.scatter_add(out, ids, values)
    return out


def bincount(B, x, weights=None, minlength=0):
    """NumPy's ``bincount``: how often each value of the non-negative 1-D integer ``x``
    occurs (int64), or the sum of the ``weights`` of each value (in weights' dtype; NumPy
    gives float64); ``max(minlength, max(x) + 1)`` bins."""
    n = minlength
    if x.shape[0]:
        n = max(n, int(B.max(x)) + 1)
    if weights is None:
        weights = B.ones(x.shape, dtype=B.int64)
    return B.segment_sum(weights, x, n)


def _bincount_cupy(x, weights=None, minlength=0):
    import cupy
    return cupy.bincount(x, weights=weights, minlength=minlength)


# ---------------------------------------------------------------- row replacement

def put_rows(B, x, rows, updates):
    """A copy of x with ``x[rows[j]] = updates[j]``, for 1-D integer ``rows`` without
    duplicates. Generic: each row finds the update aimed at it with a segment sum."""
    k = rows.shape[0]
    if k == 0:
        return B.asarray(x, copy=True)
    pos = B.segment_sum(B.arange(1, k + 1, dtype=rows.dtype), rows, x.shape[0])
    hit = B.reshape(pos > 0, (x.shape[0],) + (1,) * (x.ndim - 1))
    return B.where(hit, B.take(updates, B.clip(pos - 1, 0, k - 1), axis=0), x)


def _put_rows_native(x, rows, updates):
    out = x.copy()
    out[rows] = updates
    return out


# ---------------------------------------------------------------- what ext.py collects

# the generic implementations, f(B, ...), each under its own name
EXTENSIONS = (summable, pad, segment_sum, bincount, put_rows)
# the backends' own implementations, f(...) without B: (backend, extension) -> f
OVERRIDES = {
    # NOTE: NumPy sums bools with dtype=int32 as they are, twice as fast as a cast first
    ("numpy", "summable"): _same,
    ("cupy", "summable"): _same,
    ("numpy", "pad"): _pad_numpy,
    ("cupy", "pad"): _pad_cupy,
    ("numpy", "segment_sum"): _segment_sum_numpy,
    ("cupy", "segment_sum"): _segment_sum_cupy,
    ("numpy", "bincount"): __import__("numpy").bincount,
    ("cupy", "bincount"): _bincount_cupy,
    ("numpy", "put_rows"): _put_rows_native,
    ("cupy", "put_rows"): _put_rows_native,
}
