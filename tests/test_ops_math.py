"""The elementwise math added for the complete op set (div_no_nan, bitwise_and) and the
reduction composites euclidean_norm and moments: table rows against NumPy and finite
differences to order 2, div_no_nan at b = 0 (no NaN at any order, unlike TF.js which
throws), errors and properties. The math kernels' dtype paths (int32, NaN, bounds) on every
backend, and the math extensions' generic implementations against NumPy's own."""
import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from flowgrad import backends
from flowgrad.backends import ext
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


@pytest.fixture(params=BACKENDS)
def on_backend(request):
    prev = tf.set_backend(request.param)
    yield request.param
    tf.set_backend(prev)


def test_relu_gradient_at_zero_and_nan(on_backend):
    """relu'(0) = 0 and a NaN input passes NaN to its gradient (TF.js: dy * step(x)), also
    when dy broadcasts a batch over x (the jacobian's rows)."""
    x = tf.tensor([-1.0, 0.0, 2.0, np.nan])
    np.testing.assert_array_equal(tf.grad(lambda t: t.relu())(x).numpy(),
                                  [0.0, 0.0, 1.0, np.nan])
    # row i is the vjp with dy = e_i: e_i * step(x), and 0 * step(NaN) is NaN in every row
    np.testing.assert_array_equal(tf.jacobian(lambda t: t.relu())(x).numpy(),
                                  [[0, 0, 0, np.nan], [0, 0, 0, np.nan], [0, 0, 1, np.nan],
                                   [0, 0, 0, np.nan]])


# ---------------------------------------------------------------- kernels' dtype paths

NAN, INF = float("nan"), float("inf")


def i32(v):
    return tf.tensor(v, dtype="int32")


def vals(t):
    return t.array_sync()


def test_int_and_nan_paths(on_backend):
    """The kernels' branches the float table rows do not reach, alike on every backend."""
    assert vals(tf.div(i32([5, -7, 7]), i32([2, 2, -2]))) == [2, -4, -4]      # floor
    p = tf.pow(i32([2, 3, 2]), i32([3, 2, -1]))     # computed in floats, truncated
    assert p.dtype == "int32" and vals(p) == [8, 9, 0]
    assert vals(tf.mod(i32([-7, 7]), i32([2, -2]))) == [1, -1]
    # int32 clipped as floats, then truncated (TF.js stores the float bound)
    c = tf.clip_by_value(i32([-3, 0, 1, 5]), -0.5, 2.7)
    assert c.dtype == "int32" and vals(c) == [0, 0, 1, 2]
    np.testing.assert_array_equal(tf.clip_by_value(tf.tensor([-3, 0, NAN]), -0.5, 2).numpy(),
                                  [-0.5, 0, NAN])
    np.testing.assert_allclose(vals(tf.step(tf.tensor([-1, 0, 2, NAN]), 0.3)),
                               [0.3, 0.3, 1, NAN])
    s = tf.step(i32([-1, 0, 2]), -1.7)
    assert s.dtype == "int32" and vals(s) == [-1, -1, 1]
    assert vals(tf.step(i32([-1, 2]))) == [0, 1]
    assert vals(tf.sign(tf.tensor([-2, 0, NAN, 3]))) == [-1, 0, 0, 1]
    assert vals(tf.sign(i32([-2, 0, 3]))) == [-1, 0, 1]
    for f in (tf.floor, tf.ceil, tf.round):
        r = f(i32([1, -2]))
        assert r.dtype == "int32" and vals(r) == [1, -2]
    r = tf.relu(i32([-1, 3]))
    assert r.dtype == "int32" and vals(r) == [0, 3]
    assert vals(tf.relu6(i32([-1, 3, 9]))) == [0, 3, 6]
    d = tf.div_no_nan(i32([7, -7, 3]), i32([2, 2, 0]))
    assert d.dtype == "int32" and vals(d) == [3, -4, 0]
    assert vals(tf.div_no_nan(tf.tensor([1, 0, NAN, INF, 6]), tf.tensor([0, 0, 0, 0, 3]))) == \
        [0, 0, 0, 0, 2]
    np.testing.assert_allclose(vals(tf.softplus(tf.tensor([-100.0, 0, 100]))),
                               [3.783506e-44, math.log(2), 100], rtol=1e-6)
    np.testing.assert_allclose(vals(tf.log_sigmoid(tf.tensor([-100.0, 0, 100]))),
                               [-100, -math.log(2), -3.783506e-44], rtol=1e-6)
    assert vals(tf.is_nan(i32([1]))) == [False] and vals(tf.is_finite(i32([1]))) == [True]
    with pytest.raises(DtypeError, match="must be bool tensor, but got float32 tensor"):
        tf.logical_not(tf.tensor([1.0]))


