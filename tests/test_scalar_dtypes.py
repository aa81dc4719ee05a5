"""A Python number takes the dtype of the tensors it meets, in every op (issue 27).

Each case gives one parameter of one op a Python number that float32 cannot represent
(0.1, or a list of them), with every tensor the op meets in float64, and compares the result
with the same formula written in float64 NumPy, to 1e-14. Converted alone, 0.1 becomes a
float32 tensor (0.10000000149...) that is then promoted: off by ~1e-9 relative, silently.

``test_every_parameter_that_takes_a_number_has_a_case`` walks the signatures of every op:
a parameter that could carry a number next to a tensor must have a case here, or be named
in NOT_A_FLOAT (axes, shapes, flags...) with the others of its kind.
"""
import inspect

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.ops import NAMESPACES, OPS

S = 0.1                       # float32 cannot hold it: 0.1f is 0.100000001490116...
F64 = "float64"
rng = np.random.default_rng(27)
XN = rng.uniform(0.2, 0.9, (2, 3))          # positive: pow, log_loss, lrn stay real
YN = rng.uniform(0.2, 0.9, (2, 3))
VN = rng.uniform(0.2, 0.9, (3,))
IMGN = rng.uniform(0.2, 0.9, (1, 2, 2, 3))


def t(a):
    return tf.keep(tf.tensor(a, dtype=F64))


X, Y, V, IMG = t(XN), t(YN), t(VN), t(IMGN)
AN = np.array([[2.0, 0.5], [0.25, 1.5]])      # well conditioned: solvers agree to ~1 ulp
A = t(AN)
IMG1 = t(IMGN[..., :1])
EXACT = t(np.array([0.1, 0.2, 0.05]))       # holds 0.1 itself: comparisons see the rounding


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _lstm(fb, kernel, bias, data, c, h):
    res = np.concatenate([data, h], 1) @ kernel + bias
    i, j, f, o = np.split(res, 4, 1)
    new_c = c * sigmoid(f + fb) + sigmoid(i) * np.tanh(j)
    return new_c, np.tanh(new_c) * sigmoid(o)


LK, LB = rng.uniform(-1, 1, (5, 12)), rng.uniform(-1, 1, (12,))
LD, LC, LH = rng.uniform(-1, 1, (1, 2)), rng.uniform(-1, 1, (1, 3)), rng.uniform(-1, 1, (1, 3))


def _lrn(x, radius, bias, alpha, beta):
    sq = np.pad(x * x, [(0, 0)] * 3 + [(radius, radius)])
    win = sum(sq[..., k:k + x.shape[-1]] for k in range(2 * radius + 1))
    return x / (bias + alpha * win) ** beta


def _bn(x, m, v, off, sc, eps):
    return (x - m) / np.sqrt(v + eps) * sc + off


def _kept(dropped):
    """dropout's result with its zeros filled by the kept value's formula (x / (1 - rate))."""
    d = dropped.numpy()
    assert 0 < (d != 0).sum(), "no element kept"
    return tf.tensor(np.where(d != 0, d, XN / (1 - S)), dtype=F64)


def _seeded(make, shape=(64,)):
    """(mean, spread) applied to the standard draw of the same seed."""
    return make(shape, 0.0, 1.0, F64, 7).numpy()


