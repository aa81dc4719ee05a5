"""Elementwise one-input ops: arithmetic, exponentials and logs, trigonometry, clipping.

Each kernel sits beside its gradient rule; rules use flowgrad ops (Tensor methods and
operators), so every gradient is differentiable again. Rules that need the op's output
declare ``save_y`` and receive it still connected to the input, which is what makes
exp'', tanh'' and sigmoid'' right (TF.js gets them wrong).
"""
import math

from .. import batching as V
from .. import engine as E
from ..errors import ArgumentError
from ..tensor import Tensor
from ._core import as_number, as_numeric, export, primitive, unary
from .logical import where

_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)


# ---------------------------------------------------------------- arithmetic

@unary("Neg", policy="numeric", ufunc="negative", expr="-{0}", native="-{0}")
def neg(B, x):
    """-x, elementwise.

    >>> import flowgrad as tf
    >>> tf.neg(tf.tensor([1, -2])).print()
    Tensor
        [-1, 2]
    """
    return B.negative(x)


@neg.vjp
def _(dy, x):
    return -dy


@unary("Square", policy="numeric", ufunc="square", native="{0} * {0}")
def square(B, x):
    """x², elementwise.

    >>> import flowgrad as tf
    >>> tf.square(tf.tensor([2, 3])).print()
    Tensor
        [4, 9]
    """
    return B.square(x)


@square.vjp
def _(dy, x):
    if dy.dtype != x.dtype:             # (an int32 x: promoted as the product would be)
        return dy * (x * 2)
    return E.run_kernel(_square_grad, (dy, x))


@primitive("SquareGrad", batched_vjp=True, ufunc="square_grad", vmap=V.elementwise,
           expr="{0} * ({1} * 2)", native="{0} * ({1} * T(2))")
def _square_grad(B, dy, x):
    return B.square_grad(dy, x)     # dy · (x · 2): one kernel, the rule's ufuncs in order


@_square_grad.def_vjp
def _(g, dy, x, needs):
    return (E.run_kernel(_square_grad, (g, x)) if needs[0] else None,
            g * dy * 2 if needs[1] else None)


@unary("Sqrt", save_y=True, ufunc="sqrt", native="math.sqrt({0})")
def sqrt(B, x):
    """√x, elementwise (NaN below 0). Gradient +Inf at 0.

    >>> import flowgrad as tf
    >>> tf.sqrt(tf.tensor([4, 9])).print()
    Tensor
        [2, 3]
    """
    return B.sqrt(x)


@sqrt.vjp
def _(dy, x, y):
    return dy / (y * 2)


@unary("Rsqrt", save_y=True, native="T(1) / math.sqrt({0})")
def rsqrt(B, x):
    """1/√x, elementwise.

    >>> import flowgrad as tf
    >>> tf.rsqrt(tf.tensor([4])).print()
    Tensor
        [0.5]
    """
    return 1 / B.sqrt(x)


@rsqrt.vjp
def _(dy, x, y):
    return dy * (y * y * y) * -0.5


@unary("Reciprocal", save_y=True, native="T(1) / {0}")
def reciprocal(B, x):
    """1/x, elementwise.

    >>> import flowgrad as tf
    >>> tf.reciprocal(tf.tensor([2, 4])).print()
    Tensor
        [0.5, 0.25]
    """
    return 1 / x


@reciprocal.vjp
def _(dy, x, y):
    return -dy * (y * y)


@unary("Abs", policy="numeric", ufunc="absolute", native="abs({0})")
def abs(B, x):  # noqa: A001 - the TF.js name
    """|x|, elementwise. [conv] abs'(0) = -1, as TF.js.

    >>> import flowgrad as tf
    >>> tf.abs(tf.tensor([-2, 3])).print()
    Tensor
        [2, 3]
    """
    return B.abs(x)


@abs.vjp
def _(dy, x):
    return dy * x.step(-1)


# ---------------------------------------------------------------- exponentials and logs

@unary("Exp", save_y=True, ufunc="exp", native="math.exp({0})")
def exp(B, x):
    """eˣ, elementwise. Every derivative is right (TF.js's exp'' throws).

    >>> import flowgrad as tf
    >>> tf.exp(tf.tensor([0, -1])).print()
    Tensor
        [1, 0.3678794]
    """
    return B.exp(x)


@exp.vjp
def _(dy, x, y):
    return dy * y


