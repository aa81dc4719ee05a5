"""Indexing: gather (with batch dims) and its adjoint (segment sums), gather_nd /
scatter_nd / tensor_scatter_update. Python's ``x[...]`` and strided_slice are in
subscript.py.

Each rule is the adjoint of its op (gather <-> scatter-add, gather_nd <-> scatter_nd),
written with these same ops, so higher orders come for free.
"""
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import check_alloc
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor, convert
from ._core import as_int, as_ints, as_tensor, export, norm_axis, primitive


# ---------------------------------------------------------------- gather / segment sum
# With batch_dims b, x is seen as (batch, outer, n, inner) and the indices as (batch, K):
# out[b, o, k, i] = x[b, o, indices[b, k], i]. b = 0 is plain ``take``.

def _take(B, x, indices, axis, bd):
    shape = x.shape[:axis] + indices.shape[bd:] + x.shape[axis + 1:]
    if not bd:
        # the standard's take wants 1-D indices
        if indices.ndim == 1:
            return B.take(x, indices, axis=axis)
        return B.reshape(B.take(x, B.reshape(indices, (-1,)), axis=axis), shape)
    # x as rows (nb * no * n, ni): entry (b, o, j) reads row (b * no + o) * n + indices[b, j]
    n = x.shape[axis]
    nb, no = math.prod(x.shape[:bd]), math.prod(x.shape[bd:axis])
    ni = math.prod(x.shape[axis + 1:])
    k = math.prod(indices.shape[bd:])
    idx = indices if nb * no * n < 2 ** 31 else B.astype(indices, B.int64)
    base = B.arange(0, nb * no * n, n, dtype=idx.dtype)
    rows = B.reshape(B.reshape(idx, (nb, 1, k)) + B.reshape(base, (nb, no, 1)), (-1,))
    return B.reshape(B.take(B.reshape(x, (nb * no * n, ni)), rows, axis=0), shape)


@primitive("GatherV2", vmap=V.gather)
def _gather(B, x, indices, axis, batch_dims=0):
    return _take(B, x, indices, axis, batch_dims)


@_gather.def_vjp
def _(dy, x, indices, axis, batch_dims=0):
    return scatter_add_along(dy, indices, axis, x.shape[axis], batch_dims), None


@primitive("ScatterAdd", vmap=V.loop)
def _scatter_add_k(B, dy, indices, axis, n, batch_dims=0):
    # dy seen as (nb, no, k, ni): entry (b, o, j) goes to segment (b * no + o) * n +
    # indices[b, j]; out-of-range (negative) ids go to a spare last segment, dropped (TF.js)
    bd = batch_dims
    pre = dy.shape[:axis]
    post = dy.shape[axis + indices.ndim - bd:]
    nb, no = math.prod(pre[:bd]), math.prod(pre[bd:])
    k, ni = math.prod(indices.shape[bd:]), math.prod(post)
    total = nb * no * n
    idx = indices if total < 2 ** 31 else B.astype(indices, B.int64)
    idx = B.reshape(idx, (nb, 1, k))
    ok = (idx >= 0) & (idx < n)
    if nb * no > 1:
        idx = idx + B.reshape(B.arange(0, total, n, dtype=idx.dtype), (nb, no, 1))
    idx = B.reshape(B.where(ok, idx, total), (-1,))
    out = B.segment_sum(B.reshape(dy, (nb * no * k, ni)), idx, total + 1)
    return B.reshape(out[:total, ...], pre + (n,) + post)


@_scatter_add_k.def_vjp
def _(ddx, dy, indices, axis, n, batch_dims=0):
    return gather_or_zero(ddx, indices, axis, batch_dims), None


def scatter_add_along(dy, indices, axis, n, batch_dims=0):
    """The rows of ``dy`` summed into ``n`` rows along ``axis`` at ``indices`` (the gradient
    of a gather; out-of-range ids are dropped). For the family files, not a public op."""
    attrs = {"axis": axis, "n": n}
    if batch_dims:
        attrs["batch_dims"] = batch_dims
    return E.run_kernel(_scatter_add_k, (dy, indices), attrs)


def gather_or_zero(x, indices, axis, batch_dims=0):
    """The rows of ``x`` at ``indices`` along ``axis``, zeros where an id is out of range
    (the adjoint of scatter_add_along). For the family files, not a public op."""
    attrs = {"axis": axis}
    if batch_dims:
        attrs["batch_dims"] = batch_dims
    return E.run_kernel(_gather_pad, (x, indices), attrs)


def gather_in_range(x, indices, axis):
    """The rows of ``x`` at int32 ``indices`` along ``axis``, all in range (the caller has
    checked them): ``gather`` without its argument checks. For the family files, not a
    public op."""
    return E.run_kernel(_gather, (x, indices), {"axis": axis})


