"""dilation2d: forward against a direct NumPy reference, gradients for x and the filter
against finite differences (away from ties), TF.js's argmax convention for ties, padding
that never wins, the higher-order gathers, properties, and every error message."""
import re

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError, ShapeError
from opcheck import BACKENDS, Case, run_case
from test_ops_conv import tf_padding, tup

F64 = "float64"


# ---------------------------------------------------------------- NumPy reference

def ref_dilation(x, w, strides, pad, dilations=1):
    """max over the window cells inside the input of x's cell plus the filter's."""
    batched = x.ndim == 4
    x = x if batched else x[None]
    s, d, k = tup(strides, 2), tup(dilations, 2), w.shape[:2]
    before, out = tf_padding(x.shape[1:3], k, s, d, pad)
    y = np.full((x.shape[0], *out, x.shape[-1]), -np.inf)
    for o in np.ndindex(*out):
        for j in np.ndindex(*k):
            p = tuple(o[i] * s[i] + j[i] * d[i] - before[i] for i in range(2))
            if all(0 <= p[i] < x.shape[1 + i] for i in range(2)):
                y[(slice(None),) + o] = np.maximum(y[(slice(None),) + o],
                                                   x[(slice(None),) + p] + w[j])
    return y if batched else y[0]


def dcase(name, xs, ks, strides, pad, dilations=1, order=1):
    return Case(f"dilation2d[{name}]",
                lambda x, w: tf.dilation2d(x, w, strides, pad, dilations),
                lambda x, w: ref_dilation(x, w, strides, pad, dilations),
                [(xs, "real"), (ks, "real")], order)


