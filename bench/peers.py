"""Optional peers: PyTorch (eager), JAX (jit-compiled) and HIPS autograd, each measured
only when importable (never required: none is a flowgrad dependency), on the same inputs as
the NumPy floor and checked against it before timing. Peers are timed in the same
interleaved rounds as flowgrad and the floor, so every ratio of a workload divides by the
same floor samples. W1 and W2 have every peer; W3, W4a and W5 have PyTorch's rows in
bench/workloads.py and JAX's here; W4b has JAX's.

JAX runs on the CPU, in float32 (the inputs are float32 arrays and x64 is off unless asked:
every JAX run checks its result's dtype), each function jax.jit-compiled and called once
before timing; a timed call includes ``block_until_ready`` and ``np.asarray`` of the result.
"""
import importlib
import os
import sys

import numpy as np

if "jax" not in sys.modules:
    # Environment read when jax is imported (so set here, before any workload imports it):
    # the CPU even where an accelerator's plugin is installed, and XLA's CPU thread pool off
    # for its Eigen kernels (matrix products). NOTE: jaxlib 0.10's CPU runtime does not
    # honour these flags for its own loops (measured: CPU time 1.7-2x wall time on two cores
    # with and without them), so JAX's rows run on one thread only under ``taskset -c N``,
    # as the bench is meant to run; jax_threads_note() says so where it is not.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in _flags:
        os.environ["XLA_FLAGS"] = (_flags + " --xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1").strip()

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
            return float(loss.detach())
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


# ---------------------------------------------------------------- JAX: W3, W4a, W4b, W5

def jax_threads_note():
    """A line for stderr where JAX's rows may use more than one core (none under taskset
    -c N), else None: XLA's flags do not keep jaxlib 0.10's CPU loops on one thread."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cpus and cpus > 1:
        return (f"note: JAX may use {cpus} cores here (its CPU runtime ignores the thread "
                f"flags); run under taskset -c N for one-thread rows")
    return None


_noted = []


def _jax():
    """(jax, jax.numpy), or None where JAX is missing; says once on stderr if its rows may
    use more than one core."""
    if "jax" not in available():
        return None
    import jax
    import jax.numpy as jnp
    if not _noted:
        _noted.append(True)
        note = jax_threads_note()
        if note:
            print(note, file=sys.stderr)
    return jax, jnp


def _jax_call(fn, *arrays):
    """A zero-argument run of ``jax.jit(fn)`` on ``arrays`` (moved to JAX once, here),
    returning a float32 NumPy array; the first call, by the caller's check, compiles."""
    import jax
    import jax.numpy as jnp
    jitted = jax.jit(fn)
    args = [jnp.asarray(a) for a in arrays]

    def run():
        out = np.asarray(jitted(*args).block_until_ready())
        assert out.dtype == np.float32, f"JAX computed in {out.dtype}, not float32"
        return out
    return run


def jax_w3(xn):
    """W3's gradient, d/dx sum(exp(x) sin(x) + x x), by jax.jit(jax.grad); None without
    JAX."""
    if (j := _jax()) is None:
        return None
    jax, jnp = j
    return _jax_call(jax.grad(lambda x: (jnp.exp(x) * jnp.sin(x) + x * x).sum()), xn)


def jax_w4a(xn, how):
    """W4a's second derivative by grad of grad (each gradient of a sum, as tf.grad of a
    tensor is), the cube written ``how``: "x^3" (x * x * x) or "x.pow(3)" (x ** 3, JAX's
    integer power); None without JAX."""
    if (j := _jax()) is None:
        return None
    jax, _ = j
    cube = (lambda t: t * t * t) if how == "x^3" else (lambda t: t ** 3)
    d1 = jax.grad(lambda t: cube(t).sum())
    return _jax_call(jax.grad(lambda t: d1(t).sum()), xn)


def jax_w4b(Wn, xn):
    """W4b's Hessian of sum(tanh(W x)) in x by jax.hessian (forward over reverse), W an
    argument (not a constant XLA could fold); None without JAX."""
    if (j := _jax()) is None:
        return None
    jax, jnp = j
    return _jax_call(jax.hessian(lambda W, x: jnp.tanh(W @ x).sum(), argnums=1), Wn, xn)


def jax_w5(wn, xn, yn, steps):
    """W5's ``steps`` tiny SGD steps: one jax.jit-compiled step (the gradient of
    (w x - y)^2 and w - 0.01 g) called per step from a Python loop, w carried as a JAX
    array, the result made NumPy once at the end; None without JAX.

    One function serves both of W5's variants: an optimizer's SGD step (optax's
    ``sgd`` + ``apply_updates``: w + (-lr g)) compiles to the same computation."""
    if (j := _jax()) is None:
        return None
    jax, jnp = j
    x, y = jnp.float32(xn), jnp.float32(yn)
    step = jax.jit(lambda w: w - 0.01 * jax.grad(lambda v: jnp.square(v * x - y))(w))
    w0 = jnp.float32(wn)

    def run():
        w = w0
        for _ in range(steps):
            w = step(w)
        out = np.asarray(w.block_until_ready())
        assert out.dtype == np.float32, f"JAX computed in {out.dtype}, not float32"
        return out
    return run