LS = [[S, S, S], [S, S, S]]        # a dtype-less list of 0.1s of X's shape
# op (as named in the table), parameter -> (call with the number, float64 NumPy reference)
CASES = {
    ("add", "a"): (lambda: tf.add(S, X), lambda: S + XN),
    ("add", "b"): (lambda: tf.add(X, S), lambda: XN + S),
    ("sub", "a"): (lambda: tf.sub(S, X), lambda: S - XN),
    ("sub", "b"): (lambda: tf.sub(X, LS), lambda: XN - S),
    ("mul", "a"): (lambda: tf.mul(LS, X), lambda: S * XN),
    ("mul", "b"): (lambda: X * S, lambda: XN * S),
    ("div", "a"): (lambda: S / X, lambda: S / XN),
    ("div", "b"): (lambda: tf.div(X, S), lambda: XN / S),
    ("div_no_nan", "a"): (lambda: tf.div_no_nan(S, X), lambda: S / XN),
    ("div_no_nan", "b"): (lambda: tf.div_no_nan(X, [S, S, S]), lambda: XN / S),
    ("floor_div", "a"): (lambda: tf.floor_div(S, X * 0.01), lambda: np.floor(S / (XN * 0.01))),
    ("floor_div", "b"): (lambda: tf.floor_div(X, S), lambda: np.floor(XN / S)),
    ("mod", "a"): (lambda: tf.mod(S, X * 0.3), lambda: np.mod(S, XN * 0.3)),
    ("mod", "b"): (lambda: tf.mod(X, S), lambda: np.mod(XN, S)),
    ("pow", "a"): (lambda: tf.pow(S, X), lambda: S ** XN),
    ("pow", "b"): (lambda: X ** S, lambda: XN ** S),
    ("atan2", "a"): (lambda: tf.atan2(S, X), lambda: np.arctan2(S, XN)),
    ("atan2", "b"): (lambda: tf.atan2(X, S), lambda: np.arctan2(XN, S)),
    ("squared_difference", "a"): (lambda: tf.squared_difference(S, X), lambda: (S - XN) ** 2),
    ("squared_difference", "b"): (lambda: tf.squared_difference(X, S), lambda: (XN - S) ** 2),
    ("maximum", "a"): (lambda: tf.maximum(S + 0.4, X), lambda: np.maximum(S + 0.4, XN)),
    ("maximum", "b"): (lambda: tf.maximum(X, LS), lambda: np.maximum(XN, S)),
    ("minimum", "a"): (lambda: tf.minimum(S + 0.4, X), lambda: np.minimum(S + 0.4, XN)),
    ("minimum", "b"): (lambda: tf.minimum(X, S + 0.4), lambda: np.minimum(XN, S + 0.4)),
    ("prelu", "b"): (lambda: tf.prelu(X - 0.5, S), lambda: np.where(XN > 0.5, XN - 0.5,
                                                                    S * (XN - 0.5))),
    ("leaky_relu", "alpha"): (lambda: tf.leaky_relu(X - 0.5, S),
                              lambda: np.where(XN > 0.5, XN - 0.5, S * (XN - 0.5))),
    ("step", "alpha"): (lambda: tf.step(X - 0.5, S), lambda: np.where(XN > 0.5, 1.0, S)),
    ("clip_by_value", "clip_value_min"): (lambda: tf.clip_by_value(EXACT, S, 1.0),
                                          lambda: np.clip([0.1, 0.2, 0.05], S, 1.0)),
    ("clip_by_value", "clip_value_max"): (lambda: tf.clip_by_value(X, 0.0, S + 0.4),
                                          lambda: np.clip(XN, 0.0, S + 0.4)),
    ("where", "a"): (lambda: tf.where(X > 0.5, S, X), lambda: np.where(XN > 0.5, S, XN)),
    ("where", "b"): (lambda: tf.where(X > 0.5, X, S), lambda: np.where(XN > 0.5, XN, S)),
    ("pad", "constant_value"): (lambda: tf.pad(X, [[1, 0], [0, 1]], S),
                                lambda: np.pad(XN, [(1, 0), (0, 1)], constant_values=S)),
    ("equal", "b"): (lambda: tf.equal(EXACT, S), lambda: np.array([True, False, False])),
    ("equal", "a"): (lambda: tf.equal([S, S, S], EXACT), lambda: np.array([True, False, False])),
    ("not_equal", "b"): (lambda: tf.not_equal(EXACT, S), lambda: np.array([False, True, True])),
    ("not_equal", "a"): (lambda: tf.not_equal(S, EXACT), lambda: np.array([False, True, True])),
    ("greater", "b"): (lambda: tf.greater(EXACT, S), lambda: np.array([False, True, False])),
    ("greater", "a"): (lambda: tf.greater(S, EXACT), lambda: np.array([False, False, True])),
    ("greater_equal", "b"): (lambda: tf.greater_equal(EXACT, S),
                             lambda: np.array([True, True, False])),
    ("greater_equal", "a"): (lambda: tf.greater_equal(S, EXACT),
                             lambda: np.array([True, False, True])),
    ("less", "b"): (lambda: tf.less(EXACT, S), lambda: np.array([False, False, True])),
    ("less", "a"): (lambda: tf.less(S, EXACT), lambda: np.array([False, True, False])),
    ("less_equal", "b"): (lambda: tf.less_equal(EXACT, S), lambda: np.array([True, False, True])),
    ("less_equal", "a"): (lambda: tf.less_equal(S, EXACT), lambda: np.array([True, True, False])),
    ("mat_mul", "a"): (lambda: tf.mat_mul([[S, S]], X), lambda: np.array([[S, S]]) @ XN),
    ("mat_mul", "b"): (lambda: tf.mat_mul(X, [[S], [S], [S]]), lambda: XN @ np.full((3, 1), S)),
    ("dot", "t1"): (lambda: tf.dot([S, S, S], V), lambda: np.dot([S, S, S], VN)),
    ("dot", "t2"): (lambda: tf.dot(X, [S, S, S]), lambda: XN @ np.full(3, S)),
    ("outer_product", "v1"): (lambda: tf.outer_product([S, 0.3], V),
                              lambda: np.outer([S, 0.3], VN)),
    ("outer_product", "v2"): (lambda: tf.outer_product(V, [S, 0.3]),
                              lambda: np.outer(VN, [S, 0.3])),
    ("conv1d", "filter"): (lambda: tf.conv1d(t(XN.reshape(1, 6, 1)), [[[S]]], 1, "valid"),
                           lambda: XN.reshape(1, 6, 1) * S),
    ("conv2d", "filter"): (lambda: tf.conv2d(IMG1, [[[[S]]]], 1, "valid"),
                           lambda: IMGN[..., :1] * S),
    ("conv2d", "x"): (lambda: tf.conv2d(IMGN[..., :1].tolist(), t([[[[0.3]]]]), 1, "valid"),
                      lambda: IMGN[..., :1] * 0.3),
    ("conv2d_transpose", "filter"): (
        lambda: tf.conv2d_transpose(IMG1, [[[[S]]]], [1, 2, 2, 1], 1, "valid"),
        lambda: IMGN[..., :1] * S),
    ("conv3d", "filter"): (lambda: tf.conv3d(t(XN.reshape(1, 1, 2, 3, 1)), [[[[[S]]]]], 1,
                                             "valid"), lambda: XN.reshape(1, 1, 2, 3, 1) * S),
    ("conv3d_transpose", "filter"): (
        lambda: tf.conv3d_transpose(t(XN.reshape(1, 1, 2, 3, 1)), [[[[[S]]]]],
                                    [1, 1, 2, 3, 1], 1, "valid"),
        lambda: XN.reshape(1, 1, 2, 3, 1) * S),
    ("depthwise_conv2d", "filter"): (lambda: tf.depthwise_conv2d(IMG1, [[[[S]]]], 1, "valid"),
                                     lambda: IMGN[..., :1] * S),
    ("separable_conv2d", "depthwise_filter"): (
        lambda: tf.separable_conv2d(IMG1, [[[[S]]]], t([[[[0.3]]]]), 1, "valid"),
        lambda: IMGN[..., :1] * S * 0.3),
    ("separable_conv2d", "pointwise_filter"): (
        lambda: tf.separable_conv2d(IMG1, t([[[[0.3]]]]), [[[[S]]]], 1, "valid"),
        lambda: IMGN[..., :1] * 0.3 * S),
    ("dilation2d", "filter"): (lambda: tf.dilation2d(IMG1, [[[S]]], 1, "valid"),
                               lambda: IMGN[..., :1] + S),
    ("local_response_normalization", "bias"): (
        lambda: tf.local_response_normalization(IMG, 1, S), lambda: _lrn(IMGN, 1, S, 1, 0.5)),
    ("local_response_normalization", "alpha"): (
        lambda: tf.local_response_normalization(IMG, 1, 1, S), lambda: _lrn(IMGN, 1, 1, S, 0.5)),
    ("local_response_normalization", "beta"): (
        lambda: tf.local_response_normalization(IMG, 1, 1, 1, S), lambda: _lrn(IMGN, 1, 1, 1, S)),
    ("basic_lstm_cell", "forget_bias"): (
        lambda: tf.basic_lstm_cell(0.73, t(LK), t(LB), t(LD), t(LC), t(LH))[0],
        lambda: _lstm(0.73, LK, LB, LD, LC, LH)[0]),
    ("basic_lstm_cell", "h"): (
        lambda: tf.basic_lstm_cell(t(0.73), t(LK), t(LB), t(LD), t(LC), [[S, S, S]])[1],
        lambda: _lstm(0.73, LK, LB, LD, LC, np.full((1, 3), S))[1]),
    ("basic_lstm_cell", "lstm_bias"): (
        lambda: tf.basic_lstm_cell(1.0, t(LK), S, t(LD), t(LC), t(LH))[0],
        lambda: _lstm(1.0, LK, S, LD, LC, LH)[0]),
    ("multi_rnn_cell", "c"): (
        lambda: tf.multi_rnn_cell([lambda d, c, h: tf.basic_lstm_cell(0.73, t(LK), t(LB), d,
                                                                      c, h)],
                                  t(LD), [[[S, S, S]]], [t(LH)])[0][0],
        lambda: _lstm(0.73, LK, LB, LD, np.full((1, 3), S), LH)[0]),
    ("dropout", "rate"): (lambda: _kept(tf.dropout(X, S, seed=3)), lambda: XN / (1 - S)),
    ("tensor_scatter_update", "updates"): (
        lambda: tf.tensor_scatter_update(V, [[1]], [S]), lambda: np.array([VN[0], S, VN[2]])),
    ("one_hot", "on_value"): (lambda: tf.one_hot([0, 2], 3, S, 0.3, F64),
                              lambda: np.array([[S, 0.3, 0.3], [0.3, 0.3, S]])),
    ("one_hot", "off_value"): (lambda: tf.one_hot([1], 2, 1.0, S, F64), lambda: np.array([[S, 1]])),
    ("range", "start"): (lambda: tf.range(S, 1.0, 0.25, F64), lambda: S + 0.25 * np.arange(4)),
    ("range", "step"): (lambda: tf.range(0, 0.5, S, F64), lambda: S * np.arange(5)),
    ("range", "stop"): (lambda: tf.range(0, S, 0.03, F64), lambda: 0.03 * np.arange(4)),
    ("random_normal", "mean"): (lambda: tf.random_normal([64], S, 1.0, F64, 7),
                                lambda: S + _seeded(tf.random_normal)),
    ("random_normal", "stddev"): (lambda: tf.random_normal([64], 0.0, S, F64, 7),
                                  lambda: S * _seeded(tf.random_normal)),
    ("truncated_normal", "mean"): (lambda: tf.truncated_normal([64], S, 1.0, F64, 7),
                                   lambda: S + _seeded(tf.truncated_normal)),
    ("truncated_normal", "stddev"): (lambda: tf.truncated_normal([64], 0.0, S, F64, 7),
                                     lambda: S * _seeded(tf.truncated_normal)),
    ("random_uniform", "minval"): (lambda: tf.random_uniform([64], S, 1.0, F64, 7),
                                   lambda: S + (1.0 - S) * _seeded(tf.random_uniform)),
    ("random_uniform", "maxval"): (lambda: tf.random_uniform([64], 0.0, S, F64, 7),
                                   lambda: S * _seeded(tf.random_uniform)),
    ("concat", "tensors"): (lambda: tf.concat([X, LS], 0), lambda: np.concatenate([XN, LS], 0)),
    ("stack", "tensors"): (lambda: tf.stack([LS, X]), lambda: np.stack([LS, XN])),
    ("add_n", "tensors"): (lambda: tf.add_n([X, LS, Y]), lambda: XN + S + YN),
    ("einsum", "tensors"): (lambda: tf.einsum("ij,ij->i", X, LS), lambda: (XN * S).sum(1)),
    ("meshgrid", "y"): (lambda: tf.meshgrid(V, [S, 0.3])[1], lambda: np.meshgrid(VN, [S, 0.3])[1]),
    ("meshgrid", "x"): (lambda: tf.meshgrid([S, 0.3], V)[0], lambda: np.meshgrid([S, 0.3], VN)[0]),
    ("search_sorted", "values"): (lambda: tf.search_sorted(EXACT[:2], S, "right"), lambda: 1),
    ("search_sorted", "sorted_sequence"): (lambda: tf.search_sorted([0.0, S], EXACT[:1]),
                                           lambda: np.array([1])),
    ("lower_bound", "values"): (lambda: tf.lower_bound(t([0.05, 0.1]), [S]), lambda: [1]),
    ("upper_bound", "values"): (lambda: tf.upper_bound(t([0.05, 0.1]), [S]), lambda: [2]),
}
# batch_norm: mean, variance, offset and scale have one rank (TF.js), so the number comes as
# a list of three (one per channel); variance_epsilon is a plain number
_BN = {"mean": VN, "variance": VN, "offset": VN, "scale": VN, "variance_epsilon": 0.001}
for _bn_op, _xn in (("batch_norm", XN), ("batch_norm2d", XN), ("batch_norm3d", XN[None]),
                    ("batch_norm4d", IMGN)):
    for _p in _BN:
        _given = {k: (t(v) if k != "variance_epsilon" else v) for k, v in _BN.items()}
        _given[_p] = S if _p == "variance_epsilon" else [S, S, S]
        _ref = dict(_BN, **{_p: S})
        CASES[(_bn_op, _p)] = (
            lambda op=_bn_op, xn=_xn, g=_given: getattr(tf, op)(
                t(xn), g["mean"], g["variance"], g["offset"], g["scale"], g["variance_epsilon"]),
            lambda xn=_xn, r=_ref: _bn(xn, r["mean"], r["variance"], r["offset"], r["scale"],
                                       r["variance_epsilon"]))

