"""Cumulative and selection ops: cumsum, cumprod, topk, bincount, sorted search, meshgrid.

Scans keep their axis as a negative index, so a rule also works on a cotangent with extra
leading (batch) axes. cumprod's gradient is built from multiplications and additions only
(no division), so it is exact with zeros and differentiable again.
"""
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import check_alloc, choice, describe, flag
from ..errors import ArgumentError, DtypeError, ShapeError
from ..camel_case import Result
from ._core import (as_int, as_numeric, as_tensor, binary_args, export, met_float, norm_axis,
                    primitive, scalar_of)
from .creation import fill, range as _arange, tensor as _tensor
from .indexing import gather_or_zero, scatter_add_along
from .logical import where
from .shape import broadcast_to, concat, reshape, slice


def _along(axis, sl):
    """An index tuple applying the slice ``sl`` on the (negative) ``axis`` only."""
    return (Ellipsis, sl) + (np.s_[:],) * (-axis - 1)


def _shift_arr(B, y, axis, fill_value):
    """y moved one place forward along ``axis``, ``fill_value`` shifted in (kernels)."""
    out = B.empty_like(y)
    out[_along(axis, np.s_[:1])] = fill_value
    out[_along(axis, np.s_[1:])] = y[_along(axis, np.s_[:-1])]
    return out


def _scan_kernel(op, unit):
    def fwd(B, x, axis, exclusive, reverse):
        if reverse:
            x = B.flip(x, axis=axis)
        y = op(B)(x, axis=axis, dtype=x.dtype)
        if exclusive:
            y = _shift_arr(B, y, axis, unit)
        return B.flip(y, axis=axis) if reverse else y
    return fwd


def _scan_args(x, axis, exclusive, reverse, fn):
    x = as_numeric(x, fn)
    if x.rank == 0:
        raise ShapeError(f"{fn}() needs a tensor of rank >= 1 (it scans along an axis), got a "
                         f"scalar")
    a = norm_axis(axis, x.rank, fn) - x.rank        # negative: batch axes may be prepended
    return x, {"axis": a, "exclusive": flag(exclusive, "exclusive", fn),
               "reverse": flag(reverse, "reverse", fn)}


# ---------------------------------------------------------------- cumsum

_cumsum = primitive("Cumsum", batched_vjp=True, vmap=V.axis_rule())(_scan_kernel(lambda B: B.cumulative_sum, 0))


@_cumsum.def_vjp
def _(dy, x, axis, exclusive, reverse):
    # the adjoint of a prefix sum is the suffix sum, on the same axis (TF.js transposes it
    # for a non-last axis)
    return E.run_kernel(_cumsum, (dy,), {"axis": axis, "exclusive": exclusive,
                                         "reverse": not reverse})


@export
def cumsum(x, axis=0, exclusive=False, reverse=False):
    """The cumulative sum along ``axis`` (any axis, negative ones too). ``exclusive``:
    each entry leaves itself out (the first is 0); ``reverse``: sums run from the end.

    >>> import flowgrad as tf
    >>> tf.cumsum(tf.tensor([1, 2, 3, 4])).print()
    Tensor
        [1, 3, 6, 10]
    >>> tf.cumsum(tf.tensor([1, 2, 3, 4]), 0, True, True).print()
    Tensor
        [9, 7, 4, 0]
    """
    x, attrs = _scan_args(x, axis, exclusive, reverse, "cumsum")
    return E.run_kernel(_cumsum, (x,), attrs)


# ---------------------------------------------------------------- cumprod

_cumprod = primitive("Cumprod", save_y=True, batched_vjp=True, vmap=V.axis_rule())(
    _scan_kernel(lambda B: B.cumulative_prod, 1))


def _shift(t, axis, k, value, forward):
    """t moved k places along ``axis`` (forward: toward higher indices), ``value`` shifted
    in. Built from slice and concat, so it is differentiable."""
    a = axis % t.rank
    n = t.shape[a]
    fill_shape = list(t.shape)
    fill_shape[a] = min(k, n)
    pad = fill(fill_shape, value, t.dtype)
    if k >= n:
        return pad
    begin = [0] * t.rank
    size = list(t.shape)
    size[a] = n - k
    if not forward:
        begin[a] = k
    kept = slice(t, begin, size)
    return concat([pad, kept] if forward else [kept, pad], a)