CASES = [
    dcase("valid", (2, 4, 5, 2), (2, 2, 2), 1, "valid", order=2),
    dcase("same", (1, 4, 5, 2), (3, 2, 2), 1, "same"),
    dcase("same-stride2", (1, 5, 5, 1), (3, 3, 1), 2, "same"),
    dcase("valid-rect-strides", (1, 5, 6, 2), (2, 3, 2), (2, 1), "valid"),
    dcase("same-dilated", (1, 5, 5, 2), (2, 2, 2), 1, "same", 2),
    dcase("valid-strided-and-dilated", (1, 6, 7, 1), (2, 2, 1), 2, "valid", (1, 2)),
    dcase("rank3", (4, 4, 3), (2, 2, 3), 1, "same"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- conventions

X = tf.tensor([1, 5, 3, 4, 2, 8, 0, 6, 7], [1, 3, 3, 1], F64)


def test_ties_go_to_the_first_cell_of_each_window():
    # every window's candidates are equal: the first cell (row-major) takes dy, for x and
    # for the filter alike (TF.js's argmax keeps the first strict maximum)
    x, w = tf.ones([1, 3, 3, 1]), tf.zeros([2, 2, 1])
    gx, gw = tf.grads(lambda a, f: tf.dilation2d(a, f, 1, "valid").sum())([x, w])
    np.testing.assert_array_equal(gx.numpy().reshape(3, 3), [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(gw.numpy().reshape(2, 2), [[4, 0], [0, 0]])


def test_gradients_go_to_the_argmax_of_each_window():
    w = tf.tensor([0, -1, -1, 1], [2, 2, 1], F64)
    gx, gw = tf.grads(lambda a, f: tf.dilation2d(a, f, 1, "valid").sum())([X, w])
    # the windows' argmax: x cells 5 (filter cell (0, 1)), 8 (1, 1), 6 (1, 1), 7 (1, 1)
    np.testing.assert_array_equal(gx.numpy().reshape(3, 3), [[0, 1, 0], [0, 0, 1], [0, 1, 1]])
    np.testing.assert_array_equal(gw.numpy().reshape(2, 2), [[0, 1], [0, 3]])


def test_padding_never_wins():
    x = tf.tensor(-np.arange(1.0, 26.0).reshape(1, 5, 5, 1))
    y = tf.dilation2d(x, tf.zeros([3, 3, 1]), 1, "same")
    assert float(y.max().item()) < 0
    np.testing.assert_array_equal(y.numpy(), ref_dilation(x.numpy().astype(float),
                                                          np.zeros((3, 3, 1)), 1, "same"))


def test_window_that_sees_no_input_cell():
    # a 2x2 filter dilated by 3 over one cell, 'same': both rows/columns it reads are
    # padding, so the value is -inf and no gradient flows (TF.js gives MIN_SAFE_INTEGER)
    x, w = tf.ones([1, 1, 1, 1]), tf.zeros([2, 2, 1])
    y = tf.dilation2d(x, w, 1, "same", 3)
    assert y.shape == (1, 1, 1, 1) and np.isneginf(y.item())
    gx, gw = tf.grads(lambda a, f: tf.dilation2d(a, f, 1, "same", 3).sum())([x, w])
    assert gx.numpy().sum() == 0 and gw.numpy().sum() == 0


def test_second_derivatives_in_dy_gather_from_the_argmax():
    w = tf.tensor([0, -1, -1, 1], [2, 2, 1], F64)
    v = tf.tensor(np.arange(1.0, 10.0).reshape(1, 3, 3, 1))
    u = tf.tensor([10, 20, 30, 40], [2, 2, 1], F64)

    def h(dy):
        gx, gw = tf.grads(lambda a, f: (tf.dilation2d(a, f, 1, "valid") * dy).sum())([X, w])
        return (gx * v).sum() + (gw * u).sum()
    g = tf.grad(h)(tf.ones([1, 2, 2, 1], F64))
    # v at the x argmax (cells 2, 6, 8, 9) plus u at the filter argmax (20, 40, 40, 40)
    np.testing.assert_array_equal(g.numpy().ravel(), [22, 46, 48, 49])

    # third order: the gathers' gradients scatter back (exact)
    def k(vv, uu):
        def inner(dy):
            gx, gw = tf.grads(lambda a, f: (tf.dilation2d(a, f, 1, "valid") * dy).sum())([X, w])
            return (gx * vv).sum() + (gw * uu).sum()
        return tf.grad(inner)(tf.ones([1, 2, 2, 1], F64)).sum()
    gv, gu = tf.grads(k)([v, u])
    np.testing.assert_array_equal(gv.numpy().reshape(3, 3), [[0, 1, 0], [0, 0, 1], [0, 1, 1]])
    np.testing.assert_array_equal(gu.numpy().reshape(2, 2), [[0, 1], [0, 3]])


def test_second_derivative_in_x_and_filter_comes_only_through_y():
    w = tf.tensor([0, -1, -1, 1], [2, 2, 1], F64)
    h = tf.grad(lambda a: tf.grad(lambda b: tf.dilation2d(b, w, 1, "valid").square().sum())(a)
                .sum())
    # d/dx sum(2 * y * dy/dx): each x argmax gets 2 per window it wins; the argmax is constant
    np.testing.assert_array_equal(h(X).numpy().reshape(3, 3), [[0, 2, 0], [0, 0, 2], [0, 2, 2]])


def test_gradients_are_euler_homogeneous():
    """y is positively homogeneous of degree 1 in (x, filter) jointly, so
    <x, dL/dx> + <filter, dL/dfilter> = <y, dy>; and each dy goes to exactly one x cell and
    one filter cell."""
    rng = np.random.default_rng(3)
    for strides, pad, dil in [(1, "same", 1), (2, "same", 1), (1, "valid", 2), (2, "valid", 1),
                              ((1, 2), "same", 1), (1, "same", (2, 1))]:
        x = tf.tensor(rng.normal(size=(2, 6, 5, 3)), dtype=F64)
        w = tf.tensor(rng.normal(size=(3, 2, 3)), dtype=F64)
        y = tf.dilation2d(x, w, strides, pad, dil)
        dy = tf.tensor(rng.normal(size=y.shape), dtype=F64)
        gx, gw = tf.grads(lambda a, f: (tf.dilation2d(a, f, strides, pad, dil) * dy).sum())(
            [x, w])
        lhs = float((y * dy).sum().item())
        rhs = float((x * gx).sum().item() + (w * gw).sum().item())
        assert abs(lhs - rhs) < 1e-9 * max(1, abs(lhs))
        total = float(dy.sum().item())
        assert abs(float(gx.sum().item()) - total) < 1e-9
        assert abs(float(gw.sum().item()) - total) < 1e-9


def test_dtypes_and_names():
    xi = tf.tensor([[[[1], [2]], [[3], [4]]]], dtype="int32")
    y = tf.dilation2d(xi, tf.tensor([[[1]], [[2]]], dtype="int32"), 1, "same")
    assert y.dtype == "int32"
    np.testing.assert_array_equal(y.numpy().ravel(), [5, 6, 4, 5])
    assert tf.dilation2d(xi, tf.zeros([1, 1, 1]), 1, "valid").dtype == "float32"
    assert tf.dilation2d(X, tf.zeros([1, 1, 1], F64), 1, "valid").dtype == F64
    assert X.dilation2d(tf.zeros([1, 1, 1], F64), 1, "valid").shape == (1, 3, 3, 1)
    assert tf.dilation2d is getattr(tf, "dilation2d") and "dilation2d" in tf.__all__
    from flowgrad.ops import pool as P
    names = [p.name for p in (P.DILATION, P.DILATION_INPUT, P.DILATION_FILTER,
                              P.DILATION_GATHER_INPUT, P.DILATION_GATHER_FILTER)]
    assert names == ["Dilation2D", "Dilation2DBackpropInput", "Dilation2DBackpropFilter",
                     "Dilation2DBackpropInputGrad", "Dilation2DBackpropFilterGrad"]


# ---------------------------------------------------------------- errors

X4 = tf.ones([1, 4, 4, 2])
W = tf.zeros([2, 2, 2])


def row(id_, fn, cls, message):
    return pytest.param(fn, cls, message, id=id_)


ERRORS = [
    row("rank", lambda: tf.dilation2d(tf.ones([4, 4]), W, 1, "same"), ShapeError,
        "Error in dilation2d: input must be rank 4, but got rank 2 (shape [4, 4]); rank 3 "
        "means a batch of one."),
    row("filter-rank", lambda: tf.dilation2d(X4, tf.zeros([2, 2, 2, 1]), 1, "same"),
        ShapeError, "Error in dilation2d: filter must be rank 3, but got rank 4 (shape "
        "[2, 2, 2, 1]): [filter_height, filter_width, depth]."),
    row("depth", lambda: tf.dilation2d(X4, tf.zeros([2, 2, 3]), 1, "same"), ShapeError,
        "Error in dilation2d: the filter's depth (3) must match the input's depth (2)"),
    row("data-format", lambda: tf.dilation2d(X4, W, 1, "same", 1, "NCHW"), ArgumentError,
        "Error in dilation2d: only NHWC is currently supported, but got dataFormat 'NCHW'"),
    row("pad", lambda: tf.dilation2d(X4, W, 1, 1), ArgumentError,
        "Error in dilation2d: pad must be 'same' or 'valid', got 1"),
    row("strides-length", lambda: tf.dilation2d(X4, W, [1, 1, 1], "same"), ArgumentError,
        "Error in dilation2d: strides must be an int or a list of 2 ints, got [1, 1, 1]"),
    row("dilations-zero", lambda: tf.dilation2d(X4, W, 1, "same", 0), ArgumentError,
        "dilation2d: dilations must be >= 1, got 0"),
    row("empty", lambda: tf.dilation2d(X4, tf.zeros([5, 5, 2]), 1, "valid"), ShapeError,
        "Error in dilation2d: the output would be empty: input spatial shape [4, 4], window "
        "[5, 5] (dilated to [5, 5]), strides [1, 1], pad 'valid' give output [0, 0]."),
]


@pytest.mark.parametrize("fn,cls,message", ERRORS)
def test_errors(fn, cls, message):
    with pytest.raises(cls, match=re.escape(message)):
        fn()