# the losses: every weight a scalar 0.1 (SUM_BY_NONZERO_WEIGHTS: the weighted sum over the
# count of non-zero weights, here every element)
_L = {"absolute_difference": lambda l, p: np.abs(l - p),
      "mean_squared_error": lambda l, p: (l - p) ** 2,
      "hinge_loss": lambda l, p: np.maximum(0, 1 - (2 * l - 1) * p),
      "log_loss": lambda l, p: -l * np.log(p + 1e-7) - (1 - l) * np.log(1 - p + 1e-7),
      "huber_loss": lambda l, p: np.where(np.abs(p - l) < 1, 0.5 * (p - l) ** 2,
                                          np.abs(p - l) - 0.5)}
for _name, _ref in _L.items():
    CASES[(f"losses.{_name}", "weights")] = (
        lambda n=_name: getattr(tf.losses, n)(X, Y, S), lambda r=_ref: (r(XN, YN) * S).mean())
    CASES[(f"losses.{_name}", "labels")] = (
        lambda n=_name: getattr(tf.losses, n)(LS, Y), lambda r=_ref: r(np.full((2, 3), S), YN).mean())
    CASES[(f"losses.{_name}", "predictions")] = (
        lambda n=_name: getattr(tf.losses, n)(X, LS), lambda r=_ref: r(XN, np.full((2, 3), S)).mean())