def _cumprod_grad(dy, x, y, axis, exclusive, reverse):
    """dx_i = E_i * S_i with E the exclusive cumprod (y shifted by one) and S the suffix
    sums S_i = dy_i + x_{i+1} S_{i+1} ("suffix" is taken in the scan's direction), computed
    by a log-depth affine scan. Only products and sums: exact with zeros (the gradient of
    sum(cumprod([2, 0, 3])) is [1, 8, 0]), and every order is differentiable."""
    fwd = not reverse       # the direction of the forward scan
    n = x.shape[axis]
    xs = _shift(x, axis, 1, 1, fwd) if exclusive else x   # y is the inclusive scan of xs
    e = _shift(y, axis, 1, 1, fwd)                         # exclusive cumprod of xs
    # h_i = b_i + c_i h_{i+1} (i+1 in the scan's direction), a Hillis-Steele scan of the
    # affine maps h -> b + c h: after the step of width k, c holds the product of k factors
    h, c = dy, _shift(xs, axis, 1, 1, not fwd)
    k = 1
    while k < n:
        h = h + c * _shift(h, axis, k, 0, not fwd)
        if 2 * k < n:
            c = c * _shift(c, axis, k, 1, not fwd)
        k *= 2
    g = e * h
    return _shift(g, axis, 1, 0, not fwd) if exclusive else g


@_cumprod.def_vjp
def _(dy, x, y, axis, exclusive, reverse):
    if x.size == 0:
        return None
    return _cumprod_grad(dy, x, y, axis, exclusive, reverse)


@export
def cumprod(x, axis=0, exclusive=False, reverse=False):
    """The cumulative product along ``axis``; ``exclusive`` and ``reverse`` as in cumsum.
    Its gradient is exact with zeros and differentiable again (TF.js has none).

    >>> import flowgrad as tf
    >>> tf.cumprod(tf.tensor([1, 2, 3, 4])).print()
    Tensor
        [1, 2, 6, 24]
    >>> tf.grad(lambda x: tf.cumprod(x).sum())(tf.tensor([2, 0, 3])).print()
    Tensor
        [1, 8, 0]
    """
    x, attrs = _scan_args(x, axis, exclusive, reverse, "cumprod")
    return E.run_kernel(_cumprod, (x,), attrs)


# ---------------------------------------------------------------- topk

@primitive("TopK", multi=True, save_y=True, vmap=V.leading)
def _topk(B, x, k, sorted):
    if x.dtype in B.float_dtypes:
        nan = B.isnan(x)
        if bool(B.any(nan)):
            # NaN ranks above everything, as in arg_max: sort the numbers, then (stably)
            # bring the NaNs to the front
            order = B.argsort(B.where(nan, B.zeros((), dtype=x.dtype), -x), axis=-1,
                              stable=True)
            late = B.astype(~B.take_along_axis(nan, order, axis=-1), B.dtypes["int32"])
            order = B.take_along_axis(order, B.argsort(late, axis=-1, stable=True), axis=-1)
        else:
            order = B.argsort(-x, axis=-1, stable=True)
    else:
        # in float64: -x of int32's minimum would overflow
        order = B.argsort(-B.astype(x, B.dtypes["float64"]), axis=-1, stable=True)
    order = order[..., :k]
    if not sorted:
        order = B.sort(order, axis=-1)
    return B.take_along_axis(x, order, axis=-1), B.astype(order, B.dtypes["int32"])


@_topk.def_vjp
def _(dys, x, values, indices, k, sorted):
    # each value's gradient goes back to the entry it was taken from
    n = x.shape[-1]
    if k == 0 or x.size == 0:
        return None
    rows = x.size // n
    offsets = reshape(_arange(0, rows * n, n, "int32"), x.shape[:-1] + (1,))
    flat = reshape(indices + offsets, (-1,))
    return reshape(scatter_add_along(reshape(dys[0], (-1,)), flat, 0, rows * n), x.shape)


