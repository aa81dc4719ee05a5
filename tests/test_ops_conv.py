"""Convolutions: forward against direct-sum NumPy references, gradients (to order 2, for x
and the filter, dilated too) against finite differences, both col2im strategies, the
adjoint identities as properties, TF.js's shape conventions, and every error message."""
import functools
import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, ShapeError
from flowgrad.ops import conv as conv_mod
from opcheck import BACKENDS, Case, run_case

F64 = "float64"


# ---------------------------------------------------------------- NumPy references
# Direct sums over output and kernel positions, channels last; TF.js's padding rules.

def tup(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def rounded(v, mode):
    return {None: math.trunc, "floor": math.floor, "ceil": math.ceil,
            "round": lambda a: math.floor(a + 0.5)}[mode](v)


def tf_padding(xs, k, s, d, pad, mode=None, first=False):
    """(before, out) per spatial axis, by TF.js's rules."""
    before, out = [], []
    for i, (x, kk, ss, dd) in enumerate(zip(xs, k, s, d)):
        eff = (kk - 1) * dd + 1
        if pad == "same":
            o = -(-x // ss)
            b = max(0, (o - 1) * ss + eff - x) // 2
        elif pad == "valid":
            o, b = -(-(x - eff + 1) // ss), 0
        elif isinstance(pad, int):
            o, b = rounded((x - eff + 2 * pad) / ss + 1, mode), pad
        else:
            t, e = (pad[2:] if first else pad[1:-1])[i]
            o, b = rounded((x - eff + t + e) / ss + 1, mode), t
        before.append(b)
        out.append(o)
    return before, out


def ref_conv(x, w, strides, pad, dil=1, mode=None, depthwise=False, first=False):
    n = x.ndim - 2
    if first:
        x = np.moveaxis(x, 1, -1)
    s, d, k = tup(strides, n), tup(dil, n), w.shape[:n]
    before, out = tf_padding(x.shape[1:1 + n], k, s, d, pad, mode, first)
    cout = w.shape[-1] * (x.shape[-1] if depthwise else 1)
    y = np.zeros((x.shape[0], *out, cout))
    for o in np.ndindex(*out):
        for j in np.ndindex(*k):
            p = tuple(o[i] * s[i] + j[i] * d[i] - before[i] for i in range(n))
            if all(0 <= p[i] < x.shape[1 + i] for i in range(n)):
                v = x[(slice(None),) + p]
                if depthwise:
                    y[(slice(None),) + o] += (v[:, :, None] * w[j][None]).reshape(len(v), -1)
                else:
                    y[(slice(None),) + o] += v @ w[j]
    return np.moveaxis(y, -1, 1) if first else y


def ref_conv_transpose(y, w, out_shape, strides, pad, mode=None):
    """The scatter that conv's input gradient is: each y[o] spreads through w onto x."""
    n = y.ndim - 2
    s, k = tup(strides, n), w.shape[:n]
    before, out = tf_padding(out_shape[1:1 + n], k, s, (1,) * n, pad, mode)
    assert tuple(out) == y.shape[1:1 + n]
    x = np.zeros(out_shape)
    for o in np.ndindex(*out):
        for j in np.ndindex(*k):
            p = tuple(o[i] * s[i] + j[i] - before[i] for i in range(n))
            if all(0 <= p[i] < out_shape[1 + i] for i in range(n)):
                x[(slice(None),) + p] += y[(slice(None),) + o] @ w[j].T
    return x


def batched(f):
    """A reference for a rank-(n+1) input: add the batch axis and take it away."""
    return lambda x, *a: f(x[None], *a)[0]


# ---------------------------------------------------------------- the table

def c2(name, xs, ws, strides, pad, dil=(1, 1), mode=None, fmt="NHWC", order=2):
    first = fmt == "NCHW"
    return Case(f"conv2d[{name}]",
                lambda x, w: tf.conv2d(x, w, strides, pad, fmt, dil, mode),
                lambda x, w: ref_conv(x, w, strides, pad, dil, mode, first=first),
                [(xs, "small"), (ws, "small")], order)


EXPL = [[0, 0], [2, 0], [1, 3], [0, 0]]
CASES = [
    c2("same", (2, 5, 4, 2), (3, 3, 2, 3), 1, "same"),
    c2("same-even-kernel", (1, 5, 4, 2), (2, 2, 2, 2), 1, "same"),
    c2("valid", (2, 5, 4, 2), (3, 2, 2, 3), 1, "valid"),
    c2("same-stride2", (2, 5, 6, 2), (3, 3, 2, 2), 2, "same"),
    c2("valid-stride21", (1, 6, 5, 2), (3, 2, 2, 2), (2, 1), "valid"),
    c2("pad1", (1, 5, 4, 2), (3, 3, 2, 2), 1, 1),
    c2("pad1-stride2-ceil", (1, 6, 5, 2), (3, 3, 2, 2), 2, 1, mode="ceil"),
    c2("pad2-stride3-round", (1, 6, 5, 1), (2, 3, 1, 2), 3, 2, mode="round"),
    c2("explicit", (1, 4, 4, 2), (3, 2, 2, 2), 1, EXPL),
    c2("explicit-stride2", (1, 5, 4, 2), (2, 3, 2, 2), 2, EXPL),
    c2("dilated-same", (1, 6, 5, 2), (2, 3, 2, 2), 1, "same", (2, 2)),
    c2("dilated-valid", (2, 6, 6, 2), (2, 2, 2, 3), 1, "valid", (3, 2)),
    c2("dilated-explicit", (1, 5, 5, 1), (2, 2, 1, 2), 1, EXPL, (2, 1)),
    # more input than output channels: the input gradient takes the adjoint-window path
    c2("wide-in", (1, 5, 5, 4), (3, 3, 4, 1), 1, "same"),
    c2("wide-in-dilated", (1, 6, 5, 3), (2, 2, 3, 1), 1, "same", (2, 2)),
    c2("nchw-same", (2, 2, 5, 4), (3, 3, 2, 3), 1, "same", fmt="NCHW"),
    c2("nchw-explicit-stride2", (1, 2, 5, 5), (3, 2, 2, 2), 2, [[0, 0], [0, 0], [1, 2],
                                                                  [0, 1]], fmt="NCHW"),
    Case("conv2d[rank3]", lambda x, w: tf.conv2d(x, w, 1, "same"),
         batched(lambda x, w: ref_conv(x, w, 1, "same")), [((4, 4, 2), "small"),
                                                           ((2, 2, 2, 2), "small")]),
    Case("conv1d[same]", lambda x, w: tf.conv1d(x, w, 1, "same"),
         lambda x, w: ref_conv(x, w, 1, "same"), [((2, 7, 2), "small"),
                                                  ((3, 2, 3), "small")]),
    Case("conv1d[valid-stride2]", lambda x, w: tf.conv1d(x, w, 2, "valid"),
         lambda x, w: ref_conv(x, w, 2, "valid"), [((2, 8, 2), "small"),
                                                   ((3, 2, 2), "small")]),
    Case("conv1d[dilated-explicit]",
         lambda x, w: tf.conv1d(x, w, 1, [[0, 0], [3, 1], [0, 0]], dilation=2),
         lambda x, w: ref_conv(x, w, 1, [[0, 0], [3, 1], [0, 0]], 2),
         [((1, 6, 2), "small"), ((3, 2, 2), "small")]),
    Case("conv1d[ncw-rank2]", lambda x, w: tf.conv1d(x, w, 1, "same", "NCW"),
         lambda x, w: ref_conv(x[None], w, 1, "same", first=True)[0],
         [((2, 6), "small"), ((2, 2, 3), "small")]),
    Case("conv3d[same]", lambda x, w: tf.conv3d(x, w, 1, "same"),
         lambda x, w: ref_conv(x, w, 1, "same"), [((1, 3, 4, 3, 2), "small"),
                                                  ((2, 2, 2, 2, 2), "small")]),
    Case("conv3d[valid-stride]", lambda x, w: tf.conv3d(x, w, (2, 1, 2), "valid"),
         lambda x, w: ref_conv(x, w, (2, 1, 2), "valid"), [((2, 4, 3, 4, 1), "small"),
                                                           ((2, 2, 2, 1, 2), "small")]),
    Case("conv3d[dilated-ncdhw]",
         lambda x, w: tf.conv3d(x, w, 1, "same", "NCDHW", (2, 1, 2)),
         lambda x, w: ref_conv(x, w, 1, "same", (2, 1, 2), first=True),
         [((1, 2, 4, 3, 4), "small"), ((2, 2, 2, 2, 1), "small")]),
    Case("depthwise[same]", lambda x, w: tf.depthwise_conv2d(x, w, 1, "same"),
         lambda x, w: ref_conv(x, w, 1, "same", depthwise=True),
         [((2, 4, 5, 2), "small"), ((3, 2, 2, 2), "small")]),
    Case("depthwise[valid-stride2]", lambda x, w: tf.depthwise_conv2d(x, w, 2, "valid"),
         lambda x, w: ref_conv(x, w, 2, "valid", depthwise=True),
         [((1, 6, 5, 3), "small"), ((2, 2, 3, 1), "small")]),
    Case("depthwise[dilated-pad1]",
         lambda x, w: tf.depthwise_conv2d(x, w, 1, 1, dilations=(2, 2)),
         lambda x, w: ref_conv(x, w, 1, 1, (2, 2), depthwise=True),
         [((1, 5, 5, 2), "small"), ((2, 2, 2, 3), "small")]),
    Case("depthwise[nchw-mult1]", lambda x, w: tf.depthwise_conv2d(x, w, 1, "same", "NCHW"),
         lambda x, w: ref_conv(x, w, 1, "same", depthwise=True, first=True),
         [((1, 3, 4, 4), "small"), ((3, 3, 3, 1), "small")]),
    Case("separable[same]", lambda x, d, p: tf.separable_conv2d(x, d, p, 1, "same"),
         lambda x, d, p: ref_conv(ref_conv(x, d, 1, "same", depthwise=True), p, 1, "valid"),
         [((1, 4, 4, 2), "small"), ((2, 2, 2, 2), "small"), ((1, 1, 4, 3), "small")]),
    Case("separable[dilated]",
         lambda x, d, p: tf.separable_conv2d(x, d, p, 1, "valid", (2, 1)),
         lambda x, d, p: ref_conv(ref_conv(x, d, 1, "valid", (2, 1), depthwise=True), p, 1,
                                  "valid"),
         [((1, 5, 4, 2), "small"), ((2, 2, 2, 1), "small"), ((1, 1, 2, 2), "small")]),
    Case("conv2d_transpose[same-stride2]",
         lambda y, w: tf.conv2d_transpose(y, w, [2, 5, 4, 2], 2, "same"),
         lambda y, w: ref_conv_transpose(y, w, (2, 5, 4, 2), 2, "same"),
         [((2, 3, 2, 3), "small"), ((3, 3, 2, 3), "small")]),
    Case("conv2d_transpose[valid]",
         lambda y, w: tf.conv2d_transpose(y, w, [1, 5, 4, 3], 1, "valid"),
         lambda y, w: ref_conv_transpose(y, w, (1, 5, 4, 3), 1, "valid"),
         [((1, 4, 2, 2), "small"), ((2, 3, 3, 2), "small")]),
    Case("conv2d_transpose[rank3-pad1-floor]",
         lambda y, w: tf.conv2d_transpose(y, w, [6, 5, 1], 2, 1, "floor"),
         lambda y, w: ref_conv_transpose(y[None], w, (1, 6, 5, 1), 2, 1, "floor")[0],
         [((3, 3, 2), "small"), ((3, 3, 1, 2), "small")]),
    Case("conv3d_transpose[same-stride2]",
         lambda y, w: tf.conv3d_transpose(y, w, [1, 3, 4, 3, 2], 2, "same"),
         lambda y, w: ref_conv_transpose(y, w, (1, 3, 4, 3, 2), 2, "same"),
         [((1, 2, 2, 2, 2), "small"), ((2, 2, 2, 2, 2), "small")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- both col2im strategies

GEOMETRIES = [((1, 1), (1, 1), "same"), ((2, 2), (1, 1), "same"), ((2, 3), (1, 1), "valid"),
              ((1, 1), (2, 3), "same"), ((1, 1), (1, 2), EXPL), ((3, 2), (1, 1), EXPL),
              ((2, 2), (1, 1), 1), ((1, 1), (3, 3), [[0, 0], [5, 0], [0, 4], [0, 0]])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strides,dil,pad", GEOMETRIES, ids=str)
def test_col2im_strategies_agree(strides, dil, pad, backend, monkeypatch):
    monkeypatch.setattr(conv_mod, "COL2IM", None)
    prev = tf.set_backend(backend)
    try:
        _col2im_strategies_agree(strides, dil, pad, monkeypatch)
    finally:
        tf.set_backend(prev)


def _col2im_strategies_agree(strides, dil, pad, monkeypatch):
    rng = np.random.default_rng(3)
    x = tf.tensor(rng.normal(size=(2, 7, 6, 3)), dtype=F64)
    w = tf.tensor(rng.normal(size=(3, 2, 3, 2)), dtype=F64)
    op = tf.conv2d
    dy = tf.tensor(rng.normal(size=op(x, w, strides, pad, "NHWC", dil).shape), dtype=F64)
    got = {}
    for mode in ("loop", "adjoint"):
        monkeypatch.setattr(conv_mod, "COL2IM", mode)
        gx = tf.grad(lambda a: (op(a, w, strides, pad, "NHWC", dil) * dy).sum())(x)
        got[mode] = gx.numpy()
    np.testing.assert_allclose(got["loop"], got["adjoint"], rtol=1e-12, atol=1e-12)
    # and both are the adjoint of the forward
    lhs = float((op(x, w, strides, pad, "NHWC", dil) * dy).sum().item())
    assert abs(lhs - float((got["loop"] * x.numpy()).sum())) < 1e-9 * max(1, abs(lhs))


# ---------------------------------------------------------------- generic extensions
# Each window extension's generic version (the array API alone) against NumPy's override,
# on NumPy arrays: any geometry, padding cells that no output reaches included.

@st.composite
def window_setup(draw):
    n = draw(st.integers(1, 3))
    k = tuple(draw(st.integers(1, 3)) for _ in range(n))
    s = tuple(draw(st.integers(1, 3)) for _ in range(n))
    d = tuple(draw(st.integers(1, 2)) for _ in range(n))
    out = tuple(draw(st.integers(1, 3)) for _ in range(n))
    before = tuple(draw(st.integers(-3, 3)) for _ in range(n))
    size = tuple(draw(st.integers(1, 6)) for _ in range(n))
    return n, k, s, d, out, before, size, draw(st.integers(1, 2)), draw(st.integers(0, 99))


@settings(max_examples=80, deadline=None)
@given(window_setup())
def test_generic_window_extensions_match_numpy(setup):
    from flowgrad.backends import ext, namespace
    n, k, s, d, out, before, size, lead, seed = setup
    B = namespace("numpy")
    generic = {name: functools.partial(ext.EXTENSIONS[name], B) for name in
               ("windows", "reduce_windows", "scatter_windows", "depthwise_dot")}
    rng = np.random.default_rng(seed)
    span = tuple((out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in range(n))
    xp = rng.normal(size=(2, *span, 3))
    np.testing.assert_array_equal(generic["windows"](xp, out, s, d, k),
                                  B.windows(xp, out, s, d, k))
    for kind in ("sum", "max"):
        np.testing.assert_allclose(generic["reduce_windows"](xp, out, s, d, k, kind),
                                   B.reduce_windows(xp, out, s, d, k, kind), atol=1e-12)
    w = rng.normal(size=(*k, 3, 2))
    np.testing.assert_allclose(generic["depthwise_dot"](B.windows(xp, out, s, d, k), w),
                               B.depthwise_dot(B.windows(xp, out, s, d, k), w), atol=1e-12)
    parts = rng.normal(size=(math.prod(k),) + (2,) * lead + out + (3,))
    shape = (2,) * lead + size + (3,)
    want = B.scatter_windows(iter(parts), shape, lead, out, s, d, k, before)
    np.testing.assert_allclose(
        generic["scatter_windows"](iter(parts), shape, lead, out, s, d, k, before), want,
        atol=1e-12)
    # the scatter is the adjoint of the (padded) windows' read
    flat = xp.shape[:1] + size + xp.shape[-1:]
    if lead == 1 and all(b >= 0 and b + sz <= sp for b, sz, sp in zip(before, size, span)):
        x = rng.normal(size=flat)
        xpad = np.zeros_like(xp)
        xpad[(slice(None),) + tuple(slice(b, b + sz) for b, sz in zip(before, size))] = x
        cols = np.moveaxis(B.windows(xpad, out, s, d, k).reshape(
            (2,) + out + (-1, 3)), 1 + n, 0)
        lhs = float((cols * parts[:, :2]).sum())
        assert abs(lhs - float((want * x).sum())) < 1e-9 * max(1, abs(lhs))


# ---------------------------------------------------------------- adjoint properties

@st.composite
def conv_setup(draw):
    n = draw(st.sampled_from([1, 2, 3]))
    k = tuple(draw(st.integers(1, 3)) for _ in range(n))
    strided = draw(st.booleans())
    s = tuple(draw(st.integers(1, 3)) if strided else 1 for _ in range(n))
    d = tuple(1 if strided else draw(st.integers(1, 2)) for _ in range(n))
    eff = [(k[i] - 1) * d[i] + 1 for i in range(n)]
    pad = draw(st.sampled_from(["same", "valid", "number", "explicit"]))
    if pad == "number":
        pad = draw(st.integers(0, 2))
    elif pad == "explicit":
        pad = [[0, 0]] + [[draw(st.integers(0, 3)), draw(st.integers(0, 3))]
                          for _ in range(n)] + [[0, 0]]
    xs = tuple(draw(st.integers(eff[i], eff[i] + 4)) for i in range(n))
    c, o = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2 ** 16))
    return n, xs, k, s, d, pad, c, o, seed


def _conv_fn(n):
    return {1: tf.conv1d, 2: tf.conv2d, 3: tf.conv3d}[n]


@settings(max_examples=60, deadline=None)
@given(conv_setup(), st.sampled_from([None, "loop", "adjoint"]))
def test_adjoint_identities(setup, col2im):
    """<conv(x, w), y> = <x, conv_transpose(y, w)> = <w, filter_grad(x, y)>, any geometry."""
    n, xs, k, s, d, pad, c, o, seed = setup
    rng = np.random.default_rng(seed)
    x = tf.tensor(rng.normal(size=(2, *xs, c)), dtype=F64)
    w = tf.tensor(rng.normal(size=(*k, c, o)), dtype=F64)
    conv = _conv_fn(n)
    old = conv_mod.COL2IM
    conv_mod.COL2IM = col2im
    try:
        fmt = {1: "NWC", 2: "NHWC", 3: "NDHWC"}[n]
        y = conv(x, w, s if n > 1 else s[0], pad, fmt, dilations_kw(n, d))
        yv = tf.tensor(rng.normal(size=y.shape), dtype=F64)
        lhs = float((y * yv).sum().item())
        gx, gw = tf.grads(lambda a, b: (conv(a, b, s if n > 1 else s[0], pad, fmt,
                                             dilations_kw(n, d)) * yv).sum())([x, w])
    finally:
        conv_mod.COL2IM = old
    tol = 1e-9 * max(1.0, abs(lhs))
    assert abs(lhs - float((x.numpy() * gx.numpy()).sum())) < tol
    assert abs(lhs - float((w.numpy() * gw.numpy()).sum())) < tol
    if n > 1 and d == (1,) * n:
        # the public transposed convolution is the same adjoint
        t = (tf.conv2d_transpose if n == 2 else tf.conv3d_transpose)(
            yv, w, list(x.shape), s, pad)
        assert abs(lhs - float((x.numpy() * t.numpy()).sum())) < tol


def dilations_kw(n, d):
    return d[0] if n == 1 else d


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 2), st.sampled_from(["same", "valid", 1]),
       st.integers(0, 2 ** 16))
def test_depthwise_adjoint(m, dil, pad, seed):
    rng = np.random.default_rng(seed)
    x = tf.tensor(rng.normal(size=(2, 5, 6, 3)), dtype=F64)
    w = tf.tensor(rng.normal(size=(2, 3, 3, m)), dtype=F64)
    y = tf.depthwise_conv2d(x, w, 1, pad, "NHWC", dil)
    yv = tf.tensor(rng.normal(size=y.shape), dtype=F64)
    lhs = float((y * yv).sum().item())
    gx, gw = tf.grads(lambda a, b: (tf.depthwise_conv2d(a, b, 1, pad, "NHWC", dil)
                                    * yv).sum())([x, w])
    assert abs(lhs - float((x.numpy() * gx.numpy()).sum())) < 1e-9 * max(1, abs(lhs))
    assert abs(lhs - float((w.numpy() * gw.numpy()).sum())) < 1e-9 * max(1, abs(lhs))


# ---------------------------------------------------------------- conventions

def test_same_padding_puts_the_extra_cell_after():
    # 3x3 input, 2x2 kernel, 'same': no padding before, one row and column after (TF)
    x = tf.tensor(list(range(1, 10)), [1, 3, 3, 1])
    y = tf.conv2d(x, tf.ones([2, 2, 1, 1]), 1, "same").reshape([3, 3])
    np.testing.assert_array_equal(y.numpy(), [[12, 16, 9], [24, 28, 15], [15, 17, 9]])


@pytest.mark.parametrize("mode,size", [(None, 3), ("floor", 3), ("round", 4),
                                       ("ceil", 4)])
def test_dim_rounding_modes(mode, size):
    # (6 - 3 + 2*1) / 2 + 1 = 3.5
    y = tf.conv2d(tf.ones([1, 6, 6, 1]), tf.ones([3, 3, 1, 1]), 2, 1, "NHWC", 1, mode)
    assert y.shape == (1, size, size, 1)


@pytest.mark.parametrize("pad,strides,size", [("same", 1, 7), ("same", 2, 4),
                                              ("same", 3, 3), ("valid", 1, 5),
                                              ("valid", 2, 3), ("valid", 3, 2)])
def test_output_sizes_follow_tfjs(pad, strides, size):
    y = tf.conv2d(tf.ones([1, 7, 7, 1]), tf.ones([3, 3, 1, 1]), strides, pad)
    assert y.shape == (1, size, size, 1)


def test_dilated_gradients_work():
    # TF.js: "dilation rates greater than 1 are not yet supported in gradients"
    x = tf.ones([1, 5, 5, 1])
    g = tf.grad(lambda w: tf.conv2d(x, w, 1, "valid", "NHWC", 2).sum())(tf.ones([2, 2, 1, 1]))
    np.testing.assert_array_equal(g.numpy().ravel(), [9, 9, 9, 9])


def test_grad_of_grad_of_conv2d_is_the_bilinear_cross_term():
    # f(x, w) = sum(conv(x, w)): d/dw of sum(df/dx) = conv of ones, window sums
    x = tf.tensor(np.arange(9.0).reshape(1, 3, 3, 1), dtype=F64)
    w = tf.ones([2, 2, 1, 1], F64)

    def inner(w_):
        return tf.grad(lambda a: tf.conv2d(a, w_, 1, "valid").sum())(x).sum()
    g = tf.grad(inner)(w)
    np.testing.assert_array_equal(g.numpy().ravel(), [4, 4, 4, 4])


def test_int_inputs_become_float32():
    x = tf.tensor([[[[1], [2]], [[3], [4]]]], dtype="int32")
    y = tf.conv2d(x, tf.ones([1, 1, 1, 1], "int32"), 1, "valid")
    assert y.dtype == "float32"


def test_mixed_float_dtypes_give_float64():
    y = tf.conv2d(tf.ones([1, 2, 2, 1]), tf.ones([1, 1, 1, 1], F64), 1, "valid")
    assert y.dtype == F64


def test_float32_stays_float32_through_gradients():
    x, w = tf.ones([1, 4, 4, 2]), tf.ones([3, 3, 2, 2])
    gx, gw = tf.grads(lambda a, b: tf.conv2d(a, b, 2, "same").sum())([x, w])
    assert gx.dtype == gw.dtype == "float32"


def test_kernel_names_are_tfjs():
    names = [p.name for fam in (conv_mod.CONV2D, conv_mod.CONV3D, conv_mod.DEPTHWISE)
             for p in fam]
    assert names == ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
                     "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
                     "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                     "DepthwiseConv2dNativeBackpropFilter"]


# ---------------------------------------------------------------- errors

X4, W4 = tf.ones([1, 4, 4, 2]), tf.ones([2, 2, 2, 3])


def row(id_, fn, cls, message):
    return pytest.param(fn, cls, message, id=id_)


ERRORS = [
    row("input-rank", lambda: tf.conv2d(tf.ones([4, 2]), W4, 1, "same"), ShapeError,
        "Error in conv2d: input must be rank 4, but got rank 2 (shape [4, 2])"),
    row("filter-rank", lambda: tf.conv2d(X4, tf.ones([2, 2, 2]), 1, "same"), ShapeError,
        "Error in conv2d: filter must be rank 4, but got rank 3 (shape [2, 2, 2])."),
    row("depth", lambda: tf.conv2d(X4, tf.ones([2, 2, 3, 1]), 1, "same"), ShapeError,
        "Error in conv2d: depth of input (2) must match input depth for filter 3"),
    row("depth-nchw", lambda: tf.conv2d(X4, tf.ones([2, 2, 2, 1]), 1, "same", "NCHW"),
        ShapeError, "Error in conv2d: depth of input (4) must match input depth for filter 2"),
    row("depthwise-channels", lambda: tf.depthwise_conv2d(X4, tf.ones([2, 2, 3, 1]), 1,
                                                          "same"), ShapeError,
        "Error in depthwise_conv2d: number of input channels (2) must match the inChannels "
        "dimension in filter 3"),
    row("strides-and-dilations", lambda: tf.conv2d(X4, W4, 2, "same", "NHWC", 2),
        ArgumentError, "Error in conv2d: Either strides or dilations must be 1. Got strides "
        "2 and dilations '2'"),
    row("conv1d-stride-dilation", lambda: tf.conv1d(tf.ones([1, 5, 1]), tf.ones([2, 1, 1]),
                                                    2, "same", "NWC", 2), ArgumentError,
        "Error in conv1d: Either stride or dilation must be 1. Got stride 2 and dilation '2'"),
    row("strides-length", lambda: tf.conv2d(X4, W4, [1, 2, 3], "same"), ArgumentError,
        "Error in conv2d: strides must be an int or a list of 2 ints, got [1, 2, 3]"),
    row("strides-zero", lambda: tf.conv2d(X4, W4, 0, "same"), ArgumentError,
        "conv2d: strides must be >= 1, got 0"),
    row("dilations-float", lambda: tf.conv2d(X4, W4, 1, "same", "NHWC", [1, 1.5]),
        ArgumentError, "conv2d: dilations[1] must be an integer, got 1.5"),
    row("data-format", lambda: tf.conv2d(X4, W4, 1, "same", "HWCN"), ArgumentError,
        "Error in conv2d: Unknown dataFormat 'HWCN': use 'NHWC' (channels last, the default) "
        "or 'NCHW' (channels first)"),
    row("data-format-3d", lambda: tf.conv3d(tf.ones([1, 2, 2, 2, 1]),
                                            tf.ones([1, 1, 1, 1, 1]), 1, "same", "NHWC"),
        ArgumentError, "Error in conv3d: Unknown dataFormat 'NHWC': use 'NDHWC'"),
    row("pad-string", lambda: tf.conv2d(X4, W4, 1, "full"), ArgumentError,
        "Unknown padding parameter: 'full' (Error in conv2d: pad must be 'same', 'valid', a "
        "non-negative int, or the explicit form"),
    row("pad-none", lambda: tf.conv2d(X4, W4, 1, None), ArgumentError,
        "Unknown padding parameter: None"),
    row("pad-negative", lambda: tf.conv2d(X4, W4, 1, -1), ArgumentError,
        "Error in conv2d: pad must be non-negative, got -1"),
    row("explicit-length", lambda: tf.conv2d(X4, W4, 1, [[1, 1], [1, 1]]), ArgumentError,
        "Error in conv2d: explicit padding must be 4 pairs of non-negative ints, "
        "[[0, 0], [before, after], [before, after], [0, 0]]; got [[1, 1], [1, 1]]"),
    row("explicit-pair", lambda: tf.conv2d(X4, W4, 1, [[0, 0], [1], [1, 1], [0, 0]]),
        ArgumentError, "Error in conv2d: explicit padding must be 4 pairs of non-negative "
        "ints"),
    row("explicit-negative", lambda: tf.conv2d(X4, W4, 1, [[0, 0], [1, -1], [1, 1], [0, 0]]),
        ArgumentError, "explicit padding must be 4 pairs of non-negative ints"),
    row("explicit-channels", lambda: tf.conv2d(X4, W4, 1, [[0, 0], [1, 1], [1, 1], [1, 0]]),
        ArgumentError, "Error in conv2d: explicit padding of the batch and channel axes must "
        "be [0, 0]; got [[0, 0], [1, 1], [1, 1], [1, 0]] (the form is [[0, 0], "
        "[before, after], [before, after], [0, 0]])"),
    row("explicit-nchw-form", lambda: tf.conv2d(tf.ones([1, 2, 4, 4]), W4, 1,
                                                [[0, 0], [1, 1], [1, 1], [0, 0]], "NCHW"),
        ArgumentError, "(the form is [[0, 0], [0, 0], [before, after], [before, after]])"),
    row("rounding-with-string-pad", lambda: tf.conv2d(X4, W4, 1, "same", "NHWC", 1, "ceil"),
        ArgumentError, "Error in conv2d: pad must be an integer when using dimRoundingMode "
        "ceil but got pad same."),
    row("rounding-unknown", lambda: tf.conv2d(X4, W4, 1, 1, "NHWC", 1, "up"), ArgumentError,
        "Error in conv2d: Unknown roundingMode 'up': use 'floor', 'round' or 'ceil'"),
    row("empty-output", lambda: tf.conv2d(X4, tf.ones([3, 3, 2, 1]), 1, "valid", "NHWC", 2),
        ShapeError, "Error in conv2d: the output would be empty: input spatial shape [4, 4], "
                    "window [3, 3] (dilated to [5, 5]), strides [1, 1], pad 'valid' give "
                    "output [0, 0]."),
    row("sep-depthwise-rank", lambda: tf.separable_conv2d(X4, tf.ones([2, 2, 2]),
                                                          tf.ones([1, 1, 2, 1]), 1, "same"),
        ShapeError, "Error in separable_conv2d: depthwise filter must be rank 4, but got "
        "rank 3"),
    row("sep-pointwise-rank", lambda: tf.separable_conv2d(X4, tf.ones([2, 2, 2, 1]),
                                                          tf.ones([2, 1]), 1, "same"),
        ShapeError, "Error in separable_conv2d: pointwise filter must be rank 4, but got "
        "rank 2"),
    row("sep-pointwise-1x1", lambda: tf.separable_conv2d(X4, tf.ones([2, 2, 2, 1]),
                                                         tf.ones([2, 1, 2, 1]), 1, "same"),
        ShapeError, "Error in separable_conv2d: the pointwise filter must be [1, 1, "
        "inChannels * channelMultiplier, outChannels], but got shape [2, 1, 2, 1]."),
    row("sep-pointwise-depth", lambda: tf.separable_conv2d(X4, tf.ones([2, 2, 2, 2]),
                                                           tf.ones([1, 1, 2, 1]), 1, "same"),
        ShapeError, "Error in separable_conv2d: the third dimension of pointwise filter must "
        "be 4, but got 2 (inChannels 2 x channelMultiplier 2)."),
    row("t-rank-match", lambda: tf.conv2d_transpose(X4, W4, [4, 4, 2], 1, "same"),
        ShapeError, "Error in conv2d_transpose: Length of inShape (3) and rank of dy (4) "
        "must match"),
    row("t-x-rank", lambda: tf.conv2d_transpose(tf.ones([2, 2]), W4, [2, 2], 1, "same"),
        ShapeError, "Error in conv2d_transpose: x must be rank 4, but got rank 2."),
    row("t-filter-rank", lambda: tf.conv2d_transpose(X4, tf.ones([2, 2]), [1, 4, 4, 1], 1,
                                                     "same"),
        ShapeError, "Error in conv2d_transpose: filter must be rank 4, but got rank 2."),
    row("t-out-depth", lambda: tf.conv2d_transpose(tf.ones([1, 4, 4, 3]), W4, [1, 4, 4, 5],
                                                   1, "same"), ShapeError,
        "Error in conv2d_transpose: depth of output (5) must match output depth for filter 2"),
    row("t-in-depth", lambda: tf.conv2d_transpose(X4, W4, [1, 4, 4, 2], 1, "same"),
        ShapeError, "Error in conv2d_transpose: depth of input (2) must match input depth "
        "for filter 3"),
    row("t-misfit", lambda: tf.conv2d_transpose(tf.ones([1, 4, 4, 3]), W4, [1, 9, 9, 2], 1,
                                                "same"), ShapeError,
        "Error in conv2d_transpose: output_shape [1, 9, 9, 2] does not fit x of shape "
        "[1, 4, 4, 3]: convolving output_shape with this filter, strides [1, 1] and pad "
        "'same' gives [1, 9, 9] spatially"),
    row("t-rounding", lambda: tf.conv2d_transpose(tf.ones([1, 4, 4, 3]), W4, [1, 4, 4, 2],
                                                  1, "same", "ceil"), ArgumentError,
        "Error in conv2d_transpose: pad must be an integer when using dimRoundingMode ceil"),
    row("t-shape-entries", lambda: tf.conv2d_transpose(X4, W4, [1, 0, 4, 2], 1, "same"),
        ArgumentError, "conv2d_transpose: output_shape[1] must be >= 1, got 0"),
    row("t3-depth", lambda: tf.conv3d_transpose(tf.ones([1, 2, 2, 2, 1]),
                                                tf.ones([1, 1, 1, 2, 3]), [1, 2, 2, 2, 2],
                                                1, "same"), ShapeError,
        "Error in conv3d_transpose: depth of input (1) must match input depth for filter 3"),
]


@pytest.mark.parametrize("fn,cls,message", ERRORS)
def test_errors(fn, cls, message):
    with pytest.raises(cls, match=re.escape(message)):
        fn()


def test_geometry_is_exhaustive_over_small_cases():
    """Every (size, kernel, stride, dilation, pad) of a small range against the reference
    (forward only: a quick sweep for off-by-one errors at the borders)."""
    rng = np.random.default_rng(7)
    for xsz, k, s, d, pad in itertools.product([1, 2, 5], [1, 2, 3], [1, 2], [1, 2],
                                               ["same", "valid", 1]):
        if s > 1 and d > 1 or tf_padding([xsz], [k], [s], [d], pad)[1][0] <= 0:
            continue
        x = rng.normal(size=(1, xsz, 1))
        w = rng.normal(size=(k, 1, 2))
        got = tf.conv1d(tf.tensor(x, dtype=F64), tf.tensor(w, dtype=F64), s, pad, "NWC", d)
        np.testing.assert_allclose(got.numpy(), ref_conv(x, w, s, pad, d), atol=1e-12)