CASES.update({
    ("losses.compute_weighted_loss", "weights"): (
        lambda: tf.losses.compute_weighted_loss(X, S), lambda: (XN * S).mean()),
    ("losses.cosine_distance", "weights"): (
        lambda: tf.losses.cosine_distance(X, Y, 1, S), lambda: ((1 - (XN * YN).sum(1)) * S).mean()),
    ("losses.cosine_distance", "labels"): (
        lambda: tf.losses.cosine_distance(LS, Y, 1), lambda: (1 - (S * YN).sum(1)).mean()),
    ("losses.cosine_distance", "predictions"): (
        lambda: tf.losses.cosine_distance(X, LS, 1), lambda: (1 - (XN * S).sum(1)).mean()),
    ("losses.huber_loss", "delta"): (
        lambda: tf.losses.huber_loss(X, Y, delta=S),
        lambda: np.where(np.abs(YN - XN) < S, 0.5 * (YN - XN) ** 2,
                         S * np.abs(YN - XN) - 0.5 * S * S).mean()),
    ("losses.log_loss", "epsilon"): (
        lambda: tf.losses.log_loss(X, Y, epsilon=S),
        lambda: (-XN * np.log(YN + S) - (1 - XN) * np.log(1 - YN + S)).mean()),
    ("losses.sigmoid_cross_entropy", "label_smoothing"): (
        lambda: tf.losses.sigmoid_cross_entropy(X, Y, label_smoothing=S),
        lambda: (np.maximum(YN, 0) - YN * (XN * (1 - S) + 0.5 * S)
                 + np.log1p(np.exp(-np.abs(YN)))).mean()),
    ("losses.sigmoid_cross_entropy", "weights"): (
        lambda: tf.losses.sigmoid_cross_entropy(X, Y, S),
        lambda: ((np.maximum(YN, 0) - YN * XN + np.log1p(np.exp(-np.abs(YN)))) * S).mean()),
    ("losses.sigmoid_cross_entropy", "multi_class_labels"): (
        lambda: tf.losses.sigmoid_cross_entropy(LS, Y),
        lambda: (np.maximum(YN, 0) - YN * S + np.log1p(np.exp(-np.abs(YN)))).mean()),
    ("losses.softmax_cross_entropy", "label_smoothing"): (
        lambda: tf.losses.softmax_cross_entropy(X, Y, label_smoothing=S),
        lambda: -((XN * (1 - S) + S / 3) * _log_softmax(YN)).sum(1).mean()),
    ("losses.softmax_cross_entropy", "weights"): (
        lambda: tf.losses.softmax_cross_entropy(X, Y, S),
        lambda: (-(XN * _log_softmax(YN)).sum(1) * S).mean()),
    ("losses.softmax_cross_entropy", "onehot_labels"): (
        lambda: tf.losses.softmax_cross_entropy(LS, Y),
        lambda: -(S * _log_softmax(YN)).sum(1).mean()),
    ("losses.sparse_softmax_cross_entropy", "weights"): (
        lambda: tf.losses.sparse_softmax_cross_entropy(tf.tensor([2, 0], dtype="int32"), Y,
                                                       [S, S]),
        lambda: (-_log_softmax(YN)[[0, 1], [2, 0]] * S).mean()),
    # linear algebra: a right-hand side given as numbers meets a float64 matrix
    ("linalg.solve", "b"): (lambda: tf.linalg.solve(A, [S, 2 * S]),
                            lambda: np.linalg.solve(AN, [S, 2 * S])),
    ("linalg.triangular_solve", "b"): (
        lambda: tf.linalg.triangular_solve(A, [[S], [S]]),
        lambda: np.linalg.solve(np.tril(AN), [[S], [S]])),
    ("linalg.lstsq", "b"): (lambda: tf.linalg.lstsq(X.transpose(), [S, S, 3 * S]).x,
                            lambda: np.linalg.lstsq(XN.T, [S, S, 3 * S], rcond=None)[0]),
})


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.parametrize("key", list(CASES), ids=[f"{o}-{p}" for o, p in CASES])
def test_a_python_number_takes_the_dtype_of_the_tensors_it_meets(key):
    call, ref = CASES[key]
    got = call()
    want = np.asarray(ref())
    if want.dtype == bool or want.dtype.kind == "i":       # comparisons, places
        assert got.dtype == ("bool" if want.dtype == bool else "int32")
        np.testing.assert_array_equal(got.numpy(), want)
        return
    assert got.dtype == "float64", f"{key}: {got.dtype}"
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-15)


