"""Optional peers for W1 and W2: PyTorch (eager), JAX (jit-compiled) and HIPS autograd,
each measured only when importable (never required: none is a flowgrad dependency), on the
same inputs as the NumPy floor and checked against it before timing. Peers are timed in
the same interleaved rounds as flowgrad and the floor, so every ratio of a workload divides
by the same floor samples."""
import importlib

import numpy as np

from .timing import measure

PEERS = ("torch", "jax", "autograd")


def torch_one_thread():
    """PyTorch on one thread (as every row is measured), or None where it is missing."""
    if "torch" not in available():
        return None
    import torch
    torch.set_num_threads(1)
    return torch


def available():
    """The peers importable here."""
    out = []
    for name in PEERS:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        out.append(name)
    return out


# ---------------------------------------------------------------- W1: the op chain

def chain_grad(peer, a, n_ops):
    """A zero-argument function computing the W1 chain's gradient with ``peer``."""
    if peer == "torch":
        import torch
        torch.set_num_threads(1)
        x0 = torch.tensor(a)

        def run():
            x = x0.clone().requires_grad_(True)
            v = x
            for _ in range(n_ops // 5):
                v = torch.tanh(torch.exp(torch.sin(v * 1.01 + 0.1)))
            (g,) = torch.autograd.grad(v.sum(), x)
            return g.numpy()
        return run
    if peer == "jax":
        import jax
        import jax.numpy as jnp

        def f(x):
            v = x
            for _ in range(n_ops // 5):
                v = jnp.tanh(jnp.exp(jnp.sin(v * 1.01 + 0.1)))
            return v.sum()
        g = jax.jit(jax.grad(f))
        x = jnp.asarray(a)
        return lambda: np.asarray(g(x).block_until_ready())
    if peer == "autograd":
        import autograd
        import autograd.numpy as anp

        def f(x):
            v = x
            for _ in range(n_ops // 5):
                v = anp.tanh(anp.exp(anp.sin(v * np.float32(1.01) + np.float32(0.1))))
            return anp.sum(v)
        g = autograd.grad(f)
        return lambda: g(a)
    raise ValueError(peer)


def w1_runs(n_ops, a, floor):
    """{peer: run} for every importable peer, each checked against the floor first (the
    caller times them in the same rounds as flowgrad and the floor)."""
    runs = {}
    for peer in available():
        run = chain_grad(peer, a, n_ops)
        np.testing.assert_allclose(run(), floor(), rtol=1e-4)
        runs[peer] = run
    return runs


# ---------------------------------------------------------------- W2: MLP with Adam

def mlp_step(peer, x, y, params, lr=1e-3):
    """A zero-argument training step (forward, backward, Adam) with ``peer``; returns the
    loss as a float."""
    if peer == "torch":
        import torch
        torch.set_num_threads(1)
        ps = [torch.tensor(p, requires_grad=True) for p in params]
        xs, ys = torch.tensor(x), torch.tensor(y)
        opt = torch.optim.Adam(ps, lr=lr, eps=1e-7)

        def step():
            W1, b1, W2, b2, W3, b3 = ps
            h = torch.relu(torch.relu(xs @ W1 + b1) @ W2 + b2)
            loss = -(ys * torch.log_softmax(h @ W3 + b3, 1)).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return float(loss)
        return step
    if peer == "jax":
        import jax
        import jax.numpy as jnp
        ps = [jnp.asarray(p) for p in params]
        state = {"p": ps, "m": [jnp.zeros_like(p) for p in ps],
                 "v": [jnp.zeros_like(p) for p in ps], "t": 0}

        def loss_fn(ps, xs, ys):
            W1, b1, W2, b2, W3, b3 = ps
            h = jax.nn.relu(jax.nn.relu(xs @ W1 + b1) @ W2 + b2)
            return -(ys * jax.nn.log_softmax(h @ W3 + b3, 1)).sum(1).mean()

        @jax.jit
        def update(ps, m, v, t, xs, ys):
            loss, gs = jax.value_and_grad(loss_fn)(ps, xs, ys)
            m = [0.9 * a + 0.1 * g for a, g in zip(m, gs)]
            v = [0.999 * a + 0.001 * g * g for a, g in zip(v, gs)]
            c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
            ps = [p - lr * (a / c1) / (jnp.sqrt(b / c2) + 1e-7) for p, a, b in zip(ps, m, v)]
            return ps, m, v, loss
        xs, ys = jnp.asarray(x), jnp.asarray(y)

        def step():
            state["t"] += 1
            state["p"], state["m"], state["v"], loss = update(
                state["p"], state["m"], state["v"], state["t"], xs, ys)
            return float(loss)
        return step
    if peer == "autograd":
        import autograd
        import autograd.numpy as anp
        ps = [p.copy() for p in params]
        m = [np.zeros_like(p) for p in ps]
        v = [np.zeros_like(p) for p in ps]
        t = [0]

        def loss_ag(ps):
            W1, b1, W2, b2, W3, b3 = ps
            h = anp.maximum(anp.dot(anp.maximum(anp.dot(x, W1) + b1, 0), W2) + b2, 0)
            z = anp.dot(h, W3) + b3
            z = z - anp.max(z, 1, keepdims=True)
            logp = z - anp.log(anp.sum(anp.exp(z), 1, keepdims=True))
            return -anp.mean(anp.sum(y * logp, 1))
        vg = autograd.value_and_grad(loss_ag)

        def step():
            loss, gs = vg(ps)
            t[0] += 1
            c1, c2 = 1 - 0.9 ** t[0], 1 - 0.999 ** t[0]
            for p, g, a, b in zip(ps, gs, m, v):
                a *= 0.9
                a += 0.1 * g
                b *= 0.999
                b += 0.001 * g * g
                p -= lr * (a / c1) / (np.sqrt(b / c2) + 1e-7)
            return float(loss)
        return step
    raise ValueError(peer)


def w2_runs(x, y, params, floor_factory, steps):
    """{peer: step} for every importable peer, each trained ``steps`` steps beside a fresh
    floor and checked to reach the same loss (the caller times them in the same rounds as
    flowgrad and the floor)."""
    runs = {}
    for peer in available():
        step = mlp_step(peer, x, y, params)
        floor = floor_factory(params)
        for _ in range(steps):
            last_p = step()
            last_np = floor.step(x, y)
        np.testing.assert_allclose(last_p, last_np, rtol=2e-3)
        runs[peer] = step
    return runs
