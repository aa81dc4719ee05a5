"""tf.linalg's square-matrix functions (flowgrad/ops/matrices.py): values against NumPy in
float64 and float32, gradients against central finite differences to order 2 (tables run by
opcheck.run_case, on every test backend), batched and broadcast inputs, tf.vmap, tf.jit and
vectorised jacobians, the symmetric Cholesky gradient, and every error path. QR's gradient
(flowgrad/ops/linalg.py) under tf.jit and tf.vmap and at rank-deficient inputs is here too."""
import numpy as np
import pytest
from opcheck import BACKENDS, Case, run_case

import flowgrad as tf
from flowgrad.errors import ArgumentError, FlowgradError, GradientError, ShapeError

L = tf.linalg


def well(x, shift=6.0):
    """x + shift·I on its last two axes: invertible and well conditioned for the "real"
    domain's entries (uniform in [-2, 2], matrices up to 3x3). Works on tensors and arrays."""
    n = x.shape[-1]
    if isinstance(x, np.ndarray):
        return x + shift * np.eye(n)
    return x + shift * tf.eye(n, dtype=x.dtype)


def spd(x):
    """x·xᵀ + 3I: symmetric positive definite."""
    n = x.shape[-2]
    if isinstance(x, np.ndarray):
        return x @ np.swapaxes(x, -1, -2) + 3 * np.eye(n)
    return tf.mat_mul(x, x, False, True) + 3 * tf.eye(n, dtype=x.dtype)


def row(name, fn, ref, *shapes, order=2):
    return Case(name, fn, ref, [(s, "real") for s in shapes], order, f32_rtol=2e-4)


def np_tri(a, lower=True, adjoint=False, unit=False):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        n = a.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    return np.swapaxes(t, -1, -2) if adjoint else t


