"""Indexing: gather (with batch dims) and its adjoint (segment sums), gather_nd /
scatter_nd / tensor_scatter_update, strided_slice and Python ``x[...]`` indexing.

Each rule is the adjoint of its op (gather <-> scatter-add, gather_nd <-> scatter_nd,
strided slice <-> its scatter into zeros), written with these same ops, so higher orders
come for free.
"""
import builtins
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import check_alloc
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor, convert
from ._core import as_int, as_ints, as_tensor, export, norm_axis, own_buffer, primitive

_pyslice = builtins.slice


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


# ---------------------------------------------------------------- Python indexing

@primitive("StridedSlice", batched_vjp=True, vmap=V.strided_slice)
def _strided_slice(B, x, key):
    # (an int key on a vector gives a NumPy scalar: keep an array)
    return own_buffer(B, B.asarray(x[key]), x)


# The two rules below accept leading batch axes (vectorised jacobians): the key is
# prefixed with full slices over them.
def _batch_key(key, k):
    return (_pyslice(None),) * k + tuple(key) if k else key


@_strided_slice.def_vjp
def _(dy, x, key):
    out_rank = np.broadcast_to(np.zeros((), np.int8), x.shape)[key].ndim
    k = dy.rank - out_rank
    return E.run_kernel(_strided_slice_grad, (dy,), {"key": _batch_key(key, k),
                                                       "shape": dy.shape[:k] + x.shape})


@primitive("StridedSliceGrad", batched_vjp=True, vmap=V.strided_slice_grad)
def _strided_slice_grad(B, dy, key, shape):
    out = B.zeros(shape, dtype=dy.dtype)
    # the standard's __setitem__ takes no None: drop the new axes, and dy's axes of size 1
    # they made
    if None in key:
        key = tuple(k for k in key if k is not None)
        dy = B.reshape(dy, out[key].shape)
    out[key] = dy
    return out


@_strided_slice_grad.def_vjp
def _(ddx, dy, key, shape):
    return E.run_kernel(_strided_slice, (ddx,), {"key": _batch_key(key, ddx.rank - len(shape))})