@export(alias=("top_k",))
def topk(x, k=1, sorted=True):  # noqa: A002 - the TF.js name
    """The ``k`` largest entries along the last axis and their int32 indices, as
    ``(values, indices)`` (also ``r.values``, ``r["indices"]``). Ties: the lower index comes
    first (TF.js). ``sorted=False`` gives the same entries in index order. The values are
    differentiable: each gradient goes back to the entry it came from.

    >>> import flowgrad as tf
    >>> values, indices = tf.topk(tf.tensor([[1, 5, 3], [4, 4, 2]]), 2)
    >>> values.print()
    Tensor
        [[5, 3],
         [4, 4]]
    >>> indices.print()
    Tensor
        [[1, 2],
         [0, 1]]
    """
    x = as_numeric(x, "topk")
    if x.rank == 0:
        raise ShapeError("topk() expects the input to be of rank 1 or higher")
    last = x.shape[-1]
    k = as_int(k, "k", "topk")
    if k < 0:
        raise ArgumentError(f"'k' passed to topk() must be >= 0 but got {k}")
    if k > last:
        raise ArgumentError(f"'k' passed to topk() must be <= the last dimension ({last}) "
                            f"but got {k}")
    values, indices = E.run_kernel(_topk, (x,), {"k": k,
                                                 "sorted": flag(sorted, "sorted", "topk")})
    return Result(values=values, indices=indices)


# ---------------------------------------------------------------- bincount

def _bincount_fwd(B, x, w, size, binary):
    rows = x.shape[0] if x.ndim == 2 else 1
    # each row has a spare last bin for the values >= size (negatives were refused), dropped
    ids = B.minimum(x, size)
    if x.ndim == 2:
        ids = ids + B.reshape(B.arange(rows, dtype=x.dtype) * (size + 1), (rows, 1))
    ids = B.reshape(ids, (-1,))
    if binary or w.size == 0:
        out = B.bincount(ids, minlength=rows * (size + 1))
        if binary:
            out = out > 0
    else:
        out = B.bincount(ids, weights=B.reshape(w, (-1,)), minlength=rows * (size + 1))
    out = B.astype(B.reshape(out, (rows, size + 1))[:, :size], w.dtype)
    return out if x.ndim == 2 else B.reshape(out, (size,))


_bincount = primitive("Bincount", vmap=V.loop)(_bincount_fwd)
_dense_bincount = primitive("DenseBincount", vmap=V.loop)(_bincount_fwd)


def _bincount_vjp(dy, x, w, size, binary):
    if binary or w.size == 0 or size == 0:
        return None, None
    # weight j went to bin x_j (of its row): it gets that bin's gradient, or 0 if dropped
    ids = x
    if x.rank == 2:
        ids = ids + reshape(_arange(0, x.shape[0] * size, size, "int32"), (x.shape[0], 1))
    ids = where(x.less(scalar_of(size, dtypes.int32)), ids, scalar_of(-1, dtypes.int32))
    return None, gather_or_zero(reshape(dy, (-1,)), ids, 0)


_bincount.def_vjp(_bincount_vjp)
_dense_bincount.def_vjp(_bincount_vjp)


def _bincount_args(x, weights, size, fn):
    x = as_tensor(x, fn, "x")
    if x.dtype != dtypes.int32:
        ok = x.dtype in dtypes.FLOATS and bool((x.floor() == x).all())
        if not ok:
            raise DtypeError(f"Error in {fn}: input dtype must be int32, but got {x.dtype} "
                             f"(cast integer data with x.cast('int32'))")
        x = x.cast("int32")
    size = as_int(size, "size", fn)
    if size < 0:
        raise ArgumentError(f"size must be non-negative, but got {size}.")
    check_alloc((x.shape[0] if x.rank == 2 else 1, size), dtypes.float32, fn)
    if weights is None:
        weights = _tensor([], dtype="float32")
    w = as_numeric(weights, fn, "weights")
    if w.size not in (0, x.size):
        raise ShapeError(f"Error in {fn}: weights must have the same size as input or "
                         f"0-length, but got input shape: {list(x.shape)}, weights shape: "
                         f"{list(w.shape)}.")
    if x.size and int(x.numpy().min()) < 0:
        raise ArgumentError(f"{fn}(): Input x must be non-negative! (got "
                            f"{int(x.numpy().min())}; negative values have no bin)")
    if w.size:
        w = reshape(w, x.shape)
    return x, w, size


