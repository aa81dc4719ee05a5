"""``tf.losses``: the loss functions of TF.js, as composites of flowgrad ops.

Each loss computes its per-element (or per-row) losses and hands them to
compute_weighted_loss, which applies the weights and the reduction, as TF.js does. The
gradients come from the ops they are built of (softmax_cross_entropy's rows are one kernel,
ops/nn.py, whose rules are ops too), so every smooth loss has second derivatives, and
softmax_cross_entropy's gradient w.r.t. the labels is the true one (-log_softmax·dy, where
TF.js's custom gradient gives (labels - softmax)·dy).
"""
import enum

import numpy as np

from .. import dtypes
from ..batching import VmapError
from ..errors import ArgumentError, DisposedError, DtypeError, JitError, ShapeError
from ..tensor import Tensor
from ._core import as_float, as_number, as_tensor, cast, export, met_float, norm_axis
from .activations import relu, softplus
from .binary import minimum, squared_difference
from .creation import one_hot
from .logical import not_equal, where
from .nn import log_softmax, softmax_cross_entropy_mean, softmax_cross_entropy_rows
from .shape import broadcast_to


class Reduction(enum.IntEnum):
    """How a loss reduces its weighted per-element losses (TF.js's values).

    NONE keeps them; SUM adds them; MEAN divides the sum by the sum of the weights;
    SUM_BY_NONZERO_WEIGHTS (the default) divides it by the number of non-zero weights.

    >>> import flowgrad as tf
    >>> tf.losses.Reduction.MEAN
    <Reduction.MEAN: 1>
    """
    NONE = 0
    MEAN = 1
    SUM = 2
    SUM_BY_NONZERO_WEIGHTS = 3


export(Reduction, method=False, name="Reduction")                   # tf.Reduction (TF.js)
export(Reduction, method=False, name="Reduction", namespace="losses")
_DEFAULT = Reduction.SUM_BY_NONZERO_WEIGHTS


def _reduction(r, fn):
    """A Reduction from a member, its int value or its name (any case)."""
    if isinstance(r, Reduction):
        return r
    if isinstance(r, str) and r.upper() in Reduction.__members__:
        return Reduction[r.upper()]
    if isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= 3:
        return Reduction(r)
    raise ArgumentError(f"{fn}: Unknown reduction: {r!r}. Use tf.losses.Reduction.NONE, "
                        f"MEAN, SUM or SUM_BY_NONZERO_WEIGHTS.")


def _common(a, b):
    """Two float tensors of one dtype (float64 wins)."""
    if a.dtype != b.dtype:
        a, b = cast(a, dtypes.float64), cast(b, dtypes.float64)
    return a, b


def _pair(a, b, fn, camel, names):
    """labels and predictions as float tensors of one dtype and the same shape."""
    like = met_float(a, b)
    a, b = _common(as_float(a, fn, names[0], like), as_float(b, fn, names[1], like))
    if a.shape != b.shape:
        raise ShapeError(f"Error in {camel}: Shapes {list(a.shape)} and {list(b.shape)} must "
                         f"match: '{names[0]}' and '{names[1]}' need the same shape.")
    return a, b


def _number(v, what, fn, lo, lo_ok=True, hi=None):
    v = as_number(v, what, fn)
    if not (v >= lo if lo_ok else v > lo) or (hi is not None and v > hi):
        rng = f"{'>=' if lo_ok else '>'} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        raise ArgumentError(f"{fn}: {what} must be {rng}, got {v:g}")
    return v


@export(namespace="losses")
def compute_weighted_loss(losses, weights=None, reduction=_DEFAULT):
    """losses multiplied by ``weights`` (broadcast to the losses' shape), then reduced.

    NONE: the weighted losses. SUM: their sum. MEAN: sum / sum(broadcast weights).
    SUM_BY_NONZERO_WEIGHTS: sum / the number of non-zero broadcast weights. Without
    weights, MEAN and SUM_BY_NONZERO_WEIGHTS are the mean.

    NOTE: when every weight is zero (MEAN: when the weights sum to zero) the result is 0
    with a zero gradient, as TF Python's losses give; TF.js divides 0 by 0 and gives NaN.

    >>> import flowgrad as tf
    >>> tf.losses.compute_weighted_loss(tf.tensor([1, 2, 3]), tf.tensor([1, 0, 1])).print()
    Tensor
        2
    """
    return _weighted(as_float(losses, "compute_weighted_loss", "losses"), weights, reduction,
                     "compute_weighted_loss")


