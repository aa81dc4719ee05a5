"""Comparisons, logic, selection, and the piecewise-constant ops.

None of these is differentiable except ``where`` (through its two branches). In flowgrad a
non-differentiable op contributes a zero gradient and never makes backprop fail (TF.js has
no gradient for Greater, Less, Equal... and throws when one lies on the path).
"""
from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import DtypeError
from ..tensor import Tensor
from ._core import (FLOATS, as_number, as_numeric, as_tensor, binary, binary_args, export,
                    primitive, unary)

bool_ = dtypes.bool_


# ---------------------------------------------------------------- comparisons

@binary("Greater")
def greater(B, a, b):
    """a > b, elementwise (a bool tensor).

    >>> import flowgrad as tf
    >>> tf.greater(tf.tensor([1, 3]), 2).print()
    Tensor
        [false, true]
    """
    return B.greater(a, b)


@binary("GreaterEqual", zero_grad=True)
def greater_equal(B, a, b):
    """a >= b, elementwise.

    >>> import flowgrad as tf
    >>> tf.greater_equal(tf.tensor([1, 2]), 2).print()
    Tensor
        [false, true]
    """
    return B.greater_equal(a, b)


@binary("Less")
def less(B, a, b):
    """a < b, elementwise.

    >>> import flowgrad as tf
    >>> tf.less(tf.tensor([1, 3]), 2).print()
    Tensor
        [true, false]
    """
    return B.less(a, b)


@binary("LessEqual")
def less_equal(B, a, b):
    """a <= b, elementwise.

    >>> import flowgrad as tf
    >>> tf.less_equal(tf.tensor([2, 3]), 2).print()
    Tensor
        [true, false]
    """
    return B.less_equal(a, b)


@binary("Equal")
def equal(B, a, b):
    """a == b, elementwise.

    >>> import flowgrad as tf
    >>> tf.equal(tf.tensor([1, 2]), 2).print()
    Tensor
        [false, true]
    """
    return B.equal(a, b)


@binary("NotEqual")
def not_equal(B, a, b):
    """a != b, elementwise.

    >>> import flowgrad as tf
    >>> tf.not_equal(tf.tensor([1, 2]), 2).print()
    Tensor
        [true, false]
    """
    return B.not_equal(a, b)


# ---------------------------------------------------------------- logic

@binary("LogicalAnd", policy="bool")
def logical_and(B, a, b):
    """a AND b for bool tensors.

    >>> import flowgrad as tf
    >>> tf.logical_and(tf.tensor([True, True]), tf.tensor([True, False])).print()
    Tensor
        [true, false]
    """
    return B.logical_and(a, b)


@binary("LogicalOr", policy="bool")
def logical_or(B, a, b):
    """a OR b for bool tensors.

    >>> import flowgrad as tf
    >>> tf.logical_or(tf.tensor([False, True]), tf.tensor([False, False])).print()
    Tensor
        [false, true]
    """
    return B.logical_or(a, b)


@binary("LogicalXor", policy="bool")
def logical_xor(B, a, b):
    """a XOR b for bool tensors.

    >>> import flowgrad as tf
    >>> tf.logical_xor(tf.tensor([True, True]), tf.tensor([True, False])).print()
    Tensor
        [false, true]
    """
    return B.logical_xor(a, b)


@unary("LogicalNot", policy="any")
def logical_not(B, x):
    """NOT x for a bool tensor.

    >>> import flowgrad as tf
    >>> tf.logical_not(tf.tensor([True, False])).print()
    Tensor
        [false, true]
    """
    if x.dtype != B.dtypes["bool"]:
        name = next((k for k, v in B.dtypes.items() if v == x.dtype), str(x.dtype))
        raise DtypeError(f"Argument 'x' passed to 'logical_not' must be bool tensor, but got "
                         f"{name} tensor")
    return B.logical_not(x)


# ---------------------------------------------------------------- selection

@primitive("Select", batched_vjp=True, vmap=V.elementwise)
def _select(B, condition, a, b):
    return B.where(condition, a, b)


@_select.def_vjp
def _(dy, condition, a, b, needs):
    return (None,
            where(condition, dy, 0) if needs[1] else None,
            where(condition, 0, dy) if needs[2] else None)


@export(method=False)
def where(condition, a, b):
    """Elementwise ``a if condition else b``; the three inputs broadcast together.

    The gradient flows to a where condition holds and to b elsewhere. (The method form
    follows TF.js: ``a.where(condition, b)``.)

    >>> import flowgrad as tf
    >>> tf.where(tf.tensor([True, False]), tf.tensor([1, 2]), tf.tensor([10, 20])).print()
    Tensor
        [1, 20]
    """
    condition = as_tensor(condition, "where", "condition")
    if condition.dtype != bool_:
        raise DtypeError(f"Argument 'condition' passed to 'where' must be bool tensor, but "
                         f"got {condition.dtype} tensor")
    a, b = binary_args(a, b, "where")
    return E.run_kernel(_select, (condition, a, b))


