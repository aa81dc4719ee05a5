"""Neural-network layers: batch_norm (and 2d/3d/4d), local_response_normalization, dropout,
basic_lstm_cell and multi_rnn_cell against NumPy formulas, gradients against finite
differences to order 2, dropout's mask reproducible and used by the gradient; every error
path."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from opcheck import BACKENDS, Case, run_case


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ---------------------------------------------------------------- batch_norm

def bn_ref(x, mean, var, offset=0.0, scale=1.0, eps=0.001):
    return (x - mean) / np.sqrt(var + eps) * scale + offset


BN = [
    Case("batch_norm[all5]", lambda x, m, v, o, s: tf.batch_norm(x, m, v, o, s),
         bn_ref, [((2, 3), "real"), ((3,), "real"), ((3,), "pos"), ((3,), "real"),
                  ((3,), "real")]),
    Case("batch_norm[no-offset-scale]", lambda x, m, v: tf.batch_norm(x, m, v, None, None, 0.1),
         lambda x, m, v: bn_ref(x, m, v, eps=0.1), [((2, 3), "real"), ((3,), "real"),
                                                    ((3,), "pos")]),
    Case("batch_norm[scale-only]", lambda x, m, v, s: tf.batch_norm(x, m, v, scale=s),
         lambda x, m, v, s: bn_ref(x, m, v, scale=s),
         [((3, 2), "real"), ((2,), "real"), ((2,), "pos"), ((2,), "real")]),
    Case("batch_norm4d", lambda x, m, v, o, s: tf.batch_norm4d(x, m, v, o, s), bn_ref,
         [((2, 1, 2, 3), "real"), ((3,), "real"), ((3,), "pos"), ((3,), "real"),
          ((3,), "real")]),
    Case("batch_norm2d[rank2-stats]", lambda x, m, v: tf.batch_norm2d(x, m, v),
         lambda x, m, v: bn_ref(x, m, v), [((2, 3), "real"), ((1, 3), "real"),
                                           ((1, 3), "pos")]),
    Case("batch_norm3d", lambda x, m, v: tf.batch_norm3d(x, m, v), bn_ref,
         [((2, 2, 2), "real"), ((2,), "real"), ((2,), "pos")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", BN, ids=repr)
def test_batch_norm(case, backend):
    run_case(case, backend)


def test_batch_norm_method_and_camel_case():
    x = tf.tensor([[1.0, 2.0], [3.0, 6.0]])
    y = x.batch_norm(tf.tensor([2.0, 4.0]), tf.tensor([1.0, 4.0]), variance_epsilon=0)
    np.testing.assert_allclose(y.numpy(), [[-1, -1], [1, 1]])
    assert tf.batchNorm is tf.batch_norm and tf.batchNorm2d is tf.batch_norm2d
    y = tf.batch_norm(x, 2.0, 1.0, 1.0, 2.0, None)     # numbers; None: the default 0.001
    np.testing.assert_allclose(y.numpy(), bn_ref(x.numpy(), 2, 1, 1, 2), rtol=1e-6)


# ---------------------------------------------------------------- LRN

def lrn_ref(x, r=5, bias=1.0, alpha=1.0, beta=0.5):
    c = x.shape[-1]
    out = np.empty_like(x)
    for d in range(c):
        lo, hi = max(0, d - r), min(c, d + r + 1)
        s = (x[..., lo:hi] ** 2).sum(-1)
        out[..., d] = x[..., d] / (bias + alpha * s) ** beta
    return out


LRN = [
    Case("lrn[defaults]", tf.local_response_normalization, lrn_ref, [((1, 2, 2, 4), "real")]),
    Case("lrn[r2]", lambda x: tf.local_response_normalization(x, 2, 1.5, 0.3, 0.75),
         lambda x: lrn_ref(x, 2, 1.5, 0.3, 0.75), [((2, 1, 2, 6), "real")]),
    Case("lrn[rank3-r0]", lambda x: tf.local_response_normalization(x, 0, 2.0, 0.5, 1.0),
         lambda x: lrn_ref(x, 0, 2.0, 0.5, 1.0), [((2, 2, 3), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", LRN, ids=repr)
def test_lrn(case, backend):
    run_case(case, backend)


def test_lrn_method_and_alias():
    x = tf.ones([1, 1, 1, 3])
    np.testing.assert_allclose(x.local_response_normalization(1).numpy(),
                               lrn_ref(np.ones((1, 1, 1, 3)), 1), rtol=1e-6)
    assert tf.localResponseNormalization is tf.local_response_normalization


# ---------------------------------------------------------------- dropout

def dropout_mask(shape, rate, seed, dtype="float32"):
    """The mask TF.js's formula draws: floor(u + keep) / keep, u ~ U[0, 1) from the seed."""
    u = tf.random_uniform(shape, 0, 1, dtype, seed).numpy().astype(np.float64)
    keep = 1 - rate
    return np.floor(u + keep) / keep


