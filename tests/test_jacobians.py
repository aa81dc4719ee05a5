"""jacobian, hessian, hvp, vjp, jvp: against closed forms and finite differences in float64,
forward mode against reverse mode, the vectorised path, Newton and Levenberg-Marquardt."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad import jacobians

rng = np.random.default_rng(0)
W1 = rng.normal(size=(4, 3))
b1 = rng.normal(size=4)
W2 = rng.normal(size=(2, 4))


def t64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64), dtype="float64")


def mlp(x):          # R^3 -> R^2: W2 tanh(W1 x + b1)
    h = (tf.mat_mul(t64(W1), x.reshape([3, 1])).reshape([4]) + t64(b1)).tanh()
    return tf.mat_mul(t64(W2), h.reshape([4, 1])).reshape([2])


def mlp_np(x):
    return W2 @ np.tanh(W1 @ x + b1)


def mlp_jac_np(x):
    h = np.tanh(W1 @ x + b1)
    return W2 @ np.diag(1 - h * h) @ W1


def xent(z):          # softmax cross-entropy against fixed labels
    labels = t64([0.2, 0.5, 0.3])
    return -(labels * tf.log_softmax(z)).sum()


def cube_op():
    def cube(x, save):
        save([x])
        return {"value": x * x * x, "grad_func": lambda dy, s: dy * s[0].square() * 3}
    return tf.custom_grad(cube)


def numeric_jacobian(f, x, h=1e-6):
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(f(x))
    J = np.zeros(y0.shape + x.shape)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        J[(...,) + i] = (np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * h)
    return J


def via_tf(f):
    return lambda a: f(t64(a)).numpy()


X3 = np.array([0.3, -0.7, 1.1])
FUNCTIONS = [
    ("polynomial", lambda x: x ** 3 - x * 2 + (x * x).sum(), X3),
    ("mlp", mlp, X3),
    ("softmax_xent", xent, X3),
    ("custom_cube", lambda x: cube_op()(x) * 2, X3),
    ("matrix", lambda x: tf.mat_mul(x, x.transpose()), np.array([[1.0, 2.0], [0.5, -1.0]])),
]


@pytest.mark.parametrize("name, f, x", FUNCTIONS, ids=[n for n, _, _ in FUNCTIONS])
@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_against_finite_differences(name, f, x, mode):
    J = tf.jacobian(f, mode=mode)(t64(x)).numpy()
    np.testing.assert_allclose(J, numeric_jacobian(via_tf(f), x), rtol=1e-6, atol=1e-8)


def test_jacobian_of_mlp_matches_closed_form_and_modes_agree():
    Jr = tf.jacobian(mlp)(t64(X3)).numpy()
    Jf = tf.jacobian(mlp, mode="fwd")(t64(X3)).numpy()
    np.testing.assert_allclose(Jr, mlp_jac_np(X3), rtol=1e-12)
    np.testing.assert_allclose(Jf, Jr, rtol=1e-12)


@pytest.mark.parametrize("name, f, x", [r for r in FUNCTIONS if r[0] != "matrix"],
                         ids=[r[0] for r in FUNCTIONS if r[0] != "matrix"])
def test_hessian_against_finite_differences_and_hvp(name, f, x):
    scalar = lambda t: f(t).sum()          # noqa: E731
    H = tf.hessian(scalar)(t64(x)).numpy()
    grad_np = lambda a: tf.grad(scalar)(t64(a)).numpy()   # noqa: E731
    np.testing.assert_allclose(H, numeric_jacobian(grad_np, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    v = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(tf.hvp(scalar)(t64(x), t64(v)).numpy(), H @ v, rtol=1e-10,
                               atol=1e-12)


def test_hessian_closed_form_of_the_w4b_workload():
    # f(x) = sum(tanh(W x)); H = W^T diag(-2 tanh(u)(1 - tanh(u)^2)) W with u = W x
    W = rng.normal(size=(6, 6)) / 3
    x = rng.normal(size=6)
    H = tf.hessian(lambda x: tf.dot(t64(W), x).tanh().sum())(t64(x)).numpy()
    t = np.tanh(W @ x)
    np.testing.assert_allclose(H, W.T @ np.diag(-2 * t * (1 - t * t)) @ W, rtol=1e-10,
                               atol=1e-12)


def test_jvp_and_vjp_against_the_jacobian():
    J = mlp_jac_np(X3)
    v = np.array([1.0, -2.0, 0.5])
    y, t = tf.jvp(mlp, [t64(X3)], [t64(v)])
    np.testing.assert_allclose(y.numpy(), mlp_np(X3), rtol=1e-12)
    np.testing.assert_allclose(t.numpy(), J @ v, rtol=1e-12)
    y, pullback = tf.vjp(mlp, t64(X3))
    for ct in ([1.0, 0.0], [0.3, -2.0]):          # the pullback is reusable
        (g,) = pullback(t64(ct))
        np.testing.assert_allclose(g.numpy(), np.array(ct) @ J, rtol=1e-12)


def test_jvp_through_a_custom_gradient():
    # forward mode through custom_grad works by the double-vjp construction
    _, t = tf.jvp(lambda x: cube_op()(x), [t64([2.0, -1.0])], [t64([1.0, 1.0])])
    assert t.numpy().tolist() == [12.0, 3.0]


def test_multiple_argnums():
    f = lambda a, b: a * b.sum()           # noqa: E731
    ja, jb = tf.jacobian(f, argnums=(0, 1))(t64([1.0, 2.0]), t64([3.0, 4.0, 5.0]))
    np.testing.assert_allclose(ja.numpy(), 12 * np.eye(2))
    np.testing.assert_allclose(jb.numpy(), [[1, 1, 1], [2, 2, 2]])


def test_unconnected_argument_gives_zeros():
    J = tf.jacobian(lambda a, b: a * 2, argnums=1)(t64([1.0]), t64([1.0, 2.0]))
    assert J.numpy().tolist() == [[0.0, 0.0]]


def test_vectorised_path_runs_one_backward_pass(monkeypatch):
    calls = []
    real = jacobians.backprop

    def spy(*a, **k):
        calls.append(k.get("batch", False))
        return real(*a, **k)
    monkeypatch.setattr(jacobians, "backprop", spy)
    tf.jacobian(lambda x: (x.exp() * x).reshape([2, 2]).transpose())(t64([1, 2, 3, 4]))
    assert calls == [True]
    calls.clear()
    # a custom gradient cannot promise to take a batch: one pass per output element
    tf.jacobian(lambda x: cube_op()(x))(t64([1.0, 2.0, 3.0]))
    assert calls == [True, False, False, False]


def test_newton_on_rosenbrock_converges_like_the_closed_form():
    def f(p):
        x, y = p[0], p[1]
        return (1 - x) ** 2 + (y - x * x) ** 2 * 100

    def grad_np(p):
        x, y = p
        return np.array([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)])

    def hess_np(p):
        x, y = p
        return np.array([[2 - 400 * (y - 3 * x * x), -400 * x], [-400 * x, 200.0]])

    # the closed-form Newton iteration from (-1.2, 1) reaches 1e-10 in this many steps
    q, ref_steps = np.array([-1.2, 1.0]), 0
    while np.abs(q - 1).max() > 1e-10:
        q = q - np.linalg.solve(hess_np(q), grad_np(q))
        ref_steps += 1
    p_ref = np.array([-1.2, 1.0])
    p = t64(p_ref)
    steps = 0
    while np.abs(p.numpy() - 1).max() > 1e-10:
        g = tf.grad(f)(p)
        H = tf.hessian(f)(p)
        np.testing.assert_allclose(H.numpy(), hess_np(p_ref), rtol=1e-10)
        p = t64(p.numpy() - np.linalg.solve(H.numpy(), g.numpy()))
        p_ref = p_ref - np.linalg.solve(hess_np(p_ref), grad_np(p_ref))
        np.testing.assert_allclose(p.numpy(), p_ref, rtol=1e-9, atol=1e-12)
        steps += 1
        assert steps <= 10
    assert steps == ref_steps == 6


def test_levenberg_marquardt_fit_with_the_jacobian():
    t = np.linspace(0, 3, 12)
    data = 2.0 * np.exp(-0.7 * t)                       # y = a exp(b t), a = 2, b = -0.7

    def residuals(p):
        return p[0] * (t64(t) * p[1]).exp() - t64(data)

    p, lam = np.array([1.0, 0.0]), 1e-2
    cost = lambda q: float((residuals(t64(q)).numpy() ** 2).sum())   # noqa: E731
    for _ in range(50):
        J = tf.jacobian(residuals)(t64(p)).numpy()
        r = residuals(t64(p)).numpy()
        # closed form of the jacobian: [exp(b t), a t exp(b t)]
        np.testing.assert_allclose(J, np.stack([np.exp(p[1] * t), p[0] * t * np.exp(p[1] * t)],
                                               1), rtol=1e-12)
        step = np.linalg.solve(J.T @ J + lam * np.eye(2), -J.T @ r)
        if cost(p + step) < cost(p):
            p, lam = p + step, lam / 3
        else:
            lam *= 3
        if cost(p) < 1e-20:
            break
    np.testing.assert_allclose(p, [2.0, -0.7], rtol=1e-8)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: tf.jacobian(5), tf.ArgumentError, "The f passed in jacobian\\(f\\) must be a function"),
    (lambda: tf.jacobian(lambda x: x, mode="side")(t64([1.0])), tf.ArgumentError,
     "mode must be 'rev' or 'fwd'"),
    (lambda: tf.jacobian(lambda x: x, argnums=2)(t64([1.0])), tf.ArgumentError,
     "argnums 2 does not fit the 1 argument"),
    (lambda: tf.jacobian(lambda x: 3.0)(t64([1.0])), tf.GradientError,
     "f must return a tensor"),
    (lambda: tf.hessian(lambda x: x * 2)(t64([1.0, 2.0])), tf.ShapeError,
     "hessian\\(f\\): f must return a scalar"),
    (lambda: tf.hvp(lambda x: x.sum())(t64([1.0, 2.0]), t64([1.0])), tf.ShapeError,
     "v has shape \\(1,\\), which does not match"),
    (lambda: tf.hvp(lambda x: x.sum())(t64([1.0])), tf.ArgumentError,
     "give the arguments of f, then the vector v"),
    (lambda: tf.jvp(lambda x: x, [t64([1.0])], []), tf.ArgumentError, "1 primals but 0"),
    (lambda: tf.jvp(lambda x: x, [t64([1.0])], [t64([1.0, 2.0])]), tf.ShapeError,
     "tangents\\[0\\] has shape \\(2,\\)"),
    (lambda: tf.vjp(lambda x: x * 2, t64([1.0]))[1](t64([1.0, 2.0])), tf.ShapeError,
     "the cotangent has shape \\(2,\\)"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_no_tensor_leaks():
    x = t64(X3)
    before = tf.memory().num_tensors
    J = tf.jacobian(mlp)(x)
    H = tf.hessian(lambda t: mlp(t).sum())(x)
    assert tf.memory().num_tensors == before + 2
    del J, H


BATCHED = [
    ("reductions", lambda x: tf.stack([x.sum(), x.mean(0).sum(), x.max(1).sum(),
                                       x.min(-1, True).sum(), x.prod(1).sum()])),
    ("softmaxes", lambda x: tf.softmax(x) + tf.log_softmax(x, 0)),
    ("matmul", lambda x: tf.mat_mul(x, x, True, False) @ x.transpose()),
    ("shapes", lambda x: tf.concat([x[:, :2], tf.pad(x, [[1, 0], [0, 1]])[1:, 1:]], 1)
     .tile([1, 2]).reverse(0).reshape([-1])),
    ("stack_split", lambda x: tf.stack(tf.split(x, 3, 1), 2).sum(2) * tf.unstack(x)[0]),
    ("where_broadcast", lambda x: tf.where(x > 0, x.exp(), x * 2) +
     tf.broadcast_to(x[:1], [2, 3])),
]


@pytest.mark.parametrize("name, f", BATCHED, ids=[n for n, _ in BATCHED])
def test_vectorised_jacobian_equals_rows_of_grad(name, f, monkeypatch):
    x = t64([[0.3, -0.8, 1.2], [0.5, 2.0, -0.4]])
    calls = []
    real = jacobians.backprop
    monkeypatch.setattr(jacobians, "backprop",
                        lambda *a, **k: calls.append(k.get("batch")) or real(*a, **k))
    J = tf.jacobian(f)(x).numpy()
    assert calls == [True]                              # one vectorised pass
    y = f(x)
    rows = []
    for k in range(y.size):
        e = np.zeros(y.size)
        e[k] = 1
        rows.append(tf.grad(f)(x, t64(e.reshape(y.shape))).numpy())
    np.testing.assert_allclose(J.reshape(y.size, -1), np.stack(rows).reshape(y.size, -1),
                               rtol=1e-12, atol=1e-12)
