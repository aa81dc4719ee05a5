"""tf.losses: every loss and every reduction against formulas written here in NumPy,
gradients against finite differences (order 2 for the smooth losses), label smoothing,
weights broadcasting (hypothesis), the mathematically right softmax_cross_entropy
gradients, stability for large logits, and every error message."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowgrad as tf
from flowgrad.errors import ArgumentError, ShapeError
from opcheck import BACKENDS, Case, run_case

R = tf.losses.Reduction
L = tf.losses


# ---------------------------------------------------------------- NumPy references

def reduce_ref(losses, weights=None, reduction=R.SUM_BY_NONZERO_WEIGHTS):
    """TF's compute_weighted_loss: weights broadcast to the losses' shape."""
    w = np.ones_like(losses) if weights is None else np.broadcast_to(weights, losses.shape)
    wl = losses * w
    if reduction == R.NONE:
        return wl
    if reduction == R.SUM:
        return wl.sum()
    if reduction == R.MEAN:
        return wl.sum() / w.sum()
    return wl.sum() / np.count_nonzero(w)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def huber(y, p, delta=1.0):
    e = np.abs(p - y)
    return np.where(e <= delta, 0.5 * e ** 2, delta * e - 0.5 * delta ** 2)


ELEMENTWISE = {   # name -> (per-element loss of (labels, predictions), extra kwargs)
    "absolute_difference": (lambda y, p: np.abs(y - p), {}),
    "mean_squared_error": (lambda y, p: (y - p) ** 2, {}),
    "hinge_loss": (lambda y, p: np.maximum(0, 1 - (2 * y - 1) * p), {}),
    "huber_loss": (huber, {}),
    "log_loss": (lambda y, p: -y * np.log(p + 1e-7) - (1 - y) * np.log(1 - p + 1e-7), {}),
    "sigmoid_cross_entropy": (lambda z, x: -z * np.log(sigmoid(x))
                              - (1 - z) * np.log(1 - sigmoid(x)), {}),
}

RNG = np.random.default_rng(7)
LABELS01 = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
PROBS = RNG.uniform(0.1, 0.9, (2, 3))
SOFT_LABELS = RNG.uniform(0.0, 1.0, (2, 3))
W_ZEROS = np.array([[1.0, 0.0, 2.0], [0.5, 0.0, 1.5]])   # constants: the count of
W_ROW = np.array([[2.0], [0.0]])                          # non-zeros is not smooth in them


def inputs_for(name):
    if name == "log_loss":
        return [SOFT_LABELS, PROBS]
    if name == "hinge_loss":
        return [LABELS01, ((2, 3), "real")]
    if name == "sigmoid_cross_entropy":
        return [SOFT_LABELS, ((2, 3), "real")]
    if name == "huber_loss":
        return [((2, 3), "real"), ((2, 3), "real")]
    return [((2, 3), "real"), ((2, 3), "real")]


def elementwise_cases():
    out = []
    for name, (ref, kw) in ELEMENTWISE.items():
        fn = getattr(L, name)
        for red in R:
            for wname, w in (("none", None), ("zeros", W_ZEROS), ("row", W_ROW)):
                if red == R.MEAN and wname == "row":
                    continue
                out.append(Case(
                    f"{name}[{red.name},{wname}]",
                    (lambda f, w, r: lambda y, p: f(y, p, w, reduction=r))(fn, w, red),
                    (lambda g, w, r: lambda y, p: reduce_ref(g(y, p), w, r))(ref, w, red),
                    inputs_for(name),
                    order=2 if (red == R.SUM_BY_NONZERO_WEIGHTS and wname == "none") else 1))
    return out


def sce_ref(z, x, s=0.0):
    z = z * (1 - s) + 0.5 * s
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def softmax_ce_ref(y, x, s=0.0):
    y = y * (1 - s) + s / x.shape[-1]
    return -(y * log_softmax(x)).sum(-1)


CASES = elementwise_cases() + [
    Case("huber_loss[delta=0.5]", lambda y, p: L.huber_loss(y, p, delta=0.5),
         lambda y, p: huber(y, p, 0.5).mean(), [((2, 3), "real"), ((2, 3), "real")]),
    Case("log_loss[eps=0]", lambda y, p: L.log_loss(y, p, epsilon=0, reduction=R.NONE),
         lambda y, p: -y * np.log(p) - (1 - y) * np.log(1 - p), [SOFT_LABELS, PROBS]),
    Case("cosine_distance[axis=1]", lambda y, p: L.cosine_distance(y, p, 1),
         lambda y, p: (1 - (y * p).sum(1, keepdims=True)).mean(),
         [((2, 3), "real"), ((2, 3), "real")]),
    Case("cosine_distance[axis=0,NONE]", lambda y, p: L.cosine_distance(y, p, 0,
                                                                       reduction=R.NONE),
         lambda y, p: 1 - (y * p).sum(0, keepdims=True), [((2, 3), "real"), ((2, 3), "real")]),
    Case("cosine_distance[axis=-1,weights]",
         lambda y, p: L.cosine_distance(y, p, -1, np.array([[1.0], [0.0]])),
         lambda y, p: reduce_ref(1 - (y * p).sum(-1, keepdims=True), np.array([[1.0], [0.0]])),
         [((2, 3), "real"), ((2, 3), "real")]),
    Case("sigmoid_cross_entropy[stable_form]", lambda z, x: L.sigmoid_cross_entropy(
        z, x, reduction=R.NONE), sce_ref, [SOFT_LABELS, ((2, 3), "real")], order=3),
    Case("sigmoid_cross_entropy[smoothing=0.2]", lambda z, x: L.sigmoid_cross_entropy(
        z, x, label_smoothing=0.2, reduction=R.SUM),
         lambda z, x: sce_ref(z, x, 0.2).sum(), [LABELS01, ((2, 3), "real")]),
    Case("softmax_cross_entropy", L.softmax_cross_entropy,
         lambda y, x: softmax_ce_ref(y, x).mean(), [((2, 3), "real"), ((2, 3), "real")],
         order=3),
    Case("softmax_cross_entropy[MEAN]",
         lambda y, x: L.softmax_cross_entropy(y, x, reduction=R.MEAN),
         lambda y, x: softmax_ce_ref(y, x).mean(), [SOFT_LABELS, ((2, 3), "real")], order=3),
    # (its cotangent then depends on the inputs: the gradient kernel's rule in dy counts)
    Case("softmax_cross_entropy[squared]", lambda y, x: L.softmax_cross_entropy(y, x) ** 2,
         lambda y, x: softmax_ce_ref(y, x).mean() ** 2, [SOFT_LABELS, ((2, 3), "real")],
         order=3),
    Case("softmax_cross_entropy[rank3,smoothing=0.2]",
         lambda y, x: L.softmax_cross_entropy(y, x, label_smoothing=0.2),
         lambda y, x: softmax_ce_ref(y, x, 0.2).mean(), [((2, 2, 3), "real"),
                                                         ((2, 2, 3), "real")], order=2),
    Case("softmax_cross_entropy[NONE]",
         lambda y, x: L.softmax_cross_entropy(y, x, reduction=R.NONE), softmax_ce_ref,
         [SOFT_LABELS, ((2, 3), "real")]),
    Case("softmax_cross_entropy[smoothing=0.3]",
         lambda y, x: L.softmax_cross_entropy(y, x, label_smoothing=0.3, reduction=R.NONE),
         lambda y, x: softmax_ce_ref(y, x, 0.3), [LABELS01, ((2, 3), "real")]),
    Case("softmax_cross_entropy[rank3,weights,MEAN]",
         lambda y, x: L.softmax_cross_entropy(y, x, [[1.0, 3.0]], 0.1, R.MEAN),
         lambda y, x: reduce_ref(softmax_ce_ref(y, x, 0.1), np.array([[1.0, 3.0]]), R.MEAN),
         [((2, 2, 3), "real"), ((2, 2, 3), "real")]),
    Case("softmax_cross_entropy[rank1]", L.softmax_cross_entropy,
         lambda y, x: softmax_ce_ref(y, x), [((4,), "real"), ((4,), "real")]),
    # differentiable weights (non-zero, so the count is constant near them)
    *[Case(f"compute_weighted_loss[{red.name},dweights]",
           (lambda r: lambda l, w: L.compute_weighted_loss(l, w, r))(red),
           (lambda r: lambda l, w: reduce_ref(l, w, r))(red), [((2, 3), "real"), ((3,), "pos")])
      for red in R],
    *[Case(f"compute_weighted_loss[{red.name},no weights]",
           (lambda r: lambda l: L.compute_weighted_loss(l, reduction=r))(red),
           (lambda r: lambda l: reduce_ref(l, None, r))(red), [((2, 3), "real")])
      for red in R],
    Case("compute_weighted_loss[scalar weight]",
         lambda l, w: L.compute_weighted_loss(l, w.reshape([])),
         lambda l, w: reduce_ref(l, w.reshape(())), [((2, 3), "real"), ((1,), "pos")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- properties

@st.composite
def losses_and_weights(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
    # weights: a suffix of the shape, any axis possibly 1
    k = draw(st.integers(0, len(shape)))
    wshape = tuple(draw(st.sampled_from([1, s])) for s in shape[len(shape) - k:])
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    losses = rng.normal(size=shape)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], size=wshape)
    if not np.any(weights):
        weights = np.ones(wshape)
    return losses, weights, draw(st.sampled_from(list(R)))


@settings(max_examples=60, deadline=None)
@given(losses_and_weights())
def test_weights_broadcast_every_reduction(problem):
    losses, weights, red = problem
    got = L.compute_weighted_loss(tf.tensor(losses, dtype="float64"),
                                  tf.tensor(weights, dtype="float64"), red)
    want = reduce_ref(losses, weights, red)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- fixed points

def test_softmax_cross_entropy_gradients():
    """logits: softmax - labels (one-hot rows); labels: -log_softmax (TF.js: labels - p)."""
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    y = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    gy, gx = tf.grads(lambda a, b: L.softmax_cross_entropy(a, b, reduction=R.SUM))(
        [tf.tensor(y, dtype="float64"), tf.tensor(logits, dtype="float64")])
    np.testing.assert_allclose(gx.numpy(), np.exp(log_softmax(logits)) - y, rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), -log_softmax(logits), rtol=1e-12)
    # labels that do not sum to 1: the true gradient softmax·sum(labels) - labels
    y2 = y * 3
    gx = tf.grad(lambda b: L.softmax_cross_entropy(y2, b, reduction=R.SUM))(
        tf.tensor(logits, dtype="float64"))
    np.testing.assert_allclose(gx.numpy(), np.exp(log_softmax(logits)) * 3 - y2, rtol=1e-12)


def test_softmax_cross_entropy_rows_are_one_kernel_each_way():
    """The rows' losses are one kernel forward and one backward (what a training step's loss
    costs), with the composite's values, under tf.jit, tf.vmap and a batched jacobian."""
    rng = np.random.default_rng(3)
    y = tf.tensor(rng.random((3, 4)), dtype="float64")
    x = tf.tensor(rng.standard_normal((3, 4)), dtype="float64")
    info = tf.profile(lambda: tf.grad(lambda b: L.softmax_cross_entropy(
        y, b, reduction=R.SUM))(x))
    assert info.kernel_names[:2] == ["SoftmaxCrossEntropy", "Sum"]
    assert "SoftmaxCrossEntropyGrad" in info.kernel_names
    assert not {"LogSoftmax", "Multiply", "Exp"} & set(info.kernel_names)
    want = -(y.numpy() * log_softmax(x.numpy())).sum(-1)
    rows = lambda a, b: L.softmax_cross_entropy(a, b, reduction=R.NONE)    # noqa: E731
    np.testing.assert_allclose(tf.jit(rows)(y, x).numpy(), want, rtol=1e-14)
    ys = tf.tensor(rng.random((2, 3, 4)))
    xs = tf.tensor(rng.standard_normal((2, 3, 4)))
    np.testing.assert_allclose(
        tf.vmap(rows)(ys, xs).numpy(),
        -(ys.numpy() * log_softmax(xs.numpy())).sum(-1), rtol=1e-6)
    # each row's loss depends on its own row only: the jacobian is block diagonal, each block
    # softmax·sum(labels) - labels (worked out by hand)
    J = tf.jacobian(lambda b: rows(y, b))(x).numpy()
    p = np.exp(log_softmax(x.numpy()))
    for i in range(3):
        for k in range(3):
            block = p[i] * y.numpy()[i].sum() - y.numpy()[i] if i == k else np.zeros(4)
            np.testing.assert_allclose(J[i, k], block, rtol=1e-12, atol=1e-15)