def test_dropout_mask_and_gradient():
    x = tf.tensor(np.random.default_rng(0).normal(size=(50, 40)))
    y = tf.dropout(x, 0.3, seed=7)
    mask = dropout_mask((50, 40), 0.3, 7)
    np.testing.assert_allclose(y.numpy(), x.numpy() * mask, rtol=1e-6)
    assert abs((mask == 0).mean() - 0.3) < 0.05            # about `rate` of them dropped
    np.testing.assert_allclose(np.unique(mask), [0, 1 / 0.7], rtol=1e-6)
    g = tf.grad(lambda v: tf.dropout(v, 0.3, seed=7).sum())(x)
    np.testing.assert_allclose(g.numpy(), mask, rtol=1e-6)
    np.testing.assert_array_equal(tf.dropout(x, 0.3, seed=7).numpy(), y.numpy())  # seeded


def test_dropout_noise_shape():
    x = tf.ones([4, 3, 5])
    y = tf.dropout(x, 0.5, [4, 1, 5], seed=1).numpy()
    assert (y == y[:, :1, :]).all()                        # one mask shared along axis 1
    np.testing.assert_allclose(y[:, 0, :], dropout_mask((4, 1, 5), 0.5, 1)[:, 0, :])
    y = tf.dropout(x, 0.5, [None, 1, None], seed=1).numpy()   # None: x's length (TF.js)
    np.testing.assert_allclose(y[:, 0, :], dropout_mask((4, 1, 5), 0.5, 1)[:, 0, :])


def test_dropout_rate_zero_and_float64():
    x = tf.tensor([1.0, 2.0])
    y = tf.dropout(x, 0)
    assert y is not x and y.array_sync() == [1.0, 2.0]
    x64 = tf.tensor(np.ones(200), dtype="float64")
    y = tf.dropout(x64, 0.5, seed=3)
    assert y.dtype == "float64"
    np.testing.assert_allclose(y.numpy(), dropout_mask((200,), 0.5, 3, "float64"))