def _weighted(losses, weights, reduction, fn):
    red = _reduction(reduction, fn)
    if weights is None:
        if red == Reduction.NONE:
            if losses.is_disposed:      # (returned as they are: no kernel checks them)
                raise DisposedError(f"{fn}: Tensor is disposed: the losses were disposed "
                                    f"(by dispose() or by the tidy() that created them)")
            return losses
        if red != Reduction.SUM and losses.size == 0:
            raise ShapeError(f"{fn}: the losses are empty (shape {list(losses.shape)}): their "
                             f"mean is undefined (use reduction=Reduction.SUM or NONE)")
        return losses.sum() if red == Reduction.SUM else losses.mean()
    w = as_float(weights, fn, "weights", losses.dtype)
    if len(w.shape) > len(losses.shape) or any(
            a != 1 and a != b for a, b in zip(reversed(w.shape), reversed(losses.shape))):
        raise ShapeError(f"{fn}: weights of shape {list(w.shape)} do not broadcast to the "
                         f"losses' shape {list(losses.shape)}: give a scalar, or weights of "
                         f"the losses' rank whose axes are 1 or the losses' length.")
    if w.dtype != losses.dtype:
        w = cast(w, losses.dtype)        # the weights never change the loss's dtype
    weighted = losses * w
    if red == Reduction.NONE:
        return weighted
    total = weighted.sum()
    if red == Reduction.SUM:
        return total
    if red == Reduction.MEAN:
        den = w.sum() * (losses.size / max(w.size, 1))
        zero = den == 0
        return where(zero, 0, total / where(zero, 1, den))
    # SUM_BY_NONZERO_WEIGHTS: the count is a constant (not_equal has no gradient)
    count = not_equal(broadcast_to(w, losses.shape), 0).cast(w.dtype).sum()
    return total / count.maximum(1)


@export(namespace="losses")
def absolute_difference(labels, predictions, weights=None, reduction=_DEFAULT):
    """|labels - predictions|, weighted and reduced (see compute_weighted_loss).

    >>> import flowgrad as tf
    >>> tf.losses.absolute_difference(tf.tensor([1, 2]), tf.tensor([2, 4])).print()
    Tensor
        1.5
    """
    y, p = _pair(labels, predictions, "absolute_difference", "absoluteDifference",
                 ("labels", "predictions"))
    return _weighted((y - p).abs(), weights, reduction, "absolute_difference")


@export(namespace="losses")
def mean_squared_error(labels, predictions, weights=None, reduction=_DEFAULT):
    """(labels - predictions)², weighted and reduced (see compute_weighted_loss).

    >>> import flowgrad as tf
    >>> tf.losses.mean_squared_error(tf.tensor([1, 2]), tf.tensor([2, 4])).print()
    Tensor
        2.5
    """
    y, p = _pair(labels, predictions, "mean_squared_error", "meanSquaredError",
                 ("labels", "predictions"))
    return _weighted(squared_difference(y, p), weights, reduction, "mean_squared_error")


@export(namespace="losses")
def cosine_distance(labels, predictions, axis, weights=None, reduction=_DEFAULT):
    """1 - sum(labels·predictions) along ``axis`` (kept, with length 1): the cosine
    distance of unit vectors. As in TF.js the inputs are not normalized: give unit vectors.

    >>> import flowgrad as tf
    >>> tf.losses.cosine_distance(tf.tensor([[1, 0]]), tf.tensor([[0.5, 0.5]]), 1).print()
    Tensor
        0.5
    """
    fn = "cosine_distance"
    y, p = _pair(labels, predictions, fn, "cosineDistance", ("labels", "predictions"))
    a = norm_axis(axis, y.rank, fn)
    return _weighted(1 - (y * p).sum(a, True), weights, reduction, fn)


@export(namespace="losses")
def hinge_loss(labels, predictions, weights=None, reduction=_DEFAULT):
    """max(0, 1 - y·predictions) with labels in {0, 1} mapped to y in {-1, 1}.

    >>> import flowgrad as tf
    >>> tf.losses.hinge_loss(tf.tensor([0, 1]), tf.tensor([-2, 0.5])).print()
    Tensor
        0.25
    """
    y, p = _pair(labels, predictions, "hinge_loss", "hingeLoss", ("labels", "predictions"))
    return _weighted(relu(1 - (y * 2 - 1) * p), weights, reduction, "hinge_loss")


@export(namespace="losses")
def huber_loss(labels, predictions, weights=None, delta=1.0, reduction=_DEFAULT):
    """0.5·e² where e = |predictions - labels| <= delta, delta·(e - 0.5·delta) beyond.

    >>> import flowgrad as tf
    >>> tf.losses.huber_loss(tf.tensor([0, 0]), tf.tensor([0.5, 3])).print()
    Tensor
        1.3125
    """
    fn = "huber_loss"
    y, p = _pair(labels, predictions, fn, "huberLoss", ("labels", "predictions"))
    delta = _number(delta, "delta", fn, 0, lo_ok=False)
    err = (p - y).abs()
    quadratic = minimum(err, delta)
    losses = quadratic.square() * 0.5 + (err - quadratic) * delta
    return _weighted(losses, weights, reduction, fn)


