"""Elementwise two-input ops with broadcasting: arithmetic, powers, extrema.

Rules return gradients of the broadcast shape; the engine sums them back to each input's
shape (so Maximum, Minimum and SquaredDifference reduce correctly, unlike TF.js). Rules
taking ``needs`` skip the gradient of an input that does not lead to an x.
"""
from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tape import units
from ._core import as_tensor, binary, binary_args, export, met_float, primitive
from .logical import where


# ufunc=: the backend ufunc the kernel is on floats (tf.jit pools and fuses it); expr=: the
# Python operator it is on floats, which a tf.jit replay writes inline (RealDiv floors int32
# operands instead; tests/test_jit.py compares replays with eager); native=: the kernel on
# one float element in tf.jit's compiled segments (flowgrad/jit_native.py; T(c): the
# constant c in the operands' dtype)
@binary("Add", ufunc="add", expr="{0} + {1}", native="{0} + {1}")
def add(B, a, b):
    """a + b, with broadcasting.

    >>> import flowgrad as tf
    >>> tf.add(tf.tensor([1, 2]), 10).print()
    Tensor
        [11, 12]
    """
    return a + b


@add.vjp
def _(dy, a, b):
    return dy, dy


@binary("Sub", ufunc="subtract", expr="{0} - {1}", native="{0} - {1}")
def sub(B, a, b):
    """a - b, with broadcasting.

    >>> import flowgrad as tf
    >>> tf.sub(tf.tensor([1, 2]), 1).print()
    Tensor
        [0, 1]
    """
    return a - b


@sub.vjp
def _(dy, a, b, needs):
    return dy, (-dy if needs[1] else None)


@binary("Multiply", ufunc="multiply", expr="{0} * {1}", native="{0} * {1}")
def mul(B, a, b):
    """a · b, elementwise with broadcasting.

    >>> import flowgrad as tf
    >>> tf.mul(tf.tensor([1, 2]), tf.tensor([3, 4])).print()
    Tensor
        [3, 8]
    """
    return a * b


@mul.vjp
def _(dy, a, b, needs):
    if units and units.get(id(dy)) is dy:       # dy is a seed of ones: 1·b is b, exactly
        return (_times_one(dy, b) if needs[0] else None), \
            (_times_one(dy, a) if needs[1] else None)
    return (dy * b if needs[0] else None), (dy * a if needs[1] else None)


def _times_one(one, t):
    # t itself where that is what the product would be (the same shape and dtype)
    return t if t.shape == one.shape and t.dtype is one.dtype else one * t


@binary("RealDiv", ufunc="true_divide", expr="{0} / {1}", native="{0} / {1}")
def div(B, a, b):
    """a / b. Two int32 tensors divide with floor (TF.js): [5, -7] / 2 = [2, -4].

    >>> import flowgrad as tf
    >>> tf.div(tf.tensor([1, 3]), 2).print()
    Tensor
        [0.5, 1.5]
    """
    # NOTE: the float test first: it is the common case, and the cheapest test on NumPy
    if a.dtype not in B.float_dtypes and a.dtype == B.dtypes["int32"]:
        return B.floor_divide(a, b)
    return a / b


@div.vjp
def _(dy, a, b, needs):
    return (dy / b if needs[0] else None), (-dy * a / b.square() if needs[1] else None)


@binary("FloorDiv", policy="numeric")     # bool // bool would be int8
def floor_div(B, a, b):
    """floor(a / b). [conv] its gradient is that of real division, as in TF.js.

    >>> import flowgrad as tf
    >>> tf.floor_div(tf.tensor([7, -7]), 2).print()
    Tensor
        [3, -4]
    """
    return B.floor_divide(a, b)


@floor_div.vjp
def _(dy, a, b, needs):
    return (dy / b if needs[0] else None), (-dy * a / b.square() if needs[1] else None)


@binary("Mod", policy="numeric")
def mod(B, a, b):
    """a mod b, with the sign of the divisor (mod(-7, 2) = 1, mod(7, -2) = -1).

    >>> import flowgrad as tf
    >>> tf.mod(tf.tensor([-7, 7]), tf.tensor([2, -2])).print()
    Tensor
        [1, -1]
    """
    return B.remainder(a, b)


@mod.vjp
def _(dy, a, b, needs):
    return dy, (-dy * (a / b).floor() if needs[1] else None)


