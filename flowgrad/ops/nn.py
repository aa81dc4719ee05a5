"""Neural-network ops with fused gradient rules: softmax and log_softmax (any axis).

Both save their output; it reaches the rule still connected to the logits, so second
derivatives are right (TF.js's softmax'' and logSoftmax'' are not).
"""
from .. import engine as E
from ._core import as_float, export, norm_axis, primitive


@primitive("Softmax", save_y=True)
def _softmax(B, x, axis):
    e = B.exp(x - B.max(x, axis=axis, keepdims=True))
    return e / B.sum(e, axis=axis, keepdims=True)


@_softmax.def_vjp
def _(dy, x, y, axis):
    return y * (dy - (dy * y).sum(axis, True))


@export
def softmax(logits, dim=-1):
    """exp(x) / sum(exp(x)) along ``dim`` (the last axis by default), without overflow.

    >>> import flowgrad as tf
    >>> tf.softmax(tf.tensor([0, 0])).print()
    Tensor
        [0.5, 0.5]
    """
    x = as_float(logits, "softmax", "logits")
    if x.rank == 0:
        x = x.reshape((1,))
    return E.run_kernel(_softmax, (x,), {"axis": norm_axis(dim, x.rank, "softmax")})


@primitive("LogSoftmax", save_y=True)
def _log_softmax(B, x, axis):
    s = x - B.max(x, axis=axis, keepdims=True)
    return s - B.log(B.sum(B.exp(s), axis=axis, keepdims=True))


@_log_softmax.def_vjp
def _(dy, x, y, axis):
    return dy - dy.sum(axis, True) * y.exp()


@export
def log_softmax(logits, axis=-1):
    """log(softmax(x)) along ``axis``, computed stably.

    >>> import flowgrad as tf
    >>> tf.log_softmax(tf.tensor([0, 0])).print()
    Tensor
        [-0.6931472, -0.6931472]
    """
    x = as_float(logits, "log_softmax", "logits")
    if x.rank == 0:
        x = x.reshape((1,))
    return E.run_kernel(_log_softmax, (x,), {"axis": norm_axis(axis, x.rank, "log_softmax")})