def test_basic_lstm_cell_forget_bias_as_the_issue_found_it():
    # issue 27: new_c and new_h were off by ~1e-8 with forget_bias 0.73 on float64 tensors
    c, h = tf.basic_lstm_cell(0.73, t(LK), t(LB), t(LD), t(LC), t(LH))
    rc, rh = _lstm(0.73, LK, LB, LD, LC, LH)
    np.testing.assert_allclose(c.numpy(), rc, rtol=1e-14)
    np.testing.assert_allclose(h.numpy(), rh, rtol=1e-14)


def test_alone_a_python_number_is_float32_as_in_tfjs():
    # no tensor to meet: TF.js's default, float32
    assert tf.exp(0.1).dtype == "float32" and tf.add(0.1, 0.2).dtype == "float32"
    assert tf.add(tf.tensor([1, 2]), 0.5).dtype == "float32"         # int32 meets a fraction
    assert tf.concat([[0.1], [0.2]], 0).dtype == "float32"
    assert tf.losses.mean_squared_error([0.1], [0.3]).dtype == "float32"
    # NumPy arrays keep their own dtype, even beside a float64 tensor
    assert tf.add(tf.ones([1], "float32"), np.float32(0.1)).dtype == "float32"
    a32 = np.array([0.1], np.float32)
    assert tf.add(t([0.0]), a32).numpy()[0] == np.float64(np.float32(0.1))


