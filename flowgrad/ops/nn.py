"""Neural-network ops: softmax and log_softmax (any axis) with fused gradient rules, and the
composites batch_norm (and its 2d/3d/4d forms), local_response_normalization, dropout,
basic_lstm_cell and multi_rnn_cell.

softmax and log_softmax save their output; it reaches the rule still connected to the
logits, so second derivatives are right (TF.js's softmax'' and logSoftmax'' are not). The
composites are made of differentiable ops, so every gradient of every order is exact.
"""
import numpy as np

from .. import batching as V
from .. import engine as E
from ..arg_checks import describe
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor
from ._core import (FLOATS, as_float, as_floats, as_int, as_number, as_tensor, export,
                    met_float, norm_axis, primitive)
from .activations import sigmoid
from .creation import random_uniform, tensor
from .linalg import mat_mul
from .logical import floor
from .shape import clone, concat, split
from .unary import rsqrt, tanh


@primitive("Softmax", save_y=True, batched_vjp=True, vmap=V.axis_rule())
def _softmax(B, x, axis):
    e = B.exp(x - B.max(x, axis=axis, keepdims=True))
    return e / B.sum(e, axis=axis, keepdims=True)


@_softmax.def_vjp
def _(dy, x, y, axis):
    a = axis - x.rank          # from the end: dy may carry leading batch axes
    return y * (dy - (dy * y).sum(a, True))


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


@primitive("LogSoftmax", save_y=True, batched_vjp=True, vmap=V.axis_rule())
def _log_softmax(B, x, axis):
    s = x - B.max(x, axis=axis, keepdims=True)
    return s - B.log(B.sum(B.exp(s), axis=axis, keepdims=True))


@_log_softmax.def_vjp
def _(dy, x, y, axis):
    return dy - dy.sum(axis - x.rank, True) * y.exp()


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


# ---------------------------------------------------------------- softmax cross-entropy
# One kernel forward and one backward for what the composite -(y * log_softmax(x)).sum(-1)
# runs as 4 and 8 (a training step's loss: 10 kernels fewer, each ~20 us of Python). The
# forward runs the composite's ufuncs in its order (the same bits); the rules below are
# written with ops, so every order of derivative stays exact.

@primitive("SoftmaxCrossEntropy", batched_vjp=True, vmap=V.leading)
def _softmax_xent(B, labels, logits):
    s = logits - B.max(logits, axis=-1, keepdims=True)
    return -B.sum(labels * (s - B.log(B.sum(B.exp(s), axis=-1, keepdims=True))), axis=-1)


@_softmax_xent.def_vjp
def _(dy, labels, logits, needs):
    dlabels = -dy.expand_dims(-1) * log_softmax(logits, -1) if needs[0] else None
    dlogits = E.run_kernel(_softmax_xent_grad, (dy, labels, logits)) if needs[1] else None
    return dlabels, dlogits


@primitive("SoftmaxCrossEntropyGrad", batched_vjp=True, vmap=V.leading)
def _softmax_xent_grad(B, dy, labels, logits):
    # dy·(softmax·sum(labels) - labels): softmax - labels for rows of labels summing to 1
    # (TF.js's formula)
    e = B.exp(logits - B.max(logits, axis=-1, keepdims=True))
    p = e / B.sum(e, axis=-1, keepdims=True)
    return dy[..., None] * (p * B.sum(labels, axis=-1, keepdims=True) - labels)


@_softmax_xent_grad.def_vjp
def _(g, dy, labels, logits, needs):
    # the kernel is dy·(p·c - y), p = softmax(logits), c = sum(y): worked out by hand
    p = softmax(logits, -1)
    c = labels.sum(-1, True)
    gp = (g * p).sum(-1, True)
    de = dy.expand_dims(-1)
    ddy = (g * (p * c - labels)).sum(-1) if needs[0] else None
    dlabels = de * (gp - g) if needs[1] else None
    dlogits = de * c * (p * (g - gp)) if needs[2] else None
    return ddy, dlabels, dlogits