def test_softmax_cross_entropy_mean_is_one_kernel_each_way():
    """The default reduction (the rows' mean, a training step's loss) is one kernel forward
    and one backward, with the composite's bits; per example under tf.vmap, and its
    jacobian and hessian in logits (batched cotangents) as worked out by hand."""
    rng = np.random.default_rng(4)
    for dt in ("float32", "float64"):
        y = tf.tensor(np.eye(5)[rng.integers(0, 5, 7)], dtype=dt)
        x = tf.tensor(rng.standard_normal((7, 5)) * 3, dtype=dt)
        info = tf.profile(lambda: tf.grad(lambda b: L.softmax_cross_entropy(y, b))(x))
        assert info.kernel_names == ["SoftmaxCrossEntropyMean", "SoftmaxCrossEntropyMeanGrad"]
        rows = lambda a, b: L.softmax_cross_entropy(a, b, reduction=R.NONE)   # noqa: E731
        for fused, composite in ((L.softmax_cross_entropy(y, x), rows(y, x).mean()),
                                 (tf.grad(lambda b: L.softmax_cross_entropy(y, b))(x),
                                  tf.grad(lambda b: rows(y, b).mean())(x))):
            assert fused.numpy().tobytes() == composite.numpy().tobytes()
    x64 = tf.tensor(rng.standard_normal((3, 4)))
    y64 = tf.tensor(rng.random((3, 4)))
    # per example (tf.vmap over a batch of 2 problems): each its own mean and gradient
    xs, ys = tf.tensor(rng.standard_normal((2, 3, 4))), tf.tensor(rng.random((2, 3, 4)))
    per = tf.vmap(lambda a, b: L.softmax_cross_entropy(a, b))(ys, xs).numpy()
    gper = tf.vmap(lambda b, a: tf.grad(lambda t: L.softmax_cross_entropy(a, t))(b))(
        xs, ys).numpy()
    for k in range(2):
        want = -(ys.numpy()[k] * log_softmax(xs.numpy()[k])).sum(-1).mean()
        np.testing.assert_allclose(per[k], want, rtol=1e-13)
        p = np.exp(log_softmax(xs.numpy()[k]))
        c = ys.numpy()[k].sum(-1, keepdims=True)
        np.testing.assert_allclose(gper[k], (p * c - ys.numpy()[k]) / 3, rtol=1e-12)
    # the hessian in logits: block diagonal over rows, each block c·(diag(p) - p pᵀ) / n
    H = tf.hessian(lambda b: L.softmax_cross_entropy(y64, b))(x64).numpy()
    p = np.exp(log_softmax(x64.numpy()))
    c = y64.numpy().sum(-1)
    for i in range(3):
        for k in range(3):
            block = c[i] * (np.diag(p[i]) - np.outer(p[i], p[i])) / 3 if i == k else 0
            np.testing.assert_allclose(H[i, :, k, :], block, rtol=1e-11, atol=1e-15)
    # through the gradient kernel's rule in labels: d/dy_ik of (p_ij·sum(y_i) - y_ij) / n
    J = tf.jacobian(lambda a: tf.grad(lambda b: L.softmax_cross_entropy(a, b))(x64))(
        y64).numpy()
    want = np.zeros((3, 4, 3, 4))
    for i in range(3):
        want[i, :, i, :] = (p[i][:, None] - np.eye(4)) / 3
    np.testing.assert_allclose(J, want, rtol=1e-12, atol=1e-15)
    # under tf.jit: the same values as eager
    step = tf.jit(lambda a, b: L.softmax_cross_entropy(a, b))
    np.testing.assert_allclose(step(y64, x64).numpy(),
                               L.softmax_cross_entropy(y64, x64).numpy(), rtol=1e-15)


