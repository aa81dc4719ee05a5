"""Regressions of issue #14's derivative bugs, against values worked out by hand or central
finite differences in float64: jvp with several primals, multi-output ops that made one
output (split into one piece, unstack of a length-1 axis, stack of one tensor, Gram-Schmidt
of one vector), the block Hessian's layout, tf.jit with array constants, and where
maximum/minimum send the gradient when an input is NaN."""
import numpy as np
import pytest

import flowgrad as tf
from opcheck import numeric_grad


def t64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64), dtype="float64")


def fd_jvp(f, xs, vs, h=1e-6):
    """Central difference of f along the direction vs."""
    plus = f(*[t64(x + h * v) for x, v in zip(xs, vs)]).numpy()
    minus = f(*[t64(x - h * v) for x, v in zip(xs, vs)]).numpy()
    return (plus - minus) / (2 * h)


# ---------------------------------------------------------------- 1. jvp, several primals

def test_jvp_with_several_primals_sums_every_primal_term():
    a, b = tf.tensor([1., 2.]), tf.tensor([3., 5.])
    y, t = tf.jvp(lambda x, y: x * y, [a, b], [tf.tensor([1., 0.]), tf.tensor([0., 1.])])
    np.testing.assert_allclose(y.numpy(), [3., 10.])
    np.testing.assert_allclose(t.numpy(), [3., 2.])        # b0 * 1 + a1 * 1 (by hand)

    def f(x, w, c):
        return (tf.mat_mul(w, x.reshape([3, 1])).reshape([2]) + c).tanh() * x.sum()
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=3), rng.normal(size=(2, 3)), rng.normal(size=2)]
    vs = [rng.normal(size=x.shape) for x in xs]
    _, t = tf.jvp(f, [t64(x) for x in xs], [t64(v) for v in vs])
    np.testing.assert_allclose(t.numpy(), fd_jvp(f, xs, vs), rtol=1e-7, atol=1e-9)
    # a primal that does not reach the output adds nothing
    _, t = tf.jvp(lambda x, y: x * 2.0, [t64([1., 2.]), t64([3.])], [t64([1., 1.]), t64([9.])])
    np.testing.assert_allclose(t.numpy(), [2., 2.])
    # one primal, and the forward-mode jacobian (the same construction), stay right
    f = lambda x: x.sin() * x.sum()
    x = np.array([0.3, -1.2, 2.0])
    _, t = tf.jvp(f, [t64(x)], [t64([1., 0., 0.])])
    np.testing.assert_allclose(t.numpy(), fd_jvp(f, [x], [np.array([1., 0., 0.])]),
                               rtol=1e-7)
    jf = tf.jacobian(f, mode="fwd")(t64(x)).numpy()
    jr = tf.jacobian(f)(t64(x)).numpy()
    np.testing.assert_allclose(jf, jr, rtol=1e-12)
    np.testing.assert_allclose(jf[:, 0], t.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- 2. one-output multi ops

def test_gradient_through_one_piece_split_and_unstack():
    x = tf.tensor([[1., 2., 3.]])
    g = tf.grad(lambda v: tf.split(v, 1, 1)[0].sum())(x)
    np.testing.assert_array_equal(g.numpy(), [[1., 1., 1.]])
    w = tf.tensor([1., 2., 3.])
    g = tf.grad(lambda v: (tf.unstack(v, 0)[0] * w).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [[1., 2., 3.]])
    # second order through the one piece: d²/dv² sum(piece³) = 6 v
    g2 = tf.grad(tf.grad(lambda v: (tf.split(v, [3], 1)[0] ** 3).sum()))(x)
    np.testing.assert_allclose(g2.numpy(), [[6., 12., 18.]])
    # a gradient hook on the one piece sees its gradient
    seen = []

    def f(v):
        (p,) = tf.unstack(v)
        p.register_hook(lambda g: seen.append(g.numpy().tolist()))
        return (p * w).sum()
    tf.grad(f)(x)
    assert seen == [[1., 2., 3.]]


def test_forward_mode_through_stack_of_one_tensor():
    x = tf.tensor([1., 2.])
    _, t = tf.jvp(lambda v: tf.stack([v]) * v, [x], [tf.tensor([1., 1.])])
    np.testing.assert_allclose(t.numpy(), [[2., 4.]])          # d(v²) = 2 v dv
    j = tf.jacobian(lambda v: tf.stack([v]) * 2.0, mode="fwd")(x)
    np.testing.assert_array_equal(j.numpy(), [[[2., 0.], [0., 2.]]])


def test_gram_schmidt_of_a_single_vector_is_differentiable():
    x = np.array([[3., 4.]])
    f = lambda v: (tf.linalg.gram_schmidt(v) * t64([[1., 2.]])).sum()
    g = tf.grad(f)(t64(x)).numpy()
    # d/dv <v/|v|, c> = c/|v| - v <v, c>/|v|³ = [0.2, 0.4] - [3, 4] * 11/125 (by hand)
    np.testing.assert_allclose(g, [[0.2 - 33 / 125, 0.4 - 44 / 125]], rtol=1e-12)
    np.testing.assert_allclose(g, numeric_grad(f, [x])[0], rtol=1e-7)


# ---------------------------------------------------------------- 3. block Hessian

def _fd_hessian_block(f, xs, i, j, h=1e-5):
    """d/dx_j of (d f/dx_i), by central differences of the reverse-mode gradient."""
    def grad_i(*arrays):
        return tf.grads(f)([t64(a) for a in arrays])[i].numpy()
    out = np.zeros(xs[i].shape + xs[j].shape)
    for k in np.ndindex(xs[j].shape):
        plus = [a.copy() for a in xs]
        minus = [a.copy() for a in xs]
        plus[j][k] += h
        minus[j][k] -= h
        out[(Ellipsis,) + k] = (grad_i(*plus) - grad_i(*minus)) / (2 * h)
    return out


def test_block_hessian_of_arguments_of_different_sizes():
    f = lambda x, y: (x * x).sum() * y[0] * y[1] + (x.sin().sum() * y).sum()
    xs = [np.array([1., 2.]), np.array([3., 4., 5.])]
    H = tf.hessian(f, argnums=(0, 1))(*[t64(a) for a in xs])
    assert isinstance(H, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in H)
    for i in range(2):
        for j in range(2):
            assert H[i][j].shape == xs[i].shape + xs[j].shape
            np.testing.assert_allclose(H[i][j].numpy(), _fd_hessian_block(f, xs, i, j),
                                       rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H[0][1].numpy(), H[1][0].numpy().T, rtol=1e-12)


def test_block_hessian_blocks_are_not_transposed():
    # f = x0² y0² + x1² y0 y1, by hand: d²f/dx_i dy_j = [[4 x0 y0, 0], [2 x1 y1, 2 x1 y0]]
    f = lambda x, y: (x * x * y * y[0]).sum()
    H = tf.hessian(f, argnums=(0, 1))(t64([1., 2.]), t64([3., 4.]))
    np.testing.assert_allclose(H[0][0].numpy(), [[18., 0.], [0., 24.]])
    np.testing.assert_allclose(H[0][1].numpy(), [[12., 0.], [16., 12.]])
    np.testing.assert_allclose(H[1][0].numpy(), [[12., 16.], [0., 12.]])
    np.testing.assert_allclose(H[1][1].numpy(), [[2., 4.], [4., 0.]])
    # argnums picks and orders the blocks; one argnum in a tuple is a 1x1 block
    H = tf.hessian(f, argnums=(1, 0))(t64([1., 2.]), t64([3., 4.]))
    np.testing.assert_allclose(H[0][1].numpy(), [[12., 16.], [0., 12.]])
    (row,) = tf.hessian(f, argnums=(1,))(t64([1., 2.]), t64([3., 4.]))
    np.testing.assert_allclose(row[0].numpy(), [[2., 4.], [4., 0.]])
    # a single int keeps the plain Hessian
    np.testing.assert_allclose(tf.hessian(f, argnums=1)(t64([1., 2.]), t64([3., 4.])).numpy(),
                               [[2., 4.], [4., 0.]])


# ---------------------------------------------------------------- 4. jit with array constants

def test_jit_adds_two_different_array_constants():
    c1, c2 = tf.tensor([1., 2.]), tf.tensor([3., 4.])
    step = tf.jit(lambda v: v + (c1 + c2))
    np.testing.assert_array_equal(step(tf.tensor([0., 0.])).numpy(), [4., 6.])
    np.testing.assert_array_equal(step(tf.tensor([1., -1.])).numpy(), [5., 5.])   # replay
    # a slot added to a constant, and to itself (the 2 * x peephole), still agree
    twice = tf.jit(lambda v: (v + c1) + (v + v))
    for _ in range(2):
        np.testing.assert_array_equal(twice(tf.tensor([1., 2.])).numpy(), [4., 8.])


# ---------------------------------------------------------------- 5. maximum/minimum, NaN

@pytest.mark.parametrize("op", [tf.maximum, tf.minimum], ids=["maximum", "minimum"])
def test_nan_input_sends_the_gradient_to_neither_input(op):
    nan = float("nan")
    for p, q in ((nan, 0.5), (0.5, nan), (nan, nan)):
        gp, gq = tf.grads(lambda a, b: op(a, b).sum())([tf.tensor([p]), tf.tensor([q])])
        # TF.js's masks (a >= b, a < b for maximum): both false with a NaN
        assert gp.numpy().tolist() == [0.] and gq.numpy().tolist() == [0.], (p, q)
    # the ordinary rule is unchanged: the winner gets dy, a tie goes to a
    gp, gq = tf.grads(lambda a, b: op(a, b).sum())([tf.tensor([1., 2., 3.]),
                                                     tf.tensor([3., 2., 1.])])
    want = [[0., 1., 1.], [1., 0., 0.]] if op is tf.maximum else [[1., 1., 0.], [0., 0., 1.]]
    assert [gp.numpy().tolist(), gq.numpy().tolist()] == want


# ---------------------------------------------------------------- prod's rule, edge groups

def test_prod_gradient_of_empty_tensors_is_empty():
    # torch and JAX: a zero gradient of x's shape (the scan sliced n - 1 = -1 elements)
    e = t64(np.zeros((0, 3)))
    for f in (lambda q: tf.prod(q), lambda q: tf.prod(q, 0).sum(), lambda q: tf.prod(q, 1).sum()):
        g = tf.grad(f)(e)
        assert g.shape == (0, 3) and g.dtype == "float64"


def test_prod_over_one_element_has_gradient_one_even_at_inf():
    # d/dx of the product of a group holding only x is 1 (x·0 + 1 gave NaN at ±inf)
    x = t64([[np.inf], [-np.inf], [2.0]])
    np.testing.assert_array_equal(tf.grad(lambda q: tf.prod(q, 1).sum())(x).numpy(),
                                  [[1.0], [1.0], [1.0]])
    # and its second derivative is 0, by hand
    h = tf.hessian(lambda q: tf.prod(q, 1).sum())(t64([[3.0], [2.0]]))
    np.testing.assert_array_equal(h.numpy(), np.zeros((2, 1, 2, 1)))


# ---------------------------------------------------------------- one tensor, two arguments

def test_a_tensor_passed_twice_is_two_arguments_to_the_transforms():
    # partial derivatives, by hand, of g(u, v) = u·sin(v) and h(u, v) = Σ u²v at u = v = x;
    # keyed by the tensor, each argument got the total derivative
    xn = np.array([1.0, 2.0])
    x = t64(xn)
    g = lambda u, v: u * v.sin()                                  # noqa: E731
    _, t = tf.jvp(g, [x, x], [t64([1.0, 1.0]), t64([0.0, 0.0])])
    np.testing.assert_allclose(t.numpy(), np.sin(xn), rtol=1e-14)
    for mode in ("rev", "fwd"):
        j = tf.jacobian(g, argnums=1, mode=mode)(x, x)
        np.testing.assert_allclose(j.numpy(), np.diag(xn * np.cos(xn)), rtol=1e-14)
    _, pullback = tf.vjp(g, x, x)
    gu, gv = pullback(t64([1.0, 1.0]))
    np.testing.assert_allclose(gu.numpy(), np.sin(xn), rtol=1e-14)
    np.testing.assert_allclose(gv.numpy(), xn * np.cos(xn), rtol=1e-14)
    H = tf.hessian(lambda u, v: (u * u * v).sum(), argnums=(0, 1))(x, x)
    want = [[np.diag(2 * xn), np.diag(2 * xn)], [np.diag(2 * xn), np.zeros((2, 2))]]
    for i in range(2):
        for k in range(2):
            np.testing.assert_allclose(H[i][k].numpy(), want[i][k], rtol=1e-14, atol=0)
    # tf.grads keeps TF.js's rule: one tensor, one (total) gradient
    gs = tf.grads(lambda u, v: (u * v.sin()).sum())([x, x])
    np.testing.assert_allclose(gs[0].numpy(), np.sin(xn) + xn * np.cos(xn), rtol=1e-14)
