"""Shape ops: reshape and friends, transpose, concat/split, stack/unstack, slice/pad,
tile, reverse, broadcast_to, clone, stop_gradient.

Each rule is the adjoint of its op (slice <-> pad, concat <-> split, stack <-> unstack,
tile -> sum over the copies), written with these same ops.
"""
import builtins
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from .. import recording
from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor, varargs_method
from ..arg_checks import alive, as_number, check_alloc, norm_perm
from ._core import (as_ints, as_tensor, export, met_float, norm_axes, norm_axis, own_buffer,
                    primitive)


def _tensors(tensors, fn):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise ArgumentError(f"{fn}() takes a list of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ArgumentError(f"{fn}() needs at least one tensor")
    like = met_float(*tensors)
    ts = [as_tensor(t, fn, f"tensors[{i}]", like) for i, t in enumerate(tensors)]
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = dtypes.promote(dt, t.dtype, fn)
    return tuple(t if t.dtype == dt else t.cast(dt) for t in ts)


_pyslice = builtins.slice   # this module defines the op ``slice``


# ---------------------------------------------------------------- identity family

@primitive("Identity", view=True, batched_vjp=True, vmap=V.elementwise, native="{0}")
def _identity(B, x):
    return x


@_identity.def_vjp
def _(dy, x):
    return dy


@export
def clone(x):
    """A new tensor with the same values (sharing x's buffer; gradient passes through).

    >>> import flowgrad as tf
    >>> tf.clone(tf.tensor([1, 2])).print()
    Tensor
        [1, 2]
    """
    return E.run_kernel(_identity, (as_tensor(x, "clone"),))


@primitive("StopGradient", cut=True, vmap=V.elementwise, native="{0}")
def _stop_gradient(B, x):
    return x


@export
def stop_gradient(x):
    """x's values, as a constant: no gradient flows back through it.

    >>> import flowgrad as tf
    >>> tf.grad(lambda x: x * tf.stop_gradient(x))(tf.scalar(3.0)).item()
    3.0
    """
    return E.run_kernel(_stop_gradient, (as_tensor(x, "stop_gradient"),))


# ---------------------------------------------------------------- reshape family

# Rules below accept dy with extra leading (batch) axes, for vectorised jacobians: they
# count axes from the output's rank, and keep whatever leads.
def _lead(dy, out_rank):
    return dy.shape[:dy.rank - out_rank]


@primitive("Reshape", view=True, batched_vjp=True, vmap=V.reshape)
def _reshape(B, x, shape):
    return B.reshape(x, shape)


@_reshape.def_vjp
def _(dy, x, shape):
    return reshape(dy, _lead(dy, len(shape)) + x.shape)



def unchanged(x, prim):
    """x's values as a new tensor sharing its buffer, for an op that changes nothing
    (reshape to the same shape, transpose by the identity...): as in TF.js a new tensor, so
    disposing it leaves x alone and a variable's "snapshot" does not follow its later
    assigns. Inside gradient rules, x itself (nobody holds rule results but the sweep)."""
    alive(x, prim)
    if recording.in_backward():
        return x
    return E.run_kernel(_reshape, (x,), {"shape": x.shape})

@export
def reshape(x, shape):
    """x with a new shape of the same size; one entry may be -1 (inferred).

    >>> import flowgrad as tf
    >>> tf.reshape(tf.tensor([1, 2, 3, 4]), [2, -1]).shape
    (2, 2)
    """
    x = as_tensor(x, "reshape")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = as_ints(shape, "shape", "reshape")
    if shape == x.shape:
        return unchanged(x, _reshape)
    size = x.size
    if shape.count(-1) > 1:
        raise ShapeError(f"Shapes can only have 1 implicit size. Found -1 at dims "
                         f"{[i for i, s in enumerate(shape) if s == -1]} of {list(shape)}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ShapeError(f"The implicit shape can't be a fractional number. Got "
                             f"{size} / {known} (reshape of a tensor of shape {x.shape} to "
                             f"{list(shape)})")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or math.prod(shape) != size:
        raise ShapeError(f"Size({size}) must match the product of shape {list(shape)}: "
                         f"cannot reshape a tensor of shape {x.shape} to {list(shape)}")
    return E.run_kernel(_reshape, (x,), {"shape": shape})


@export(kernel="ExpandDims")
def expand_dims(x, axis=0):
    """x with a new axis of length 1 inserted at ``axis``.

    >>> import flowgrad as tf
    >>> tf.expand_dims(tf.tensor([1, 2]), 1).shape
    (2, 1)
    """
    x = as_tensor(x, "expand_dims")
    r = x.rank + 1
    a = norm_axis(axis, r, "expand_dims")
    return reshape(x, x.shape[:a] + (1,) + x.shape[a:])


@export
def squeeze(x, axis=None):
    """x without its axes of length 1 (all of them, or those listed).

    >>> import flowgrad as tf
    >>> tf.squeeze(tf.zeros([1, 3, 1])).shape
    (3,)
    """
    x = as_tensor(x, "squeeze")
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = norm_axes(axis, x.rank, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ShapeError(f"Can't squeeze axis {a} since its dim '{x.shape[a]}' is not 1")
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


@export
def flatten(x):
    """x as a 1-D tensor.

    >>> import flowgrad as tf
    >>> tf.flatten(tf.zeros([2, 3])).shape
    (6,)
    """
    x = as_tensor(x, "flatten")
    return reshape(x, (x.size,))


def _as_nd(rank):
    def method(self, *shape):
        if rank == 1:
            return reshape(self, (self.size,))
        if len(shape) != rank:
            raise ShapeError(f"as{rank}d() takes {rank} sizes, got {len(shape)}")
        try:
            return reshape(self, shape)
        except ShapeError as e:         # (reshape's words, under the method's name)
            raise ShapeError(f"as{rank}d(*shape): {e}") from None
    method.__name__ = f"as{rank}d"
    method.__doc__ = f"x reshaped to rank {rank} (TF.js ``as{rank}D``)."
    return method


for _r in range(1, 6):
    setattr(Tensor, f"as{_r}d", _as_nd(_r))


def _as_scalar(self):
    """The one element of x as a rank-0 tensor (TF.js ``asScalar``)."""
    if self.size != 1:
        raise ShapeError(f"The array must have only 1 element, but has shape {self.shape}.")
    return reshape(self, ())


Tensor.as_scalar = _as_scalar
Tensor.as_type = lambda self, dtype: self.cast(dtype)


# ---------------------------------------------------------------- transpose

@primitive("Transpose", batched_vjp=True, vmap=V.transpose)
def _transpose(B, x, perm):
    return B.permute_dims(x, perm)


@_transpose.def_vjp
def _(dy, x, perm):
    k = dy.rank - len(perm)
    return transpose(dy, tuple(range(k)) + tuple(int(i) + k for i in np.argsort(perm)))


@export
def transpose(x, perm=None):
    """x with its axes permuted (reversed when perm is None).

    >>> import flowgrad as tf
    >>> tf.transpose(tf.zeros([2, 3])).shape
    (3, 2)
    """
    x = as_tensor(x, "transpose")
    r = x.rank
    perm = norm_perm(perm, r, "transpose")
    if perm == tuple(range(r)):
        return unchanged(x, _transpose)
    return E.run_kernel(_transpose, (x,), {"perm": perm})


# NumPy's spread-out forms of the methods: x.reshape(2, 3), x.transpose(1, 0)
Tensor.reshape = varargs_method(reshape, "shape")
Tensor.transpose = varargs_method(transpose, "perm")


# ---------------------------------------------------------------- broadcast_to

@primitive("BroadcastTo", batched_vjp=True, vmap=V.broadcast_to)
def _broadcast_to(B, x, shape):
    return B.broadcast_to(x, shape)


@_broadcast_to.def_vjp
def _(dy, x, shape):
    return dy      # the engine sums dy back to x's shape


@export
def broadcast_to(x, shape):
    """x repeated along axes of length 1 (and new leading axes) to ``shape``.

    >>> import flowgrad as tf
    >>> tf.broadcast_to(tf.tensor([1, 2]), [2, 2]).print()
    Tensor
        [[1, 2],
         [1, 2]]
    """
    x = as_tensor(x, "broadcast_to")
    shape = as_ints(shape, "shape", "broadcast_to()", 0)
    if shape == x.shape:
        return unchanged(x, _broadcast_to)
    lead = len(shape) - x.rank
    ok = lead >= 0 and all(s == d or s == 1 for s, d in zip(x.shape, shape[lead:]))
    if not ok:
        raise ShapeError(f"broadcast_to(): cannot broadcast a tensor of shape {x.shape} to "
                         f"{shape}: each axis must match or be 1")
    check_alloc(shape, x.dtype, "broadcast_to()")
    return E.run_kernel(_broadcast_to, (x,), {"shape": shape})


# ---------------------------------------------------------------- concat / split

@primitive("Concat", batched_vjp=True, vmap=V.axis_rule(full_batch=True))
def _concat(B, *tensors, axis):
    return B.concat(tensors, axis=axis)


@_concat.def_vjp
def _(dy, *tensors, axis):
    sizes = [t.shape[axis] for t in tensors]
    k = dy.rank - tensors[0].rank
    return list(split(dy, sizes, axis + k)) if len(sizes) > 1 else [dy]


@export(method=False)
def concat(tensors, axis=0):
    """Tensors joined along an existing axis.

    >>> import flowgrad as tf
    >>> tf.concat([tf.tensor([1, 2]), tf.tensor([3])]).print()
    Tensor
        [1, 2, 3]
    """
    ts = _tensors(tensors, "concat")
    r = ts[0].rank
    if r == 0:
        raise ShapeError("concat() cannot join scalars (rank 0): use stack()")
    a = norm_axis(axis, r, "concat")
    for i, t in enumerate(ts[1:], 1):
        if t.rank != r:
            raise ShapeError(f"Error in concat{r}D: rank of tensors[{i}] must be the same as the "
                             f"rank of the rest ({r})")
        for k in range(r):
            if k != a and t.shape[k] != ts[0].shape[k]:
                raise ShapeError(f"Error in concat{r}D: Shape of tensors[{i}] {t.shape} does "
                                 f"not match {ts[0].shape} along the non-concatenated axis {k}")
    if len(ts) == 1:
        return ts[0]
    return E.run_kernel(_concat, ts, {"axis": a})


@primitive("SplitV", multi=True, batched_vjp=True, vmap=V.axis_rule())
def _split(B, x, sizes, axis):
    head = (_pyslice(None),) * axis
    out, b = [], 0
    for s in sizes:
        out.append(own_buffer(B, x[head + (_pyslice(b, b + s), Ellipsis)], x))
        b += s
    return out


@_split.def_vjp
def _(dys, x, sizes, axis):
    return concat(dys, axis + dys[0].rank - x.rank)


@export
def split(x, num_or_size_splits, axis=0):
    """x cut along ``axis`` into equal parts (an int) or parts of the given sizes (one size
    may be -1). Returns a list of tensors.

    >>> import flowgrad as tf
    >>> [t.shape for t in tf.split(tf.zeros([6, 2]), [1, -1, 2])]
    [(1, 2), (3, 2), (2, 2)]
    """
    x = as_tensor(x, "split")
    a = norm_axis(axis, x.rank, "split")
    n = x.shape[a]
    if isinstance(num_or_size_splits, (int, np.integer)) and \
            not isinstance(num_or_size_splits, bool):
        k = int(num_or_size_splits)
        if k <= 0 or n % k:
            raise ShapeError(f"Number of splits must evenly divide the axis: axis {a} has "
                             f"{n} entries, which {k} splits cannot share equally.")
        sizes = [n // k] * k
    else:
        sizes = list(as_ints(num_or_size_splits, "num_or_size_splits", "split"))
        if sizes.count(-1) > 1:
            raise ShapeError("split(): only one size may be -1")
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(f"The sum of sizes {list(num_or_size_splits)} must match the size "
                             f"of the axis ({n})")
    return list(E.run_kernel(_split, (x,), {"sizes": tuple(sizes), "axis": a}))


# ---------------------------------------------------------------- stack / unstack

@primitive("Pack", batched_vjp=True, vmap=V.axis_rule(full_batch=True))
def _stack(B, *tensors, axis):
    return B.stack(tensors, axis=axis)


@_stack.def_vjp
def _(dy, *tensors, axis):
    return unstack(dy, axis + dy.rank - tensors[0].rank - 1)


@export(method=False)
def stack(tensors, axis=0):
    """Tensors of one shape joined along a new axis.

    >>> import flowgrad as tf
    >>> tf.stack([tf.tensor([1, 2]), tf.tensor([3, 4])]).shape
    (2, 2)
    """
    ts = _tensors(tensors, "stack")
    for i, t in enumerate(ts[1:], 1):
        if t.shape != ts[0].shape:
            raise ShapeError(f"All tensors passed to stack must have matching shapes: "
                             f"tensors[0] has {ts[0].shape}, tensors[{i}] has {t.shape}")
    a = norm_axis(axis, ts[0].rank + 1, "stack")
    return E.run_kernel(_stack, ts, {"axis": a})


@primitive("Unpack", multi=True, batched_vjp=True, vmap=V.axis_rule())
def _unstack(B, x, axis):
    return [own_buffer(B, a, x) for a in B.unstack(x, axis=axis)]


@_unstack.def_vjp
def _(dys, x, axis):
    return stack(dys, axis + dys[0].rank - x.rank + 1)


@export
def unstack(x, axis=0):
    """The slices of x along ``axis``, as a list of tensors of rank one less.

    >>> import flowgrad as tf
    >>> [t.item() for t in tf.unstack(tf.tensor([1, 2]))]
    [1.0, 2.0]
    """
    x = as_tensor(x, "unstack")
    if x.rank == 0:
        raise ShapeError("unstack() needs a tensor of rank >= 1, got a scalar")
    a = norm_axis(axis, x.rank, "unstack")
    if x.shape[a] == 0:
        return []
    return list(E.run_kernel(_unstack, (x,), {"axis": a}))


# ---------------------------------------------------------------- slice / pad

@primitive("Slice", batched_vjp=True, vmap=V.slice_)
def _slice(B, x, begin, size):
    return own_buffer(B, x[tuple(_pyslice(b, b + s) for b, s in zip(begin, size))], x)


@_slice.def_vjp
def _(dy, x, begin, size):
    k = dy.rank - x.rank
    return pad(dy, [(0, 0)] * k + [(b, n - b - s) for b, s, n in zip(begin, size, x.shape)])


@export
def slice(x, begin, size=None):  # noqa: A001 - the TF.js name
    """The block of x starting at ``begin`` with ``size`` (-1 or missing: to the end).

    >>> import flowgrad as tf
    >>> tf.slice(tf.tensor([1, 2, 3, 4]), [1], [2]).print()
    Tensor
        [2, 3]
    """
    x = as_tensor(x, "slice")
    r = x.rank
    if isinstance(begin, (int, np.integer)):
        begin = [begin]
    begin = list(as_ints(begin, "begin", "slice"))
    begin += [0] * (r - len(begin))
    if size is None:
        size = []
    elif isinstance(size, (int, np.integer)):
        size = [size]
    size = list(as_ints(size, "size", "slice"))
    size += [-1] * (r - len(size))
    if len(begin) != r or len(size) != r:
        raise ShapeError(f"Error in slice{r}D: Length of begin {begin} and size {size} must "
                         f"match the rank of the array ({r}).")
    out = []
    for k, (b, s, n) in enumerate(zip(begin, size, x.shape)):
        if s == -1:
            s = n - b
        if b < 0 or s < 0 or b + s > n:
            raise ShapeError(f"Error in slice{r}D: begin {begin} and size {size} do not fit in "
                             f"a tensor of shape {x.shape} (axis {k}).")
        out.append(s)
    if tuple(out) == x.shape:
        return unchanged(x, _slice)
    return E.run_kernel(_slice, (x,), {"begin": tuple(begin), "size": tuple(out)})


@primitive("PadV2", batched_vjp=True, vmap=V.pad)
def _pad(B, x, paddings, constant_value):
    return B.pad(x, paddings, constant_value)


@_pad.def_vjp
def _(dy, x, paddings, constant_value):
    lead = list(_lead(dy, x.rank))
    return slice(dy, [0] * len(lead) + [p[0] for p in paddings], lead + list(x.shape))


@export
def pad(x, paddings, constant_value=0):
    """x surrounded by ``constant_value``: paddings is [[before, after], ...] per axis.

    >>> import flowgrad as tf
    >>> tf.pad(tf.tensor([1, 2]), [[1, 2]]).print()
    Tensor
        [0, 1, 2, 0, 0]
    """
    x = as_tensor(x, "pad")
    if not isinstance(paddings, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in paddings):
        raise ShapeError(f"pad(): paddings must be a list of [before, after] pairs, one per "
                         f"axis of x (rank {x.rank}), got {paddings!r}")
    pads = tuple(as_ints(p, "paddings", "pad") for p in paddings)
    if len(pads) != x.rank or any(p < 0 for pp in pads for p in pp):
        raise ShapeError(f"pad(): paddings {[list(p) for p in pads]} must give one "
                         f"non-negative [before, after] pair per axis of x (rank {x.rank})")
    check_alloc(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads)), x.dtype, "pad")
    cv = constant_value
    if type(cv) not in (int, float, bool):
        cv = as_number(cv, "constant_value", "pad")
    return E.run_kernel(_pad, (x,), {"paddings": pads, "constant_value": cv})


# ---------------------------------------------------------------- reverse / tile

@primitive("Reverse", batched_vjp=True, vmap=V.axis_rule("axes"))
def _reverse(B, x, axes):
    return B.flip(x, axis=axes)


@_reverse.def_vjp
def _(dy, x, axes):
    k = dy.rank - x.rank
    return reverse(dy, [a + k for a in axes])


@export
def reverse(x, axis=None):
    """x with the order of entries reversed along ``axis`` (all axes when None).

    >>> import flowgrad as tf
    >>> tf.reverse(tf.tensor([1, 2, 3])).print()
    Tensor
        [3, 2, 1]
    """
    x = as_tensor(x, "reverse")
    axes = norm_axes(axis, x.rank, "reverse")
    if not axes:
        return unchanged(x, _reverse)
    return E.run_kernel(_reverse, (x,), {"axes": axes})


@primitive("Tile", batched_vjp=True, vmap=V.tile)
def _tile(B, x, reps):
    return B.tile(x, reps)


@_tile.def_vjp
def _(dy, x, reps):
    # dy viewed as (r0, s0, r1, s1, ...): the copies of x sit along the r axes
    lead = list(_lead(dy, x.rank))
    inter = []
    for r, s in zip(reps, x.shape):
        inter += [r, s]
    k = len(lead)
    return reshape(dy, lead + inter).sum(list(range(k, k + 2 * x.rank, 2)))


@export
def tile(x, reps):
    """x repeated ``reps[i]`` times along axis i (any rank).

    >>> import flowgrad as tf
    >>> tf.tile(tf.tensor([1, 2]), [2]).print()
    Tensor
        [1, 2, 1, 2]
    """
    x = as_tensor(x, "tile")
    reps = as_ints(reps, "reps", "tile")
    if len(reps) != x.rank or any(r < 0 for r in reps):
        raise ShapeError(f"Error in tile: reps {list(reps)} must have one non-negative entry "
                         f"per axis of x (rank {x.rank})")
    if all(r == 1 for r in reps):
        return unchanged(x, _tile)
    check_alloc(tuple(n * r for n, r in zip(x.shape, reps)), x.dtype, "tile")
    return E.run_kernel(_tile, (x,), {"reps": reps})
