"""Pooling: forward against direct NumPy references, gradients against finite differences
(away from ties), TF.js's tie and padding conventions, avg_pool's consistent 'same'
normalisation, max_pool's second derivatives, properties, and every error message."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, ShapeError
from opcheck import BACKENDS, Case, run_case
from test_ops_conv import tf_padding, tup

F64 = "float64"


# ---------------------------------------------------------------- NumPy reference

def ref_pool(x, k, s, pad, kind, d=1, mode=None, first=False):
    """Max or mean over the input cells of each window (padding never counts)."""
    n = x.ndim - 2
    if first:
        x = np.moveaxis(x, 1, -1)
    k, s, d = tup(k, n), tup(s, n), tup(d, n)
    before, out = tf_padding(x.shape[1:1 + n], k, s, d, pad, mode)
    y = np.zeros((x.shape[0], *out, x.shape[-1]))
    for o in np.ndindex(*out):
        cells = []
        for j in np.ndindex(*k):
            p = tuple(o[i] * s[i] + j[i] * d[i] - before[i] for i in range(n))
            if all(0 <= p[i] < x.shape[1 + i] for i in range(n)):
                cells.append(x[(slice(None),) + p])
        if not cells:       # a window wholly in the padding
            y[(slice(None),) + o] = -np.inf if kind == "max" else 0
            continue
        c = np.stack(cells)
        y[(slice(None),) + o] = c.max(0) if kind == "max" else c.mean(0)
    return np.moveaxis(y, -1, 1) if first else y


def pcase(kind, name, xs, k, s, pad, mode=None, order=None):
    fn = tf.max_pool if kind == "max" else tf.avg_pool
    return Case(f"{kind}_pool[{name}]", lambda x: fn(x, k, s, pad, mode),
                lambda x: ref_pool(x, k, s, pad, kind, mode=mode),
                [(xs, "real")], order if order is not None else (1 if kind == "max" else 2))


EXPL = [[0, 0], [1, 1], [0, 1], [0, 0]]
CASES = [
    pcase("max", "valid", (2, 4, 5, 2), 2, 1, "valid"),
    pcase("max", "same-stride2", (1, 5, 5, 2), 3, 2, "same", order=2),
    pcase("max", "rect", (1, 5, 6, 1), (2, 3), (1, 2), "valid"),
    pcase("max", "pad1-ceil", (1, 6, 5, 2), 3, 2, 1, "ceil"),
    pcase("max", "explicit", (1, 4, 4, 2), 2, 1, EXPL),
    pcase("avg", "same", (2, 4, 5, 2), 3, 1, "same"),
    pcase("avg", "same-even-stride2", (1, 5, 5, 2), 2, 2, "same"),
    pcase("avg", "valid", (1, 5, 4, 2), (3, 2), 1, "valid"),
    pcase("avg", "pad1-ceil", (1, 6, 5, 1), 3, 2, 1, "ceil"),
    pcase("avg", "explicit-stride2", (1, 5, 4, 2), 2, 2, EXPL),
    Case("max_pool[rank3]", lambda x: tf.max_pool(x, 2, 2, "same"),
         lambda x: ref_pool(x[None], 2, 2, "same", "max")[0], [((5, 4, 2), "real")], 1),
    Case("avg_pool[rank3]", lambda x: tf.avg_pool(x, 2, 1, "same"),
         lambda x: ref_pool(x[None], 2, 1, "same", "avg")[0], [((3, 4, 2), "real")]),
    Case("max_pool3d[same]", lambda x: tf.max_pool3d(x, 2, 1, "same"),
         lambda x: ref_pool(x, 2, 1, "same", "max"), [((1, 3, 3, 4, 2), "real")], 1),
    Case("max_pool3d[ncdhw-stride]", lambda x: tf.max_pool3d(x, 2, 2, "valid", None, "NCDHW"),
         lambda x: ref_pool(x, 2, 2, "valid", "max", first=True),
         [((1, 2, 4, 4, 5), "real")], 1),
    Case("avg_pool3d[same-stride2]", lambda x: tf.avg_pool3d(x, (2, 3, 2), 2, "same"),
         lambda x: ref_pool(x, (2, 3, 2), 2, "same", "avg"), [((1, 3, 4, 3, 2), "real")]),
    Case("avg_pool3d[ncdhw-pad1]", lambda x: tf.avg_pool3d(x, 2, 1, 1, None, "NCDHW"),
         lambda x: ref_pool(x, 2, 1, 1, "avg", first=True), [((1, 2, 3, 2, 3), "real")]),
    Case("pool[max-dilated-same]", lambda x: tf.pool(x, 2, "max", "same", 2),
         lambda x: ref_pool(x, 2, 1, "same", "max", 2), [((1, 5, 5, 2), "real")], 1),
    Case("pool[avg-dilated-same]", lambda x: tf.pool(x, (2, 3), "avg", "same", (2, 1)),
         lambda x: ref_pool(x, (2, 3), 1, "same", "avg", (2, 1)), [((1, 5, 4, 2), "real")]),
    Case("pool[avg-dilated-valid]", lambda x: tf.pool(x, 2, "avg", "valid", 3),
         lambda x: ref_pool(x, 2, 1, "valid", "avg", 3), [((2, 5, 5, 1), "real")]),
    Case("pool[max-strided]", lambda x: tf.pool(x, 3, "max", "same", strides=2),
         lambda x: ref_pool(x, 3, 2, "same", "max"), [((1, 5, 6, 2), "real")], 1),
    Case("pool[avg-3d-dilated]",
         lambda x: tf.pool(x, [2, 2, 2], "avg", "same", dilation_rate=2),
         lambda x: ref_pool(x, 2, 1, "same", "avg", 2), [((1, 3, 4, 3, 1), "real")]),
    Case("pool[max-rank3-pad0]", lambda x: tf.pool(x, 2, "max", 0),
         lambda x: ref_pool(x[None], 2, 1, "valid", "max")[0], [((3, 4, 2), "real")], 1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- conventions

def grid(values, shape=(1, 3, 3, 1), dtype="float32"):
    return tf.tensor(values, shape, dtype)


def test_avg_pool_same_gradient_divides_like_the_forward():
    # border windows average fewer cells; the gradient uses the same counts (TF.js divides
    # by the full window: [[.25, .5, .5], [.5, 1, 1], [.5, 1, 1]] here)
    g = tf.grad(lambda x: tf.avg_pool(x, 2, 1, "same").sum())(tf.zeros([1, 3, 3, 1]))
    np.testing.assert_array_equal(g.numpy().reshape(3, 3),
                                  [[0.25, 0.5, 0.75], [0.5, 1, 1.5], [0.75, 1.5, 2.25]])


def test_avg_pool3d_same_gradient_divides_like_the_forward():
    x = tf.zeros([1, 2, 2, 2, 1])
    g = tf.grad(lambda a: tf.avg_pool3d(a, 2, 1, "same").sum())(x)
    # cell (1,1,1) is in all 8 windows, whose cell counts are 8, 4, 4, 2, 4, 2, 2, 1
    np.testing.assert_allclose(g.numpy()[0, 1, 1, 1, 0],
                               1 / 8 + 3 / 4 + 3 / 2 + 1)


def test_max_pool_ties_go_to_the_first_cell_of_each_window():
    g = tf.grad(lambda x: tf.max_pool(x, 2, 1, "valid").sum())(tf.ones([1, 3, 3, 1]))
    np.testing.assert_array_equal(g.numpy().reshape(3, 3), [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


def test_max_pool_gradient_accumulates_on_a_shared_maximum():
    x = grid([1, 2, 3, 4, 9, 5, 6, 7, 8])
    g = tf.grad(lambda a: tf.max_pool(a, 2, 1, "valid").sum())(x)
    np.testing.assert_array_equal(g.numpy().reshape(3, 3), [[0, 0, 0], [0, 4, 0], [0, 0, 0]])


def test_padding_never_wins_the_max():
    # all negative: a zero from the padding would win if it took part (as in TF.js's
    # dilated 'same' pool, which pads with zeros through spaceToBatchND)
    x = tf.tensor(-np.arange(1.0, 26.0).reshape(1, 5, 5, 1))
    for y in (tf.max_pool(x, 3, 1, "same"), tf.pool(x, 2, "max", "same", 2),
              tf.max_pool(x, 2, 1, 1)):
        assert float(y.max().item()) < 0


def test_dilated_avg_pool_same_counts_only_input_cells():
    y = tf.pool(tf.ones([1, 5, 5, 1]), 3, "avg", "same", 2)
    np.testing.assert_array_equal(y.numpy(), 1)


def test_window_wholly_in_padding():
    # explicit pads wider than the window: such windows see no input cell
    pad = [[0, 0], [3, 0], [0, 0], [0, 0]]
    y = tf.avg_pool(tf.ones([1, 2, 2, 1]), (2, 1), (2, 1), pad)
    np.testing.assert_array_equal(y.numpy().ravel(), [0, 0, 1, 1])
    m = tf.max_pool(tf.ones([1, 2, 2, 1]), (2, 1), (2, 1), pad)
    assert np.isneginf(m.numpy().ravel()[0])
    g = tf.grad(lambda x: tf.max_pool(x, (2, 1), (2, 1), pad).sum())(tf.ones([1, 2, 2, 1]))
    np.testing.assert_array_equal(g.numpy().ravel(), [1, 1, 0, 0])


def test_max_pool_second_derivative_in_dy_is_a_gather():
    x = grid([1, 5, 3, 4, 2, 8, 0, 6, 7], dtype=F64)
    v = grid([1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=F64)

    def h(dy):
        gx = tf.grad(lambda a: (tf.max_pool(a, 2, 1, "valid") * dy).sum())(x)
        return (gx * v).sum()
    g = tf.grad(h)(tf.ones([1, 2, 2, 1], F64))
    # the windows' maxima are 5, 8, 6, 8: v there is 2, 6, 8, 6
    np.testing.assert_array_equal(g.numpy().ravel(), [2, 6, 8, 6])
    # and its own gradient in v scatters back (third order, still exact)
    g3 = tf.grad(lambda vv: (tf.grad(lambda dy: (tf.grad(
        lambda a: (tf.max_pool(a, 2, 1, "valid") * dy).sum())(x) * vv).sum())(
        tf.ones([1, 2, 2, 1], F64))).sum())(v)
    np.testing.assert_array_equal(g3.numpy().reshape(3, 3), [[0, 1, 0], [0, 0, 2], [0, 1, 0]])


def test_max_pool_second_derivative_in_x_comes_only_through_y():
    x = grid([1, 5, 3, 4, 2, 8, 0, 6, 7], dtype=F64)
    h = tf.grad(lambda a: (tf.grad(lambda b: tf.max_pool(b, 2, 1, "valid").square().sum())(a)
                           ).sum())
    # d/dx sum(2 * y * dy/dx): y's own path gives the gathered 2s; the argmax is constant
    np.testing.assert_array_equal(h(x).numpy().reshape(3, 3),
                                  [[0, 2, 0], [0, 0, 4], [0, 2, 0]])


def test_avg_pool_second_derivative_in_dy_is_avg_pool():
    x = tf.zeros([1, 3, 3, 1], F64)
    v = grid(list(range(9)), dtype=F64)

    def h(dy):
        return (tf.grad(lambda a: (tf.avg_pool(a, 2, 1, "same") * dy).sum())(x) * v).sum()
    g = tf.grad(h)(tf.ones([1, 3, 3, 1], F64))
    np.testing.assert_allclose(g.numpy(), tf.avg_pool(v, 2, 1, "same").numpy())


def test_dtypes():
    xi = tf.tensor([[[[1], [2]], [[3], [4]]]], dtype="int32")
    assert tf.max_pool(xi, 2, 1, "same").dtype == "int32"
    np.testing.assert_array_equal(tf.max_pool(xi, 2, 1, "same").numpy().ravel(), [4, 4, 4, 4])
    assert tf.avg_pool(xi, 2, 1, "valid").dtype == "float32"   # TF.js truncates to int32
    assert tf.avg_pool(xi, 2, 1, "valid").item() == 2.5
    assert tf.max_pool(tf.ones([1, 2, 2, 1], F64), 2, 1, "same").dtype == F64


def test_kernel_names_are_tfjs():
    from flowgrad.ops import pool as P
    names = [p.name for fam in (P.MAX2D, P.MAX3D, P.AVG2D, P.AVG3D) for p in fam]
    assert names == ["MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "MaxPool3D",
                     "MaxPool3DGrad", "MaxPool3DGradGrad", "AvgPool", "AvgPoolGrad",
                     "AvgPool3D", "AvgPool3DGrad"]


# ---------------------------------------------------------------- properties

@st.composite
def pool_setup(draw):
    n = draw(st.sampled_from([2, 3]))
    k = tuple(draw(st.integers(1, 3)) for _ in range(n))
    strided = draw(st.booleans())
    s = tuple(draw(st.integers(1, 3)) if strided else 1 for _ in range(n))
    d = tuple(1 if strided else draw(st.integers(1, 2)) for _ in range(n))
    pad = draw(st.sampled_from(["same", "valid", 0, 1]))
    if pad == 1 and min(k) < 2:
        pad = "same"            # a 1-wide window would lie wholly in the padding
    xs = tuple(draw(st.integers((k[i] - 1) * d[i] + 1, (k[i] - 1) * d[i] + 4))
               for i in range(n))
    return n, xs, k, s, d, pad, draw(st.integers(0, 2 ** 16))


@settings(max_examples=40, deadline=None)
@given(pool_setup())
def test_pool_gradients_are_adjoint(setup):
    """avg: <pool(x), y> = <x, grad>; max: the gradient moves each dy onto its window's
    maximum, so it sums to sum(dy) and <x, grad> = <pool(x), dy>."""
    n, xs, k, s, d, pad, seed = setup
    rng = np.random.default_rng(seed)
    x = tf.tensor(rng.normal(size=(2, *xs, 2)), dtype=F64)
    for kind in ("avg", "max"):
        y = tf.pool(x, list(k), kind, pad, list(d), list(s))
        dy = tf.tensor(rng.normal(size=y.shape), dtype=F64)
        gx = tf.grad(lambda a: (tf.pool(a, list(k), kind, pad, list(d), list(s)) * dy).sum())(x)
        lhs = float((y * dy).sum().item())
        assert abs(lhs - float((x * gx).sum().item())) < 1e-9 * max(1, abs(lhs))
        if kind == "max":
            assert abs(float(gx.sum().item()) - float(dy.sum().item())) < 1e-9


# ---------------------------------------------------------------- errors

X4 = tf.ones([1, 4, 4, 2])


def row(id_, fn, cls, message):
    return pytest.param(fn, cls, message, id=id_)


ERRORS = [
    row("rank", lambda: tf.max_pool(tf.ones([4, 4]), 2, 1, "same"), ShapeError,
        "Error in max_pool: x must be rank 4 but got rank 2 (shape [4, 4]); rank 3 means a "
        "batch of one."),
    row("rank-3d", lambda: tf.avg_pool3d(X4[0, 0], 2, 1, "same"), ShapeError,
        "Error in avg_pool3d: x must be rank 5 but got rank 2"),
    row("data-format-3d", lambda: tf.max_pool3d(tf.ones([1, 2, 2, 2, 1]), 2, 1, "same", None,
                                                "NCHW"), ArgumentError,
        "Error in max_pool3d: Unknown dataFormat 'NCHW': use 'NDHWC' (channels last, the "
        "default) or 'NCDHW' (channels first)"),
    row("filter-size-length", lambda: tf.max_pool(X4, [2, 2, 2], 1, "same"), ArgumentError,
        "Error in max_pool: filter_size must be an int or a list of 2 ints, got [2, 2, 2]"),
    row("filter-size-zero", lambda: tf.avg_pool(X4, 0, 1, "same"), ArgumentError,
        "avg_pool: filter_size must be >= 1, got 0"),
    row("strides-zero", lambda: tf.avg_pool3d(tf.ones([1, 2, 2, 2, 1]), 1, [1, 0, 1], "same"),
        ArgumentError, "avg_pool3d: strides[1] must be >= 1, got 0"),
    row("strides-and-dilations", lambda: tf.pool(X4, 2, "max", "same", 2, 2), ArgumentError,
        "Error in pool: Either strides or dilations must be 1. Got strides 2 and dilations "
        "'2'"),
    row("pooling-type", lambda: tf.pool(X4, 2, "min", "same"), ArgumentError,
        "Error in pool: poolingType must be 'max' or 'avg', got 'min'"),
    row("window-shape", lambda: tf.pool(X4, [2], "max", "same"), ArgumentError,
        "Error in pool: window_shape must be an int or a list of 2 or 3 ints, got [2]"),
    row("pad-unknown", lambda: tf.avg_pool(X4, 2, 1, "full"), ArgumentError,
        "Unknown padding parameter: 'full' (Error in avg_pool: pad must be 'same', 'valid'"),
    row("rounding-string-pad", lambda: tf.avg_pool3d(tf.ones([1, 2, 2, 2, 1]), 1, 1, "valid",
                                                     "floor"), ArgumentError,
        "Error in avg_pool3d: pad must be an integer when using dimRoundingMode floor but got "
        "pad valid."),
    row("rounding-unknown", lambda: tf.max_pool(X4, 2, 1, 1, "trunc"), ArgumentError,
        "Error in max_pool: Unknown roundingMode 'trunc'"),
    row("empty", lambda: tf.max_pool(X4, 5, 1, "valid"), ShapeError,
        "Error in max_pool: the output would be empty: input spatial shape [4, 4], window "
        "[5, 5] (dilated to [5, 5]), strides [1, 1], pad 'valid' give output [0, 0]."),
    row("explicit-form", lambda: tf.max_pool(X4, 2, 1, [[1, 1], [1, 1]]), ArgumentError,
        "Error in max_pool: explicit padding must be 4 pairs of non-negative ints"),
]


@pytest.mark.parametrize("fn,cls,message", ERRORS)
def test_errors(fn, cls, message):
    with pytest.raises(cls, match=re.escape(message)):
        fn()
