"""The workloads. Each returns rows (label, flowgrad seconds, floor seconds, unit scale,
unit) after checking that flowgrad's result equals the floor's."""
import numpy as np

import flowgrad as tf
from flowgrad import tape

from .timing import measure


def _chain_floor(x, n_ops):
    """Forward and backward of the W1 chain by hand: mul, add, sin, exp, tanh, repeated."""
    def run():
        vals = [x]
        v = x
        for i in range(n_ops // 5):
            v = v * np.float32(1.01)
            vals.append(v)
            v = v + np.float32(0.1)
            vals.append(v)
            v = np.sin(v)
            vals.append(v)
            v = np.exp(v)
            vals.append(v)
            v = np.tanh(v)
            vals.append(v)
        g = np.ones_like(v)
        for i in range(n_ops // 5 - 1, -1, -1):
            t = vals[5 * i + 5]
            g = g * (1 - t * t)
            g = g * vals[5 * i + 4]
            g = g * np.cos(vals[5 * i + 2])
            g = g * np.float32(1.01)
        return g
    return run


def _chain(x, n_ops):
    for _ in range(n_ops // 5):
        x = (x * 1.01 + 0.1).sin().exp().tanh()
    return x


def w1(reps, n_ops=200):
    """Forward+backward (and forward only) of a 200-op chain; microseconds per op."""
    rows = []
    for size in (1, 1000):
        a = np.linspace(0.1, 0.5, size).astype(np.float32)
        x = tf.tensor(a)
        floor = _chain_floor(a, n_ops)
        np.testing.assert_allclose(tf.grad(lambda t: _chain(t, n_ops))(x).numpy(), floor(),
                                   rtol=1e-4)
        t = measure({"fg": lambda: tf.grad(lambda t: _chain(t, n_ops))(x), "np": floor},
                    reps, inner=5)
        rows.append((f"W1 chain fwd+bwd, {size} elt", t["fg"], t["np"], 1e6 / n_ops,
                     "us/op"))
        fwd_np = _chain_fwd_floor(a, n_ops)
        t = measure({"fg": lambda: _chain(x, n_ops), "np": fwd_np}, reps, inner=5)
        rows.append((f"W1 chain fwd only, {size} elt", t["fg"], t["np"], 1e6 / n_ops,
                     "us/op"))
    return rows


def _chain_fwd_floor(x, n_ops):
    def run():
        v = x
        for _ in range(n_ops // 5):
            v = np.tanh(np.exp(np.sin(v * np.float32(1.01) + np.float32(0.1))))
        return v
    return run


def w4b(reps):
    """Hessian of sum(tanh(W x)), W 100x100, against the closed form."""
    rng = np.random.default_rng(0)
    Wn = (rng.standard_normal((100, 100)) / 10).astype(np.float32)
    xn = rng.standard_normal(100).astype(np.float32)
    W, x = tf.tensor(Wn), tf.tensor(xn)
    hess = tf.hessian(lambda x: tf.dot(W, x).tanh().sum())

    def closed():
        t = np.tanh(Wn @ xn)
        return (Wn.T * (-2 * t * (1 - t * t))) @ Wn
    np.testing.assert_allclose(hess(x).numpy(), closed(), rtol=1e-3, atol=1e-5)
    t = measure({"fg": lambda: hess(x), "np": closed}, reps, inner=3)
    return [("W4b hessian of sum(tanh(Wx)), 100x100", t["fg"], t["np"], 1e3, "ms")]


def debug_cost(reps, n_ops=200):
    """The per-op workload with the debug seams as shipped versus a sweep without them:
    the price of debugging when it is off."""
    x = tf.tensor(np.linspace(0.1, 0.5, 1).astype(np.float32))
    shipped = tape._sweep
    stripped = _sweep_without_seams()
    run = lambda: tf.grad(lambda t: _chain(t, n_ops))(x)      # noqa: E731

    def with_stripped():
        tape._sweep = stripped
        try:
            run()
        finally:
            tape._sweep = shipped
    t = measure({"fg": run, "np": with_stripped}, reps, inner=5)
    return [("debug off: seams vs none (W1, 1 elt)", t["fg"], t["np"], 1e6 / n_ops,
             "us/op")]


def _sweep_without_seams():
    """tape._sweep's source with its debug lines removed (hooks, dx_hook, current node)."""
    import inspect
    import textwrap
    src = textwrap.dedent(inspect.getsource(tape._sweep))
    drop = ("any_node_hooks", "_node_hook", "current_node", "dx_hook")
    lines = [ln for ln in src.splitlines() if not any(d in ln for d in drop)]
    ns = dict(vars(tape))
    exec("\n".join(lines).replace("global \n", ""), ns)
    return ns["_sweep"]


WORKLOADS = {"W1": w1, "W4b": w4b, "debug": debug_cost}