@export(namespace="losses")
def log_loss(labels, predictions, weights=None, epsilon=1e-7, reduction=_DEFAULT):
    """-labels·log(predictions + ε) - (1 - labels)·log(1 - predictions + ε), for
    predictions that are probabilities.

    >>> import flowgrad as tf
    >>> tf.losses.log_loss(tf.tensor([1, 0]), tf.tensor([0.5, 0.5]), epsilon=0).print()
    Tensor
        0.6931471824645996
    """
    fn = "log_loss"
    y, p = _pair(labels, predictions, fn, "logLoss", ("labels", "predictions"))
    eps = _number(epsilon, "epsilon", fn, 0)
    losses = -(y * (p + eps).log()) - (1 - y) * (1 - p + eps).log()
    return _weighted(losses, weights, reduction, fn)


@export(namespace="losses")
def sigmoid_cross_entropy(multi_class_labels, logits, weights=None, label_smoothing=0,
                          reduction=_DEFAULT):
    """Cross entropy of sigmoid(logits) against labels z, from the logits:
    max(x, 0) - x·z + log(1 + exp(-|x|)) = softplus(x) - x·z, which never overflows.

    label_smoothing s moves the labels toward 1/2: z·(1 - s) + s/2.

    >>> import flowgrad as tf
    >>> tf.losses.sigmoid_cross_entropy(tf.tensor([1, 0]), tf.tensor([0, 0])).print()
    Tensor
        0.6931471824645996
    """
    fn = "sigmoid_cross_entropy"
    z, x = _pair(multi_class_labels, logits, fn, "sigmoidCrossEntropy",
                 ("multi_class_labels", "logits"))
    s = _number(label_smoothing, "label_smoothing", fn, 0, hi=1)
    if s > 0:
        z = z * (1 - s) + 0.5 * s
    return _weighted(softplus(x) - x * z, weights, reduction, fn)


@export(namespace="losses")
def softmax_cross_entropy(onehot_labels, logits, weights=None, label_smoothing=0,
                          reduction=_DEFAULT):
    """Cross entropy of softmax(logits) against label distributions, along the last axis:
    -sum(labels·log_softmax(logits)), one loss per row (the leading axes).

    label_smoothing s moves the labels toward uniform: labels·(1 - s) + s/num_classes.
    Gradients: logits, softmax·sum(labels) - labels (softmax - labels for rows of labels
    that sum to 1, TF.js's formula); labels, -log_softmax(logits) (TF.js: labels - softmax).

    >>> import flowgrad as tf
    >>> tf.losses.softmax_cross_entropy(tf.tensor([[1, 0]]), tf.tensor([[0, 0]])).print()
    Tensor
        0.6931471824645996
    """
    fn = "softmax_cross_entropy"
    shape = None            # (a ragged list's shape is left to _pair's error)
    if isinstance(onehot_labels, (Tensor, np.ndarray)):
        shape = onehot_labels.shape
    elif isinstance(onehot_labels, (list, tuple)):
        try:
            shape = np.shape(onehot_labels)
        except ValueError:
            pass
    xshape = getattr(logits, "shape", None)
    if shape is not None and xshape is not None and len(xshape) >= 1 and \
            tuple(shape) == tuple(xshape[:-1]):
        raise ShapeError(f"Error in softmaxCrossEntropy: Shapes {list(shape)} and "
                         f"{list(xshape)} must match: onehot_labels holds one row of class "
                         f"probabilities per example. For integer class labels (one per "
                         f"example), use tf.losses.sparse_softmax_cross_entropy(labels, logits)"
                         f", or tf.one_hot(labels, {xshape[-1]}).")
    y, x = _pair(onehot_labels, logits, fn, "softmaxCrossEntropy", ("onehot_labels", "logits"))
    if x.rank == 0:
        raise ShapeError(f"{fn}: logits must have a class axis (rank >= 1), got a scalar")
    if x.shape[-1] == 0:
        raise ShapeError(f"{fn}: logits of shape {list(x.shape)} have no classes (the last "
                         f"axis is empty): a softmax needs at least one")
    s = _number(label_smoothing, "label_smoothing", fn, 0, hi=1)
    if s > 0:
        # NOTE: TF.js divides by shape[1], the class count only for rank 2; the classes
        # are the last axis (the softmax axis) at every rank
        y = y * (1 - s) + s / x.shape[-1]
    if weights is None and x.size and _reduction(reduction, fn) in (
            Reduction.MEAN, Reduction.SUM_BY_NONZERO_WEIGHTS):
        return softmax_cross_entropy_mean(y, x)       # (the rows' mean, as _weighted's)
    return _weighted(softmax_cross_entropy_rows(y, x), weights, reduction, fn)


