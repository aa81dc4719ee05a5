"""The elementwise math added for the complete op set (div_no_nan, bitwise_and) and the
reduction composites euclidean_norm and moments: table rows against NumPy and finite
differences to order 2, div_no_nan at b = 0 (no NaN at any order, unlike TF.js which
throws), errors and properties."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from opcheck import BACKENDS, Case, run_case

BCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


def div_no_nan_ref(a, b):
    out = np.zeros(np.broadcast(a, b).shape)
    a, b = np.broadcast_arrays(a, b)
    nz = b != 0
    out[nz] = a[nz] / b[nz]
    return out


def moments_ref(x, axis=None, keep=False):
    return [x.mean(axis, keepdims=keep), x.var(axis, keepdims=keep)]


CASES = [
    *[Case(f"div_no_nan{list(sa)}{list(sb)}", tf.div_no_nan, div_no_nan_ref,
           [(sa, "real"), (sb, "nonzero")], order=2) for sa, sb in BCAST],
    # b = 0 entries are held fixed (the op is not continuous in b there); a moves freely
    Case("div_no_nan_zero_b", lambda a: tf.div_no_nan(a, tf.tensor(
        [[1.5, 0, -2], [0, 0.5, 0]], dtype=a.dtype)), lambda a: div_no_nan_ref(
        a, np.array([[1.5, 0, -2], [0, 0.5, 0]])), [((2, 3), "real")], order=3),
    Case("div_no_nan_method", lambda a, b: a.div_no_nan(b).square(),
         lambda a, b: (a / b) ** 2, [((3,), "real"), ((3,), "pos")]),
    Case("euclidean_norm", tf.euclidean_norm, lambda x: np.sqrt((x ** 2).sum()),
         [((2, 3), "real")]),
    Case("euclidean_norm_axis", lambda x: x.euclidean_norm(1),
         lambda x: np.sqrt((x ** 2).sum(1)), [((2, 3), "real")]),
    Case("euclidean_norm_neg_keep", lambda x: tf.euclidean_norm(x, -1, True),
         lambda x: np.sqrt((x ** 2).sum(-1, keepdims=True)), [((2, 2, 3), "real")]),
    Case("euclidean_norm_matrix", lambda x: tf.euclidean_norm(x, [0, 2]),
         lambda x: np.sqrt((x ** 2).sum((0, 2))), [((2, 2, 3), "real")]),
    Case("moments", lambda x: list(tf.moments(x)), moments_ref, [((2, 3), "real")]),
    Case("moments_axis", lambda x: list(tf.moments(x, 0)), lambda x: moments_ref(x, 0),
         [((3, 2), "real")]),
    Case("moments_axes_keep", lambda x: list(tf.moments(x, [0, 2], True)),
         lambda x: moments_ref(x, (0, 2), True), [((2, 2, 3), "real")]),
    Case("moments_neg_axis", lambda x: tf.moments(x, -1).variance,
         lambda x: x.var(-1), [((2, 4), "real")], order=3),
    Case("bitwise_and", lambda a, b: tf.bitwise_and((a * 100).cast("int32"),
                                                    (b * 100).cast("int32")),
         lambda a, b: np.bitwise_and(np.trunc(a * 100).astype(np.int32),
                                     np.trunc(b * 100).astype(np.int32)),
         [((2, 3), "real"), ((2, 3), "real")], order=0, exact=True),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- div_no_nan at b = 0

def test_div_no_nan_at_zero():
    a = tf.tensor([1.0, 0.0, float("nan"), float("inf"), 6.0])
    b = tf.tensor([0.0, 0.0, 0.0, 0.0, 3.0])
    assert tf.div_no_nan(a, b).array_sync() == [0, 0, 0, 0, 2]
    ga, gb = tf.grads(lambda a, b: tf.div_no_nan(a, b).sum())([a[:2], b[:2]])
    assert ga.array_sync() == [0, 0] and gb.array_sync() == [0, 0]
    # int32 divides with floor, 0 where the divisor is 0
    q = tf.div_no_nan(tf.tensor([7, -7, 3], dtype="int32"), tf.tensor([2, 2, 0], dtype="int32"))
    assert q.dtype == "int32" and q.array_sync() == [3, -4, 0]
    assert tf.divNoNan is tf.div_no_nan


def test_div_no_nan_higher_orders_stay_finite():
    a = tf.tensor([2.0, 3.0, -1.0], dtype="float64")
    b = tf.tensor([0.0, 2.0, 0.0], dtype="float64")

    def f(a, b):
        return (tf.div_no_nan(a, b) * a).sum()

    # d/db twice and the mixed second derivatives: 0 at b = 0, textbook elsewhere
    gbb = tf.grad(lambda t: tf.grad(lambda u: f(a, u))(t).sum())(b)
    np.testing.assert_array_equal(gbb.numpy(), [0, 2 * 9 / 8, 0])      # 2a^2/b^3
    gab = tf.grad(lambda s: tf.grad(lambda u: f(s, u))(b).sum())(a)
    np.testing.assert_array_equal(gab.numpy(), [0, -2 * 3 / 4, 0])     # -2a/b^2
    h = tf.hessian(lambda u: f(a, u))(b).numpy()
    assert np.isfinite(h).all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.sampled_from([0.0, -2.0, 0.5, 3.0])),
                min_size=1, max_size=5))
def test_div_no_nan_never_nan(pairs):
    a = tf.tensor([p[0] for p in pairs], dtype="float64")
    b = tf.tensor([p[1] for p in pairs], dtype="float64")
    y = tf.div_no_nan(a, b).numpy()
    np.testing.assert_array_equal(y, div_no_nan_ref(a.numpy(), b.numpy()))
    for g in tf.grads(lambda a, b: tf.div_no_nan(a, b).sum())([a, b]):
        assert np.isfinite(g.numpy()).all()


# ---------------------------------------------------------------- bitwise_and, moments

def test_bitwise_and_values():
    x = tf.tensor([0, 5, 3, 14, -1, -8], dtype="int32")
    y = tf.tensor([5, 0, 7, 11, 12345, 7], dtype="int32")
    assert tf.bitwise_and(x, y).array_sync() == [0, 0, 3, 10, 12345, 0]
    assert tf.bitwise_and(x, y).dtype == "int32"


def test_moments_result_and_dtypes():
    r = tf.moments(tf.tensor([[1, 2], [3, 6]], dtype="int32"), 1)
    assert r.mean.dtype == "float32" and r["variance"].array_sync() == [0.25, 2.25]
    m, v = r
    assert m.array_sync() == [1.5, 4.5]
    assert tf.moments(tf.tensor([1, 2], dtype="float64")).variance.dtype == "float64"
    # the variance of a constant has a zero gradient (the mean's path cancels exactly)
    g = tf.grad(lambda x: tf.moments(x).variance)(tf.tensor([2.0, 2.0, 2.0]))
    assert g.array_sync() == [0, 0, 0]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=1, max_size=6))
def test_moments_property(xs):
    m, v = tf.moments(tf.tensor(xs, dtype="float64"))
    np.testing.assert_allclose(m.item(), np.mean(xs), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v.item(), np.var(xs), rtol=1e-9, atol=1e-9)
    assert v.item() >= 0


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("call, err, msg", [
    (lambda: tf.bitwise_and(tf.tensor([1], dtype="int32"), tf.tensor([1, 2], dtype="int32")),
     ShapeError, "BitwiseAnd: Tensors must have the same shape. x: [1], y: [2]"),
    (lambda: tf.bitwise_and(tf.tensor([1.0]), tf.tensor([1], dtype="int32")), DtypeError,
     "BitwiseAnd: Only supports 'int32' values in tensor, found type of x: float32 and type "
     "of y: int32"),
    (lambda: tf.div_no_nan(tf.ones([2]), tf.ones([3])), ShapeError,
     "Operands could not be broadcast together with shapes (2,) and (3,)"),
    (lambda: tf.moments(tf.ones([2, 0]), 1), ShapeError,
     "moments() of an empty axis: axis 1 of shape (2, 0) has no entries"),
    (lambda: tf.moments(tf.ones([2]), 1), ArgumentError,
     "moments: axis 1 is out of range for a tensor of rank 1"),
    (lambda: tf.euclidean_norm(tf.ones([2, 2, 2]), [0, 1, 2]), ArgumentError,
     "Error in norm: invalid axis: [0, 1, 2]"),
])
def test_errors(call, err, msg):
    with pytest.raises(err) as e:
        call()
    assert msg in str(e.value)


def test_relu_gradient_at_zero_and_nan():
    """relu'(0) = 0 and a NaN input passes NaN to its gradient (TF.js: dy * step(x)), also
    when dy broadcasts a batch over x (the jacobian's rows)."""
    x = tf.tensor([-1.0, 0.0, 2.0, np.nan])
    np.testing.assert_array_equal(tf.grad(lambda t: t.relu())(x).numpy(),
                                  [0.0, 0.0, 1.0, np.nan])
    # row i is the vjp with dy = e_i: e_i * step(x), and 0 * step(NaN) is NaN in every row
    np.testing.assert_array_equal(tf.jacobian(lambda t: t.relu())(x).numpy(),
                                  [[0, 0, 0, np.nan], [0, 0, 0, np.nan], [0, 0, 1, np.nan],
                                   [0, 0, 0, np.nan]])
