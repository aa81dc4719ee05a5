"""Python subscripts on tensors, ``x[1:, None, ..., 0]``, ``x[[2, 0]]``, ``x[x > 0]``, and
TF.js's strided_slice. Basic indexing (ints, slices, None, Ellipsis) is one strided slice,
whose rule is its scatter into zeros (and that one's, the slice again: every order); int
arrays and bool masks are NumPy's advanced indexing, a gather (indexing.py) after it.
"""
import builtins
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor
from ._core import as_int, as_ints, as_tensor, export, own_buffer, primitive
from .indexing import gather_in_range
from .shape import broadcast_to, reshape, transpose

_pyslice = builtins.slice


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
        elif isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
            k = k.item()            # np.array(1): an int, as NumPy reads it
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
            raise ArgumentError(f"Tensors are indexed with ints, slices, None, '...' and "
                                f"int or bool arrays (lists, NumPy arrays, tensors); got "
                                f"{type(k).__name__}.")
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
    """``x[1:, None, ..., 0]``: NumPy's indexing, differentiable. Basic indexing (ints,
    slices, None, Ellipsis) is a strided slice; int arrays (lists, NumPy arrays, int32
    tensors) and bool masks index as NumPy's advanced indexing does (a gather; its gradient
    adds up at repeated indices), mixed with basic entries, several arrays broadcasting.

    >>> import flowgrad as tf
    >>> x = tf.tensor([[1, 2, 3], [4, 5, 6]])
    >>> x[1, ::2].print()
    Tensor
        [4, 6]
    >>> x[:, [2, 0, 2]].print()
    Tensor
        [[3, 1, 3],
         [6, 4, 6]]
    >>> x[x > 2].print()
    Tensor
        [3, 4, 5, 6]
    """
    if type(key) is tuple:
        for k in key:
            if _is_array_index(k):
                return _advanced(self, key)
    elif _is_array_index(key):
        return _advanced(self, (key,))
    return E.run_kernel(_strided_slice, (self,), {"key": _index_key(key, self.shape)})


# ---------------------------------------------------------------- advanced indexing
# NumPy's rules: each array (and, among arrays, each int) indexes one axis; the arrays
# broadcast to one shape S; a bool mask of rank m stands for the m int arrays of its
# nonzero(). The result holds S where the indexed axes were when they are adjacent in the
# key, else first, followed by the other axes in order.

def _is_array_index(k):
    if isinstance(k, (list, tuple)):
        return True
    if isinstance(k, np.ndarray):
        return k.ndim > 0 or k.dtype == np.bool_
    return isinstance(k, Tensor) and (k.rank > 0 or k.dtype == dtypes.bool_)


def _as_index(k):
    """An index entry as a NumPy array (lists, arrays) or a tensor of int32 or bool."""
    if isinstance(k, Tensor):
        if k.dtype == dtypes.int32 or k.dtype == dtypes.bool_:
            return k
        if k.dtype in dtypes.FLOATS:
            # (tf.tensor([0, 2]) is float32, as JS numbers: whole numbers index, as in gather)
            v = k.numpy()
            if v.size == 0 or np.all(v == np.floor(v)):
                return k.cast("int32")
        raise DtypeError(f"x[key]: an index tensor must hold integers (int32) or booleans, "
                         f"got a {k.dtype} tensor" + (" with fractions" if k.dtype in
                                                       dtypes.FLOATS else "")
                         + ": give tf.tensor(index, dtype='int32').")
    try:
        a = np.asarray(k)
    except ValueError as e:
        raise ShapeError(f"x[key]: the index list is ragged (every row must have the same "
                         f"length): {e}") from None
    if a.size == 0 and a.dtype == np.float64:
        a = a.astype(np.intp)          # ([] is an empty index list, as in NumPy)
    if a.dtype != np.bool_ and a.dtype.kind not in "iu":
        raise DtypeError(f"x[key]: arrays used as indices must be of integer (or boolean) "
                         f"type, got {a.dtype} ({k!r:.60}); slices, ints, None and '...' go "
                         f"in the key directly, e.g. x[0, [1, 2]] or x[:, [1, 2]].")
    return a