def _class_labels(labels, lead, classes, fn):
    """The labels as an int32 tensor of shape ``lead`` (a trailing axis of length 1 is
    dropped, as Keras allows), each checked to be a class index in [0, classes); and None,
    or, where the values cannot be read (labels traced by tf.jit or batched by tf.vmap),
    the bool tensor of the labels that are class indices."""
    y = as_tensor(labels, fn, "labels")
    if y.dtype == dtypes.bool_ or y.dtype not in (dtypes.int32, *dtypes.FLOATS):
        raise DtypeError(f"{fn}: labels must hold integer class indices (int32), got a "
                         f"{y.dtype} tensor. For one-hot or soft labels use "
                         f"tf.losses.softmax_cross_entropy.")
    if y.shape == lead + (1,):
        y = y.reshape(list(lead))
    if y.shape != lead:
        hint = (" (labels of the logits' shape are one-hot rows: use "
                "tf.losses.softmax_cross_entropy)" if y.shape == lead + (classes,) else "")
        raise ShapeError(f"{fn}: labels of shape {list(y.shape)} do not match logits of shape "
                         f"{list(lead + (classes,))}: give one class index per row of logits, "
                         f"labels of shape {list(lead)}{hint}")
    try:
        values = y.numpy()
    except (JitError, VmapError):
        # NOTE: values that differ per replay or per example are checked by ops instead: a
        # row whose label is not a class index gets a NaN loss
        ok = (y >= 0) & (y < classes)
        if y.dtype != dtypes.int32:
            ok = ok & (y == y.floor())
            y = cast(y, dtypes.int32)
        return y, ok
    if y.dtype != dtypes.int32:
        # (tf.tensor([0, 2]) is float32, as JS numbers are: whole numbers are accepted)
        bad = values[values != np.floor(values)]
        if bad.size:
            raise DtypeError(f"{fn}: labels must be whole class indices, got "
                             f"{float(bad.flat[0]):g}: give an int32 tensor "
                             f"(tf.tensor(labels, dtype='int32')).")
        y = cast(y, dtypes.int32)
    if values.size:
        lo, hi = values.min(), values.max()
        if lo < 0 or hi >= classes:
            v = lo if lo < 0 else hi
            raise ArgumentError(f"{fn}: label {v:g} is out of range: logits of shape "
                                f"{list(lead + (classes,))} have {classes} classes, so labels "
                                f"must be in [0, {classes - 1}].")
    return y, None


@export(namespace="losses")
def sparse_softmax_cross_entropy(labels, logits, weights=None, reduction=_DEFAULT):
    """Cross entropy of softmax(logits) against integer class labels (TF Python's
    ``tf.losses.sparse_softmax_cross_entropy``, PyTorch's ``cross_entropy`` with class
    indices): -log_softmax(logits)[..., label], one loss per row, then weighted and reduced
    as ``softmax_cross_entropy`` (the default reduction is the mean over rows with a
    non-zero weight; see compute_weighted_loss).

    ``labels`` has the logits' leading shape (a trailing axis of length 1 is accepted), each
    entry a class index in [0, num_classes): int32, or whole numbers in a float tensor. A
    label out of range raises an ArgumentError (inside tf.jit or tf.vmap, where the labels'
    values cannot be read, its row's loss is NaN instead). The gradient flows to the logits:
    softmax(logits) - one_hot(labels) per row (times dy), and on to every order; labels
    have none.

    >>> import flowgrad as tf
    >>> logits = tf.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> loss = tf.losses.sparse_softmax_cross_entropy(tf.tensor([0, 2], dtype="int32"), logits)
    >>> round(loss.item(), 4)
    0.6691
    """
    fn = "sparse_softmax_cross_entropy"
    x = as_float(logits, fn, "logits")
    if x.rank == 0:
        raise ShapeError(f"{fn}: logits must have a class axis (rank >= 1), got a scalar")
    lead, classes = x.shape[:-1], x.shape[-1]
    if classes == 0:
        raise ShapeError(f"{fn}: logits of shape {list(x.shape)} have no classes (the last "
                         f"axis is the class axis)")
    y, ok = _class_labels(labels, lead, classes, fn)
    # NOTE: a where, not one_hot * log_softmax: a logit of -inf (a masked class) gives
    # log_softmax -inf, and 0 * -inf would be NaN. It reads no index, so it runs as it is
    # under tf.jit and tf.vmap.
    pick = one_hot(y, classes, dtype=dtypes.bool_)
    losses = -where(pick, log_softmax(x, -1), 0).sum(-1)
    if ok is not None:
        losses = where(ok, losses, float("nan"))
    return _weighted(losses, weights, reduction, fn)