def _index_key(key, shape):
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    dims = sum(1 for k in key if k is not None and k is not Ellipsis)
    if dims > len(shape):
        raise ShapeError(f"too many indices for a tensor of shape {shape}: {len(key)} given")
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    axis = 0
    for k in key:
        if k is None or k is Ellipsis:
            out.append(k)
            if k is Ellipsis:
                axis += len(shape) - dims
            continue
        if isinstance(k, Tensor):
            k = k.item() if k.rank == 0 else k
        if isinstance(k, builtins.slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and (isinstance(part, bool)
                                         or not isinstance(part, (int, np.integer))):
                    raise ArgumentError(f"slice indices must be integers or None, got "
                                        f"{part!r} in {k}")
            if k.step == 0:
                raise ArgumentError("slice step cannot be zero")
            out.append(_clamp(k, shape[axis]))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            n = shape[axis]
            if not -n <= k < n:
                raise ShapeError(f"x[key]: index {k} is out of bounds for axis {axis} with "
                                 f"size {n}")
            out.append(int(k) % n)
        else:
            raise ArgumentError(f"Tensors are indexed with ints, slices, None and '...'; got "
                                f"{type(k).__name__}. Use tf.gather() for index tensors.")
        axis += 1
    return _full_key(out)


def _clamp(sl, n):
    """The slice with its bounds within [0, n] (Python clamps; the standard does not take
    bounds outside the axis): the same entries, in the same order."""
    if (sl.start is None or -n <= sl.start <= n) and (sl.stop is None or -n <= sl.stop <= n):
        return sl
    start, stop, step = sl.indices(n)
    if (stop - start) * step <= 0:
        return _pyslice(0, 0, 1)
    return _pyslice(start, stop if stop >= 0 else None, step)


def _full_key(key):
    """The key with a trailing '...' when it has none: the standard indexes with keys that
    cover every axis."""
    key = tuple(key)
    return key if Ellipsis in key else key + (Ellipsis,)


def _getitem(self, key):
    """``x[1:, None, ..., 0]``: basic indexing with ints, slices, None and Ellipsis.

    >>> import flowgrad as tf
    >>> tf.tensor([[1, 2, 3], [4, 5, 6]])[1, ::2].print()
    Tensor
        [4, 6]
    """
    return E.run_kernel(_strided_slice, (self,), {"key": _index_key(key, self.shape)})


Tensor.__getitem__ = _getitem


def _bits(mask, what, fn):
    return as_int(mask, what, fn, 0)


@export
def strided_slice(x, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0):
    """The slice ``x[begin[0]:end[0]:strides[0], ...]``, TF.js's strided slice. Bit i of a
    mask applies to entry i: ``begin_mask``/``end_mask`` ignore begin[i]/end[i] (from the
    start / to the end), ``ellipsis_mask`` makes entry i a ``...``, ``new_axis_mask`` a new
    axis of size 1, ``shrink_axis_mask`` takes the single index begin[i] and drops the axis.
    Differentiable (TF.js has no gradient for it).

    >>> import flowgrad as tf
    >>> x = tf.tensor([[1, 2, 3], [4, 5, 6]])
    >>> tf.strided_slice(x, [0, 2], [2, 0], [1, -1]).print()
    Tensor
        [[3, 2],
         [6, 5]]
    >>> tf.strided_slice(x, [1, 0], [0, 3], [1, 2], shrink_axis_mask=1).print()
    Tensor
        [4, 6]
    """
    fn = "strided_slice"
    x = as_tensor(x, fn)
    begin = as_ints(begin, "begin", fn)
    end = as_ints(end, "end", fn)
    strides = (1,) * len(begin) if strides is None else as_ints(strides, "strides", fn)
    if not len(begin) == len(end) == len(strides):
        raise ArgumentError(f"{fn}(): begin, end and strides must have the same length, got "
                            f"{len(begin)}, {len(end)} and {len(strides)}")
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask = (
        _bits(m, w, fn) for m, w in ((begin_mask, "begin_mask"), (end_mask, "end_mask"),
                                     (ellipsis_mask, "ellipsis_mask"),
                                     (new_axis_mask, "new_axis_mask"),
                                     (shrink_axis_mask, "shrink_axis_mask")))
    if ellipsis_mask & (ellipsis_mask - 1):
        raise ArgumentError(f"{fn}(): Multiple ellipses in slice is not allowed. "
                            f"(ellipsis_mask {ellipsis_mask} has more than one bit set)")
    n = len(begin)
    # entries that index an axis of x: all but the ellipsis and the new axes (TF.js gives
    # the ellipsis precedence when both bits are set)
    real = [i for i in range(n) if not (ellipsis_mask | new_axis_mask) >> i & 1]
    if len(real) > x.rank:
        raise ShapeError(f"{fn}(): Index out of range using input dim {x.rank}; input has only "
                         f"{x.rank} dims: {len(real)} entries of begin index an axis of x "
                         f"(shape {x.shape})")
    key = []
    axis = 0
    for i in range(n):
        bit = 1 << i
        if ellipsis_mask & bit:
            key.append(Ellipsis)
            axis += x.rank - len(real)
            continue
        if new_axis_mask & bit:
            key.append(None)
            continue
        s = strides[i]
        if s == 0:
            raise ArgumentError(f"{fn}(): strides[{i}] must be non-zero")
        dim = x.shape[axis]
        if shrink_axis_mask & bit:
            if s < 0:
                raise ArgumentError(f"{fn}(): only stride 1 allowed on non-range indexing. "
                                    f"(entry {i} shrinks an axis with stride {s})")
            b = begin[i] + dim if begin[i] < 0 else begin[i]
            if not 0 <= b < dim:
                raise ShapeError(f"{fn}(): slice index {begin[i]} of dimension {axis} out of "
                                 f"bounds. (axis {axis} of x {x.shape} has {dim} entries)")
            key.append(b)
        else:
            key.append(_clamp(_pyslice(None if begin_mask & bit else begin[i],
                                       None if end_mask & bit else end[i], s), dim))
        axis += 1
    # NOTE: TF.js's begin/end clamping is Python's slice clamping, so a Python key is exact.
    return E.run_kernel(_strided_slice, (x,), {"key": _full_key(key)})
