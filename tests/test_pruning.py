"""Backward pruning: a gradient rule computes only the input gradients some x needs, a
constant gets none, and grad of grad skips what cannot reach x; a seed of ones is not
multiplied by (1·b is b). Results are checked against closed forms in float64."""
import collections
import tracemalloc

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import engine as E
from flowgrad.ops import PRIMITIVES


def t64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64), dtype="float64")


X = np.linspace(-1.5, 2.0, 7)


@pytest.fixture
def kernels(monkeypatch):
    """Counts of kernels run, by name, while the test runs."""
    count = collections.Counter()
    run = E.run_kernel

    def counting(prim, inputs, attrs=None):
        count[prim.name] += 1
        return run(prim, inputs, attrs)
    monkeypatch.setattr(E, "run_kernel", counting)
    return count


@pytest.fixture
def needs_of(monkeypatch):
    """needs_of(kernel) -> the ``needs`` its rule was called with, one tuple per call."""
    seen = collections.defaultdict(list)

    def watch(name):
        prim = PRIMITIVES[name]
        rule = prim.vjp

        def watched(*args, needs, **attrs):
            seen[name].append(needs)
            return rule(*args, needs=needs, **attrs)
        monkeypatch.setattr(prim, "vjp", watched)
        return seen[name]
    return watch


def test_constant_exponent_gets_no_gradient_in_grad_of_grad(kernels, needs_of):
    calls = needs_of("Pow")
    x = t64(X)
    d2 = tf.grad(tf.grad(lambda t: t ** 3))(x)
    np.testing.assert_allclose(d2.numpy(), 6 * X, rtol=1e-12)
    assert calls and all(n == (True, False) for n in calls)      # never d/d(exponent)
    assert kernels["Log"] == 0 and kernels["Greater"] == 0        # its rule's log(a) part
    d3 = tf.grad(tf.grad(tf.grad(lambda t: t.pow(tf.scalar(3.0, "float64")))))(x)
    np.testing.assert_allclose(d3.numpy(), np.full_like(X, 6.0), rtol=1e-12)


def test_exponent_gradient_still_computed_when_asked():
    a, b = t64(X[X > 0]), t64([2.5])
    ga, gb = tf.grads(lambda a, b: a ** b)([a, b])
    np.testing.assert_allclose(ga.numpy(), 2.5 * a.numpy() ** 1.5, rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), [np.sum(a.numpy() ** 2.5 * np.log(a.numpy()))],
                               rtol=1e-12)


@pytest.mark.parametrize("op, name", [(lambda x, c: x * c, "Multiply"),
                                      (lambda x, c: x / c, "RealDiv"),
                                      (lambda x, c: c - x, "Sub"),
                                      (lambda x, c: tf.squared_difference(x, c),
                                       "SquaredDifference")])
def test_binary_rule_skips_the_constant_operand(op, name, needs_of):
    calls = needs_of(name)
    c = t64(X + 3.0)
    x = t64(X)
    g = tf.grad(lambda t: op(t, c).sum())(x)
    h = 1e-6
    fd = np.array([(op(t64(X + h * e), c).sum().item() - op(t64(X - h * e), c).sum().item())
                   / (2 * h) for e in np.eye(len(X))])
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-7, atol=1e-8)
    expected = (False, True) if name == "Sub" else (True, False)
    assert calls == [expected]


def test_mat_mul_with_a_constant_matrix_computes_one_product(kernels, needs_of):
    calls = needs_of("BatchMatMul")
    rng = np.random.default_rng(0)
    xn, cn = rng.normal(size=(3, 4)), rng.normal(size=(4, 5))
    g = tf.grad(lambda x: tf.mat_mul(x, t64(cn)).sum())(t64(xn))
    np.testing.assert_allclose(g.numpy(), np.ones((3, 5)) @ cn.T, rtol=1e-12)
    assert calls == [(True, False)]
    assert kernels["BatchMatMul"] == 2                # the forward and dy @ c^T only


def test_grad_of_grad_of_a_product_chain_skips_the_unit_seed(kernels):
    x = t64(X)
    d2 = tf.grad(tf.grad(lambda t: t * t * t))(x)
    np.testing.assert_allclose(d2.numpy(), 6 * X, rtol=1e-12)
    # forward 2, first order 2 (1·t and 1·t·t are not multiplied), second order 0
    assert kernels["Multiply"] == 4
    d3 = tf.grad(tf.grad(tf.grad(lambda t: t * t * t * t)))(x)
    np.testing.assert_allclose(d3.numpy(), 24 * X, rtol=1e-12)
    d2 = tf.grad(tf.grad(lambda t: t * t.sin()))(x)
    np.testing.assert_allclose(d2.numpy(), 2 * np.cos(X) - X * np.sin(X), rtol=1e-12)


