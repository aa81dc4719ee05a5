"""Activation functions: the logistic family (sigmoid, softplus, log_sigmoid) and the
rectifier family (relu, relu6, elu, selu, leaky_relu).

Conventions at the kinks follow TF.js (relu'(0) = 0, elu'(0) = 1, selu'(0) = scale·α,
leaky_relu'(0) = α). The hot rules use fused gradient kernels (SigmoidGrad, ReluGrad) with
their own rules, so higher orders stay exact.
"""
from .. import batching as V
from .. import engine as E
from ._core import as_float, as_number, export, primitive, unary
from .logical import where

SELU_SCALE = 1.0507009873554805
SELU_ALPHA = 1.6732632423543772


# ---------------------------------------------------------------- logistic family

@unary("Sigmoid", save_y=True, native="math.tanh({0} * T(0.5)) * T(0.5) + T(0.5)")
def sigmoid(B, x):
    """1 / (1 + e⁻ˣ), computed without overflow.

    >>> import flowgrad as tf
    >>> tf.sigmoid(tf.tensor([0])).print()
    Tensor
        [0.5]
    """
    # NOTE: 0.5 + 0.5 tanh(x/2) is the logistic function without exp overflow for x << 0
    return B.tanh(x * 0.5) * 0.5 + 0.5


@sigmoid.vjp
def _(dy, x, y):
    return E.run_kernel(_sigmoid_grad, (dy, y))


# Fused gradient kernels: one op instead of three in every backward pass through tanh and
# sigmoid. Their own rules keep higher orders exact.
@primitive("SigmoidGrad", batched_vjp=True, vmap=V.elementwise,
           native="{0} * {1} * (T(1) - {1})")
def _sigmoid_grad(B, dy, y):
    return dy * y * (1 - y)


@_sigmoid_grad.def_vjp
def _(g, dy, y, needs):
    return (E.run_kernel(_sigmoid_grad, (g, y)) if needs[0] else None,
            g * dy * (1 - y * 2) if needs[1] else None)


@unary("Softplus", native="({0} if {0} > T(0) else T(0)) + math.log1p(math.exp(-abs({0})))")
def softplus(B, x):
    """log(1 + eˣ), computed without overflow.

    >>> import flowgrad as tf
    >>> tf.softplus(tf.tensor([0])).print()
    Tensor
        [0.6931472]
    """
    return B.softplus(x)


@softplus.vjp
def _(dy, x):
    return dy * x.sigmoid()


# (-softplus(-x), softplus as above)
@unary("LogSigmoid",
       native="-((-{0} if {0} < T(0) else T(0)) + math.log1p(math.exp(-abs({0}))))")
def log_sigmoid(B, x):
    """log(sigmoid(x)) = -softplus(-x), without overflow.

    >>> import flowgrad as tf
    >>> tf.log_sigmoid(tf.tensor([0])).print()
    Tensor
        [-0.6931472]
    """
    return -B.softplus(-x)


@log_sigmoid.vjp
def _(dy, x):
    return dy * (-x).sigmoid()


# ---------------------------------------------------------------- rectifiers

# (maximum(x, 0): NaN stays NaN, -0.0 gives 0.0)
@unary("Relu", policy="numeric", native="{0} if {0} > T(0) or {0} != {0} else T(0)")
def relu(B, x):
    """max(x, 0). [conv] relu'(0) = 0.

    >>> import flowgrad as tf
    >>> tf.relu(tf.tensor([-1, 2])).print()
    Tensor
        [0, 2]
    """
    return B.maximum(x, 0)


@relu.vjp
def _(dy, x):
    return E.run_kernel(_relu_grad, (dy, x))


# (dy · step(x), step(NaN) = NaN)
@primitive("ReluGrad", batched_vjp=True, vmap=V.elementwise,
           native="{0} * (T(1) if {1} > T(0) else T(0) if {1} <= T(0) else {1})")
def _relu_grad(B, dy, x):
    # [conv] relu'(0) = 0; a NaN input passes NaN (TF.js: dy * step(x), step(NaN) = NaN)
    return B.relu_grad(dy, x)


@_relu_grad.def_vjp
def _(g, dy, x):
    return E.run_kernel(_relu_grad, (g, x)), None


# (clip(x, 0, 6): NaN stays NaN, -0.0 stays -0.0)
@unary("Relu6", policy="numeric", native="T(0) if {0} < T(0) else T(6) if {0} > T(6) else {0}")
def relu6(B, x):
    """min(max(x, 0), 6). [conv] the gradient is 1 on 0 < x <= 6.

    >>> import flowgrad as tf
    >>> tf.relu6(tf.tensor([-1, 3, 8])).print()
    Tensor
        [0, 3, 6]
    """
    return B.clip(x, 0, 6)


@relu6.vjp
def _(dy, x):
    return dy * x.greater(0).logical_and(x.less_equal(6)).cast(dy.dtype)


# (expm1(minimum(x, 0)) where x <= 0 or NaN: minimum(-0.0, 0) is 0.0, as the Minimum form)
_ELU_NEG = "math.expm1({0} if {0} < T(0) or {0} != {0} else T(0))"


@unary("Elu", save_y=True, native="{0} if {0} > T(0) else " + _ELU_NEG)
def elu(B, x):
    """x if x > 0 else eˣ - 1. [conv] elu'(0) = 1.

    >>> import flowgrad as tf
    >>> tf.elu(tf.tensor([0, 1])).print()
    Tensor
        [0, 1]
    """
    return B.where(x > 0, x, B.expm1(B.minimum(x, 0)))


@elu.vjp
def _(dy, x, y):
    return where(y >= 0, dy, dy * (y + 1))


@unary("Selu", native=f"({{0}} if {{0}} > T(0) else {_ELU_NEG} * T({SELU_ALPHA!r})) * "
                      f"T({SELU_SCALE!r})")
def selu(B, x):
    """scale·(x if x > 0 else α(eˣ - 1)), with TF.js's scale and α.

    >>> import flowgrad as tf
    >>> tf.selu(tf.tensor([1])).print()
    Tensor
        [1.050701]
    """
    return B.where(x > 0, x, B.expm1(B.minimum(x, 0)) * SELU_ALPHA) * SELU_SCALE


@selu.vjp
def _(dy, x):
    # [conv] at 0 the gradient is scale·α, as in TF.js
    return where(x > 0, dy * SELU_SCALE, dy * (x.exp() * (SELU_SCALE * SELU_ALPHA)))


@primitive("LeakyRelu", batched_vjp=True, vmap=V.elementwise,
           native="{0} if {0} > T(0) else {0} * {alpha}")
def _leaky_relu(B, x, alpha):
    return B.where(x > 0, x, x * alpha)


@_leaky_relu.def_vjp
def _(dy, x, alpha):
    return where(x > 0, dy, dy * alpha)


@export
def leaky_relu(x, alpha=0.2):
    """x if x > 0 else alpha·x. [conv] the gradient at 0 is alpha.

    >>> import flowgrad as tf
    >>> tf.leaky_relu(tf.tensor([-1, 2]), 0.1).print()
    Tensor
        [-0.1, 2]
    """
    x = as_float(x, "leaky_relu")
    return E.run_kernel(_leaky_relu, (x,), {"alpha": as_number(alpha, "alpha", "leaky_relu")})