def _advanced(x, key):
    shape = x.shape
    entries = []              # (kind, value): "basic" / "int" / "array" / "mask"
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, builtins.slice):
            entries.append(("basic", k))
        elif _is_array_index(k):
            a = _as_index(k)
            mask = a.dtype == dtypes.bool_ if isinstance(a, Tensor) else a.dtype == np.bool_
            if mask and not a.ndim:
                raise ArgumentError("x[key]: a boolean scalar (True / False) is not an index "
                                    "here; x[None] adds an axis, x[mask] takes a mask of the "
                                    "axes it selects from.")
            entries.append(("mask" if mask else "array", a))
        else:
            if isinstance(k, Tensor):
                k = k.item() if k.rank == 0 else k
            if isinstance(k, np.ndarray):
                k = k.item()
            if not isinstance(k, (int, np.integer)) or isinstance(k, (bool, np.bool_)):
                _index_key((k,), (1,))          # (its error for the kind of entry)
            entries.append(("int", int(k)))
    dims = sum(a.ndim if kind == "mask" else 1 for kind, a in entries
               if a is not None and a is not Ellipsis)
    if dims > len(shape):
        raise ShapeError(f"too many indices for a tensor of shape {shape}: the key indexes "
                         f"{dims} axes")
    if sum(1 for _, a in entries if a is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    basic, arrays, where_ = [], [], []       # the basic key, the index arrays, their y axes
    # NumPy counts the arrays adjacent when no entry of the key parts them (a '...' of no
    # axes does): then S takes their place, else it goes first
    adjacent, last = True, None
    axis = yaxis = 0
    for pos, (kind, a) in enumerate(entries):
        if kind != "basic":
            adjacent = adjacent and (last is None or last == pos - 1)
            last = pos
        if kind == "basic":
            basic.append(a)
            if a is Ellipsis:
                axis += len(shape) - dims
                yaxis += len(shape) - dims
            elif a is None:
                yaxis += 1
            else:
                axis += 1
                yaxis += 1
            continue
        if kind == "mask":
            m = a.ndim
            if tuple(a.shape) != shape[axis:axis + m]:
                raise ShapeError(f"x[key]: a boolean mask of shape {tuple(a.shape)} must "
                                 f"match the axes it covers, {shape[axis:axis + m]} (axes "
                                 f"{axis} to {axis + m - 1} of x, shape {shape})")
            parts = np.nonzero(a.numpy() if isinstance(a, Tensor) else a)
        else:
            parts = (a,)
        for part in parts:
            arrays.append(_checked(part, shape[axis], axis))
            where_.append(yaxis)
            basic.append(_pyslice(None))
            axis += 1
            yaxis += 1
    if all(b == _pyslice(None) or b is Ellipsis for b in basic):
        y = x
    else:
        y = E.run_kernel(_strided_slice, (x,), {"key": _index_key(tuple(basic), shape)})
    return _gather_arrays(y, arrays, where_, adjacent)


def _checked(a, n, axis):
    """Index array ``a`` for an axis of length n: bounds checked, negatives counted from
    the end, as an int32 tensor."""
    host = a.numpy() if isinstance(a, Tensor) else np.asarray(a)
    if host.size:
        lo, hi = host.min(), host.max()
        if lo < -n or hi >= n:
            raise ShapeError(f"x[key]: index {lo if lo < -n else hi} is out of bounds for "
                             f"axis {axis} with size {n}")
    if isinstance(a, Tensor):
        if host.size and lo < 0:
            a = a + (a < 0).cast("int32") * np.int32(n)     # (a Python int: float32)
        return a
    host = np.where(host < 0, host + n, host) if host.size and host.min() < 0 else host
    return E.make_tensor(E.from_host(host.astype(np.int32)))


def _gather_arrays(y, arrays, axes, adjacent):
    """y gathered at the broadcast index arrays along ``axes`` (ascending axes of y, next to
    each other when ``adjacent``)."""
    try:
        s = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ShapeError(f"x[key]: shape mismatch: the index arrays could not be broadcast "
                         f"together with shapes {' '.join(str(a.shape) for a in arrays)}"
                         ) from None
    if len(arrays) == 1:
        return gather_in_range(y, arrays[0], axes[0])
    sizes = [y.shape[p] for p in axes]
    n = math.prod(sizes)
    if n >= 2 ** 31:
        raise ShapeError(f"x[key]: the indexed axes (sizes {sizes}) have {n} entries "
                         f"together, more than int32 indices reach")
    flat, stride = None, 1
    for a, size in zip(reversed(arrays), reversed(sizes)):
        term = a if stride == 1 else a * np.int32(stride)
        flat = term if flat is None else flat + term
        stride *= size
    if flat.shape != s:
        flat = broadcast_to(flat, s)
    if not adjacent:        # the indexed axes go first (NumPy's rule)
        y = transpose(y, axes + [i for i in range(y.rank) if i not in axes])
        axes = list(range(len(axes)))
    first = axes[0]
    y = reshape(y, y.shape[:first] + (n,) + y.shape[axes[-1] + 1:])
    return gather_in_range(y, flat, first)


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