# The mean over the rows, the loss a training step differentiates (softmax_cross_entropy's
# default reduction), is one kernel each way too: mean(rows) forward, and backward
# (dy / n)·(softmax·sum(labels) - labels), where the composite ran Mean, then RealDiv,
# BroadcastTo and the rows' gradient kernel (three kernels fewer a step, each ~30 us
# inside a training step). ``rank`` is the logits' own rank: axes in front of those are
# batch axes (tf.vmap's, or a jacobian's cotangents), kept apart.

def _rows_in(logits, rank):
    """The logical rows axes of a physical logits array (batch axes in front)."""
    return tuple(range(logits.ndim - rank, logits.ndim - 1))


@primitive("SoftmaxCrossEntropyMean", batched_vjp=True, vmap=V.leading)
def _softmax_xent_mean(B, labels, logits, rank):
    # (the rows' kernel, then Mean's own call: the composite's bits)
    rows = _softmax_xent.fwd(B, labels, logits)
    return B.mean(rows, axis=tuple(range(rows.ndim - (rank - 1), rows.ndim)), keepdims=False)


@_softmax_xent_mean.def_vjp
def _(dy, labels, logits, rank, needs):
    n = int(np.prod(logits.shape[:-1]))
    dlabels = None
    if needs[0]:
        d = (dy / n).reshape(dy.shape + (1,) * rank)
        dlabels = -d * log_softmax(logits, -1)
    dlogits = E.run_kernel(_softmax_xent_mean_grad, (dy, labels, logits),
                           {"rank": rank}) if needs[1] else None
    return dlabels, dlogits


@primitive("SoftmaxCrossEntropyMeanGrad", batched_vjp=True, vmap=V.leading)
def _softmax_xent_mean_grad(B, dy, labels, logits, rank):
    n = 1
    for a in _rows_in(logits, rank):
        n *= logits.shape[a]
    # NOTE: dy / n in the dtype, as the composite's RealDiv of a Python int computed it,
    # then spread over each row's classes: the same products as its broadcast rows
    d = B.divide(dy, B.asarray(n, dtype=logits.dtype))
    d = B.reshape(d, d.shape + (1,) * rank)
    e = B.exp(logits - B.max(logits, axis=-1, keepdims=True))
    p = e / B.sum(e, axis=-1, keepdims=True)
    return d * (p * B.sum(labels, axis=-1, keepdims=True) - labels)


@_softmax_xent_mean_grad.def_vjp
def _(g, dy, labels, logits, rank, needs):
    # the kernel is D·(p·c - y), D = dy/n spread, p = softmax(logits), c = sum(y): as the
    # rows' gradient kernel's rule above, with D for each row's dy
    n = int(np.prod(logits.shape[:-1]))
    p = softmax(logits, -1)
    c = labels.sum(-1, True)
    gp = (g * p).sum(-1, True)
    d = (dy / n).reshape(dy.shape + (1,) * rank)
    ddy = (g * (p * c - labels)).sum(list(range(-rank, 0))) / n if needs[0] else None
    dlabels = d * (gp - g) if needs[1] else None
    dlogits = d * c * (p * (g - gp)) if needs[2] else None
    return ddy, dlabels, dlogits


def softmax_cross_entropy_mean(labels, logits):
    """The mean over the rows of softmax_cross_entropy_rows, as one kernel each way
    (labels and logits: float tensors of one dtype and shape, with at least one row; the
    caller checks): tf.losses.softmax_cross_entropy's default reduction without weights.

    >>> import flowgrad as tf
    >>> from flowgrad.ops.nn import softmax_cross_entropy_mean
    >>> round(softmax_cross_entropy_mean(tf.tensor([[1.0, 0.0], [0.0, 1.0]]),
    ...                                  tf.tensor([[0.0, 0.0], [0.0, 0.0]])).item(), 6)
    0.693147
    """
    return E.run_kernel(_softmax_xent_mean, (labels, logits), {"rank": logits.rank})


def softmax_cross_entropy_rows(labels, logits):
    """-sum(labels·log_softmax(logits)) along the last axis, one loss per row, as one kernel
    (labels and logits: float tensors of one dtype and shape, rank >= 1; the caller checks).
    tf.losses.softmax_cross_entropy weighs and reduces these.

    >>> import flowgrad as tf
    >>> from flowgrad.ops.nn import softmax_cross_entropy_rows
    >>> round(softmax_cross_entropy_rows(tf.tensor([[1.0, 0.0]]), tf.tensor([[0.0, 0.0]]))
    ...       .item(), 6)
    0.693147
    """
    return E.run_kernel(_softmax_xent, (labels, logits))