CASES = [
    row("solve[3x3,3x2]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (3, 3), (3, 2)),
    row("solve[3x3,vector]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (3, 3), (3,)),
    row("solve[batch a,vector]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (2, 3, 3), (3,)),
    row("solve[batch broadcast]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (2, 1, 2, 2), (3, 2, 1)),
    row("solve[b batched only]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (2, 2), (2, 2, 3)),
    row("solve[1x1]", lambda a, b: L.solve(well(a), b),
        lambda a, b: np.linalg.solve(well(a), b), (1, 1), (1, 2)),
    row("inv[3x3]", lambda a: L.inv(well(a)), lambda a: np.linalg.inv(well(a)), (3, 3)),
    row("inv[batch]", lambda a: L.inv(well(a)), lambda a: np.linalg.inv(well(a)), (2, 2, 2)),
    row("det[3x3]", lambda a: L.det(well(a)), lambda a: np.linalg.det(well(a)), (3, 3)),
    row("det[negative]", lambda a: L.det(well(a, -6)),
        lambda a: np.linalg.det(well(a, -6)), (3, 3)),
    row("det[batch]", lambda a: L.det(well(a)), lambda a: np.linalg.det(well(a)), (2, 2, 2)),
    row("det[no shift]", L.det, np.linalg.det, (2, 2)),
    row("slogdet[3x3]", lambda a: list(L.slogdet(well(a))),
        lambda a: list(np.linalg.slogdet(well(a))), (3, 3)),
    row("slogdet[negative,batch]", lambda a: list(L.slogdet(well(a, -6))),
        lambda a: list(np.linalg.slogdet(well(a, -6))), (2, 3, 3)),
    row("cholesky[3x3]", lambda a: L.cholesky(spd(a)), lambda a: np.linalg.cholesky(spd(a)),
        (3, 3)),
    row("cholesky[upper]", lambda a: L.cholesky(spd(a), upper=True),
        lambda a: np.linalg.cholesky(spd(a), upper=True), (3, 3)),
    row("cholesky[batch,wide factor]", lambda a: L.cholesky(spd(a)),
        lambda a: np.linalg.cholesky(spd(a)), (2, 3, 2)),
    row("trace[3x4]", L.trace, np.linalg.trace, (3, 4)),
    row("trace[offset=1]", lambda x: L.trace(x, 1), lambda x: np.linalg.trace(x, offset=1),
        (3, 4)),
    row("trace[offset=-2,batch]", lambda x: L.trace(x, offset=-2),
        lambda x: np.linalg.trace(x, offset=-2), (2, 4, 3)),
    row("trace[offset past the end]", lambda x: L.trace(x, 5),
        lambda x: np.linalg.trace(x, offset=5), (2, 3)),
]


def triangle_rows(k):
    return [row(f"tril[k={k}]", lambda x: L.tril(x, k), lambda x: np.tril(x, k), (3, 4)),
            row(f"triu[k={k},batch]", lambda x: L.triu(x, k), lambda x: np.triu(x, k),
                (2, 4, 3))]


def power_row(n):
    return row(f"matrix_power[n={n}]", lambda a: L.matrix_power(well(a) / 6, n),
               lambda a: np.linalg.matrix_power(well(a) / 6, n), (3, 3))


def triangular_solve_row(lo, adj, unit):
    def fn(a, b):
        return L.triangular_solve(well(a), b, lower=lo, adjoint=adj, unit_diagonal=unit)

    def ref(a, b):
        return np.linalg.solve(np_tri(well(a), lo, adj, unit), b)

    return row(f"triangular_solve[lower={lo},adjoint={adj},unit={unit}]", fn, ref, (3, 3),
               (3, 2))


for _k in (0, -1, 1, 3):
    CASES += triangle_rows(_k)
CASES += [power_row(_n) for _n in (0, 1, 2, 3, 5, -1, -2)]
CASES.append(row("matrix_power[batch,n=3]", lambda a: L.matrix_power(a, 3),
                 lambda a: np.linalg.matrix_power(a, 3), (2, 2, 2)))
CASES += [triangular_solve_row(*_r) for _r in [
    (True, False, False), (False, False, False), (True, True, False), (False, True, False),
    (True, False, True), (False, True, True)]]
CASES += [
    row("triangular_solve[vector]", lambda a, b: L.triangular_solve(well(a), b),
        lambda a, b: np.linalg.solve(np.tril(well(a)), b), (3, 3), (3,)),
    row("triangular_solve[batch broadcast]",
        lambda a, b: L.triangular_solve(well(a), b, lower=False),
        lambda a, b: np.linalg.solve(np.triu(well(a)), b), (2, 1, 3, 3), (2, 3, 1)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_matrix_functions(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- dtypes, names, ints

@pytest.mark.parametrize("fn", [L.inv, L.det, L.cholesky, lambda a: L.slogdet(a)[1],
                                lambda a: L.matrix_power(a, -2), L.trace, L.tril, L.triu,
                                lambda a: L.solve(a, a), lambda a: L.triangular_solve(a, a)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_dtypes_are_kept(fn, dtype):
    a = tf.tensor(spd(np.random.default_rng(0).uniform(-1, 1, (3, 3))), dtype=dtype)
    assert fn(a).dtype == dtype
    assert tf.grad(lambda x: fn(x).sum())(a).dtype == dtype


def test_mixed_float_dtypes_promote_and_ints_become_float32():
    a = tf.tensor([[2.0, 0.0], [0.0, 4.0]], dtype="float32")
    b = tf.tensor([1.0, 1.0], dtype="float64")
    assert L.solve(a, b).dtype == "float64"
    assert L.solve([[2, 0], [0, 4]], [2, 4]).dtype == "float32"
    assert L.inv(tf.tensor([[2, 0], [0, 4]], dtype="int32")).dtype == "float32"
    # Python lists next to a float64 tensor take its dtype (no float32 rounding)
    x = L.solve(tf.tensor([[3.0]], dtype="float64"), [0.1])
    assert x.dtype == "float64" and x.numpy()[0] == pytest.approx(0.1 / 3, rel=1e-15)


def test_integer_inputs_of_the_structural_functions_stay_integer():
    m = tf.tensor([[1, 2, 3], [4, 5, 6]], dtype="int32")
    assert L.tril(m).dtype == L.triu(m).dtype == L.trace(m).dtype == "int32"
    assert L.trace(m).item() == 6
    assert L.tril(m, -1).numpy().tolist() == [[0, 0, 0], [4, 0, 0]]
    p = L.matrix_power(tf.tensor([[1, 1], [1, 0]], dtype="int32"), 10)
    assert p.dtype == "int32" and p.numpy().tolist() == [[89, 55], [55, 34]]     # Fibonacci
    assert L.tril(tf.tensor([[True, True], [True, True]])).numpy().tolist() == [
        [True, False], [True, True]]


def test_trace_keeps_infinities_off_the_diagonal_out():
    x = tf.tensor([[1.0, np.inf], [-np.inf, 2.0]])
    assert L.trace(x).item() == 3.0
    assert tf.grad(lambda v: L.trace(v))(x).numpy().tolist() == [[1, 0], [0, 1]]


def test_slogdet_is_a_named_pair_like_numpy():
    a = tf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64")
    r = L.slogdet(a)
    want = np.linalg.slogdet(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert r.sign.item() == want.sign == r[0].item()
    assert r.logabsdet.item() == pytest.approx(want.logabsdet, rel=1e-14)
    _sign, logabsdet = r
    assert logabsdet is r.logabsdet and len(r) == 2


def test_slogdet_of_a_singular_matrix_is_numpys_and_sign_has_no_gradient():
    s = L.slogdet(tf.tensor([[1.0, 2.0], [2.0, 4.0]], dtype="float64"))
    assert s.sign.item() == 0 and s.logabsdet.item() == -np.inf
    a = tf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64")
    g = tf.grad(lambda x: L.slogdet(x).sign * 3)(a)
    np.testing.assert_array_equal(g.numpy(), 0)


def test_matrix_power_zero_is_a_constant_identity():
    a = tf.tensor(np.arange(8.0).reshape(2, 2, 2))
    np.testing.assert_array_equal(L.matrix_power(a, 0).numpy(), np.broadcast_to(np.eye(2),
                                                                                 (2, 2, 2)))
    g = tf.grad(lambda x: L.matrix_power(x, 0).sum(), allow_unconnected=True)(a)
    np.testing.assert_array_equal(g.numpy(), 0)


def test_camel_case_names():
    assert tf.linalg.matrixPower is tf.linalg.matrix_power
    assert tf.linalg.triangularSolve is tf.linalg.triangular_solve


def test_zero_size_batches():
    a = tf.zeros([0, 2, 2], "float64")
    assert L.solve(a, tf.zeros([0, 2, 1], "float64")).shape == (0, 2, 1)
    assert L.det(a).shape == (0,) and L.inv(a).shape == (0, 2, 2)


# ---------------------------------------------------------------- Cholesky's gradient

def test_cholesky_gradient_lies_on_the_triangle_it_reads():
    # cholesky reads a's lower triangle (as NumPy): its gradient is the derivative of that,
    # so a finite difference of any single entry agrees, and along a symmetric perturbation
    # it gives what the symmetric gradient (PyTorch's, JAX's) gives
    rng = np.random.default_rng(5)
    a = spd(rng.uniform(-1, 1, (4, 4)))
    w = rng.uniform(-1, 1, (4, 4))

    def f(x):
        return (L.cholesky(x) * tf.tensor(w)).sum()

    g = tf.grad(f)(tf.tensor(a)).numpy()
    np.testing.assert_array_equal(np.triu(g, 1), 0)
    h = 1e-6
    for i in range(4):
        for j in range(4):
            e = np.zeros((4, 4))
            e[i, j] = 1
            num = (f(tf.tensor(a + h * e)).item() - f(tf.tensor(a - h * e)).item()) / (2 * h)
            assert g[i, j] == pytest.approx(num, rel=1e-6, abs=1e-8)
    for i, j in [(0, 0), (2, 1), (3, 0), (1, 3)]:
        e = np.zeros((4, 4))
        e[i, j] = e[j, i] = 1            # a symmetric perturbation
        num = (f(tf.tensor(a + h * e)).item() - f(tf.tensor(a - h * e)).item()) / (2 * h)
        assert (g * e).sum() == pytest.approx(num, rel=1e-6, abs=1e-8)


def test_cholesky_third_order():
    a = tf.tensor(spd(np.random.default_rng(2).uniform(-1, 1, (3, 3))))
    v = tf.tensor(np.random.default_rng(3).uniform(-1, 1, (3, 3)))

    def f(x):
        return L.cholesky(spd(x)).square().sum()

    def d(f):
        return lambda x: (tf.grad(f)(x) * v).sum()

    g3 = tf.grad(d(d(f)))(a).numpy()
    h = 1e-4
    ff = d(d(f))
    for ix in [(0, 0), (1, 2)]:
        e = np.zeros((3, 3))
        e[ix] = h
        num = (ff(a + e).item() - ff(a - e).item()) / (2 * h)
        assert g3[ix] == pytest.approx(num, rel=1e-5, abs=1e-6)


# ---------------------------------------------------------------- vmap, jit, jacobians

FUNCS = {
    "solve": lambda x, y: L.solve(well(x), y),
    "solve_vector": lambda x, y: L.solve(well(x), y[:, 0]),
    "triangular_solve": lambda x, y: L.triangular_solve(well(x), y, lower=False,
                                                        adjoint=True),
    "inv": lambda x, y: L.inv(well(x)) @ y,
    "det": lambda x, y: L.det(well(x)) * y,
    "slogdet": lambda x, y: L.slogdet(well(x)).logabsdet * y,
    "cholesky": lambda x, y: L.cholesky(spd(x)) @ y,
    "matrix_power": lambda x, y: L.matrix_power(well(x), -3) @ y,
    "trace": lambda x, y: L.trace(x, 1) * y,
    "tril": lambda x, y: L.tril(x, -1) @ y,
    "triu": lambda x, y: L.triu(x, 1) @ y,
}
_R = np.random.default_rng(11)
XS = _R.uniform(-2, 2, (4, 3, 3))
YS = _R.uniform(-2, 2, (4, 3, 2))


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_vmap_matches_a_loop(name, in_axes):
    f = FUNCS[name]
    x = XS if in_axes[0] == 0 else XS[0]
    y = YS if in_axes[1] == 0 else YS[0]

    def pick(v, ax, i):
        return tf.tensor(v[i] if ax == 0 else v)

    got = tf.vmap(f, in_axes=in_axes)(tf.tensor(x), tf.tensor(y))
    want = np.stack([f(pick(x, in_axes[0], i), pick(y, in_axes[1], i)).numpy()
                     for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)

    def g(a, b):
        return tf.grads(lambda u, v: f(u, v).square().sum())([a, b])

    got = tf.vmap(g, in_axes=in_axes, out_axes=0)(tf.tensor(x), tf.tensor(y))
    for k, gk in enumerate(got):
        want = np.stack([g(pick(x, in_axes[0], i), pick(y, in_axes[1], i))[k].numpy()
                         for i in range(4)])
        np.testing.assert_allclose(gk.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("solver", [L.solve, L.triangular_solve])
def test_vmap_of_solves_whose_operands_have_different_ranks(solver):
    # an unbatched stack of matrices against batched right-hand sides of lower rank: the
    # batch axes must line up under the vmap axis
    a = tf.tensor(well(XS[:2]))                     # [2, 3, 3], the same for every example
    bs = tf.tensor(YS)                              # [4, 3, 2]: one [3, 2] per example
    got = tf.vmap(lambda b: solver(a, b))(bs).numpy()
    want = np.stack([solver(a, bs[i]).numpy() for i in range(4)])
    assert got.shape == (4, 2, 3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", FUNCS)
def test_jit_matches_eager_values_and_gradients(name):
    f = FUNCS[name]

    def step(a, b):
        return tf.value_and_grads(lambda u, v: f(u, v).square().sum())([a, b])

    jitted = tf.jit(step)
    for i in range(3):        # the first call traces, the next ones replay
        a, b = tf.tensor(XS[i]), tf.tensor(YS[i])
        (v, gs), (v2, gs2) = jitted(a, b), step(a, b)
        assert v.item() == pytest.approx(v2.item(), rel=1e-12)
        for g, g2 in zip(gs, gs2):
            np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", FUNCS)
def test_vectorised_jacobian_matches_finite_differences(name):
    f = FUNCS[name]
    y = tf.tensor(YS[0])
    x = XS[0]
    jac = tf.jacobian(lambda u: f(u, y))(tf.tensor(x)).numpy()
    h = 1e-6
    for ix in [(0, 0), (1, 2), (2, 1)]:
        e = np.zeros((3, 3))
        e[ix] = h
        num = (f(tf.tensor(x + e), y).numpy() - f(tf.tensor(x - e), y).numpy()) / (2 * h)
        np.testing.assert_allclose(jac[(...,) + ix], num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", FUNCS)
def test_check_grads_third_order_in_both_modes(name):
    # tf.debug.check_grads: reverse and forward mode, to order 3, against finite differences
    report = tf.debug.check_grads(FUNCS[name], [tf.tensor(XS[1]), tf.tensor(YS[1])], order=3,
                                  modes=("rev", "fwd"))
    assert report.passed


def test_hessian_of_a_log_determinant():
    # d²/dx² log det(a) along (u, v) is -tr(a⁻¹ u a⁻¹ v)
    a = well(np.random.default_rng(8).uniform(-2, 2, (3, 3)))
    h = tf.hessian(lambda x: L.slogdet(x).logabsdet)(tf.tensor(a)).numpy()
    ai = np.linalg.inv(a)
    want = -np.einsum("li,jk->ijkl", ai, ai)
    np.testing.assert_allclose(h, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- errors

def _singular_batch():
    return tf.tensor(np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]], np.eye(2)]))


def test_a_singular_matrix_names_the_op_and_the_batch_entry():
    with pytest.raises(np.linalg.LinAlgError) as e:
        L.solve(_singular_batch(), tf.ones([2, 1], "float64"))
    assert isinstance(e.value, FlowgradError)
    assert str(e.value).startswith(
        "solve(a, b): the 2x2 matrix at batch entry [1] (of the batch shape [3]) is singular "
        "(its LU factorization has a zero pivot): check it for linearly dependent rows or "
        "columns, or regularize it (a + eps*I)")
    with pytest.raises(np.linalg.LinAlgError, match=r"^inv\(a\): the 2x2 matrix is singular "
                       r".*tf\.linalg\.pinv gives the pseudo-inverse"):
        L.inv(tf.tensor([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(np.linalg.LinAlgError, match=r"inv\(a\): the 2x2 matrix at batch entry "
                       r"\[1\] \(of the batch shape \[3\]\) is singular"):
        L.matrix_power(_singular_batch(), -1)


def test_the_gradient_of_det_at_a_singular_matrix_says_why():
    with pytest.raises(np.linalg.LinAlgError, match=r"^the gradient of det\(a\): the 2x2 matrix "
                       r"is singular .*the gradient there is the cofactor matrix"):
        tf.grad(lambda a: L.det(a))(tf.tensor([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(np.linalg.LinAlgError, match=r"^the gradient of slogdet\(a\): .* "
                       r"log\|det\(a\)\| is -inf there and has no gradient"):
        tf.grad(lambda a: L.slogdet(a).logabsdet)(tf.tensor([[1.0, 2.0], [2.0, 4.0]]))


def test_cholesky_of_a_matrix_that_is_not_positive_definite():
    a = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0]), 2 * np.eye(3)])
    with pytest.raises(np.linalg.LinAlgError) as e:
        L.cholesky(tf.tensor(a))
    assert str(e.value).startswith(
        "cholesky(a): the 3x3 matrix at batch entry [1] (of the batch shape [3]) is not "
        "positive definite (its lower triangle read as a symmetric matrix): Cholesky needs a "
        "symmetric positive-definite matrix. If it should be one, add a small multiple of the "
        "identity")


def test_triangular_solve_with_a_zero_on_the_diagonal():
    a = tf.tensor([[[1.0, 0.0], [5.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
    with pytest.raises(np.linalg.LinAlgError, match=r"^triangular_solve\(a, b\): the 2x2 lower "
                       r"triangular matrix at batch entry \[0\] \(of the batch shape \[2\]\) is "
                       r"singular \(a zero on its diagonal\)"):
        L.triangular_solve(a, tf.ones([2, 1]))
    # with unit_diagonal=True the diagonal is not read
    x = L.triangular_solve(a, tf.ones([2, 1]), unit_diagonal=True)
    np.testing.assert_allclose(x.numpy()[0], [[1.0], [-4.0]])


@pytest.mark.parametrize("fn,msg", [
    (lambda: L.inv(tf.ones([3])),
     ("inv: a must be a matrix or a stack of matrices (rank >= 2, the last two axes), got "
      "shape [3]")),
    (lambda: L.det(tf.ones([2, 3])),
     "det: a must be square in its last two axes, got shape [2, 3] (2x3)"),
    (lambda: L.cholesky(tf.ones([4, 2, 3])), "cholesky: a must be square"),
    (lambda: L.slogdet(tf.ones([2, 3])), "slogdet: a must be square"),
    (lambda: L.matrix_power(tf.ones([2, 3]), 2), "matrix_power: a must be square"),
    (lambda: L.trace(tf.ones([3])), "trace: x must be a matrix or a stack of matrices"),
    (lambda: L.tril(tf.ones([3])), "tril: x must be a matrix"),
    (lambda: L.triu(5.0), "triu: x must be a matrix"),
    (lambda: L.solve(tf.eye(2), tf.ones([3])),
     "solve: a is 2x2 but the vector b has length 3; they must match"),
    (lambda: L.solve(tf.eye(2), tf.ones([3, 2])),
     "solve: a is 2x2 but b has 3 rows (shape [3, 2]); b must be (..., 2, K)"),
    # a stack of vectors is NumPy 1's form: b[..., None] says it in NumPy 2 and here
    (lambda: L.solve(tf.ones([2, 3, 3]), tf.ones([2, 3])),
     ("solve: a is 3x3 but b has 2 rows (shape [2, 3]); b must be (..., 3, K) — a 1-D b of "
      "length 3 is a vector (NumPy 2's rule: b is a vector only when b.ndim == 1)")),
    (lambda: L.solve(tf.eye(2), 1.0),
     ("solve: b must be a vector of length 2 or a stack of 2-row matrices (..., 2, K), got a "
      "scalar")),
    (lambda: L.solve(tf.ones([3, 2, 2]), tf.ones([4, 2, 1])),
     ("solve: the batch shapes [3] of a (shape [3, 2, 2]) and [4] of b (shape [4, 2, 1]) do "
      "not broadcast")),
    (lambda: L.triangular_solve(tf.ones([2, 3]), tf.ones([2])),
     "triangular_solve: a must be square"),
])
def test_shape_errors(fn, msg):
    with pytest.raises(ShapeError) as e:
        fn()
    assert str(e.value).startswith(msg)


@pytest.mark.parametrize("fn,msg", [
    (lambda: L.matrix_power(tf.eye(2), 1.5), "matrix_power: n must be an integer, got 1.5"),
    (lambda: L.trace(tf.eye(2), 0.5), "trace: offset must be an integer, got 0.5"),
    (lambda: L.tril(tf.eye(2), "1"), "tril: k must be an integer"),
    (lambda: L.triangular_solve(tf.eye(2), tf.ones([2]), lower="yes"), "lower"),
])
def test_argument_errors(fn, msg):
    with pytest.raises(ArgumentError) as e:
        fn()
    assert msg in str(e.value)


def test_string_tensors_are_refused():
    with pytest.raises(FlowgradError, match="must be numeric tensor, but got string tensor"):
        L.tril(tf.tensor([["a", "b"], ["c", "d"]]))


# ---------------------------------------------------------------- QR's gradient

def test_qr_gradients_under_jit_and_vmap():
    rng = np.random.default_rng(4)
    for shape, full in [((4, 2), True), ((4, 2), False), ((2, 4), False), ((3, 3), True)]:
        xs = rng.normal(size=(3,) + shape)
        k = min(shape)

        def f(x, full=full, k=k):
            q, r = L.qr(x, full)
            return (q[..., :, :k] * 1.5).sum() + (r * r).sum()

        g = tf.grad(f)
        eager = np.stack([g(tf.tensor(x)).numpy() for x in xs])
        jitted = tf.jit(g)
        np.testing.assert_allclose(np.stack([jitted(tf.tensor(x)).numpy() for x in xs]), eager,
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tf.vmap(g)(tf.tensor(xs)).numpy(), eager, rtol=1e-10,
                                   atol=1e-12)


def test_qr_complete_q_columns_error_under_jit_and_vmap():
    x = tf.tensor(np.random.default_rng(4).normal(size=(4, 2)))

    def g(v):
        return tf.grad(lambda u: L.qr(u, True)[0].sum())(v)

    msg = "is not differentiable with respect to q's last 2 columns"
    with pytest.raises(GradientError, match=msg):
        tf.jit(g)(x)
    with pytest.raises(GradientError, match=msg):
        tf.vmap(g)(tf.stack([x, x]))


def test_qr_second_order_with_a_complete_q():
    x = np.random.default_rng(6).normal(size=(4, 2))
    v = np.random.default_rng(7).normal(size=(4, 2))

    def f(u):
        q, r = L.qr(u, True)
        return (q[:, :2] ** 3).sum() + (r ** 3).sum()

    def f_red(u):
        q, r = L.qr(u)
        return (q ** 3).sum() + (r ** 3).sum()

    def hv(f):
        return tf.grad(lambda u: (tf.grad(f)(u) * tf.tensor(v)).sum())(tf.tensor(x)).numpy()

    np.testing.assert_allclose(hv(f), hv(f_red), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("x", [[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]],     # tall, rank 1
                               [[1.0, 0.0, 3.0], [2.0, 0.0, 1.0]]])     # wide, leading block
def test_qr_gradient_at_dependent_columns_says_why(x):
    with pytest.raises(GradientError, match=r"qr\(x\) of a \dx\d matrix has no gradient here: "
                       r"x's first 2 columns are linearly dependent"):
        tf.grad(lambda u: L.qr(u)[0].sum())(tf.tensor(x))