def test_int_one_hot_labels_and_camel_case():
    labels = tf.one_hot(tf.tensor([1, 0], dtype="int32"), 3)            # int32
    logits = tf.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    out = tf.losses.softmaxCrossEntropy(labels, logits)
    assert out.dtype == "float32"
    np.testing.assert_allclose(out.item(), np.log(3), rtol=1e-6)
    assert tf.losses.meanSquaredError is L.mean_squared_error
    assert tf.Reduction is R and R.SUM_BY_NONZERO_WEIGHTS == 3 and R.NONE == 0
    assert L.mean_squared_error([1, 2], [3, 2], reduction="sum").item() == 4
    assert L.mean_squared_error([1, 2], [3, 2], reduction=2).item() == 4
    # float32 with float64 gives float64
    assert L.absolute_difference(tf.tensor([1.0]), tf.tensor([2.0], dtype="float64")).dtype \
        == "float64"


def test_stable_for_large_logits():
    x = tf.tensor([1000.0, -1000.0, 0.0])
    z = tf.tensor([0.0, 1.0, 1.0])
    out = L.sigmoid_cross_entropy(z, x, reduction=R.NONE).numpy()
    np.testing.assert_allclose(out, [1000, 1000, np.log(2)], rtol=1e-6)
    g = tf.grad(lambda t: L.sigmoid_cross_entropy(z, t, reduction=R.SUM))(x).numpy()
    np.testing.assert_allclose(g, [1, -1, -0.5], rtol=1e-6)
    big = tf.tensor([[1000.0, 0.0], [-1000.0, 1000.0]])
    out = L.softmax_cross_entropy(tf.tensor([[0.0, 1.0], [1.0, 0.0]]), big, reduction=R.NONE)
    np.testing.assert_allclose(out.numpy(), [1000, 2000], rtol=1e-6)
    g = tf.grad(lambda t: L.softmax_cross_entropy([[0.0, 1.0], [1.0, 0.0]], t))(big)
    assert np.all(np.isfinite(g.numpy()))