@primitive("GatherOrZero", vmap=V.loop)
def _gather_pad(B, x, indices, axis, batch_dims=0):
    n = x.shape[axis]
    ok = (indices >= 0) & (indices < n)
    out = _take(B, x, B.where(ok, indices, 0), axis, batch_dims)
    if not bool(B.all(ok)):
        bd = batch_dims
        shape = (indices.shape[:bd] + (1,) * (axis - bd) + indices.shape[bd:]
                 + (1,) * (x.ndim - axis - 1))
        out = B.where(B.reshape(ok, shape), out, B.zeros((), dtype=x.dtype))
    return out


@_gather_pad.def_vjp
def _(dy, x, indices, axis, batch_dims=0):
    return scatter_add_along(dy, indices, axis, x.shape[axis], batch_dims), None


def _check_indices(indices, n, fn, what="indices"):
    indices = as_tensor(indices, fn, what)
    if indices.dtype != dtypes.int32:
        if indices.dtype in dtypes.FLOATS and bool((indices.floor() == indices).all()):
            indices = indices.cast("int32")
        else:
            raise DtypeError(f"Argument '{what}' passed to '{fn}' must be int32 tensor, but "
                             f"got {indices.dtype} tensor")
    return indices


def _batch_dims(batch_dims, x, indices, axis, fn):
    """batch_dims normalized and checked as TF.js does (collectGatherOpShapeInfo)."""
    bd = as_int(batch_dims, "batch_dims", fn)
    r = indices.rank
    if not -r <= bd <= r:
        raise ArgumentError(f"{fn}(): Expect batchDims in the range of [-{r}, {r}], but got "
                            f"{bd} (indices has rank {r})")
    if bd < 0:
        bd += r
    if bd > axis:
        raise ArgumentError(f"{fn}(): batchDims ({bd}) must be less than or equal to axis "
                            f"({axis}).")
    for i in range(bd):
        if x.shape[i] != indices.shape[i]:
            raise ShapeError(f"{fn}(): x.shape[{i}]: {x.shape[i]} should be equal to "
                             f"indices.shape[{i}]: {indices.shape[i]}. The first batch_dims "
                             f"({bd}) axes of x {x.shape} and indices {indices.shape} must "
                             f"match.")
    return bd


@export
def gather(x, indices, axis=0, batch_dims=0):
    """Entries of x picked along ``axis`` by int32 ``indices`` (any shape).

    With ``batch_dims`` b, the first b axes of x and indices are batch axes: batch element
    i of x is gathered with batch element i of the indices (b <= axis).

    >>> import flowgrad as tf
    >>> tf.gather(tf.tensor([10, 20, 30]), tf.tensor([2, 0], dtype="int32")).print()
    Tensor
        [30, 10]
    >>> x = tf.tensor([[1, 2, 3], [4, 5, 6]])
    >>> tf.gather(x, [[2, 0], [1, 1]], axis=1, batch_dims=1).print()
    Tensor
        [[3, 1],
         [5, 5]]
    """
    x = as_tensor(x, "gather")
    a = norm_axis(axis, x.rank, "gather")
    indices = _check_indices(indices, x.shape[a], "gather")
    bd = 0 if type(batch_dims) is int and batch_dims == 0 else \
        _batch_dims(batch_dims, x, indices, a, "gather")
    if indices.size:
        arr = indices.numpy()
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= x.shape[a]:
            bad = lo if lo < 0 else hi
            raise ShapeError(f"gather(): index {bad} is out of range for axis {a} of x, which "
                             f"has {x.shape[a]} entries (shape {x.shape}).")
    attrs = {"axis": a, "batch_dims": bd} if bd else {"axis": a}
    return E.run_kernel(_gather, (x, indices), attrs)


@export(kernel="UnsortedSegmentSum")
def unsorted_segment_sum(x, segment_ids, num_segments):
    """Sums of the rows of x that share a segment id: out[i] = sum of x[j] where
    segment_ids[j] == i. Negative ids are dropped.

    >>> import flowgrad as tf
    >>> ids = tf.tensor([0, 1, 0], dtype="int32")
    >>> tf.unsorted_segment_sum(tf.tensor([1, 2, 3]), ids, 2).print()
    Tensor
        [4, 2]
    """
    x = as_tensor(x, "unsorted_segment_sum")
    ids = _check_indices(segment_ids, num_segments, "unsorted_segment_sum", "segment_ids")
    if ids.shape != x.shape[:ids.rank]:
        raise ShapeError(f"unsorted_segment_sum(): segment_ids shape {ids.shape} must be a "
                         f"prefix of x's shape {x.shape}")
    n = as_int(num_segments, "num_segments", "unsorted_segment_sum", 0)
    check_alloc((n,) + x.shape[ids.rank:], x.dtype, "unsorted_segment_sum")
    return scatter_add_along(x, ids, 0, n)


