"""Cumulative and selection ops (flowgrad/ops/scan.py): cumsum, cumprod, topk, bincount,
dense_bincount, search_sorted / lower_bound / upper_bound, meshgrid.

Table rows against NumPy references written here, gradients against finite differences to
order 2; cumprod with zeros against hand-computed gradients and Hessians; topk ties; every
error message; hypothesis properties."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from opcheck import BACKENDS, Case, run_case


# ---------------------------------------------------------------- references

def _excl(c, axis, unit):
    """c shifted one place forward along axis, ``unit`` shifted in."""
    head = np.full_like(np.take(c, [0], axis), unit)
    return np.concatenate([head, np.delete(c, -1, axis)], axis)


def scan_ref(op, unit):
    def ref(x, axis=0, exclusive=False, reverse=False):
        y = np.flip(x, axis) if reverse else x
        c = op(y, axis)
        if exclusive:
            c = _excl(c, axis, unit)
        return np.flip(c, axis) if reverse else c
    return ref


cumsum_ref = scan_ref(np.cumsum, 0)
cumprod_ref = scan_ref(np.cumprod, 1)


def cumprod_grad_ref(x, dy):
    """d/dx_i sum_j dy_j prod_{k<=j} x_k, by brute force (no division: exact with zeros)."""
    n = len(x)
    g = np.zeros(n)
    for i in range(n):
        for j in range(i, n):
            g[i] += dy[j] * np.prod([x[k] for k in range(j + 1) if k != i])
    return g


def topk_ref(x, k):
    # stable sort of -x: ties keep the lower index first
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, -1), idx


def bincount_ref(x, w, size):
    return np.array([w[x == v].sum() for v in range(size)])


def search_ref(seq, vals, side):
    if seq.ndim == 1:
        return np.searchsorted(seq, vals, side)
    return np.stack([np.searchsorted(s, v, side) for s, v in zip(seq, vals)])


X_INT = np.array([1, 4, 1, 0, 7, 4, 4])
X_INT2 = np.array([[0, 2, 2, 5], [1, 1, 3, 0]])
SEQ = np.array([[-1.0, 0.5, 0.5, 2.0, 3.5], [0.0, 1.0, 2.0, 3.0, 4.0]])
VALS = np.array([[0.5, -3.0, 2.0, 9.0], [2.5, 1.0, 1.0, -0.5]])   # ties on entries


def i32(a):
    return tf.tensor(a, dtype="int32")


# ---------------------------------------------------------------- the table

def scans(name, fn, ref, shape, order=2):
    rows = []
    for axis, ex, rev in [(0, False, False), (1, False, False), (-1, True, False),
                          (-2, False, True), (-1, True, True), (2, True, False)]:
        if axis >= len(shape) or axis < -len(shape):
            continue
        rows.append(Case(f"{name}[axis={axis},excl={ex:d},rev={rev:d}]",
                         (lambda a, e, r: lambda x: fn(x, a, e, r))(axis, ex, rev),
                         (lambda a, e, r: lambda x: ref(x, a, e, r))(axis, ex, rev),
                         [(shape, "real")], order))
    return rows


CASES = [
    *scans("cumsum", tf.cumsum, cumsum_ref, (3, 4)),
    *scans("cumsum3d", tf.cumsum, cumsum_ref, (2, 3, 2)),
    Case("cumsum_default", lambda x: x.cumsum(), lambda x: np.cumsum(x, 0), [((4,), "real")]),
    *scans("cumprod", tf.cumprod, cumprod_ref, (3, 4)),
    *scans("cumprod3d", tf.cumprod, cumprod_ref, (2, 3, 2)),
    Case("cumprod_method", lambda x: x.cumprod(), lambda x: np.cumprod(x, 0),
         [((5,), "real")], order=3),
    # zeros are no kink for a product: finite differences stay valid there
    Case("cumprod_zero", lambda x: tf.cumprod(x), lambda x: np.cumprod(x),
         [np.array([2.0, 0.0, 3.0])]),
    Case("cumprod_zeros", lambda x: tf.cumprod(x, 1, False, True),
         lambda x: cumprod_ref(x, 1, False, True),
         [np.array([[0.0, 1.5, 0.0, 2.0], [1.2, -0.7, 0.0, 0.0]])]),
    Case("cumprod_zeros_excl", lambda x: tf.cumprod(x, -1, True),
         lambda x: cumprod_ref(x, -1, True), [np.array([[0.0, 0.0, 1.5, -2.0, 0.5]])]),
    Case("topk", lambda x: list(tf.topk(x, 2)), lambda x: list(topk_ref(x, 2)),
         [((3, 4), "real")], exact=True),
    Case("topk_all_1d", lambda x: list(x.topk(5)), lambda x: list(topk_ref(x, 5)),
         [((5,), "real")], exact=True),
    Case("topk_unsorted", lambda x: tf.topk(x, 3, False).values,
         lambda x: np.take_along_axis(x, np.sort(topk_ref(x, 3)[1], -1), -1),
         [((2, 5), "real")], exact=True),
    Case("topk_values_times_x", lambda x: tf.top_k(x, 2)[0] * x[..., :2],
         lambda x: topk_ref(x, 2)[0] * x[..., :2], [((2, 4), "real")]),
    Case("bincount", lambda w: tf.bincount(i32(X_INT), w, 5),
         lambda w: bincount_ref(X_INT, w, 5), [((7,), "real")]),
    Case("bincount_square", lambda w: tf.bincount(i32(X_INT), w * w, 8),
         lambda w: bincount_ref(X_INT, w * w, 8), [((7,), "real")]),
    Case("dense_bincount", lambda w: tf.dense_bincount(i32(X_INT2), w, 4),
         lambda w: np.stack([bincount_ref(x, v, 4) for x, v in zip(X_INT2, w)]),
         [((2, 4), "real")]),
    Case("dense_bincount_binary", lambda w: tf.dense_bincount(i32(X_INT2), w, 4, True),
         lambda w: np.stack([np.isin(np.arange(4), x) for x in X_INT2]).astype(float),
         [((2, 4), "real")], order=0, exact=True),
    Case("search_sorted_left", lambda s, v: tf.search_sorted(s, v), lambda s, v:
         search_ref(s, v, "left"), [SEQ, VALS], order=0, exact=True),
    Case("search_sorted_right", lambda s, v: tf.search_sorted(s, v, "right"), lambda s, v:
         search_ref(s, v, "right"), [SEQ, VALS], order=0, exact=True),
    Case("lower_bound_1d", lambda s, v: tf.lower_bound(s, v),
         lambda s, v: np.searchsorted(s, v, "left"), [SEQ[0], VALS], order=0, exact=True),
    Case("upper_bound_1d", lambda s, v: tf.upper_bound(s, v),
         lambda s, v: np.searchsorted(s, v, "right"), [SEQ[0], VALS], order=0, exact=True),
    Case("meshgrid_xy", lambda x, y: tf.meshgrid(x, y),
         lambda x, y: list(np.meshgrid(x, y)), [((3,), "real"), ((2,), "real")]),
    Case("meshgrid_ij", lambda x, y: [g * g for g in tf.meshgrid(x, y, "ij")],
         lambda x, y: [g * g for g in np.meshgrid(x.ravel(), y, indexing="ij")],
         [((2, 2), "real"), ((3,), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- cumsum / cumprod

def test_cumsum_conventions():
    x = tf.tensor([1, 2, 3, 4], dtype="int32")
    assert tf.cumsum(x).dtype == "int32"
    assert tf.cumsum(x, 0, True).array_sync() == [0, 1, 3, 6]
    assert tf.cumsum(x, 0, False, True).array_sync() == [10, 9, 7, 4]
    assert tf.cumsum(x, 0, True, True).array_sync() == [9, 7, 4, 0]
    assert tf.cumsum(tf.tensor([True, True])).array_sync() == [1, 2]
    # a non-last and a negative axis (TF.js: transposed gradient, corrupt forward)
    m = tf.tensor([[1, 2, 3], [4, 5, 6]])
    assert tf.cumsum(m, -2).array_sync() == [[1, 2, 3], [5, 7, 9]]
    g = tf.grad(lambda x: (tf.cumsum(x, 0) * tf.tensor([[1, 2, 3], [4, 5, 6]])).sum())(m)
    assert g.array_sync() == [[5, 7, 9], [4, 5, 6]]
    assert tf.cumsum(tf.zeros([0, 3]), 0).shape == (0, 3)


@pytest.mark.parametrize("x, ex, rev, grad", [
    ([2, 0, 3], False, False, [1, 8, 0]),       # 1 + x1 + x1x2, x0 + x0x2, x0x1
    ([2, 0, 3], True, False, [1, 2, 0]),        # sum = 1 + x0 + x0x1
    ([2, 0, 3], False, True, [0, 9, 1]),        # sum = x0x1x2 + x1x2 + x2
    ([0, 0, 2], False, False, [1, 0, 0]),
    ([0, 5, 0, 2], False, False, [6, 0, 0, 0]),   # 1 + x1 + x1x2 + x1x2x3
    ([3, 0, 0], False, False, [1, 3, 0]),
    ([0.0], False, False, [1]),
    ([0.0], True, False, [0]),
])
def test_cumprod_gradient_with_zeros(x, ex, rev, grad):
    g = tf.grad(lambda t: tf.cumprod(t, 0, ex, rev).sum())(tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(g.numpy(), grad)


def test_cumprod_second_order_with_a_zero():
    # f = x0 + x0 x1 + x0 x1 x2 at (2, 0, 3): H = [[0, 1+x2, x1], [1+x2, 0, x0], [x1, x0, 0]]
    x = tf.tensor([2, 0, 3], dtype="float64")
    f = lambda t: tf.cumprod(t).sum()  # noqa: E731
    np.testing.assert_array_equal(tf.hessian(f)(x).numpy(), [[0, 4, 0], [4, 0, 2], [0, 2, 0]])
    # and row by row through nested grad
    for i, row in enumerate([[0, 4, 0], [4, 0, 2], [0, 2, 0]]):
        e = tf.tensor(np.eye(3)[i], dtype="float64")
        h = tf.grad(lambda t: (tf.grad(f)(t) * e).sum())(x)
        np.testing.assert_array_equal(h.numpy(), row)
    # third order: d3 f / dx0 dx1 dx2 = 1
    t3 = tf.grad(lambda t: tf.grad(lambda u: tf.grad(f)(u)[0])(t)[1])(x)
    np.testing.assert_array_equal(t3.numpy(), [0, 0, 1])


def test_cumprod_jacobian_matches_row_by_row_gradients():
    x = tf.tensor([[1.0, 0.0, 3.0], [4.0, 5.0, 0.0]], dtype="float64")
    for ax, ex, rev in itertools.product((0, 1), (False, True), (False, True)):
        jac = tf.jacobian(lambda t: tf.cumprod(t, ax, ex, rev))(x).numpy().reshape(6, 6)
        rows = [tf.grad(lambda t: (tf.cumprod(t, ax, ex, rev)
                                   * tf.tensor(np.eye(6)[i].reshape(2, 3), dtype="float64"))
                        .sum())(x).numpy().reshape(6) for i in range(6)]
        np.testing.assert_array_equal(jac, np.array(rows))


def test_cumsum_jacobian():
    x = tf.tensor([1.0, 2.0, 3.0], dtype="float64")
    np.testing.assert_array_equal(tf.jacobian(lambda t: tf.cumsum(t, -1, True))(x).numpy(),
                                  [[0, 0, 0], [1, 0, 0], [1, 1, 0]])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2, 2), min_size=1, max_size=6),
       st.lists(st.integers(-2, 2), min_size=6, max_size=6))
def test_cumprod_gradient_is_exact_property(xs, dys):
    x = np.array(xs, dtype=float)
    dy = np.array(dys[:len(xs)], dtype=float)
    g = tf.grad(lambda t: (tf.cumprod(t) * tf.tensor(dy, dtype="float64")).sum())(
        tf.tensor(x, dtype="float64"))
    np.testing.assert_array_equal(g.numpy(), cumprod_grad_ref(x, dy))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=8), st.booleans(), st.booleans())
def test_cumsum_properties(xs, ex, rev):
    x = tf.tensor(xs, dtype="int32")
    y = tf.cumsum(x, 0, ex, rev).numpy()
    np.testing.assert_array_equal(y, cumsum_ref(np.array(xs), 0, ex, rev))
    incl = tf.cumsum(x, 0, False, rev).numpy()
    np.testing.assert_array_equal(incl, y + np.array(xs) if ex else y)


# ---------------------------------------------------------------- topk

def test_topk_ties_lower_index_first():
    x = tf.tensor([1, 3, 3, 2, 3])
    r = tf.topk(x, 2)
    assert r.values.array_sync() == [3, 3]
    assert r["indices"].array_sync() == [1, 2]
    assert r.indices.dtype == "int32"
    g = tf.grad(lambda t: tf.topk(t, 2).values.sum())(x)
    assert g.array_sync() == [0, 1, 1, 0, 0]
    g = tf.grad(lambda t: (tf.topk(t, 3).values * tf.tensor([1, 10, 100])).sum())(x)
    assert g.array_sync() == [0, 1, 10, 0, 100]


def test_topk_unsorted_and_edge_cases():
    r = tf.topk(tf.tensor([5, 1, 7, 3]), 2, False)
    assert r.indices.array_sync() == [0, 2] and r.values.array_sync() == [5, 7]
    assert tf.topk(tf.tensor([4, 9], dtype="int32")).values.dtype == "int32"
    assert tf.topk(tf.tensor([-2147483648, 5], dtype="int32"), 2).indices.array_sync() == [1, 0]
    assert tf.topk(tf.tensor([1.0, float("nan"), 3.0])).indices.array_sync() == [1]
    assert tf.topk(tf.tensor([[1, 2]]), 0).values.shape == (1, 0)
    assert tf.topK is tf.topk and tf.top_k is tf.topk
    g = tf.grad(lambda t: tf.topk(t, 0).values.sum() + t.sum())(tf.tensor([1.0, 2.0]))
    assert g.array_sync() == [1, 1]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=8), st.data())
def test_topk_properties(xs, data):
    k = data.draw(st.integers(0, len(xs)))
    v, i = tf.topk(tf.tensor(xs, dtype="int32"), k)
    want_v, want_i = topk_ref(np.array(xs), k)
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)


# ---------------------------------------------------------------- bincount

def test_bincount_conventions():
    x = i32([1, 1, 3, 7])
    c = tf.bincount(x, None, 5)
    assert c.dtype == "float32" and c.array_sync() == [0, 2, 0, 1, 0]
    assert tf.bincount(x, [], 2).array_sync() == [0, 2]
    w = tf.bincount(x, i32([1, 2, 3, 4]), 4)
    assert w.dtype == "int32" and w.array_sync() == [0, 3, 0, 3]
    assert tf.bincount(x, None, 0).shape == (0,)
    assert tf.bincount(tf.tensor([2.0, 0.0]), None, 3).array_sync() == [1, 0, 1]
    assert tf.bincount(i32([[0, 1], [1, 1]]), None, 2).array_sync() == [1, 3]
    d = tf.dense_bincount(i32([[0, 1, 1], [2, 2, 5]]), tf.tensor([[1, 2, 3], [4, 5, 6]]), 3)
    assert d.array_sync() == [[1, 5, 0], [0, 0, 9]]
    assert tf.dense_bincount(i32([0, 2, 2]), None, 3, True).array_sync() == [1, 0, 1]
    # the weights' gradient: the gradient of each weight's bin, 0 for dropped values
    g = tf.grad(lambda v: (tf.bincount(x, v, 4) * tf.tensor([1, 2, 3, 4])).sum())(
        tf.tensor([1.0, 1.0, 1.0, 1.0]))
    assert g.array_sync() == [2, 2, 4, 0]
    g = tf.grad(lambda v: tf.bincount(x, v, 0).sum() + v.sum())(tf.tensor([1.0, 1, 1, 1]))
    assert g.array_sync() == [1, 1, 1, 1]


# ---------------------------------------------------------------- search_sorted

def test_search_sorted_conventions():
    seq = tf.tensor([0, 3, 9, 10, 10])
    v = tf.tensor([0, 4, 10])
    assert tf.search_sorted(seq, v).array_sync() == [0, 2, 3]
    assert tf.search_sorted(seq, v, "right").array_sync() == [1, 2, 5]
    r = tf.search_sorted(tf.tensor([[0.0, 3, 8, 9, 10], [1, 2, 3, 4, 5]]),
                         tf.tensor([[9.8, 2.1, 4.3], [0.1, 6.6, 4.5]]))
    assert r.dtype == "int32" and r.array_sync() == [[4, 1, 2], [0, 5, 4]]
    assert tf.search_sorted(seq, tf.tensor([[1, 11], [-1, 3]])).array_sync() == [[1, 5], [0, 1]]
    assert tf.search_sorted(seq, tf.scalar(5)).array_sync() == 2
    assert tf.search_sorted(i32([1, 2]), tf.tensor([1.5])).array_sync() == [1]
    assert tf.search_sorted(tf.zeros([2, 0]), tf.ones([2, 3])).array_sync() == [[0] * 3] * 2


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(-4, 4), min_size=3, max_size=3), min_size=1,
                max_size=3), st.lists(st.integers(-5, 5), min_size=2, max_size=2),
       st.sampled_from(["left", "right"]))
def test_search_sorted_property(rows, vals, side):
    seq = np.sort(np.array(rows), -1)
    v = np.tile(np.array(vals), (len(rows), 1)) + np.arange(len(rows))[:, None]
    got = tf.search_sorted(i32(seq), i32(v), side).numpy()
    np.testing.assert_array_equal(got, search_ref(seq, v, side))


# ---------------------------------------------------------------- meshgrid

def test_meshgrid_conventions():
    assert tf.meshgrid() == []
    x = tf.tensor([1, 2, 3])
    (only,) = tf.meshgrid(x)
    assert only is x
    X, Y = tf.meshgrid(x, tf.tensor([4, 5]), {"indexing": "ij"})
    assert X.shape == (3, 2) and Y.array_sync() == [[4, 5]] * 3
    X, Y = tf.meshgrid(i32([1, 2]), tf.tensor([0.5]))
    assert X.dtype == "int32" and Y.dtype == "float32"


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("call, err, msg", [
    (lambda: tf.cumsum(tf.scalar(1)), ShapeError, "cumsum() needs a tensor of rank >= 1"),
    (lambda: tf.cumprod(tf.scalar(1)), ShapeError, "cumprod() needs a tensor of rank >= 1"),
    (lambda: tf.cumsum(tf.ones([2, 2]), 2), ArgumentError,
     "cumsum: axis 2 is out of range for a tensor of rank 2"),
    (lambda: tf.cumprod(tf.ones([2]), -2), ArgumentError,
     "cumprod: axis -2 is out of range for a tensor of rank 1"),
    (lambda: tf.cumsum(tf.ones([2]), 0.5), ArgumentError, "axis must be an int"),
    (lambda: tf.topk(tf.scalar(1)), ShapeError,
     "topk() expects the input to be of rank 1 or higher"),
    (lambda: tf.topk(tf.ones([3]), -1), ArgumentError,
     "'k' passed to topk() must be >= 0 but got -1"),
    (lambda: tf.topk(tf.ones([2, 3]), 4), ArgumentError,
     "'k' passed to topk() must be <= the last dimension (3) but got 4"),
    (lambda: tf.topk(tf.ones([3]), 1.5), ArgumentError, "topk: k must be an integer, got 1.5"),
    (lambda: tf.bincount(tf.tensor([0.5, 1]), None, 3), DtypeError,
     "Error in bincount: input dtype must be int32, but got float32"),
    (lambda: tf.dense_bincount(tf.tensor([True]), None, 3), DtypeError,
     "Error in denseBincount: input dtype must be int32, but got bool"),
    (lambda: tf.bincount(i32([1]), None, -1), ArgumentError,
     "size must be non-negative, but got -1."),
    (lambda: tf.bincount(i32([1]), None, 2.5), ArgumentError,
     "bincount: size must be an integer, got 2.5"),
    (lambda: tf.bincount(i32([1, 2]), tf.ones([3]), 4), ShapeError,
     "Error in bincount: weights must have the same size as input or 0-length, but got "
     "input shape: [2], weights shape: [3]."),
    (lambda: tf.dense_bincount(i32([[1, 2]]), tf.ones([3]), 4), ShapeError,
     "Error in denseBincount: weights must have the same size as input"),
    (lambda: tf.bincount(i32([1, -2]), None, 4), ArgumentError,
     "bincount(): Input x must be non-negative! (got -2"),
    (lambda: tf.dense_bincount(i32(np.zeros((1, 1, 2))), None, 4), ShapeError,
     "Error in denseBincount: input must be at most rank 2, but got rank 3."),
    (lambda: tf.dense_bincount(i32(1), None, 4), ShapeError,
     "input must be at most rank 2, but got rank 0. (a scalar: give a 1-D tensor)"),
    (lambda: tf.search_sorted(tf.ones([3]), tf.ones([2]), "middle"), ArgumentError,
     "search_sorted(): side must be 'left' or 'right', got 'middle'"),
    (lambda: tf.search_sorted(tf.scalar(1), tf.ones([2])), ShapeError,
     "Sorted input argument must be at least 1-dimensional"),
    (lambda: tf.search_sorted(tf.ones([2, 3]), tf.ones([3, 3])), ShapeError,
     "Leading dimension of 'sortedSequence' and 'values' must match: sorted_sequence has "
     "shape (2, 3), values (3, 3)"),
    (lambda: tf.search_sorted(tf.ones([2, 3]), tf.scalar(1)), ShapeError,
     "Leading dimension of 'sortedSequence' and 'values' must match"),
    (lambda: tf.meshgrid(tf.ones([2]), tf.ones([2]), "yx"), ArgumentError,
     "yx is not a valid third argument to meshgrid"),
    (lambda: tf.meshgrid(tf.scalar(1)), ShapeError,
     "meshgrid expects a tensor with rank >= 1 (argument 'x' is a scalar)"),
    (lambda: tf.meshgrid(tf.ones([2]), 3), ShapeError,
     "meshgrid expects a tensor with rank >= 1 (argument 'y' is a scalar)"),
])
def test_errors(call, err, msg):
    with pytest.raises(err) as e:
        call()
    assert msg in str(e.value)