def test_all_zero_weights_give_zero():
    """TF.js divides 0 by 0 (NaN); flowgrad gives 0 and a zero gradient (TF Python)."""
    p = tf.tensor([1.0, 2.0])
    for red, w in ((R.SUM_BY_NONZERO_WEIGHTS, [0.0, 0.0]), (R.MEAN, [0.0, 0.0]),
                   (R.MEAN, [1.0, -1.0])):
        out = L.mean_squared_error([0.0, 0.0], p, w, reduction=red)
        assert out.item() == 0
        g = tf.grad(lambda t: L.mean_squared_error([0.0, 0.0], t, w, reduction=red))(p)
        np.testing.assert_array_equal(g.numpy(), [0, 0])


def test_hinge_and_huber_conventions():
    # hinge at the kink 1 - y·p = 0: relu'(0) = 0
    g = tf.grad(lambda p: L.hinge_loss([1.0], p))(tf.tensor([1.0]))
    np.testing.assert_array_equal(g.numpy(), [0])
    # huber: continuous slope at |e| = delta, e on both sides
    g = tf.grad(lambda p: L.huber_loss([0.0, 0.0, 0.0], p, reduction=R.SUM))(
        tf.tensor([-3.0, 0.5, 1.0]))
    np.testing.assert_allclose(g.numpy(), [-1, 0.5, 1])