# parameters that never carry a float that could meet a tensor: integers, axes, shapes,
# flags, names, functions, conditions and index tensors
NOT_A_FLOAT = set("""axis dtype shape strides pad keep_dims data_format dim_rounding_mode
reduction size dilations indices filter_size seed paddings block_shape dilation output_shape
exclusive reverse block_size begin k sorted align_corners half_pixel_centers crops stride
binary_output noise_shape equation num_rows num_columns batch_shape batch_dims num
depth_radius transpose_a transpose_b indexing mode lstm_cells ord depth window_shape
pooling_type dilation_rate side dim num_or_size_splits end begin_mask end_mask
ellipsis_mask new_axis_mask shrink_axis_mask reps perm segment_ids num_segments condition
num_lower num_upper full_matrices upper UPLO compute_uv hermitian keepdims lower adjoint
unit_diagonal offset n rcond rtol""".split())
# (rcond, rtol: cutoffs against the largest singular value; they choose, never join, values)
# ops whose numbers meet no float tensor: they are integer or bool ops, or take their dtype
# from an argument that the cases above do not need (linspace: TF.js's float32)
NO_FLOAT_TENSOR = {"bitwise_and", "logical_and", "logical_or", "logical_xor", "bincount",
                   "dense_bincount", "linspace"}