@export(method=False)
def bincount(x, weights, size):
    """How many times each value 0..size-1 occurs in the int32 x (any shape, taken flat);
    with ``weights`` (x's size), the sum of the weights of each value instead. Values
    >= size are ignored. The result has weights' dtype; ``weights=None`` or ``[]`` counts
    (in float32, as TF.js gives for ``[]``). Differentiable with respect to the weights.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 1, 3, 7], dtype="int32")
    >>> tf.bincount(x, None, 5).print()
    Tensor
        [0, 2, 0, 1, 0]
    >>> tf.bincount(x, tf.tensor([0.5, 1, 2, 9]), 4).print()
    Tensor
        [0, 1.5, 0, 2]
    """
    x, w, size = _bincount_args(x, weights, size, "bincount")
    if x.rank != 1:
        x = reshape(x, (-1,))
        w = reshape(w, (-1,)) if w.size else w
    return E.run_kernel(_bincount, (x, w), {"size": size, "binary": False})


@export(method=False)
def dense_bincount(x, weights, size, binary_output=False):
    """bincount of a 1-D x, or of each row of a 2-D x (a ``[rows, size]`` result).
    ``binary_output``: 1 where a value occurs at all (weights are then ignored).

    >>> import flowgrad as tf
    >>> x = tf.tensor([[0, 1, 1], [2, 2, 5]], dtype="int32")
    >>> tf.dense_bincount(x, None, 3).print()
    Tensor
        [[1, 2, 0],
         [0, 0, 2]]
    >>> tf.dense_bincount(x, None, 3, True).print()
    Tensor
        [[1, 1, 0],
         [0, 0, 1]]
    """
    x, w, size = _bincount_args(x, weights, size, "denseBincount")
    if x.rank > 2 or x.rank == 0:
        raise ShapeError(f"Error in denseBincount: input must be at most rank 2, but got "
                         f"rank {x.rank}." + (" (a scalar: give a 1-D tensor)" if not x.rank
                                              else ""))
    binary = flag(binary_output, "binary_output", "denseBincount")
    return E.run_kernel(_dense_bincount, (x, w), {"size": size, "binary": binary})


# ---------------------------------------------------------------- sorted search

@primitive("SearchSorted", vmap=V.loop)
def _search_sorted(B, seq, values, side):
    i32 = B.dtypes["int32"]
    if seq.ndim == 1:
        return B.astype(B.searchsorted(seq, values, side=side), i32)
    # one row per leading index: sort each row of (sequence + values) together, stably; a
    # value's answer is the number of sequence entries sorted before it. Ties: 'left' puts
    # values before equal entries (values first in the row), 'right' after.
    n, m = seq.shape[-1], values.shape[-1]
    rows = math.prod(seq.shape[:-1])
    s = B.reshape(seq, (rows, n))
    v = B.reshape(values, (rows, m))
    left = side == "left"
    both = B.concat([v, s] if left else [s, v], axis=1)
    order = B.argsort(both, axis=1, stable=True)
    in_seq = B.astype((order >= m) if left else (order < n), i32)
    before = B.cumulative_sum(in_seq, axis=1, dtype=i32) - in_seq
    # the values' places in the sorted rows (the inverse permutation, on their columns)
    places = B.argsort(order, axis=1)
    out = B.take_along_axis(before, places[:, :m] if left else places[:, n:], axis=1)
    return B.reshape(out, values.shape)