DROPOUT = [Case("dropout[seeded]", lambda x: tf.dropout(x, 0.4, seed=11),
                lambda x: x * dropout_mask((3, 4), 0.4, 11), [((3, 4), "real")])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", DROPOUT, ids=repr)
def test_dropout_table(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- LSTM

def lstm_ref(forget_bias, kernel, bias, data, c, h):
    res = np.concatenate([data, h], 1) @ kernel + bias
    i, j, f, o = np.split(res, 4, 1)
    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    return [new_c, np.tanh(new_c) * sigmoid(o)]


LSTM = [
    Case("basic_lstm_cell", lambda k, b, d, c, h: tf.basic_lstm_cell(1.0, k, b, d, c, h),
         lambda k, b, d, c, h: lstm_ref(1.0, k, b, d, c, h),
         [((5, 8), "small"), ((8,), "small"), ((2, 3), "real"), ((2, 2), "real"),
          ((2, 2), "real")]),
    Case("basic_lstm_cell[forget_bias]", tf.basic_lstm_cell, lstm_ref,
         [((), "real"), ((3, 4), "small"), ((4,), "small"), ((1, 2), "real"),
          ((1, 1), "real"), ((1, 1), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", LSTM, ids=repr)
def test_lstm(case, backend):
    run_case(case, backend)


def multi_fn(k1, b1, k2, b2, d, c1, h1, c2, h2):
    cells = [lambda x, c, h: tf.basic_lstm_cell(0.5, k1, b1, x, c, h),
             lambda x, c, h: tf.basic_lstm_cell(0.5, k2, b2, x, c, h)]
    cs, hs = tf.multi_rnn_cell(cells, d, [c1, c2], [h1, h2])
    return cs + hs


def multi_ref(k1, b1, k2, b2, d, c1, h1, c2, h2):
    c1n, h1n = lstm_ref(0.5, k1, b1, d, c1, h1)
    c2n, h2n = lstm_ref(0.5, k2, b2, h1n, c2, h2)
    return [c1n, c2n, h1n, h2n]


MULTI = [Case("multi_rnn_cell", multi_fn, multi_ref,
              [((3, 4), "small"), ((4,), "small"), ((2, 4), "small"), ((4,), "small"),
               ((2, 2), "real"), ((2, 1), "real"), ((2, 1), "real"), ((2, 1), "real"),
               ((2, 1), "real")])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", MULTI, ids=repr)
def test_multi_rnn_cell(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- errors

X = tf.ones([2, 3])
S3 = tf.ones([3])


def err(id_, fn, cls, msg):
    return pytest.param(fn, cls, msg, id=id_)


def lstm(kernel=(3, 8), data=(1, 1), c=(1, 2), h=(1, 2)):
    return lambda: tf.basic_lstm_cell(1.0, tf.ones(list(kernel)), tf.ones([kernel[1]]),
                                      tf.ones(list(data)), tf.ones(list(c)), tf.ones(list(h)))


ERRORS = [
    err("bn-rank-variance", lambda: tf.batch_norm(X, S3, tf.ones([1, 3])), ShapeError,
        "Batch normalization gradient requires mean and variance to have equal ranks "
        "(batch_norm: mean has shape [3], variance has shape [1, 3])."),
    err("bn-rank-offset", lambda: tf.batch_norm(X, S3, S3, tf.ones([1, 3])), ShapeError,
        "Batch normalization gradient requires mean and offset to have equal ranks"),
    err("bn-rank-scale", lambda: tf.batch_norm(X, S3, S3, S3, tf.ones([1, 3])), ShapeError,
        "Batch normalization gradient requires mean and scale to have equal ranks"),
    err("bn-broadcast", lambda: tf.batch_norm(X, tf.ones([2]), tf.ones([2])), ShapeError,
        "batch_norm: mean of shape [2] does not broadcast to x's shape [2, 3] (give one "
        "value per channel: shape [3])"),
    err("bn-eps", lambda: tf.batch_norm(X, S3, S3, variance_epsilon="a"), ArgumentError,
        "batch_norm: variance_epsilon must be a number, got 'a'"),
    err("bn2d-x-rank", lambda: tf.batch_norm2d(S3, S3, S3), ShapeError,
        "Error in batchNorm2D: x must be rank 2 but got rank 1."),
    err("bn4d-mean-rank", lambda: tf.batch_norm4d(tf.ones([1, 1, 2, 3]), tf.ones([2, 3]),
                                                  tf.ones([2, 3])), ShapeError,
        "Error in batchNorm4D: mean must be rank 4 or rank 1 but got rank 2."),
    err("lrn-rank", lambda: tf.local_response_normalization(X), ShapeError,
        "Error in localResponseNormalization: x must be rank 3 or 4 but got rank 2."),
    err("lrn-radius", lambda: tf.local_response_normalization(tf.ones([1, 1, 3]), 1.5),
        ArgumentError, "Error in localResponseNormalization: depthRadius must be an integer "
        "but got depthRadius 1.5."),
    err("lrn-radius-negative", lambda: tf.local_response_normalization(tf.ones([1, 1, 3]), -1),
        ArgumentError, "local_response_normalization: depth_radius must be >= 0, got -1"),
    err("lrn-beta", lambda: tf.local_response_normalization(tf.ones([1, 1, 3]), 1, 1, 1, None),
        ArgumentError, "local_response_normalization: beta must be a number, got None"),
    err("dropout-int", lambda: tf.dropout(tf.tensor([1, 2], dtype="int32"), 0.5), DtypeError,
        "dropout: x has to be a floating point tensor since it's going to be scaled, but got "
        "a int32 tensor instead."),
    err("dropout-rate", lambda: tf.dropout(X, 1), ArgumentError,
        "dropout: rate must be a float in the range [0, 1), but got 1.0."),
    err("dropout-rate-negative", lambda: tf.dropout(X, -0.1), ArgumentError,
        "dropout: rate must be a float in the range [0, 1), but got -0.1."),
    err("dropout-rate-type", lambda: tf.dropout(X, "half"), ArgumentError,
        "dropout: rate must be a number, got 'half'"),
    err("dropout-noise-shape", lambda: tf.dropout(X, 0.5, [2, 2]), ShapeError,
        "dropout: noise_shape [2, 2] does not broadcast to x's shape [2, 3] (use 1 for the "
        "axes that share a mask)"),
    err("dropout-noise-type", lambda: tf.dropout(X, 0.5, 3), ArgumentError,
        "dropout: noise_shape must be a list of integers, got int"),
    err("lstm-rank", lstm(data=(3,)), ShapeError,
        "basic_lstm_cell: data must be rank 2, got shape [3]"),
    err("lstm-kernel", lstm(kernel=(4, 8)), ShapeError,
        "basic_lstm_cell: shapes do not fit: lstm_kernel [4, 8] must be [inputs + units, 4 * "
        "units] for data [1, 1] = [batch, inputs] and c [1, 2], h [1, 2] = [batch, units]"),
    err("lstm-not-4", lstm(kernel=(3, 6)), ShapeError, "basic_lstm_cell: shapes do not fit"),
    err("lstm-c-h", lstm(c=(1, 3)), ShapeError, "basic_lstm_cell: shapes do not fit"),
    err("multi-counts", lambda: tf.multi_rnn_cell([lstm()], X, [X, X], [X]), ArgumentError,
        "multi_rnn_cell: c and h must be lists with one state per cell (1 cells), got 2 states "
        "and 1 states"),
    err("multi-not-list", lambda: tf.multi_rnn_cell([lstm()], X, X, [X]), ArgumentError,
        "multi_rnn_cell: c and h must be lists with one state per cell (1 cells), got Tensor "
        "and 1 states"),
    err("multi-not-callable", lambda: tf.multi_rnn_cell([3], X, [X], [X]), ArgumentError,
        "multi_rnn_cell: lstm_cells[0] must be a function (data, c, h) -> [c, h], got int"),
]


@pytest.mark.parametrize("fn,cls,msg", ERRORS)
def test_errors(fn, cls, msg):
    with pytest.raises(cls) as e:
        fn()
    assert msg in str(e.value)