# ---------------------------------------------------------------- gather_nd / scatter_nd
# The last axis of ``indices`` holds index tuples of depth d into the leading d axes; the
# kernels see the tensor as (rows, *rest) and each tuple as a row number.

def _rows(B, indices, lead):
    """The row numbers of the index tuples (last axis of indices) into shape ``lead``,
    flat (in int64 where int32 could overflow)."""
    if not lead:
        return B.zeros((math.prod(indices.shape[:-1]),), dtype=indices.dtype)
    idx = indices if math.prod(lead) < 2 ** 31 else B.astype(indices, B.int64)
    rows = idx[..., 0]
    for k in range(1, len(lead)):
        rows = rows * lead[k] + idx[..., k]
    return B.reshape(rows, (-1,))


@primitive("GatherNd", vmap=V.loop)
def _gather_nd(B, x, indices):
    d = indices.shape[-1]
    rows = _rows(B, indices, x.shape[:d])
    out = B.take(B.reshape(x, (math.prod(x.shape[:d]),) + x.shape[d:]), rows, axis=0)
    return B.reshape(out, indices.shape[:-1] + x.shape[d:])


@_gather_nd.def_vjp
def _(dy, x, indices):
    return E.run_kernel(_scatter_nd_k, (indices, dy), {"shape": x.shape}), None


@primitive("ScatterNd", vmap=V.loop)
def _scatter_nd_k(B, indices, updates, shape):
    d = indices.shape[-1]
    rest = shape[d:]
    rows = _rows(B, indices, shape[:d])
    out = B.segment_sum(B.reshape(updates, rows.shape + rest), rows,   # duplicates add up
                        math.prod(shape[:d]))
    return B.reshape(out, shape)


@_scatter_nd_k.def_vjp
def _(dy, indices, updates, shape):
    return None, E.run_kernel(_gather_nd, (dy, indices))


@primitive("TensorScatterUpdate", vmap=V.loop)
def _tensor_scatter_update_k(B, tensor, indices, updates):
    # NOTE: indices hold no duplicate here (the public function keeps the last one), so
    # the assignment order, which NumPy leaves unspecified, does not matter.
    d = indices.shape[-1]
    rest = tensor.shape[d:]
    rows = _rows(B, indices, tensor.shape[:d])
    out = B.put_rows(B.reshape(tensor, (math.prod(tensor.shape[:d]),) + rest), rows,
                     B.reshape(updates, rows.shape + rest))
    return B.reshape(out, tensor.shape)


@_tensor_scatter_update_k.def_vjp
def _(dy, tensor, indices, updates, needs):
    g_tensor = g_updates = None
    if needs[0]:
        # dy where tensor survives, 0 where it was overwritten: the op itself on dy
        zeros = E.constant_tensor(E.B.zeros(updates.shape, dtype=E.B.dtypes[dy.dtype]))
        g_tensor = E.run_kernel(_tensor_scatter_update_k, (dy, indices, zeros))
    if needs[2]:
        g_updates = E.run_kernel(_gather_nd, (dy, indices))
    return g_tensor, None, g_updates


def _check_rows(indices, lead, fn, what):
    """A clear error for an index tuple that falls outside ``lead`` (no bare IndexError)."""
    if not indices.size:
        return
    arr = indices.numpy().reshape(-1, indices.shape[-1])
    bad = (arr < 0) | (arr >= np.asarray(lead, dtype=np.int64))
    if bad.any():
        r = int(np.argmax(bad.any(1)))
        j = int(np.argmax(bad[r]))
        raise ShapeError(f"{fn}(): Invalid indices: {arr[r].tolist()} (index tuple {r} of "
                         f"indices) does not index into {what}: its entry {j} is {arr[r, j]}, "
                         f"valid values are 0 to {lead[j] - 1} for axis {j} of size "
                         f"{lead[j]}.")


def _rank1(t, what, fn):
    if t.rank < 1:
        raise ShapeError(f"{fn}() expects the {what} to be rank 1 or higher, but the rank "
                         f"was 0.")