def _pow_native(args, consts):
    """Pow on one element: an exponent that is a number of the trace among those fast_pow
    multiplies out is multiplied out the same way (the same bits); others call libm's pow."""
    a, b = args
    return {0: "T(1)", 1: a, 2: f"{a} * {a}", 3: f"({a} * {a}) * {a}",
            4: f"({a} * {a}) * ({a} * {a})", -1: f"T(1) / {a}",
            0.5: f"math.sqrt({a})"}.get(consts[1], f"math.pow({a}, {b})")


@binary("Pow", save_y=True, ufunc="fast_pow", native=_pow_native)
def pow(B, a, b):  # noqa: A001 - the TF.js name
    """a ** b, elementwise. d/db uses log(a) where a > 0 and 0 elsewhere (TF.js); d/da is 0
    where b is 0 (a^0 is 1 everywhere; TF.js's rule gives 0 * 0^-1 = NaN at a = 0).

    An exponent that is one number among 0, ±1, ±2, ±3, 4 and ±½ runs as multiplications
    (sqrt, a reciprocal), within 2 ulp of NumPy's power and many times faster than it on
    negative bases; so does the gradient's pow(a, b - 1).

    >>> import flowgrad as tf
    >>> tf.pow(tf.tensor([2, 3]), 2).print()
    Tensor
        [4, 9]
    """
    if a.dtype in B.float_dtypes:
        return B.fast_pow(a, b)
    # NOTE: NumPy refuses negative integer exponents for ints; compute them in floats
    f64 = B.dtypes["float64"]
    return B.astype(B.pow(B.astype(a, f64), B.astype(b, f64)), a.dtype)


@pow.vjp
def _(dy, a, b, y, needs):
    da = db = None
    if needs[0]:
        # NOTE: where b is 0 the exponent b - 1 becomes 1 (JAX's select), so that 0 * 0^-1
        # never makes a NaN: the selects are on b, one number when b is a literal
        zero = b.equal(0)
        da = dy * b * a.pow(where(zero, 1, b - 1))
    if needs[1]:
        positive = a.greater(0)
        db = dy * y * where(positive, a, 1).log()
    return da, db


# NOTE: NumPy's maximum: NaN if either is NaN, and b at a tie (max(-0.0, 0.0) is 0.0)
@binary("Maximum", ufunc="maximum", native="{0} if {0} > {1} or {0} != {0} else {1}")
def maximum(B, a, b):
    """Elementwise max. [conv] a tie sends the gradient to a; a NaN in a or b (the output is
    NaN) sends it to neither (TF.js's masks a >= b and a < b are both false).

    >>> import flowgrad as tf
    >>> tf.maximum(tf.tensor([1, 5]), 3).print()
    Tensor
        [3, 5]
    """
    return B.maximum(a, b)


@maximum.vjp
def _(dy, a, b, needs):
    # two masks, not one and its complement: with a NaN both are false (see the docstring)
    return (where(a.greater_equal(b), dy, 0) if needs[0] else None), \
        (where(a.less(b), dy, 0) if needs[1] else None)


@binary("Minimum", ufunc="minimum", native="{0} if {0} < {1} or {0} != {0} else {1}")
def minimum(B, a, b):
    """Elementwise min. [conv] a tie sends the gradient to a; a NaN in a or b sends it to
    neither, as in maximum.

    >>> import flowgrad as tf
    >>> tf.minimum(tf.tensor([1, 5]), 3).print()
    Tensor
        [1, 3]
    """
    return B.minimum(a, b)


@minimum.vjp
def _(dy, a, b, needs):
    return (where(a.less_equal(b), dy, 0) if needs[0] else None), \
        (where(a.greater(b), dy, 0) if needs[1] else None)


@binary("SquaredDifference", native="({0} - {1}) * ({0} - {1})")
def squared_difference(B, a, b):
    """(a - b)², elementwise.

    >>> import flowgrad as tf
    >>> tf.squared_difference(tf.tensor([1, 5]), 3).print()
    Tensor
        [4, 4]
    """
    d = a - b
    return d * d


@squared_difference.vjp
def _(dy, a, b, needs):
    g = dy * (a - b) * 2
    return (g if needs[0] else None), (-g if needs[1] else None)


@binary("Atan2", policy="float", ufunc="arctan2", native="math.atan2({0}, {1})")
def atan2(B, a, b):
    """The angle of the point (b, a): arctan(a/b) in the right quadrant.

    >>> import flowgrad as tf
    >>> tf.atan2(tf.tensor([0, 1]), tf.tensor([1, 0])).print()
    Tensor
        [0, 1.5707964]
    """
    return B.atan2(a, b)


@atan2.vjp
def _(dy, a, b, needs):
    d = a.square() + b.square()
    return (dy * b / d if needs[0] else None), (-dy * a / d if needs[1] else None)