# ---------------------------------------------------------------- batch normalization

def _broadcasts_to(shape, target):
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


@export(kernel="FusedBatchNorm")
def batch_norm(x, mean, variance, offset=None, scale=None, variance_epsilon=0.001):
    """(x - mean) / sqrt(variance + variance_epsilon) * scale + offset, with the statistics
    broadcast against x (usually shaped [channels]: the last axis).

    Gradients flow to all five tensors (as in TF.js).

    >>> import flowgrad as tf
    >>> tf.batch_norm(tf.tensor([1.0, 3.0]), tf.tensor([2.0]), tf.tensor([1.0]),
    ...               variance_epsilon=0).print()
    Tensor
        [-1, 1]
    """
    return _batch_norm(x, mean, variance, offset, scale, variance_epsilon, "batch_norm")


def _batch_norm(x, mean, variance, offset, scale, variance_epsilon, fn, rank=None):
    args = {"mean": mean, "variance": variance, "offset": offset, "scale": scale}
    like = met_float(x, *args.values())
    x = as_float(x, fn, "x", like)
    ts = {k: as_float(v, fn, k, like) for k, v in args.items()
          if v is not None or k in ("mean", "variance")}     # None: TF.js's 'null' message
    if rank is not None:
        if x.rank != rank:
            raise ShapeError(f"Error in {fn}: x must be rank {rank} but got rank {x.rank}.")
        for k, t in ts.items():
            if t.rank not in (rank, 1):
                raise ShapeError(f"Error in {fn}: {k} must be rank {rank} or rank 1 but got "
                                 f"rank {t.rank}.")
    m = ts["mean"]
    for k in ("variance", "offset", "scale"):
        if k in ts and ts[k].rank != m.rank:
            raise ShapeError(f"Batch normalization gradient requires mean and {k} to have "
                             f"equal ranks ({fn}: mean has shape {list(m.shape)}, {k} has "
                             f"shape {list(ts[k].shape)}).")
    for k, t in ts.items():
        if not _broadcasts_to(t.shape, x.shape):
            raise ShapeError(f"{fn}: {k} of shape {list(t.shape)} does not broadcast to x's "
                             f"shape {list(x.shape)} (give one value per channel: shape "
                             f"[{x.shape[-1] if x.rank else 1}])")
    eps = 0.001 if variance_epsilon is None else as_number(variance_epsilon,
                                                           "variance_epsilon", fn)
    inv = rsqrt(ts["variance"] + eps)
    if "scale" in ts:
        inv = inv * ts["scale"]
    y = (x - m) * inv
    return y + ts["offset"] if "offset" in ts else y


def _batch_norm_nd(rank):
    def bn(x, mean, variance, offset=None, scale=None, variance_epsilon=0.001):
        return _batch_norm(x, mean, variance, offset, scale, variance_epsilon,
                           f"batchNorm{rank}D", rank)
    bn.__name__ = bn.__qualname__ = f"batch_norm{rank}d"
    bn.__doc__ = f"""batch_norm for a rank-{rank} x (statistics of rank {rank} or 1).

    >>> import flowgrad as tf
    >>> tf.batch_norm{rank}d(tf.ones({[2] * rank}), tf.tensor([1.0, 1.0]),
    ...                 tf.tensor([1.0, 1.0])).shape
    {tuple([2] * rank)}
    """
    return export(bn, method=False)


batch_norm2d, batch_norm3d, batch_norm4d = (_batch_norm_nd(r) for r in (2, 3, 4))


# ---------------------------------------------------------------- local response norm.