@export(method=False)
def search_sorted(sorted_sequence, values, side="left"):
    """Where each value would be inserted along the last axis of ``sorted_sequence`` to
    keep it sorted, as int32 ("bucketing"). side='left' gives the first such place (lower
    bound), 'right' the last (upper bound). A 1-D sequence serves values of any shape;
    otherwise the leading axes of both must match. The result has values' shape.

    >>> import flowgrad as tf
    >>> edges = tf.tensor([-1, 3.3, 9.1, 10.0])
    >>> tf.search_sorted(edges, tf.tensor([0.0, 4.1, 12.0])).print()
    Tensor
        [1, 2, 4]
    """
    choice(side, "side", "search_sorted", ("left", "right"), (
        f"search_sorted(): side must be 'left' or 'right', got {describe(side)}"))
    seq, vals = binary_args(sorted_sequence, values, "searchSorted")
    if seq.rank == 0:
        raise ShapeError("Sorted input argument must be at least 1-dimensional (got a scalar "
                         "sorted_sequence)")
    if seq.rank > 1 and (vals.rank == 0 or vals.shape[:-1] != seq.shape[:-1]):
        raise ShapeError(f"Leading dimension of 'sortedSequence' and 'values' must match: "
                         f"sorted_sequence has shape {seq.shape}, values {vals.shape} (all "
                         f"axes but the last must be equal, or give a 1-D sequence)")
    return E.run_kernel(_search_sorted, (seq, vals), {"side": side})


@export(method=False)
def lower_bound(sorted_sequence, values):
    """search_sorted(sorted_sequence, values, 'left'): the first index i with
    values <= sorted_sequence[i].

    >>> import flowgrad as tf
    >>> tf.lower_bound(tf.tensor([0, 3, 9, 10, 10]), tf.tensor([0, 4, 10])).print()
    Tensor
        [0, 2, 3]
    """
    return search_sorted(sorted_sequence, values, "left")


@export(method=False)
def upper_bound(sorted_sequence, values):
    """search_sorted(sorted_sequence, values, 'right'): the first index i with
    values < sorted_sequence[i].

    >>> import flowgrad as tf
    >>> tf.upper_bound(tf.tensor([0, 3, 9, 10, 10]), tf.tensor([0, 4, 10])).print()
    Tensor
        [1, 2, 5]
    """
    return search_sorted(sorted_sequence, values, "right")


# ---------------------------------------------------------------- meshgrid

def _grid_input(t, arg, like):
    t = as_tensor(t, "meshgrid", arg, like)
    t.throw_if_disposed()             # meshgrid(x) returns x itself
    if t.rank == 0:
        raise ShapeError(f"meshgrid expects a tensor with rank >= 1 (argument '{arg}' is a "
                         f"scalar)")
    return t


@export(method=False)
def meshgrid(x=None, y=None, indexing="xy"):
    """Coordinate grids from two vectors (taken flat): with indexing 'xy' both are
    ``[len(y), len(x)]``, x varying along the rows; with 'ij' both are ``[len(x), len(y)]``.
    Returns a list ([] without x, [x] without y). Differentiable (each grid is a broadcast).

    >>> import flowgrad as tf
    >>> X, Y = tf.meshgrid(tf.tensor([1, 2, 3]), tf.tensor([4, 5]))
    >>> X.print()
    Tensor
        [[1, 2, 3],
         [1, 2, 3]]
    >>> Y.print()
    Tensor
        [[4, 4, 4],
         [5, 5, 5]]
    """
    if isinstance(indexing, dict):        # TF.js's options object {indexing: 'ij'}
        indexing = indexing.get("indexing", "xy")
    choice(indexing, "indexing", "meshgrid", ("xy", "ij"), (
        f"{indexing} is not a valid third argument to meshgrid (use 'xy' or 'ij')"))
    if x is None:
        if y is not None:
            raise ArgumentError("meshgrid(x, y): y is given without x (x=None gives [], and "
                                "would drop y)")
        return []
    like = met_float(x, y)               # (a list beside a float64 vector: float64 too)
    x = _grid_input(x, "x", like)
    if y is None:
        return [x]
    y = _grid_input(y, "y", like)
    w, h = x.size, y.size
    if indexing == "xy":
        return [broadcast_to(reshape(x, (1, w)), (h, w)), broadcast_to(reshape(y, (h, 1)), (h, w))]
    return [broadcast_to(reshape(x, (w, 1)), (w, h)), broadcast_to(reshape(y, (1, h)), (w, h))]


__all__ = ["cumsum", "cumprod", "topk", "bincount", "dense_bincount", "search_sorted",
           "lower_bound", "upper_bound", "meshgrid"]