def test_huber_smooth_order2_on_both_sides():
    # the quadratic part has curvature 1, the linear part 0
    h = tf.grad(lambda p: tf.grad(lambda q: L.huber_loss([0.0, 0.0], q,
                                                         reduction=R.SUM))(p).sum())
    np.testing.assert_allclose(h(tf.tensor([0.3, 2.0])).numpy(), [1, 0])


# ---------------------------------------------------------------- errors

A = tf.tensor([[1.0, 2.0, 3.0]])
B = tf.tensor([1.0, 2.0, 3.0])


@pytest.mark.parametrize("fn, cls, message", [
    (lambda: L.mean_squared_error(A, B), ShapeError,
     "Error in meanSquaredError: Shapes [1, 3] and [3] must match: 'labels' and "
     "'predictions' need the same shape."),
    (lambda: L.absolute_difference(A, B), ShapeError,
     "Error in absoluteDifference: Shapes [1, 3] and [3] must match"),
    (lambda: L.softmax_cross_entropy(A, B), ShapeError,
     "Error in softmaxCrossEntropy: Shapes [1, 3] and [3] must match: 'onehot_labels' and "
     "'logits'"),
    (lambda: L.sigmoid_cross_entropy(B, A), ShapeError,
     "Error in sigmoidCrossEntropy: Shapes [3] and [1, 3] must match"),
    (lambda: L.hinge_loss(A, B), ShapeError, "Error in hingeLoss: Shapes"),
    (lambda: L.huber_loss(A, B), ShapeError, "Error in huberLoss: Shapes"),
    (lambda: L.log_loss(A, B), ShapeError, "Error in logLoss: Shapes"),
    (lambda: L.cosine_distance(A, B, 0), ShapeError, "Error in cosineDistance: Shapes"),
    (lambda: L.mean_squared_error(B, B, reduction="average"), ArgumentError,
     "mean_squared_error: Unknown reduction: 'average'. Use tf.losses.Reduction.NONE, MEAN, "
     "SUM or SUM_BY_NONZERO_WEIGHTS."),
    (lambda: L.compute_weighted_loss(B, reduction=7), ArgumentError,
     "compute_weighted_loss: Unknown reduction: 7."),
    (lambda: L.compute_weighted_loss(B, [1.0, 2.0]), ShapeError,
     "compute_weighted_loss: weights of shape [2] do not broadcast to the losses' shape [3]"),
    (lambda: L.mean_squared_error(B, B, [[1.0], [2.0]]), ShapeError,
     "mean_squared_error: weights of shape [2, 1] do not broadcast to the losses' shape "
     "[3]"),
    (lambda: L.huber_loss(B, B, delta=0), ArgumentError, "huber_loss: delta must be > 0, got 0"),
    (lambda: L.huber_loss(B, B, delta="1"), ArgumentError,
     "huber_loss: delta must be a number, got '1'"),
    (lambda: L.log_loss(B, B, epsilon=-1e-3), ArgumentError,
     "log_loss: epsilon must be >= 0, got -0.001"),
    (lambda: L.sigmoid_cross_entropy(B, B, label_smoothing=1.5), ArgumentError,
     "sigmoid_cross_entropy: label_smoothing must be >= 0 and <= 1, got 1.5"),
    (lambda: L.softmax_cross_entropy(B, B, label_smoothing=-0.1), ArgumentError,
     "softmax_cross_entropy: label_smoothing must be >= 0 and <= 1, got -0.1"),
    (lambda: L.softmax_cross_entropy(tf.scalar(1.0), tf.scalar(1.0)), ShapeError,
     "softmax_cross_entropy: logits must have a class axis (rank >= 1), got a scalar"),
    (lambda: L.softmax_cross_entropy(tf.zeros([2, 0]), tf.zeros([2, 0])), ShapeError,
     "softmax_cross_entropy: logits of shape [2, 0] have no classes (the last axis is "
     "empty): a softmax needs at least one"),
    (lambda: L.cosine_distance(A, A, 2), ArgumentError,
     "cosine_distance: axis 2 is out of range for a tensor of rank 2"),
    (lambda: L.mean_squared_error({}, B), ArgumentError,
     "Argument 'labels' passed to 'mean_squared_error' must be a Tensor or TensorLike"),
    (lambda: L.softmax_cross_entropy(B, "x"), ArgumentError,
     "Argument 'logits' passed to 'softmax_cross_entropy'"),
], ids=["mse-shape", "abs-shape", "softmax-shape", "sigmoid-shape", "hinge-shape",
        "huber-shape", "log-shape", "cosine-shape", "reduction-str", "reduction-int",
        "weights-len", "weights-rank", "delta-0", "delta-str", "epsilon-neg", "smoothing-big",
        "smoothing-neg", "softmax-scalar", "softmax-no-classes", "cosine-axis", "labels-type", "logits-type"])
def test_errors(fn, cls, message):
    with pytest.raises(cls) as e:
        fn()
    assert message in str(e.value)