@export(kernel="LRN")
def local_response_normalization(x, depth_radius=5, bias=1, alpha=1, beta=0.5):
    """x / (bias + alpha * sum of x² over a window of 2·depth_radius + 1 channels)^beta,
    the window centred on each channel of the last axis (cut at the ends). x is of rank 3
    or 4 (TF.js). alpha is not divided by the window size (as in TF).

    >>> import flowgrad as tf
    >>> x = tf.tensor([[[1.0, 2.0, 2.0]]], dtype="float64")
    >>> tf.local_response_normalization(x, 1, 0, 1, 1).array_sync()   # x / window sums
    [[[0.2, 0.2222222222222222, 0.25]]]
    """
    fn = "localResponseNormalization"
    x = as_float(x, "local_response_normalization")
    if x.rank not in (3, 4):
        raise ShapeError(f"Error in {fn}: x must be rank 3 or 4 but got rank {x.rank}.")
    if isinstance(depth_radius, bool) or not isinstance(depth_radius, (int, np.integer)):
        if not (isinstance(depth_radius, (float, np.floating))
                and float(depth_radius).is_integer()):
            raise ArgumentError(f"Error in {fn}: depthRadius must be an integer but got "
                                f"depthRadius {depth_radius}.")
    r = as_int(depth_radius, "depth_radius", "local_response_normalization", 0)
    bias = as_number(bias, "bias", "local_response_normalization")
    alpha = as_number(alpha, "alpha", "local_response_normalization")
    beta = as_number(beta, "beta", "local_response_normalization")
    c = x.shape[-1]
    # The window sums are one product with a band of ones: |i - j| <= r.
    # NOTE: the band is c×c, fine for the channel counts LRN is used with (up to ~1000).
    idx = np.arange(c)
    band = tensor((np.abs(idx[:, None] - idx[None, :]) <= r).astype(np.float64), dtype=x.dtype)
    sq = mat_mul(x * x, band)
    return x * (sq * alpha + bias) ** -beta


# ---------------------------------------------------------------- dropout

def _noise_shape(x, noise_shape):
    """TF.js's getNoiseShape: None entries take x's length."""
    if noise_shape is None:
        return x.shape
    if isinstance(noise_shape, Tensor):
        noise_shape = noise_shape.array_sync()
    if not isinstance(noise_shape, (list, tuple)):
        raise ArgumentError(f"dropout: noise_shape must be a list of integers, got "
                            f"{type(noise_shape).__name__}")
    if len(noise_shape) == x.rank:
        noise_shape = [n if v is None else v for v, n in zip(noise_shape, x.shape)]
    shape = tuple(as_int(v, f"noise_shape[{i}]", "dropout", 0)
                  for i, v in enumerate(noise_shape))
    if not _broadcasts_to(shape, x.shape):
        raise ShapeError(f"dropout: noise_shape {list(shape)} does not broadcast to x's shape "
                         f"{list(x.shape)} (use 1 for the axes that share a mask)")
    return shape


@export
def dropout(x, rate, noise_shape=None, seed=None):
    """x with each element zeroed with probability ``rate``, and the kept ones scaled by
    1 / (1 - rate) (so the expected value is x). ``noise_shape`` (broadcast to x's shape)
    shares a mask along axes of length 1; ``seed`` makes the mask reproducible. The
    gradient is dy times the same mask.

    >>> import flowgrad as tf
    >>> tf.dropout(tf.ones([6]), 0.5, seed=0).print()
    Tensor
        [2, 0, 0, 0, 2, 2]
    """
    x = as_tensor(x, "dropout")
    if x.dtype not in FLOATS:
        raise DtypeError(f"dropout: x has to be a floating point tensor since it's going to "
                         f"be scaled, but got a {x.dtype} tensor instead.")
    rate = as_number(rate, "rate", "dropout")
    if not 0 <= rate < 1:
        raise ArgumentError(f"dropout: rate must be a float in the range [0, 1), but got "
                            f"{rate}.")
    shape = _noise_shape(x, noise_shape)
    if rate == 0:
        return clone(x)
    keep = 1 - rate
    # the mask as TF.js draws it: floor(u + keep) is 1 with probability keep
    mask = floor(random_uniform(shape, 0, 1, x.dtype, seed) + keep) / keep
    return x * mask


# ---------------------------------------------------------------- LSTM