ERF_EDGES = [-INF, -30, -9, -8, -3, -1.00001, -1, -0.5, -0.0, 0, 1e-300, 1e-10, 0.99999, 1,
             1.00001, 7.9, 8, 8.1, 26.9, 27, 27.1, INF]


def test_erf_matches_math_erf(on_backend):
    x = np.concatenate([np.linspace(-10, 10, 2001), ERF_EDGES])
    y = tf.erf(tf.tensor(x, dtype="float64")).numpy()
    np.testing.assert_allclose(y, [math.erf(v) for v in x], rtol=1e-15, atol=1e-300)
    assert np.signbit(y[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()
    assert np.isnan(tf.erf(tf.tensor([NAN, 1.0])).numpy()[0])
    y32 = tf.erf(tf.tensor(x.astype(np.float32)))
    assert y32.dtype == "float32"
    np.testing.assert_allclose(y32.numpy(), [math.erf(v) for v in x.astype(np.float32)],
                               rtol=1e-7, atol=1e-37)


def generic(name):
    """An extension's generic implementation, run on NumPy's namespace."""
    return functools.partial(ext.EXTENSIONS[name], backends.namespace("numpy"))


@pytest.mark.parametrize("n", [1, 16, 191, 192, 511, 512, 2000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extensions_agree_with_numpy_overrides(n, dtype):
    """NumPy's own erf, softplus and relu_grad (each with a path for small arrays) give
    the generic implementations' results."""
    B = backends.namespace("numpy")
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 5).astype(dtype)
    x[: min(n, 4)] = [NAN, 0, -0.0, INF][: min(n, 4)]
    with np.errstate(all="ignore"):     # (kernels called directly: run_kernel would quiet them)
        _agree(B, x, n, dtype, rng)


def _agree(B, x, n, dtype, rng):
    np.testing.assert_allclose(B.erf(x), generic("erf")(x), rtol=0, atol=0)
    np.testing.assert_allclose(B.softplus(x), generic("softplus")(x),
                               rtol=2e-7 if dtype == np.float32 else 1e-15)
    assert B.softplus(x).dtype == dtype
    dy = rng.standard_normal(n).astype(dtype)
    xi = np.where(np.isfinite(x), x * 3, 0).astype(np.int32)
    for d, xx in [(dy, x), (dy, xi), (np.eye(n, dtype=dtype)[:3], x)]:      # int x, batch dy
        got, want = B.relu_grad(d, xx), generic("relu_grad")(d, xx)
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------- pow by a small exponent

SMALL = [0, 1, 2, 3, 4, -1, -2, -3, 0.5, -0.5]


def _ulps(x, y):
    """Distance in units in the last place between two arrays of one float dtype (NaN to
    NaN is 0; a zero's sign counts as a place, as between any two neighbours)."""
    it = np.int32 if x.dtype == np.float32 else np.int64
    xi, yi = (v.view(it).astype(np.int64) for v in (x, y))
    low = np.iinfo(it).min
    xi, yi = (np.where(v < 0, low - v, v) for v in (xi, yi))
    return np.where(np.isnan(x) & np.isnan(y), 0, np.abs(xi - yi))


def _wide(dtype, n=200_000, seed=5):
    """Values of every magnitude and sign of ``dtype``, subnormals, zeros of both signs,
    infinities and NaN."""
    rng = np.random.default_rng(seed)
    top = 38 if dtype == np.float32 else 307
    x = np.sign(rng.standard_normal(n)) * 10.0 ** rng.uniform(-top - 6, top, n)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5,
               np.finfo(dtype).tiny, -np.finfo(dtype).tiny, np.finfo(dtype).max]
    return np.concatenate([x, special]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SMALL)
def test_pow_by_a_small_exponent_is_within_2_ulp_of_numpy_power(n, dtype):
    x = _wide(dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, dtype(n))
    got = tf.pow(tf.tensor(x, dtype=dtype.__name__), n).numpy()        # the kernel's path
    assert got.dtype == dtype
    assert _ulps(got, want).max() <= 2, (n, x[_ulps(got, want).argmax()])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_by_a_small_exponent_is_the_same_bits_on_every_path(dtype):
    # eager on a small and a pooled size, into a buffer that is the input itself (tf.jit
    # writes over an input that dies at a kernel), and tf.jit's fused chains: one result
    B = backends.namespace("numpy")
    x = _wide(dtype, n=70_000, seed=6)
    for n in SMALL + [2.5, -4, 5]:
        b = dtype(n)
        with np.errstate(all="ignore"):
            ref = B.fast_pow(x, b)
            inplace = x.copy()
            assert B.fast_pow(inplace, b, out=inplace) is inplace
            np.testing.assert_array_equal(inplace, ref)
            if n not in SMALL:              # the others are NumPy's power itself
                np.testing.assert_array_equal(ref, np.power(x, b))
        for size in (5, 70_000):
            t = tf.tensor(x[:size], dtype=dtype.__name__)
            np.testing.assert_array_equal(tf.pow(t, n).numpy(), ref[:size])
            jitted = tf.jit(lambda v: (v * 1.0).pow(n) + 0.0)
            np.testing.assert_array_equal(jitted(t).numpy(), ref[:size] + 0.0)
    assert B.fast_pow(np.float32(2), np.float32(3)) == 8 and \
        isinstance(B.fast_pow(np.float32(2), np.float32(3)), np.float32)


def test_the_generic_fast_pow_is_power():
    x = np.array([-2.0, 0.5, 3.0])
    np.testing.assert_array_equal(generic("fast_pow")(x, np.float64(3)), x ** 3)


@pytest.mark.parametrize("n", [2, 3, 4, -1, -2, -3, 0.5, -0.5, 1.5])
def test_pow_gradients_by_small_exponents_match_finite_differences(n):
    x = tf.tensor([0.7, 1.3, 2.1] if n != int(n) else [-1.3, 0.7, 2.1], dtype="float64")
    r = tf.debug.check_grads(lambda v: v.pow(n), x, order=2)
    assert r.passed, r


def test_pow_by_zero_has_gradient_zero_everywhere():
    # d/dx x^0 = 0 (PyTorch and JAX say so); TF.js's rule gives 0 * 0^-1 = NaN at x = 0
    x = tf.tensor([0.0, -0.0, 2.0, -3.0], dtype="float64")
    for f in (lambda v: v ** 0.0, lambda v: v.pow(tf.zeros([4], "float64"))):
        assert tf.grad(f)(x).numpy().tolist() == [0, 0, 0, 0]
        assert tf.grad(tf.grad(f))(x).numpy().tolist() == [0, 0, 0, 0]
    # and x^1's second derivative at 0 (its rule's pow(x, 0) is differentiated there)
    assert tf.grad(tf.grad(lambda v: v ** 1.0))(x).numpy().tolist() == [0, 0, 0, 0]