@binary("Prelu", policy="float", native="{0} if {0} > T(0) else {0} * {1}")
def prelu(B, x, alpha):
    """x if x > 0 else alpha·x, with a learnable (broadcast) alpha.

    >>> import flowgrad as tf
    >>> tf.prelu(tf.tensor([-2, 2]), tf.scalar(0.5)).print()
    Tensor
        [-1, 2]
    """
    return B.where(x > 0, x, x * alpha)


@prelu.vjp
def _(dy, x, alpha, needs):
    pos = x.greater(0)
    return (where(pos, dy, dy * alpha) if needs[0] else None), \
        (where(pos, 0, dy * x) if needs[1] else None)


@binary("DivNoNan", policy="numeric", native="T(0) if {1} == T(0) else {0} / {1}")
def div_no_nan(B, a, b):
    """a / b, but 0 where b is 0 (even for a = 0 or NaN). Two int32 tensors divide with
    floor, as div. Differentiable, with a zero gradient where b is 0 (TF.js's throws).

    >>> import flowgrad as tf
    >>> tf.div_no_nan(tf.tensor([1, 2, 3]), tf.tensor([2, 0, 0])).print()
    Tensor
        [0.5, 0, 0]
    """
    zero = b == 0
    safe = B.where(zero, 1, b)
    q = a / safe if a.dtype in B.float_dtypes else B.floor_divide(a, safe)
    return B.where(zero, 0, q)


@div_no_nan.vjp
def _(dy, a, b, needs):
    # NOTE: written with div_no_nan itself, never with 1/b: no Inf or NaN appears at b = 0,
    # at any order (a where() over a/b would still send 0 * Inf = NaN to b)
    da = div_no_nan(dy, b)
    return (da if needs[0] else None), (-div_no_nan(da * a, b) if needs[1] else None)


@primitive("BitwiseAnd", vmap=V.elementwise)
def _bitwise_and(B, a, b):
    return B.bitwise_and(a, b)


@export(method=False)
def bitwise_and(x, y):
    """The bitwise AND of two int32 tensors of one shape (not differentiable).

    >>> import flowgrad as tf
    >>> x = tf.tensor([0, 5, 3, 14], dtype="int32")
    >>> tf.bitwise_and(x, tf.tensor([5, 0, 7, 11], dtype="int32")).print()
    Tensor
        [0, 0, 3, 10]
    """
    x = as_tensor(x, "bitwise_and", "x")
    y = as_tensor(y, "bitwise_and", "y")
    if x.shape != y.shape:
        raise ShapeError(f"BitwiseAnd: Tensors must have the same shape. x: {list(x.shape)}, "
                         f"y: {list(y.shape)}")
    if x.dtype != dtypes.int32 or y.dtype != dtypes.int32:
        raise DtypeError(f"BitwiseAnd: Only supports 'int32' values in tensor, found type of "
                         f"x: {x.dtype} and type of y: {y.dtype} (cast with .cast('int32'))")
    return E.run_kernel(_bitwise_and, (x, y))


# ---------------------------------------------------------------- n-ary

@primitive("AddN", batched_vjp=True, vmap=V.same_shape)
def _add_n(B, *tensors):
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t
    return out


@_add_n.def_vjp
def _(dy, *tensors):
    return [dy] * len(tensors)


@export(method=False)
def add_n(tensors):
    """The sum of a list of tensors of one shape and dtype.

    >>> import flowgrad as tf
    >>> tf.add_n([tf.tensor([1, 2]), tf.tensor([3, 4]), tf.tensor([5, 6])]).print()
    Tensor
        [9, 12]
    """
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ArgumentError("Must pass at least one tensor to tf.add_n")
    like = met_float(*tensors)
    ts = [as_tensor(t, "add_n", f"tensors[{i}]", like) for i, t in enumerate(tensors)]
    for i, t in enumerate(ts[1:], 1):
        if t.shape != ts[0].shape:
            raise ShapeError(f"All tensors passed to add_n must have the same shape: "
                             f"tensors[0] has shape {ts[0].shape}, tensors[{i}] has {t.shape}")
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = dtypes.promote(dt, t.dtype, "add_n")
    ts = tuple(t if t.dtype == dt else t.cast(dt) for t in ts)
    if len(ts) == 1:
        return ts[0]
    return E.run_kernel(_add_n, ts)


__all__ = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum",
           "squared_difference", "atan2", "prelu", "div_no_nan", "bitwise_and", "add_n",
           "binary_args"]
