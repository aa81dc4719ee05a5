"""Indexing: gather and its adjoint (segment sums), and Python ``x[...]`` indexing.

Each rule is the adjoint of its op (gather <-> scatter-add, strided slice <-> its
scatter into zeros), written with these same ops, so higher orders come for free.
"""
import builtins

import numpy as np

from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor
from ._core import as_int, as_tensor, export, norm_axis, primitive

_pyslice = builtins.slice


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------- gather / segment sum

@primitive("GatherV2")
def _gather(B, x, indices, axis):
    return B.take(x, indices, axis=axis)


@_gather.def_vjp
def _(dy, x, indices, axis):
    return _scatter_add(dy, indices, axis, x.shape[axis]), None


@primitive("ScatterAdd")
def _scatter_add_k(B, dy, indices, axis, n):
    pre = dy.shape[:axis]
    post = dy.shape[axis + indices.ndim:]
    d3 = dy.reshape((_size(pre), indices.size, _size(post)))
    out = B.zeros((_size(pre), n, _size(post)), dtype=dy.dtype)
    flat = indices.reshape(-1)
    ok = (flat >= 0) & (flat < n)       # negative segment ids are dropped (TF.js)
    if not ok.all():
        flat, d3 = flat[ok], d3[:, ok]
    B.add.at(out, (_pyslice(None), flat), d3)
    return out.reshape(pre + (n,) + post)


@_scatter_add_k.def_vjp
def _(ddx, dy, indices, axis, n):
    return _gather_raw(ddx, indices, axis), None


def _scatter_add(dy, indices, axis, n):
    return E.run_kernel(_scatter_add_k, (dy, indices), {"axis": axis, "n": n})


def _gather_raw(x, indices, axis):
    # negative ids select nothing: gather from x padded with a zero row at the end
    return E.run_kernel(_gather_pad, (x, indices), {"axis": axis})


@primitive("GatherOrZero")
def _gather_pad(B, x, indices, axis):
    n = x.shape[axis]
    ok = (indices >= 0) & (indices < n)
    out = B.take(x, B.where(ok, indices, 0), axis=axis)
    if not ok.all():
        shape = [1] * out.ndim
        shape[axis:axis + indices.ndim] = indices.shape
        out = B.where(ok.reshape(shape), out, 0).astype(x.dtype)
    return out


@_gather_pad.def_vjp
def _(dy, x, indices, axis):
    return _scatter_add(dy, indices, axis, x.shape[axis]), None


def _check_indices(indices, n, fn, what="indices"):
    indices = as_tensor(indices, fn, what)
    if indices.dtype != dtypes.int32:
        if indices.dtype in dtypes.FLOATS and bool((indices.floor() == indices).all()):
            indices = indices.cast("int32")
        else:
            raise DtypeError(f"Argument '{what}' passed to '{fn}' must be int32 tensor, but "
                             f"got {indices.dtype} tensor")
    return indices


@export
def gather(x, indices, axis=0):
    """Entries of x picked along ``axis`` by int32 ``indices`` (any shape).

    >>> import flowgrad as tf
    >>> tf.gather(tf.tensor([10, 20, 30]), tf.tensor([2, 0], dtype="int32")).print()
    Tensor
        [30, 10]
    """
    x = as_tensor(x, "gather")
    a = norm_axis(axis, x.rank, "gather")
    indices = _check_indices(indices, x.shape[a], "gather")
    if indices.size:
        arr = indices.numpy()
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= x.shape[a]:
            bad = lo if lo < 0 else hi
            raise ShapeError(f"gather(): index {bad} is out of range for axis {a} of x, which "
                             f"has {x.shape[a]} entries (shape {x.shape}).")
    return E.run_kernel(_gather, (x, indices), {"axis": a})


@export
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
    return _scatter_add(x, ids, 0, as_int(num_segments, "num_segments",
                                         "unsorted_segment_sum", 0))


# ---------------------------------------------------------------- Python indexing

@primitive("StridedSlice")
def _strided_slice(B, x, key):
    return x[key]


@_strided_slice.def_vjp
def _(dy, x, key):
    return E.run_kernel(_strided_slice_grad, (dy,), {"key": key, "shape": x.shape})


@primitive("StridedSliceGrad")
def _strided_slice_grad(B, dy, key, shape):
    out = B.zeros(shape, dtype=dy.dtype)
    out[key] = dy
    return out


@_strided_slice_grad.def_vjp
def _(ddx, dy, key, shape):
    return E.run_kernel(_strided_slice, (ddx,), {"key": key})


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
            out.append(k)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            n = shape[axis]
            if not -n <= k < n:
                raise ShapeError(f"index {k} is out of bounds for axis {axis} with size {n}")
            out.append(int(k) % n)
        else:
            raise ArgumentError(f"Tensors are indexed with ints, slices, None and '...'; got "
                                f"{type(k).__name__}. Use tf.gather() for index tensors.")
        axis += 1
    return tuple(out)


def _getitem(self, key):
    """``x[1:, None, ..., 0]``: basic indexing with ints, slices, None and Ellipsis.

    >>> import flowgrad as tf
    >>> tf.tensor([[1, 2, 3], [4, 5, 6]])[1, ::2].print()
    Tensor
        [4, 6]
    """
    return E.run_kernel(_strided_slice, (self,), {"key": _index_key(key, self.shape)})


Tensor.__getitem__ = _getitem