@unary("Expm1", save_y=True, ufunc="expm1", native="math.expm1({0})")
def expm1(B, x):
    """eˣ - 1, accurate near 0.

    >>> import flowgrad as tf
    >>> tf.expm1(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.expm1(x)


@expm1.vjp
def _(dy, x, y):
    return dy * (y + 1)


@unary("Log", ufunc="log", native="math.log({0})")
def log(B, x):
    """Natural logarithm (-Inf at 0, NaN below).

    >>> import flowgrad as tf
    >>> tf.log(tf.tensor([1])).print()
    Tensor
        [0]
    """
    return B.log(x)


@log.vjp
def _(dy, x):
    return dy / x


@unary("Log1p", ufunc="log1p", native="math.log1p({0})")
def log1p(B, x):
    """log(1 + x), accurate near 0.

    >>> import flowgrad as tf
    >>> tf.log1p(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.log1p(x)


@log1p.vjp
def _(dy, x):
    return dy / (x + 1)


@unary("Erf", native="math.erf({0})")
def erf(B, x):
    """The error function 2/√π ∫₀ˣ e^(-t²) dt.

    >>> import flowgrad as tf
    >>> tf.erf(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.erf(x)


@erf.vjp
def _(dy, x):
    return dy * ((-x.square()).exp() * _SQRT_PI_2)


# ---------------------------------------------------------------- trigonometry

@unary("Sin", ufunc="sin", native="math.sin({0})")
def sin(B, x):
    """sin x.

    >>> import flowgrad as tf
    >>> tf.sin(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.sin(x)


@sin.vjp
def _(dy, x):
    return E.run_kernel(_sin_grad, (dy, x))


@primitive("SinGrad", batched_vjp=True, ufunc="sin_grad", vmap=V.elementwise,
           native="{0} * math.cos({1})")
def _sin_grad(B, dy, x):
    return B.sin_grad(dy, x)        # dy · cos x


@_sin_grad.def_vjp
def _(g, dy, x, needs):
    return (E.run_kernel(_sin_grad, (g, x)) if needs[0] else None,
            E.run_kernel(_cos_grad, (g * dy, x)) if needs[1] else None)


@unary("Cos", ufunc="cos", native="math.cos({0})")
def cos(B, x):
    """cos x.

    >>> import flowgrad as tf
    >>> tf.cos(tf.tensor([0])).print()
    Tensor
        [1]
    """
    return B.cos(x)


@cos.vjp
def _(dy, x):
    return E.run_kernel(_cos_grad, (dy, x))


@primitive("CosGrad", batched_vjp=True, ufunc="cos_grad", vmap=V.elementwise,
           native="-({0} * math.sin({1}))")
def _cos_grad(B, dy, x):
    return B.cos_grad(dy, x)        # -(dy · sin x)


@_cos_grad.def_vjp
def _(g, dy, x, needs):
    return (E.run_kernel(_cos_grad, (g, x)) if needs[0] else None,
            -E.run_kernel(_sin_grad, (g * dy, x)) if needs[1] else None)


@unary("Tan", ufunc="tan", native="math.tan({0})")
def tan(B, x):
    """tan x.

    >>> import flowgrad as tf
    >>> tf.tan(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.tan(x)


@tan.vjp
def _(dy, x):
    return dy / x.cos().square()


@unary("Asin", ufunc="arcsin", native="math.asin({0})")
def asin(B, x):
    """arcsin x (NaN outside [-1, 1]).

    >>> import flowgrad as tf
    >>> tf.asin(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.asin(x)


@asin.vjp
def _(dy, x):
    return dy / (1 - x.square()).sqrt()


@unary("Acos", ufunc="arccos", native="math.acos({0})")
def acos(B, x):
    """arccos x (NaN outside [-1, 1]).

    >>> import flowgrad as tf
    >>> tf.acos(tf.tensor([1])).print()
    Tensor
        [0]
    """
    return B.acos(x)


@acos.vjp
def _(dy, x):
    return -dy / (1 - x.square()).sqrt()


@unary("Atan", ufunc="arctan", native="math.atan({0})")
def atan(B, x):
    """arctan x.

    >>> import flowgrad as tf
    >>> tf.atan(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.atan(x)


@atan.vjp
def _(dy, x):
    return dy / (x.square() + 1)


@unary("Sinh", ufunc="sinh", native="math.sinh({0})")
def sinh(B, x):
    """sinh x.

    >>> import flowgrad as tf
    >>> tf.sinh(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.sinh(x)


@sinh.vjp
def _(dy, x):
    return dy * x.cosh()


@unary("Cosh", ufunc="cosh", native="math.cosh({0})")
def cosh(B, x):
    """cosh x.

    >>> import flowgrad as tf
    >>> tf.cosh(tf.tensor([0])).print()
    Tensor
        [1]
    """
    return B.cosh(x)


@cosh.vjp
def _(dy, x):
    return dy * x.sinh()


@unary("Tanh", save_y=True, ufunc="tanh", native="math.tanh({0})")
def tanh(B, x):
    """tanh x. Every derivative is right (TF.js's tanh'' throws).

    >>> import flowgrad as tf
    >>> tf.tanh(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.tanh(x)


@tanh.vjp
def _(dy, x, y):
    return E.run_kernel(_tanh_grad, (dy, y))


@primitive("TanhGrad", batched_vjp=True, ufunc="tanh_grad", vmap=V.elementwise,
           native="{0} * (T(1) - {1} * {1})")
def _tanh_grad(B, dy, y):
    return B.tanh_grad(dy, y)       # dy · (1 - y²)


@_tanh_grad.def_vjp
def _(g, dy, y, needs):
    return (E.run_kernel(_tanh_grad, (g, y)) if needs[0] else None,
            g * dy * y * -2 if needs[1] else None)


@unary("Asinh", ufunc="arcsinh", native="math.asinh({0})")
def asinh(B, x):
    """arsinh x.

    >>> import flowgrad as tf
    >>> tf.asinh(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.asinh(x)


@asinh.vjp
def _(dy, x):
    return dy / (x.square() + 1).sqrt()


@unary("Acosh", ufunc="arccosh", native="math.acosh({0})")
def acosh(B, x):
    """arcosh x (NaN below 1).

    >>> import flowgrad as tf
    >>> tf.acosh(tf.tensor([1])).print()
    Tensor
        [0]
    """
    return B.acosh(x)


@acosh.vjp
def _(dy, x):
    return dy / (x.square() - 1).sqrt()


@unary("Atanh", ufunc="arctanh", native="math.atanh({0})")
def atanh(B, x):
    """artanh x (NaN outside (-1, 1)).

    >>> import flowgrad as tf
    >>> tf.atanh(tf.tensor([0])).print()
    Tensor
        [0]
    """
    return B.atanh(x)


@atanh.vjp
def _(dy, x):
    return dy / (1 - x.square())


# NumPy's clip on floats: max(x, lo) keeping x at a tie (clip(-0.0, 0, 1) is -0.0), then
# min(that, hi) so; NaN in x or in a bound gives NaN
_CLIP_LO = "({0} if {0} >= {lo} or {0} != {0} else {lo})"


@primitive("ClipByValue", batched_vjp=True, vmap=V.elementwise,
           native=f"{_CLIP_LO} if {_CLIP_LO} <= {{hi}} or {_CLIP_LO} != {_CLIP_LO} else {{hi}}")
def _clip(B, x, lo, hi):
    if x.dtype in B.float_dtypes:
        return B.clip(x, lo, hi)
    # int32: clipped as floats, then truncated (TF.js stores the float bound in an int32)
    return B.astype(B.clip(B.astype(x, B.dtypes["float64"]), lo, hi), x.dtype)


@_clip.def_vjp
def _(dy, x, lo, hi):
    # [conv] bounds are inclusive; NaN inputs get 0
    return where(x.greater_equal(lo).logical_and(x.less_equal(hi)), dy, 0)


@export
def clip_by_value(x, clip_value_min, clip_value_max):
    """x clipped to [min, max], keeping x's dtype. The gradient passes where
    min <= x <= max (bounds inclusive, as TF.js) and is 0 elsewhere; unlike TF.js it stays
    connected when min == max.

    >>> import flowgrad as tf
    >>> tf.clip_by_value(tf.tensor([-2, 0.5, 3]), -1, 1).print()
    Tensor
        [-1, 0.5, 1]
    """
    x = as_numeric(x, "clip_by_value") if not isinstance(x, Tensor) else x
    lo = as_number(clip_value_min, "clip_value_min", "clip_by_value")
    hi = as_number(clip_value_max, "clip_value_max", "clip_by_value")
    if lo > hi:
        raise ArgumentError(f"Error in clip: min ({_num(clip_value_min)}) must be less than "
                            f"or equal to max ({_num(clip_value_max)}).")
    return E.run_kernel(_clip, (x,), {"lo": lo, "hi": hi})


def _num(v):
    return int(v) if float(v).is_integer() else v