@export(method=False)
def basic_lstm_cell(forget_bias, lstm_kernel, lstm_bias, data, c, h):
    """One step of a basic LSTM cell; returns ``[new_c, new_h]``.

    The gates i, j, f, o are the four column blocks of concat([data, h], 1)·kernel + bias;
    new_c = c·sigmoid(f + forget_bias) + sigmoid(i)·tanh(j), new_h = tanh(new_c)·sigmoid(o).
    Shapes: data [batch, inputs], c and h [batch, units], kernel [inputs + units,
    4·units], bias [4·units].

    >>> import flowgrad as tf
    >>> c, h = tf.basic_lstm_cell(1.0, tf.zeros([3, 4]), tf.zeros([4]), tf.ones([1, 2]),
    ...                           tf.ones([1, 1]), tf.ones([1, 1]))
    >>> c.print()
    Tensor
         [[0.7310586],]
    """
    fn = "basic_lstm_cell"
    kernel, bias, data, c, h, forget_bias = as_floats(
        fn, lstm_kernel=lstm_kernel, lstm_bias=lstm_bias, data=data, c=c, h=h,
        forget_bias=forget_bias)
    for k, t in (("data", data), ("c", c), ("h", h), ("lstm_kernel", kernel)):
        if t.rank != 2:
            raise ShapeError(f"{fn}: {k} must be rank 2, got shape {list(t.shape)}")
    units = kernel.shape[1] // 4
    if kernel.shape[1] % 4 or kernel.shape[0] != data.shape[1] + h.shape[1] or \
            h.shape[1] != units or c.shape != h.shape or data.shape[0] != h.shape[0]:
        raise ShapeError(f"{fn}: shapes do not fit: lstm_kernel {list(kernel.shape)} must be "
                         f"[inputs + units, 4 * units] for data {list(data.shape)} = [batch, "
                         f"inputs] and c {list(c.shape)}, h {list(h.shape)} = [batch, units]")
    for k, t, want in (("lstm_bias", bias, (data.shape[0], 4 * units)),
                       ("forget_bias", forget_bias, c.shape)):
        if not _broadcasts_to(t.shape, want):
            raise ShapeError(f"{fn}: {k} of shape {list(t.shape)} does not broadcast to "
                             f"{list(want)}")
    res = mat_mul(concat([data, h], 1), kernel) + bias
    i, j, f, o = split(res, 4, 1)
    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)
    return [new_c, tanh(new_c) * sigmoid(o)]


@export(method=False)
def multi_rnn_cell(lstm_cells, data, c, h):
    """Stacked cells: cell k takes the h output of cell k - 1 (``data`` for the first) with
    its own ``c[k]``, ``h[k]``. Each cell is a function (data, c, h) -> [new_c, new_h].
    Returns ``[new_cs, new_hs]`` (lists, one per cell).

    >>> import flowgrad as tf
    >>> def cell(inputs):        # a cell with kernel [inputs + 1, 4]: one unit
    ...     k = tf.ones([inputs + 1, 4])
    ...     return lambda d, c, h: tf.basic_lstm_cell(1.0, k, tf.zeros([4]), d, c, h)
    >>> cs, hs = tf.multi_rnn_cell([cell(2), cell(1)], tf.ones([1, 2]),
    ...                            [tf.ones([1, 1])] * 2, [tf.ones([1, 1])] * 2)
    >>> len(cs), hs[1].shape
    (2, (1, 1))
    """
    fn = "multi_rnn_cell"
    if not isinstance(lstm_cells, (list, tuple)):
        raise ArgumentError(f"{fn}: lstm_cells must be a list of cell functions (data, c, h) "
                            f"-> [c, h], got {describe(lstm_cells)}")
    cells = list(lstm_cells)
    if not isinstance(c, (list, tuple)) or not isinstance(h, (list, tuple)) or \
            not len(c) == len(h) == len(cells):
        raise ArgumentError(f"{fn}: c and h must be lists with one state per cell "
                            f"({len(cells)} cells), got {_count(c)} and {_count(h)}")
    inp = as_float(data, fn, "data")
    new_c, new_h = [], []
    for k, cell in enumerate(cells):
        if not callable(cell):
            raise ArgumentError(f"{fn}: lstm_cells[{k}] must be a function (data, c, h) -> "
                                f"[c, h], got {type(cell).__name__}")
        like = met_float(inp, c[k], h[k])
        ck, hk = cell(inp, as_float(c[k], fn, f"c[{k}]", like),
                      as_float(h[k], fn, f"h[{k}]", like))
        new_c.append(ck)
        new_h.append(hk)
        inp = hk
    return [new_c, new_h]


def _count(v):
    return f"{len(v)} states" if isinstance(v, (list, tuple)) else type(v).__name__