def _numeric_params(name, f):
    sig = inspect.signature(f)
    params = [p for p in sig.parameters.values()
              if p.name not in NOT_A_FLOAT and p.kind is not p.VAR_KEYWORD]
    if len(params) <= 1 and not any(p.kind is p.VAR_POSITIONAL or p.name == "tensors"
                                    for p in params):
        return []       # one number alone meets no tensor (unary ops): float32, as TF.js
    return [p.name for p in params]


def test_every_parameter_that_takes_a_number_has_a_case():
    missing = []
    for prefix, table in [("", OPS)] + [(k + ".", v) for k, v in NAMESPACES.items()]:
        for name, f in sorted(table.items()):
            if not callable(f) or inspect.isclass(f):
                continue
            op = prefix + name
            for p in _numeric_params(op, f):
                if (op, p) in CASES or op in NO_FLOAT_TENSOR or f"{op}.{p}" in NO_FLOAT_TENSOR:
                    continue
                if any(o == op for o, _ in CASES) and p in ("x", "a", "labels", "losses",
                                                             "logits", "data", "tensor", "v1",
                                                             "t1", "lstm_kernel", "c", "h",
                                                             "images", "image", "start",
                                                             "sorted_sequence"):
                    continue    # the op's main tensor: a case gives a number to the other side
                missing.append(f"{op}({p})")
    assert not missing, ("give each a case in CASES (a Python 0.1 there, float64 tensors "
                         f"elsewhere, a float64 NumPy reference), or name it in NOT_A_FLOAT: "
                         f"{missing}")


def test_the_check_above_is_not_vacuous():
    # it sees the parameters a new op would add
    def new_op(x, gain=0.5):
        return x
    assert _numeric_params("new_op", new_op) == ["x", "gain"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_negative_zero_literal_keeps_its_sign(dtype):
    # -0.0 == 0.0 and hashes alike: the cache of literal constants kept one of them for
    # both, so x * -0.0 after an x * 0.0 computed with +0.0 (IEEE: 1 * -0 = -0, -0 + -0 = -0)
    one, neg = tf.scalar(1.0, dtype=dtype), tf.scalar(-0.0, dtype=dtype)
    for first in (0.0, -0.0):         # either one cached first
        second = -0.0 if first == 0.0 and np.signbit(first) == 0 else 0.0
        for v in (first, second):
            want_mul = np.signbit(np.multiply(np.float64(1.0), v))
            want_add = np.signbit(np.add(np.float64(-0.0), v))
            assert bool(np.signbit((one * v).numpy())) == want_mul
            assert bool(np.signbit((neg + v).numpy())) == want_add
