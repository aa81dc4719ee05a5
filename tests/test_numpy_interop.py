"""NumPy and PyTorch habits on flowgrad tensors (issue 17): format, __array__, NumPy ufuncs
and functions dispatched to flowgrad ops (differentiable), dtype objects, keyword spellings,
repr, foreign arrays into tf.tensor."""
import pickle
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import numpy_interop as NI
from flowgrad.errors import ArgumentError, GradientError, ShapeError


def f64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64))


def central_diff(f, x, eps=1e-6):
    """d sum(f(x)) / dx by central differences, in float64 (f: NumPy in, float out)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


# ---------------------------------------------------------------- ufuncs, table-driven
X = np.array([[0.2, 0.35], [0.5, 0.8]])
Y = np.array([[0.3, 0.9], [0.45, 0.6]])
_DOMAIN = {np.arccosh: X + 1.0}                       # defined above 1 only
_BOOL_IN = {np.logical_not, np.logical_and, np.logical_or, np.logical_xor, np.bitwise_and,
            np.bitwise_or, np.bitwise_xor}
_NOT_SMOOTH = {np.sign, np.floor, np.ceil, np.rint, np.isnan, np.isinf, np.isfinite,
               np.floor_divide, np.remainder, np.equal, np.not_equal, np.less,
               np.less_equal, np.greater, np.greater_equal, np.absolute, np.fabs,
               np.maximum, np.minimum} | _BOOL_IN


def _inputs(uf):
    if uf in _BOOL_IN:
        return [np.array([[True, False], [True, True]]),
                np.array([[True, True], [False, True]])][:uf.nin]
    return [_DOMAIN.get(uf, X), Y][:uf.nin]


@pytest.mark.parametrize("uf", list(NI.UFUNCS), ids=lambda u: u.__name__)
def test_ufunc_matches_numpy(uf):
    ins = _inputs(uf)
    out = uf(*[tf.tensor(a) for a in ins])
    assert isinstance(out, tf.Tensor), uf
    np.testing.assert_allclose(out.numpy(), uf(*ins), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("uf", [u for u in NI.UFUNCS if u not in _NOT_SMOOTH],
                         ids=lambda u: u.__name__)
def test_ufunc_gradient_matches_central_differences(uf):
    ins = _inputs(uf)
    for k in range(uf.nin):          # d/d(input k), the others held fixed
        def f(xk, k=k):
            args = [xk if j == k else a for j, a in enumerate(ins)]
            return float(np.sum(uf(*args)))

        def fg(t, k=k):
            return tf.sum(uf(*[t if j == k else f64(a) for j, a in enumerate(ins)]))
        g = tf.grad(fg)(f64(ins[k])).numpy()
        np.testing.assert_allclose(g, central_diff(f, ins[k]), rtol=1e-6, atol=1e-7)


def test_reflected_operators_with_numpy_operands_give_tensors():
    a, t = np.array([1.0, 2.0]), tf.tensor([3.0, 4.0])
    for r in (a * t, a + t, a @ t, a < t, np.float32(2) * t):
        assert isinstance(r, tf.Tensor)
    np.testing.assert_allclose((a * t).numpy(), [3, 8])


def test_ufunc_reduce_and_dtype_keyword():
    t = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(np.add.reduce(t, axis=1).numpy(), [3, 7])
    assert np.maximum.reduce(t, axis=None).item() == 4.0
    assert np.add(t, 1, dtype=np.float64).dtype == "float64"


# ---------------------------------------------------------------- array functions, table
T = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.75]])
CASES = {     # NumPy function -> (positional args (T stands for the tensor), keywords)
    np.sum: ((T,), {"axis": 1, "keepdims": True}), np.prod: ((T,), {"axis": 0}),
    np.max: ((T,), {"axis": 1}), np.min: ((T,), {}), np.amax: ((T,), {"axis": 0}),
    np.amin: ((T,), {"axis": 0, "keepdims": True}), np.mean: ((T,), {"axis": 0}),
    np.all: ((T > 0,), {"axis": 1}), np.any: ((T > 2,), {}),
    np.var: ((T,), {"axis": 1, "ddof": 1}), np.std: ((T,), {}),
    np.argmax: ((T,), {"axis": 1}), np.argmin: ((T,), {}),
    np.cumsum: ((T,), {"axis": 1}), np.cumprod: ((T,), {}),
    np.where: ((T > 0, T, -T), {}), np.concatenate: (([T, T],), {"axis": 1}),
    np.stack: (([T, T],), {"axis": 2}), np.reshape: ((T, (3, 2)), {}),
    np.ravel: ((T,), {}), np.transpose: ((T,), {}), np.dot: ((T, T.T), {}),
    np.clip: ((T, -0.5, 1.0), {}), np.squeeze: ((T[None],), {"axis": 0}),
    np.expand_dims: ((T,), {"axis": 1}), np.broadcast_to: ((T[:1], (4, 3)), {}),
    np.tile: ((T, (2, 1)), {}), np.flip: ((T,), {"axis": 1}),
    np.outer: ((T[0], T[1]), {}), np.einsum: (("ij,kj->ik", T, T), {}),
    np.round: ((T * 3.3,), {}), np.around: ((T,), {"decimals": 1}),
    np.zeros_like: ((T,), {}), np.ones_like: ((T,), {"dtype": np.float32}),
    np.linalg.norm: ((T,), {"axis": 1}), np.shape: ((T,), {}), np.ndim: ((T,), {}),
    np.size: ((T,), {}), np.inner: ((T, T), {}), np.vdot: ((T, T), {}),
    np.tensordot: ((T, T.T), {"axes": 1}),
}


def _tensorize(v):
    if isinstance(v, np.ndarray):
        return f64(v) if v.dtype == np.float64 else tf.tensor(v)
    if isinstance(v, list):
        return [_tensorize(x) for x in v]
    return v


def test_every_case_is_a_mapped_function():
    # (tests/test_numpy_functions.py checks that every mapped function has a case)
    assert set(CASES) <= set(NI.FUNCTIONS)


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_function_matches_numpy(fn):
    args, kw = CASES[fn]
    got = fn(*[_tensorize(a) for a in args], **kw)
    want = fn(*args, **kw)
    if isinstance(want, (tuple, int)):                   # np.shape, np.ndim, np.size
        assert got == want
        return
    assert isinstance(got, tf.Tensor), fn
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_np_mean_sum_tanh_through_grad():
    x = np.array([[0.1, -0.4, 0.7], [1.2, 0.0, -2.0]])
    # d mean(x)/dx = 1/n; d sum(x^2)/dx = 2x, worked by hand
    np.testing.assert_allclose(tf.grad(lambda t: np.mean(t))(f64(x)).numpy(),
                               np.full_like(x, 1 / 6))
    np.testing.assert_allclose(tf.grad(lambda t: np.sum(np.square(t)))(f64(x)).numpy(), 2 * x)
    g = tf.grad(lambda t: np.tanh(t).sum())(f64(x)).numpy()
    np.testing.assert_allclose(g, tf.grad(lambda t: tf.tanh(t).sum())(f64(x)).numpy())
    np.testing.assert_allclose(g, central_diff(lambda a: np.tanh(a).sum(), x), rtol=1e-7)
    g = tf.grad(lambda t: np.sum(np.mean(t, axis=0, keepdims=True) * t))(f64(x)).numpy()
    np.testing.assert_allclose(
        g, central_diff(lambda a: np.sum(np.mean(a, axis=0, keepdims=True) * a), x),
        rtol=1e-6)


def test_std_var_and_where_gradients_against_central_differences():
    x = np.array([0.3, -1.1, 2.0, 0.6])
    for f in (lambda a: np.std(a), lambda a: np.var(a, ddof=1),
              lambda a: np.sum(np.where(a > 0, a * a, -a)),
              lambda a: np.sum(np.clip(a, -0.5, 1.0) ** 2)):
        g = tf.grad(lambda t, f=f: f(t))(f64(x)).numpy()
        np.testing.assert_allclose(g, central_diff(lambda a, f=f: float(f(a)), x), rtol=1e-6)


def test_gradient_tape_records_numpy_calls():
    x = f64([0.5, 1.5])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = np.sum(np.exp(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.exp([0.5, 1.5]))


def test_out_and_where_are_refused_by_name():
    t = tf.tensor([1.0, 2.0])
    with pytest.raises(ArgumentError, match=r"np\.add\(\.\.\., out=\.\.\.\).*'out'"):
        np.add(t, 1, out=np.zeros(2))
    with pytest.raises(ArgumentError, match=r"'out'"):
        np.sum(t, out=np.zeros(()))
    with pytest.raises(ArgumentError, match=r"np\.mean\(\.\.\., where=\.\.\.\)"):
        np.mean(t, where=np.array([True, False]))
    with pytest.raises(ArgumentError, match=r"'where'"):
        np.exp(t, where=np.array([True, False]))


def test_unmapped_function_raises_inside_grad_naming_it_and_the_alternative():
    x = tf.tensor([3.0, 1.0, 2.0])
    with pytest.raises(GradientError, match=r"np\.average\(\).*tf\.sum\(x \* w\)"):
        tf.grad(lambda t: np.average(t))(x)
    with pytest.raises(GradientError, match=r"np\.cbrt\(\).*tf\.sign"):
        tf.grad(lambda t: tf.sum(np.cbrt(t)))(x)
    with pytest.raises(GradientError, match=r"np\.add\.accumulate\(\)"):
        tf.grad(lambda t: tf.sum(np.add.accumulate(t)))(x)
    with pytest.raises(GradientError, match=r"np\.average\(\)"):
        tf.value_and_grad(lambda t: np.average(t))(x)


def test_unmapped_function_outside_grad_computes_on_values():
    x = tf.tensor([3.0, 1.0, 2.0])
    m = np.average(x)
    assert isinstance(m, np.floating) and m == 2.0
    np.testing.assert_array_equal(np.argsort(x), [1, 2, 0])
    np.testing.assert_array_equal(np.add.accumulate(x), [3.0, 4.0, 6.0])


# ---------------------------------------------------------------- products, NumPy's semantics
# (function, shape of a, shape of b, more arguments): values and shapes against NumPy,
# gradients of sum(W * f(a, b)) against central differences, both in float64
PRODUCTS = [
    (np.dot, (), (3,)), (np.dot, (3,), ()), (np.dot, (3,), (3,)), (np.dot, (2, 3), (3,)),
    (np.dot, (3,), (3, 4)), (np.dot, (2, 3), (3, 4)), (np.dot, (2, 3), (2, 3, 4)),
    (np.dot, (2, 2, 3), (2, 3, 4)), (np.dot, (4, 2, 3), (3,)), (np.dot, (3,), (5, 3, 2)),
    (np.dot, (2, 1, 3), (4, 3, 2)), (np.dot, (2, 3, 2), (2,)), (np.dot, (0, 3), (3, 2)),
    (np.dot, (2, 0), (0, 3)),
    (np.matmul, (3,), (3,)), (np.matmul, (2, 3), (3,)), (np.matmul, (3,), (3, 4)),
    (np.matmul, (3,), (5, 3, 4)), (np.matmul, (5, 2, 3), (3,)), (np.matmul, (2, 3), (3, 4)),
    (np.matmul, (2, 1, 2, 3), (4, 3, 2)), (np.matmul, (2, 3), (5, 3, 4)),
    (np.inner, (), (3,)), (np.inner, (3,), (3,)), (np.inner, (2, 3), (4, 3)),
    (np.inner, (2, 2, 3), (5, 3)), (np.inner, (3,), (2, 4, 3)),
    (np.vdot, (6,), (2, 3)), (np.vdot, (2, 3), (3, 2)),
    (np.outer, (2, 3), (4,)), (np.outer, (3,), (2, 2)),
    (np.tensordot, (2, 3, 4), (3, 4, 5)), (np.tensordot, (2, 3), (4, 5), 0),
    (np.tensordot, (3, 4), (4, 3), 1), (np.tensordot, (2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])),
    (np.tensordot, (2, 3, 4), (4, 3, 2), (-1, 0)),
]


def _product_id(case):
    return f"{case[0].__name__}-{case[1]}-{case[2]}" + (f"-{case[3]}" if case[3:] else "")


def _operands(case):
    rng = np.random.default_rng(abs(hash(_product_id(case))) % 2**32)
    return rng.standard_normal(case[1]), rng.standard_normal(case[2]), case[3:]


@pytest.mark.parametrize("case", PRODUCTS, ids=_product_id)
def test_product_matches_numpy(case):
    fn = case[0]
    a, b, more = _operands(case)
    want = fn(a, b, *more)
    for got in (fn(f64(a), f64(b), *more), fn(a, f64(b), *more), fn(f64(a), b, *more)):
        assert isinstance(got, tf.Tensor) and got.dtype == "float64"
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in PRODUCTS if 0 not in c[1] + c[2]],
                         ids=_product_id)
def test_product_gradients_match_central_differences(case):
    fn = case[0]
    a, b, more = _operands(case)
    w = np.random.default_rng(7).standard_normal(np.shape(fn(a, b, *more)))
    ga, gb = tf.grads(lambda x, y: tf.sum(fn(x, y, *more) * f64(w)))([f64(a), f64(b)])
    np.testing.assert_allclose(ga.numpy(), central_diff(
        lambda v: float(np.sum(fn(v, b, *more) * w)), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb.numpy(), central_diff(
        lambda v: float(np.sum(fn(a, v, *more) * w)), b), rtol=1e-6, atol=1e-8)


def test_np_dot_is_numpy_dot_not_matmul_batching():
    # issue 27: both gave matmul's batching (values off by up to 2.6; shape (2, 2, 4))
    rng = np.random.default_rng(27)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(np.dot(f64(a), f64(b)).numpy(), np.dot(a, b), rtol=1e-12)
    a = rng.standard_normal((2, 2, 3))
    d = np.dot(f64(a), f64(b))
    assert d.shape == (2, 2, 2, 4)
    np.testing.assert_allclose(d.numpy()[1, 0, 1, 2], np.sum(a[1, 0, :] * b[1, :, 2]))
    g = tf.grad(lambda t: tf.sum(np.dot(t, f64(b))))(f64(a)).numpy()
    np.testing.assert_allclose(g, np.broadcast_to(b.sum(axis=(0, 2)), (2, 2, 3)))


def test_np_dot_of_float32_tensors_and_second_order():
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert np.dot(x, x).dtype == "float32"
    np.testing.assert_allclose(np.dot(x, x).numpy(), [[7, 10], [15, 22]])
    # d2/dv2 of sum(dot(v, v) ** 2) = d/dv 4 (v.v) v = 8 v v^T + 4 (v.v) I, summed per column
    v = f64([1.0, 2.0])
    h = tf.grad(lambda t: tf.sum(tf.grad(lambda u: np.dot(u, u) ** 2)(t)))(v).numpy()
    vv = np.array([1.0, 2.0])
    np.testing.assert_allclose(h, (8 * np.outer(vv, vv) + 4 * vv.dot(vv) * np.eye(2)).sum(0))


def test_product_shape_errors_name_the_shapes():
    a, b = f64(np.ones((2, 3))), f64(np.ones((4, 5)))
    with pytest.raises(ShapeError,
                       match=r"np\.dot: shapes \(2, 3\) and \(4, 5\) not aligned: 3 \(dim 1\) "
                             r"!= 4 \(dim 0\)"):
        np.dot(a, b)
    with pytest.raises(ShapeError, match=r"np\.dot: .* 3 \(dim 1\) != 4 \(dim 1\)"):
        np.dot(a, f64(np.ones((2, 4, 5))))
    with pytest.raises(ShapeError, match=r"np\.matmul: shapes \(2, 3\) and \(4, 5\)"):
        np.matmul(a, b)
    with pytest.raises(ShapeError, match=r"np\.matmul: operand 0 is a scalar"):
        np.matmul(f64(2.0), a)
    with pytest.raises(ShapeError, match=r"np\.vdot: a \(shape \(2, 3\)\) has 6"):
        np.vdot(a, b)
    with pytest.raises(ShapeError, match=r"np\.tensordot\(a, b, axes=3\)"):
        np.tensordot(a, a, 3)
    with pytest.raises(ArgumentError, match=r"axis 2 of a .* out of range or repeated"):
        np.tensordot(a, a, ([2], [0]))
    with pytest.raises(ArgumentError, match=r"np\.dot\(\.\.\., out=\.\.\.\)"):
        np.dot(a, a.transpose(), out=np.zeros((2, 2)))


# ---------------------------------------------------------------- implicit arrays in grad
HERE = __file__
# (case, f): each turns its tensor argument into a NumPy array, one case per line
IMPLICIT = [
    ("np.array of tensors", lambda x: np.sum(np.array([x, x]) * x)),
    ("np.asarray", lambda x: np.sum(x * np.asarray(x))),
    ("np.array", lambda x: np.sum(x * np.array(x, dtype=np.float64))),
    ("np.r_", lambda x: np.sum(np.r_[x, x] * x)),
    ("np.c_", lambda x: np.sum(np.c_[x, x]) * x),
    ("np.mean of a list", lambda x: np.mean([x, x]) * x),
    ("np.std of a list", lambda x: np.std([x, 2 * x]) * x),
    ("np.linalg.norm of a list", lambda x: np.linalg.norm([x, x]) * x),
    ("tf.tensor of tensors", lambda x: tf.sum(tf.tensor([x, x]) * x)),
]


@pytest.mark.parametrize("x", [1.5, [1.0, 2.0]], ids=["scalar", "vector"])
@pytest.mark.parametrize("case, f", IMPLICIT, ids=[c[0] for c in IMPLICIT])
def test_implicit_array_inside_grad_is_an_error_naming_the_line_and_the_fix(case, f, x):
    with pytest.raises(GradientError) as e:
        tf.grad(f)(x)
    msg = str(e.value)
    assert f"{HERE}:{f.__code__.co_firstlineno}" in msg, msg
    for words in ("into an array inside a gradient computation", "silently wrong",
                  "tf.stack([x, y])", "tf.concat([x, y])", "x.numpy()", "tf.stop_gradient(x)"):
        assert words in msg, (words, msg)


def test_issue_27_cases_give_the_error_and_their_fixes_the_right_value():
    # the silent results were 3.0 (the answer is 6.0) and [1, 2] (the answer is [2, 4])
    with pytest.raises(GradientError, match=r"shape \(\) into an array"):
        tf.grad(lambda x: np.sum(np.array([x, x]) * x))(1.5)
    assert tf.grad(lambda x: np.sum(np.stack([x, x]) * x))(1.5).item() == 6.0
    assert tf.grad(lambda x: tf.sum(tf.stack([x, x]) * x))(1.5).item() == 6.0
    x = tf.tensor([1.0, 2.0])
    with pytest.raises(GradientError, match=r"float32 tensor of shape \(2,\)"):
        tf.grad(lambda t: np.sum(t * np.asarray(t)))(x)
    np.testing.assert_allclose(tf.grad(lambda t: np.sum(t * t))(x).numpy(), [2, 4])
    # a constant meant, said so: d/dt sum(t * c) = c
    np.testing.assert_allclose(tf.grad(lambda t: np.sum(t * t.numpy()))(x).numpy(), [1, 2])
    np.testing.assert_allclose(tf.grad(lambda t: np.sum(t * tf.stop_gradient(t)))(x).numpy(),
                               [1, 2])
    np.testing.assert_allclose(
        tf.grad(lambda t: np.mean(tf.stack([t, 3 * t])))(x).numpy(), [1, 1])


def test_every_gradient_api_refuses_and_a_paused_tape_allows():
    x = tf.tensor([1.0, 2.0])
    w = tf.variable(tf.tensor([1.0, 2.0]), name="np_interop_implicit_w")
    try:
        for call in (lambda: tf.grads(lambda a: tf.sum(a * np.asarray(a)))([x]),
                     lambda: tf.value_and_grad(lambda a: tf.sum(a * np.asarray(a)))(x),
                     lambda: tf.variable_grads(lambda: tf.sum(w * np.asarray(w)))):
            with pytest.raises(GradientError, match="into an array"):
                call()
        with tf.GradientTape() as tape:
            tape.watch(x)
            with pytest.raises(GradientError, match="into an array"):
                np.asarray(x)
            with tape.stop_recording():
                np.testing.assert_array_equal(np.asarray(x), [1, 2])
            y = tf.sum(x * x)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2, 4])
    finally:
        w.dispose()


def test_explicit_reads_and_numpy_arrays_keep_working_inside_grad(capsys):
    def f(t):
        s = t.sum()
        reads = (t.numpy(), t.data_sync(), t.array_sync(), s.item(), float(s), int(s),
                 bool(s > 0), np.float64(s), repr(t), str(t), f"{t:.1f}", len(t))
        t.print()
        c = np.asarray(np.array([1.0, 2.0]))          # NumPy arrays stay arrays
        return tf.sum(t * c) + s * 0.0, reads
    x = tf.tensor([1.0, 2.0])
    out = {}
    g = tf.grad(lambda t: out.setdefault("r", f(t))[0])(x)
    np.testing.assert_allclose(g.numpy(), [1, 2])
    reads = out["r"][1]
    assert reads[3] == reads[4] == 3.0 and reads[5] == 3 and reads[6] is True
    assert "Tensor" in capsys.readouterr().out


def test_outside_a_gradient_numpy_conversions_are_unchanged():
    x = tf.tensor([1.0, 2.0])
    s = tf.scalar(1.5)
    np.testing.assert_array_equal(np.array([x, x]), [[1, 2], [1, 2]])
    np.testing.assert_array_equal(np.array([s, s]), [1.5, 1.5])
    np.testing.assert_array_equal(np.r_[x, x], [1, 2, 1, 2])
    assert np.mean([x, x]) == 1.5 and np.linalg.norm([s, s]) == pytest.approx(1.5 * 2 ** 0.5)
    tf.grad(lambda t: t * 2)(x)                      # after a gradient call: as before
    v = np.asarray(x, copy=False)
    assert not v.flags.writeable and np.shares_memory(v, x._data)


def test_tensors_the_gradient_does_not_record_still_convert():
    # a constant made inside f, and a tensor from outside f that it only reads, are not
    # being recorded: np.asarray of them is a constant anyway
    data = tf.tensor([3.0, 4.0])
    g = tf.grad(lambda t: tf.sum(t * np.asarray(tf.tensor([3.0, 4.0]))))(tf.tensor([1.0, 2.0]))
    np.testing.assert_allclose(g.numpy(), [3, 4])
    g = tf.grad(lambda t: tf.sum(t * np.asarray(data)))(tf.tensor([1.0, 2.0]))
    np.testing.assert_allclose(g.numpy(), [3, 4])
    # but the sources are refused, and what is computed from them, in every gradient call
    x = tf.tensor([1.0, 2.0])
    w = tf.variable(tf.tensor([1.0, 2.0]))
    frozen = tf.variable(tf.tensor([1.0, 2.0]), trainable=False)
    try:
        for call in (lambda: tf.grad(lambda t: tf.sum(np.asarray(t) * t))(x),
                     lambda: tf.grad(lambda t: tf.sum(np.asarray(t * 2) * t))(x),
                     lambda: tf.variable_grads(lambda: tf.sum(np.asarray(w) * w)),
                     lambda: tf.vjp(lambda t: tf.sum(np.asarray(t) * t), x),
                     lambda: tf.hessian(lambda t: tf.sum(np.asarray(t) * t))(x)):
            with pytest.raises(GradientError, match="inside a gradient computation"):
                call()
        with tf.GradientTape() as tape:
            tape.watch(x)
            with pytest.raises(GradientError, match="inside a gradient computation"):
                np.asarray(x)
            with pytest.raises(GradientError, match="inside a gradient computation"):
                np.asarray(w)            # (the tape watches the variables it meets)
            np.asarray(frozen)           # not trainable: not a source
        # a trainable variable that variable_grads does not differentiate is still refused
        # (it is one of its sources); a non-trainable one is read as a constant
        _, gs = tf.variable_grads(lambda: tf.sum(w * np.asarray(frozen)))
        np.testing.assert_allclose(gs[w].numpy(), [1, 2])
    finally:
        w.dispose()
        frozen.dispose()


# ---------------------------------------------------------------- format, __array__
def test_format():
    assert f"{tf.scalar(1.234):.2f}" == "1.23"
    assert f"{tf.scalar(7, 'int32'):03d}" == "007"
    assert f"{tf.tensor([1.234, 5.0]):.1f}" == "[1.2, 5.0]"
    assert f"{tf.tensor([[1, 2], [3, 4]]):.0f}" == "[[1, 2],\n [3, 4]]"
    t = tf.tensor([1.0, 2.0])
    assert f"{t}" == str(t) == format(t, "")
    with pytest.raises(ArgumentError, match=r"format\(tensor, 'q'\) on a float32 tensor"):
        format(t, "q")


def test_array_protocol_numpy2():
    t = tf.tensor([1.0, 2.0])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.flags.writeable
    v = np.asarray(t, copy=False)
    assert not v.flags.writeable and np.shares_memory(v, t._data)
    with pytest.raises(ValueError, match="copy is needed"):
        np.asarray(t, dtype=np.float64, copy=False)
    np.testing.assert_array_equal(np.array(t, dtype=np.int64), [1, 2])


# ---------------------------------------------------------------- dtypes
def test_dtype_objects_compare_both_ways_and_hash_like_strings():
    t = tf.tensor([1.0])
    for other in (np.float32, np.dtype("float32"), "float32", tf.float32):
        assert t.dtype == other and other == t.dtype
        assert not (t.dtype != other) and not (other != t.dtype)
    assert t.dtype != np.float64 and t.dtype != "int32" and np.int32 != t.dtype
    assert tf.int32 == np.int32 and tf.bool_ == np.bool_ and tf.float64 == np.float64
    assert hash(tf.float32) == hash("float32") and {"float32": 1}[t.dtype] == 1
    assert {tf.float32: 1}["float32"] == 1
    assert str(t.dtype) == "float32" and f"{t.dtype}" == "float32"
    assert pickle.loads(pickle.dumps(t.dtype)) is tf.float32
    assert np.zeros(1, dtype=t.dtype).dtype == np.float32
    assert tf.tensor([1], dtype=np.int32).dtype == tf.int32


def test_dtype_objects_survive_a_backend_change():
    prev = tf.set_backend("numpy")
    try:
        assert tf.ones([1]).dtype == np.float32 and tf.ones([1]).dtype is tf.float32
    finally:
        tf.set_backend(prev)


# ---------------------------------------------------------------- keyword spellings
def test_numpy_and_torch_keyword_spellings():
    x = tf.ones([2, 3])
    assert x.sum(keepdims=True).shape == (1, 1)
    assert tf.mean(x, dim=1, keepdim=True).shape == (2, 1)
    assert tf.max(x, axis=0, keepdims=False).shape == (3,)
    assert tf.concat([x, x], dim=1).shape == (2, 6)
    assert tf.softmax(x, axis=0).shape == (2, 3)          # softmax's TF.js name is dim
    np.testing.assert_allclose(tf.softmax(tf.tensor([[0.0, 1.0], [0.0, 1.0]]), axis=0)
                               .numpy(), 0.5)
    assert tf.sum.keyword_aliases == {"dim": "axis", "keepdims": "keep_dims",
                                      "keepdim": "keep_dims"}


def test_both_spellings_at_once_is_an_error_naming_both():
    x = tf.ones([2, 3])
    with pytest.raises(ArgumentError, match=r"sum\(\): 'keep_dims' and 'keepdims'"):
        x.sum(keep_dims=False, keepdims=True)
    with pytest.raises(ArgumentError, match=r"'axis' and 'dim'"):
        tf.mean(x, 0, dim=1)


# ---------------------------------------------------------------- repr
def test_repr_shows_shape_and_dtype_str_keeps_tfjs_format():
    t = tf.tensor([[1, 2], [3, 4]])
    assert repr(t) == "<tf.Tensor shape=[2, 2] dtype=float32\n [[1, 2],\n  [3, 4]]>"
    assert str(t) == t.to_string() == "Tensor\n    [[1, 2],\n     [3, 4]]"
    assert repr(tf.scalar(2, "int32")) == "<tf.Tensor shape=[] dtype=int32 2>"
    big = repr(tf.zeros([1000, 1000]))
    assert big.startswith("<tf.Tensor shape=[1000, 1000] dtype=float32") and len(big) < 400
    w = tf.variable(tf.tensor([1.0]), name="repr_w")
    try:
        assert repr(w) == "<tf.Variable name='repr_w' shape=[1] dtype=float32 [1]>"
    finally:
        w.dispose()
    d = tf.ones([2])
    d.dispose()
    assert repr(d) == "<tf.Tensor shape=[2] dtype=float32 disposed>"


# ---------------------------------------------------------------- foreign arrays
@pytest.mark.extra("torch", "oracle")
def test_torch_tensors_into_tf_tensor():
    import torch
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    t = tf.tensor(src)
    assert t.dtype == "float64" and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), src.numpy())
    src += 1                                   # a copy: the tensor stays as it was
    assert t.numpy()[0, 0] == 0.0
    assert tf.tensor(torch.tensor([1, 2])).dtype == "int32"
    assert tf.add(tf.ones([2]), torch.ones(2)).numpy().tolist() == [2.0, 2.0]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(ArgumentError, match=r"'torch\.Tensor'.*detach"):
            tf.tensor(torch.ones(2, requires_grad=True))
    # (none of NumPy's: np.array(x, copy=True) warned that torch's __array__ takes no copy)
    assert [str(w.message) for w in seen] == []


@pytest.mark.extra("jax", "peers")
def test_jax_arrays_into_tf_tensor():
    import jax.numpy as jnp
    np.testing.assert_array_equal(tf.tensor(jnp.arange(3.0)).numpy(), [0.0, 1.0, 2.0])


def test_dlpack_only_array_into_tf_tensor():
    class DLPackOnly:            # as array-api-strict arrays: __dlpack__, no __array__
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    np.testing.assert_array_equal(tf.tensor(DLPackOnly(np.arange(3.0))).numpy(), [0, 1, 2])


def test_unreadable_object_named_with_its_module():
    import collections
    with pytest.raises(ArgumentError, match=r"got 'collections\.OrderedDict'"):
        tf.tensor(collections.OrderedDict())


def test_a_rank_0_tensor_goes_out_through_dlpack_and_array():
    # (a rank-0 tensor holds a NumPy scalar, which has no DLPack form of its own)
    for t in (tf.scalar(1.5), tf.scalar(2.0) * tf.scalar(3.0), tf.scalar(7, "int32")):
        a = np.from_dlpack(t)
        assert a.shape == () and a.dtype == np.dtype(t.dtype) and a == t.item()
        assert np.asarray(t).shape == () and np.asarray(t) == t.item()
        assert t.__dlpack_device__() == (1, 0)            # (kDLCPU, device 0)


@pytest.mark.parametrize("axis", [(0, 2), (-1, 0), [1], (0, 1, 2), (3, -4)])
def test_expand_dims_takes_numpy_tuples_of_axes(axis):
    got = np.expand_dims(f64(T), axis)
    assert got.shape == np.expand_dims(T, axis).shape
    np.testing.assert_array_equal(got.numpy(), np.expand_dims(T, axis))
    g = tf.grad(lambda x: (np.expand_dims(x, axis) * 2).sum())(f64(T))
    np.testing.assert_array_equal(g.numpy(), np.full(T.shape, 2.0))
    with pytest.raises(tf.errors.ArgumentError, match="np.expand_dims: axis .* repeats"):
        np.expand_dims(f64(T), (1, 1))


def test_numpy_bitwise_operators_on_either_side_give_tensors():
    # with the NumPy value on the left, & | ^ fell back to NumPy and returned an ndarray
    xb = tf.tensor([True, False])
    for got, want in ((np.bool_(True) & xb, [True, False]),
                      (np.array([False, True]) | xb, [True, True]),
                      (np.array([True, True]) ^ xb, [False, True]),
                      (xb & np.bool_(True), [True, False])):
        assert isinstance(got, tf.Tensor) and got.array_sync() == want
    xi = tf.tensor([5, 6], dtype="int32")
    assert np.bitwise_and(xi, tf.tensor([3, 3], dtype="int32")).array_sync() == [1, 2]
    with pytest.raises(tf.errors.DtypeError, match=r"np.bitwise_or takes two bool tensors "
                                                   r"\(the logical op\), got int32 and int"):
        np.bitwise_or(xi, 1)