def _where_method(self, condition, other):
    """``where(condition, self, other)`` (TF.js's chained form)."""
    return where(condition, self, other)


Tensor.where = _where_method


# ---------------------------------------------------------------- tests on values

@unary("IsNan", policy="any", zero_grad=True)
def is_nan(B, x):
    """True where x is NaN.

    >>> import flowgrad as tf
    >>> tf.is_nan(tf.tensor([1, float("nan")])).print()
    Tensor
        [false, true]
    """
    return B.isnan(x)


@unary("IsInf", policy="any", zero_grad=True)
def is_inf(B, x):
    """True where x is +Inf or -Inf.

    >>> import flowgrad as tf
    >>> tf.is_inf(tf.tensor([1, float("inf")])).print()
    Tensor
        [false, true]
    """
    return B.isinf(x)


@unary("IsFinite", policy="any", zero_grad=True)
def is_finite(B, x):
    """True where x is neither NaN nor infinite.

    >>> import flowgrad as tf
    >>> tf.is_finite(tf.tensor([1, float("inf")])).print()
    Tensor
        [true, false]
    """
    return B.isfinite(x)


# ---------------------------------------------------------------- piecewise constant

# (sign(-0.0) is 0.0; NaN gives 0)
@unary("Sign", policy="numeric", zero_grad=True,
       native="T(1) if {0} > T(0) else T(-1) if {0} < T(0) else T(0)")
def sign(B, x):
    """-1, 0 or 1 by the sign of x (0 for NaN, as TF.js on cpu).

    >>> import flowgrad as tf
    >>> tf.sign(tf.tensor([-2, 0, 3])).print()
    Tensor
        [-1, 0, 1]
    """
    s = B.sign(x)
    return B.where(B.isnan(s), 0, s) if x.dtype in B.float_dtypes else s


# (NumPy's functions in numba: math.floor would return an int)
@unary("Floor", policy="numeric", zero_grad=True, native="np.floor({0})")
def floor(B, x):
    """The largest integer <= x.

    >>> import flowgrad as tf
    >>> tf.floor(tf.tensor([1.5, -1.5])).print()
    Tensor
        [1, -2]
    """
    return B.floor(x) if x.dtype in B.float_dtypes else x


@unary("Ceil", policy="numeric", zero_grad=True, native="np.ceil({0})")
def ceil(B, x):
    """The smallest integer >= x.

    >>> import flowgrad as tf
    >>> tf.ceil(tf.tensor([1.5, -1.5])).print()
    Tensor
        [2, -1]
    """
    return B.ceil(x) if x.dtype in B.float_dtypes else x


# (np.rint: halves to even, as np.round, in the default rounding mode)
@unary("Round", policy="numeric", zero_grad=True, native="np.rint({0})")
def round(B, x):  # noqa: A001 - the TF.js name
    """The nearest integer, halves to even: round(2.5) = 2.

    >>> import flowgrad as tf
    >>> tf.round(tf.tensor([2.5, 3.5, -0.4])).print()
    Tensor
        [2, 4, 0]
    """
    return B.round(x) if x.dtype in B.float_dtypes else x


def _step_native(args, consts, alpha=0.0):
    """Step on one element: NaN stays NaN; where x <= 0 an alpha of 0 (or -0.0) gives 0.0
    (the kernel skips it), any other alpha its value in the dtype (-1e-50: -0.0 in float32).
    """
    x = args[0]
    other = "{alpha}" if alpha != 0 else "T(0)"
    return f"{x} if {x} != {x} else T(1) if {x} > T(0) else {other}"


@primitive("Step", zero_grad=True, vmap=V.elementwise, native=_step_native)
def _step(B, x, alpha):
    pos = x > 0
    is_float = x.dtype in B.float_dtypes
    if not is_float:
        alpha = int(alpha)       # truncated, as a float stored into an int32 array
    out = B.astype(pos, x.dtype)
    if alpha != 0:
        out = B.where(pos, out, alpha)
    return B.where(B.isnan(x), x, out) if is_float else out


@export
def step(x, alpha=0.0):
    """1 where x > 0, else alpha (NaN stays NaN).

    >>> import flowgrad as tf
    >>> tf.step(tf.tensor([-1, 0, 2])).print()
    Tensor
        [0, 0, 1]
    """
    x = as_numeric(x, "step")
    return E.run_kernel(_step, (x,), {"alpha": as_number(alpha, "alpha", "step")})


__all__ = ["FLOATS"]