@export
def gather_nd(x, indices):
    """Slices of x picked by index tuples: the last axis of the int32 ``indices`` holds
    tuples of depth d into x's first d axes. The shape is
    ``indices.shape[:-1] + x.shape[d:]``.

    >>> import flowgrad as tf
    >>> x = tf.tensor([[1, 2], [3, 4]])
    >>> tf.gather_nd(x, [[1, 0], [0, 1]]).print()
    Tensor
        [3, 2]
    >>> tf.gather_nd(x, [[1], [0]]).print()
    Tensor
        [[3, 4],
         [1, 2]]
    """
    fn = "gather_nd"
    x = as_tensor(x, fn)
    indices = _check_indices(indices, None, fn)
    _rank1(x, "input", fn)
    _rank1(indices, "indices", fn)
    d = indices.shape[-1]
    if d > x.rank:
        raise ShapeError(f"{fn}(): index innermost dimension length must be <= tensor rank; "
                         f"saw: {d} vs. {x.rank} (indices of shape {indices.shape} into x of "
                         f"shape {x.shape})")
    _check_rows(indices, x.shape[:d], fn, f"x of shape {x.shape}")
    return E.run_kernel(_gather_nd, (x, indices))


def _scatter_args(indices, updates, shape, fn):
    """Checks shared by scatter_nd and tensor_scatter_update (TF.js's scatter_nd_util), and
    the indices as (..., depth): TF.js reads rank-1 indices as a list of indices into axis
    0, so they become a column."""
    _rank1(indices, "indices", fn)
    _rank1(updates, "updates", fn)
    if len(shape) < 1:
        raise ShapeError(f"{fn}(): Output rank must be greater or equal to 1, but got shape: "
                         f"{list(shape)}")
    if indices.rank == 1:
        indices = indices.reshape([-1, 1])
    d = indices.shape[-1]
    want = indices.shape[:-1] + tuple(shape[d:])
    if d > len(shape) or updates.shape != want:
        raise ShapeError(
            f"{fn}(): Must have updates.shape = indices.shape[:batchDim] + shape[sliceDim:], "
            f"got updates.shape: {updates.shape}, indices.shape: {indices.shape}, shape: "
            f"{tuple(shape)}, sliceDim: {d}, and batchDim: {indices.rank - 1}"
            + (f" (updates of shape {want} expected)." if d <= len(shape) else
               f" (index depth {d} exceeds the output rank {len(shape)})."))
    _check_rows(indices, tuple(shape[:d]), fn, f"the output of shape {tuple(shape)}")
    return indices


@export(method=False)
def scatter_nd(indices, updates, shape):
    """A zero tensor of ``shape`` with ``updates`` added at ``indices`` (index tuples on the
    last axis, as gather_nd; duplicates add up). The adjoint of gather_nd.

    >>> import flowgrad as tf
    >>> tf.scatter_nd([[1], [3], [1]], tf.tensor([5, 6, 7]), [4]).print()
    Tensor
        [0, 12, 0, 6]
    """
    fn = "scatter_nd"
    indices = _check_indices(indices, None, fn)
    updates = as_tensor(updates, fn, "updates")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = as_ints(shape, "shape", fn, 0)
    check_alloc(shape, updates.dtype, fn)
    indices = _scatter_args(indices, updates, shape, fn)
    return E.run_kernel(_scatter_nd_k, (indices, updates), {"shape": shape})


@export
def tensor_scatter_update(tensor, indices, updates):
    """A copy of ``tensor`` with the slices at ``indices`` (index tuples on the last axis)
    replaced by ``updates``. For a repeated index the last update wins (as TF.js on CPU);
    the updates it overrides get no gradient.

    >>> import flowgrad as tf
    >>> t = tf.tensor([1, 1, 1, 1])
    >>> tf.tensor_scatter_update(t, [[2], [0]], tf.tensor([9, 8])).print()
    Tensor
        [8, 1, 9, 1]
    """
    fn = "tensor_scatter_update"
    tensor = as_tensor(tensor, fn, "tensor")
    indices = _check_indices(indices, None, fn)
    if not isinstance(updates, Tensor):
        updates = convert(updates, "updates", fn, dtype=tensor.dtype)
    indices = _scatter_args(indices, updates, tensor.shape, fn)
    if tensor.dtype != updates.dtype:
        raise DtypeError(f"{fn}(): tensor and updates must have the same dtype, instead they "
                         f"are {tensor.dtype} and {updates.dtype}. Cast one of them "
                         f"(updates.cast('{tensor.dtype}')).")
    if indices.size:
        d = indices.shape[-1]
        rows = _rows(np, indices.numpy(), tensor.shape[:d])
        # the last occurrence of each row wins: its position in the reversed list is first
        _, first = np.unique(rows[::-1], return_index=True)
        if len(first) < len(rows):
            k = len(rows)
            keep = E.constant_tensor(E.from_host(np.sort(k - 1 - first).astype(np.int32)))
            rest = list(updates.shape[indices.rank - 1:])
            indices = gather(indices.reshape([k, d]), keep)
            updates = gather(updates.reshape([k] + rest), keep)
    return E.run_kernel(_tensor_scatter_update_k, (tensor, indices, updates))