def test_a_gradient_that_is_an_older_tensor_is_a_new_tensor():
    c = t64(X)
    x = t64(np.ones_like(X))
    before = tf.memory().num_tensors
    g = tf.grad(lambda t: t * c)(x)               # 1·c: c's values, in a tensor of its own
    assert g is not c
    np.testing.assert_array_equal(g.numpy(), X)
    g.dispose()
    assert not c.is_disposed and tf.memory().num_tensors == before
    np.testing.assert_array_equal(c.numpy(), X)
    w = tf.variable(t64(X), name="pruning_w")
    try:
        value, grads = tf.variable_grads(lambda: (w * x).sum())
        assert grads[w] is not x
        np.testing.assert_array_equal(grads[w].numpy(), np.ones_like(X))
        tf.dispose([value, grads[w]])
        assert not x.is_disposed
    finally:
        w.dispose()
    assert tf.memory().num_tensors == before


def test_an_explicit_dy_is_multiplied():
    x, dy = t64(X), t64(np.full_like(X, 2.0))
    g = tf.grad(lambda t: t * t)(x, dy)
    np.testing.assert_allclose(g.numpy(), 4 * X, rtol=1e-12)


# ---------------------------------------------------------------- freed along the way

def _probe(log):
    """An identity whose gradient rule notes the bytes NumPy holds (tracemalloc sees every
    array's buffer) when the backward reaches it."""
    def f(x, save):
        def grad_func(dy, saved):
            log.append(tracemalloc.get_traced_memory()[0])
            return dy
        return {"value": x.clone(), "grad_func": grad_func}
    return tf.custom_grad(f)


@pytest.fixture
def traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()


@pytest.mark.parametrize("order", [1, 2])
def test_first_order_backward_frees_consumed_gradients(order, traced):
    """Between the first and the last rule of a 40-op chain, a first-order pass holds a few
    gradients, not one per op (each is freed once the pass lets go of it); a pass that is
    itself recorded (grad of grad) keeps them, as the outer graph needs."""
    n = 10_000
    x = tf.tensor(np.linspace(-1, 1, n).astype(np.float32))
    log = []
    early, late = _probe(log), _probe(log)

    def f(x):
        v = early(x)
        for _ in range(20):
            v = (v * 1.01).sin()
        return late(v).sum()
    g = tf.grad(f) if order == 1 else tf.grad(lambda x: tf.grad(f)(x).sum())
    out = g(x)
    start, end = log[0], log[1]
    grown = (end - start) / (n * 4)        # float32 arrays of n elements
    if order == 1:
        assert grown <= 4, grown
    else:
        assert grown >= 20, grown          # the recorded pass keeps its gradients
    # the values: d/dx of the chain, by the chain rule in float64
    v, d = np.linspace(-1, 1, n), np.ones(n)
    for _ in range(20):
        d, v = d * np.cos(v * 1.01) * 1.01, np.sin(v * 1.01)
    if order == 1:
        np.testing.assert_allclose(out.numpy(), d, rtol=1e-4, atol=1e-6)


def test_a_first_order_pass_leaves_the_accounting_exact():
    """Its temporaries are never counted; the gradients it returns are, once, in the
    caller's scope."""
    x = tf.tensor(np.linspace(-1, 1, 1000).astype(np.float32))
    before = tf.memory()
    g = tf.grad(lambda t: (t * 2).exp().sin().tanh().square().sum())(x)
    after = tf.memory()
    assert after.num_tensors - before.num_tensors == 1
    assert after.num_bytes - before.num_bytes == 4000
    g.dispose()
    assert tf.memory().num_tensors == before.num_tensors
    a, b = tf.scalar(2.0), tf.scalar(3.0)
    n0 = tf.memory().num_tensors
    da, db = tf.tidy(lambda: tf.grads(lambda a, b: a * b + a)([a, b]))
    assert tf.memory().num_tensors == n0 + 2 and (da.item(), db.item()) == (4.0, 2.0)
    tf.dispose([da, db])
    assert tf.memory().num_tensors == n0


def _counts():
    m = tf.memory()
    return m.num_tensors, m.num_data_buffers, m.num_bytes


def test_gradients_that_view_a_pass_s_temporaries_count_their_buffers():
    """A view (reshape) of an uncounted temporary is the first counted holder of its
    buffer: once, however many views and promoted tensors share it. The buffer was not
    counted at all while such a gradient lived."""
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    n0, b0, y0 = _counts()
    g = tf.grad(lambda t: t.reshape([4]).exp().sum())(x)     # a view of exp's rule result
    np.testing.assert_allclose(g.numpy(), np.exp(x.numpy()), rtol=1e-6)
    assert _counts() == (n0 + 1, b0 + 1, y0 + 16)
    g.dispose()
    assert _counts() == (n0, b0, y0)
    # one buffer for two gradients: a's is exp's rule result, b's a view of it
    a, b = tf.tensor([[0.5, 1.0], [1.5, 2.0]]), tf.tensor([0.1, 0.2, 0.3, 0.4])
    n0, b0, y0 = _counts()
    da, db = tf.grads(lambda a, b: (a + b.reshape([2, 2])).exp().sum())([a, b])
    want = np.exp(a.numpy() + b.numpy().reshape(2, 2))
    np.testing.assert_allclose(da.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(db.numpy(), want.reshape(4), rtol=1e-6)
    assert np.shares_memory(da._data, db._data)
    assert _counts()[:2] == (n0 + 2, b0 + 1)
    da.dispose()
    assert _counts()[:2] == (n0 + 1, b0 + 1)
    db.dispose()
    assert _counts() == (n0, b0, y0)


def test_a_view_of_a_constant_counts_its_buffer():
    from flowgrad import engine as E
    from flowgrad.ops import PRIMITIVES
    c = E.constant_tensor(np.arange(4, dtype=np.float32))
    n0, b0, _ = _counts()
    v = E.run_kernel(PRIMITIVES["Reshape"], (c,), {"shape": (2, 2)})
    assert np.shares_memory(v._data, c._data)
    assert _counts()[:2] == (n0 + 1, b0 + 1)
    v.dispose()
    assert _counts()[:2] == (n0, b0)


def test_user_code_in_a_backward_pass_sees_counted_tensors():
    """A custom gradient's function and a hook may keep what they get: those are counted
    tensors that tidy and dispose handle as any other."""
    kept = []

    def f(x, save):
        def grad_func(dy, saved):
            kept.append(dy)                   # the dy it was given
            kept.append(dy * 3)               # and one it made
            return dy * 3
        return {"value": x * 3, "grad_func": grad_func}
    op = tf.custom_grad(f)
    x = tf.tensor([1.0, 2.0])
    n0 = tf.memory().num_tensors
    g = tf.grad(lambda t: op(t.exp()).sin().sum())(x)
    want = np.cos(3 * np.exp([1.0, 2.0])) * 3 * np.exp([1.0, 2.0])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5)
    # grad's tidy disposed what the function kept (it did not keep() them)
    assert all(t.is_disposed for t in kept)
    assert tf.memory().num_tensors == n0 + 1
    hooked = []
    y = tf.tensor([0.5, 1.5])
    n1 = tf.memory().num_tensors

    def hooked_f(t):
        sq = t.square()
        sq.register_hook(lambda g: hooked.append(tf.keep(g)))
        return sq.exp().sum()
    tf.grad(hooked_f)(y).dispose()
    assert tf.memory().num_tensors == n1 + 1          # the kept hooked gradient
    np.testing.assert_allclose(hooked[0].numpy(), np.exp([0.25, 2.25]), rtol=1e-6)
    tf.dispose([hooked[0], y, g])
    assert tf.memory().num_tensors == n0


def test_a_summed_seed_of_ones_is_not_multiplied_by(kernels):
    """grad(f) of a sum: the sum's gradient spreads the seed of ones into ones, and the
    products below it hand back their other factor instead of multiplying by them."""
    x, w = t64(X), t64(X[::-1].copy())
    g = tf.grad(lambda t: (t * w).sum())(x)
    np.testing.assert_array_equal(g.numpy(), X[::-1])
    assert kernels["Multiply"] == 1                 # the forward's only
    kernels.clear()
    g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum(axis=0))(x)
    np.testing.assert_allclose(g.numpy(), np.exp(X) * (np.sin(X) + np.cos(X)) + 2 * X,
                               rtol=1e-12)
    assert kernels["Multiply"] == 2 + 1             # forward 2; exp's rule
    assert kernels["SinGrad"] == 1                  # sin's: dy cos x, one kernel
    # a gradient that is an older tensor is handed out as a new one (w stays w)
    g = tf.grad(lambda t: (t * w).sum())(x)
    assert g is not w and not g.is_disposed and not w.is_disposed
    tf.dispose([x, w, g])
