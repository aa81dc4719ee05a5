"""The workloads. Each returns rows (label, flowgrad seconds, floor seconds, unit scale,
unit) after checking that flowgrad's result equals the floor's."""
import importlib.util

import numpy as np

import flowgrad as tf
from flowgrad import tape
from flowgrad.train import fused

from . import peers
from .timing import measure

# tf.jit's rows run the NumPy replay (backend="numpy": "auto" would switch to native code in
# the middle of a measurement where numba is installed); the "tf.jit native" rows, beside
# them where numba is installed, run the compiled segments (issue 29)
NATIVE = importlib.util.find_spec("numba") is not None


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
        # the peers run in the same rounds: one floor for every ratio of the workload
        others = peers.w1_runs(n_ops, a, floor)
        t = measure({"fg": lambda: tf.grad(lambda t: _chain(t, n_ops))(x), "np": floor,
                     **others}, reps, inner=5)
        rows.append((f"W1 chain fwd+bwd, {size} elt", t["fg"], t["np"], 1e6 / n_ops,
                     "us/op"))
        rows += [(f"W1 chain fwd+bwd, {size} elt [{peer}]", t[peer], t["np"], 1e6 / n_ops,
                  "us/op") for peer in others]
        jitted = tf.jit(tf.grad(lambda t: _chain(t, n_ops)), backend="numpy")
        np.testing.assert_allclose(jitted(x).numpy(), floor(), rtol=1e-4)
        runs = {"fg": lambda: jitted(x), "np": floor}
        if NATIVE:
            native = tf.jit(tf.grad(lambda t: _chain(t, n_ops)), backend="native")
            np.testing.assert_allclose(native(x).numpy(), floor(), rtol=1e-4)
            runs["native"] = lambda: native(x)
        t = measure(runs, reps, inner=5)
        rows.append((f"W1 chain fwd+bwd, {size} elt, tf.jit", t["fg"], t["np"], 1e6 / n_ops,
                     "us/op"))
        if NATIVE:
            rows.append((f"W1 chain fwd+bwd, {size} elt, tf.jit native", t["native"], t["np"],
                         1e6 / n_ops, "us/op"))
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
    """Hessian of sum(tanh(W x)), W 100x100, against the closed form: eager (beside JAX's
    jax.hessian, jit-compiled), and tf.jit's NumPy replay beside the native one."""
    rng = np.random.default_rng(0)
    Wn = (rng.standard_normal((100, 100)) / 10).astype(np.float32)
    xn = rng.standard_normal(100).astype(np.float32)
    W, x = tf.tensor(Wn), tf.tensor(xn)
    hess = tf.hessian(lambda x: tf.dot(W, x).tanh().sum())

    def closed():
        t = np.tanh(Wn @ xn)
        return (Wn.T * (-2 * t * (1 - t * t))) @ Wn
    np.testing.assert_allclose(hess(x).numpy(), closed(), rtol=1e-3, atol=1e-5)
    runs = {"fg": lambda: hess(x), "np": closed}
    jax_h = peers.jax_w4b(Wn, xn)        # (same rounds)
    if jax_h is not None:
        np.testing.assert_allclose(jax_h(), closed(), rtol=1e-3, atol=1e-5)
        runs["jax"] = jax_h
    t = measure(runs, reps, inner=3)
    label = "W4b hessian of sum(tanh(Wx)), 100x100"
    rows = [(label, t["fg"], t["np"], 1e3, "ms")]
    if "jax" in t:
        rows.append((f"{label} [jax]", t["jax"], t["np"], 1e3, "ms"))
    t = measure(_jitted(hess, x, closed, rtol=1e-3, atol=1e-5), reps, inner=3)
    return rows + _jit_rows(label, t, 1e3, "ms")


def _jitted(f, x, floor, **tol):
    """The runs of a workload's tf.jit rows: f(x) replayed by NumPy ("fg") and, where numba
    is installed, compiled ("native"), each checked against the floor first."""
    runs = {"np": floor}
    for key, backend in (("fg", "numpy"), ("native", "native")):
        if backend == "native" and not NATIVE:
            continue
        jf = tf.jit(f, backend=backend)
        np.testing.assert_allclose(jf(x).numpy(), floor(), err_msg=backend, **tol)
        runs[key] = lambda jf=jf: jf(x)
    return runs


def _jit_rows(label, t, scale, unit):
    """The tf.jit rows of measure(_jitted(...)): the NumPy replay's and the native one's."""
    rows = [(f"{label}, tf.jit", t["fg"], t["np"], scale, unit)]
    if "native" in t:
        rows.append((f"{label}, tf.jit native", t["native"], t["np"], scale, unit))
    return rows


def debug_cost(reps, n_ops=200):
    """The per-op workload with the debug hooks as shipped versus a sweep without them:
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
    """tape._sweep's source with its debug lines removed (node hooks, the interceptors'
    dx_hook; its signature keeps the parameter)."""
    import inspect
    import textwrap
    src = textwrap.dedent(inspect.getsource(tape._sweep))
    drop = ("node_hooks", "_node_hook", "dx_hook")
    lines = [ln for ln in src.splitlines()
             if ln.startswith("def ") or not any(d in ln for d in drop)]
    ns = dict(vars(tape))
    exec("\n".join(lines).replace("global \n", ""), ns)
    return ns["_sweep"]


WORKLOADS = {"W1": w1, "W4b": w4b, "debug": debug_cost}


# ---------------------------------------------------------------- W2: MLP training

def _mlp_data(seed=0, batch=128):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = rng.integers(0, 10, batch)
    y = np.eye(10, dtype=np.float32)[labels]
    def init(shape):
        return (rng.standard_normal(shape) * np.sqrt(2 / shape[0])).astype(np.float32)
    params = [init((784, 256)), np.zeros(256, np.float32), init((256, 256)),
              np.zeros(256, np.float32), init((256, 10)), np.zeros(10, np.float32)]
    return x, y, params


class _NumpyAdam:
    """The floor: forward, backward and Adam (TF.js's rule) by hand, in float32."""

    def __init__(self, params, lr=1e-3, b1=0.9, b2=0.999, eps=1e-7):
        self.p = [p.copy() for p in params]
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0

    def step(self, x, y):
        loss, grads = self.fwd_bwd(x, y)
        self.update(grads)
        return loss

    def fwd_bwd(self, x, y):
        W1, b1, W2, b2, W3, b3 = self.p
        h1 = np.maximum(x @ W1 + b1, 0)
        h2 = np.maximum(h1 @ W2 + b2, 0)
        z = h2 @ W3 + b3
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        sm = e / e.sum(1, keepdims=True)
        loss = -(y * (z - np.log(e.sum(1, keepdims=True)))).sum(1).mean()
        dz = (sm - y) / x.shape[0]
        gW3, gb3 = h2.T @ dz, dz.sum(0)
        d2 = (dz @ W3.T) * (h2 > 0)
        gW2, gb2 = h1.T @ d2, d2.sum(0)
        d1 = (d2 @ W2.T) * (h1 > 0)
        gW1, gb1 = x.T @ d1, d1.sum(0)
        return loss, (gW1, gb1, gW2, gb2, gW3, gb3)

    def update(self, grads):
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for p, g, m, v in zip(self.p, grads, self.m, self.v):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            p -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


def _mlp_flowgrad(x, y, params):
    xs, ys = tf.tensor(x), tf.tensor(y)
    vs = [tf.variable(tf.tensor(p)) for p in params]
    opt = tf.train.adam(1e-3)

    def loss():
        W1, b1, W2, b2, W3, b3 = vs
        h = xs.mat_mul(W1).add(b1).relu().mat_mul(W2).add(b2).relu()
        logits = h.mat_mul(W3).add(b3)
        return tf.losses.softmax_cross_entropy(ys, logits)
    return vs, opt, loss


WARM_STEPS = 800


def w2(reps, steps=200):
    """MLP 784-256-256-10, relu, softmax cross-entropy, batch 128, Adam 1e-3: the step
    eager (beside every peer), its two halves, and the whole step by tf.jit's NumPy replay
    beside the native one."""
    x, y, params = _mlp_data()
    floor = _NumpyAdam(params)
    vs, opt, loss = _mlp_flowgrad(x, y, params)
    try:
        for _ in range(steps):
            last_np = floor.step(x, y)
            last_fg = opt.minimize(loss, return_cost=True).item()
        np.testing.assert_allclose(last_fg, last_np, rtol=2e-3)
        if NATIVE and fused.NATIVE_UPDATES == "auto":
            # a training run's steady state: with numba installed, eager Adam updates
            # compile once their NumPy steps have cost what compiling would
            # (train/fused.py: ~500 of W2's steps the first time, fewer from the disk cache)
            for _ in range(WARM_STEPS):
                opt.minimize(loss)
        others = peers.w2_runs(x, y, params, _NumpyAdam, steps)    # (same rounds)
        t = measure({"fg": lambda: opt.minimize(loss), "np": lambda: floor.step(x, y),
                     **others}, reps, inner=5)
    finally:
        tf.dispose(vs)
        opt.dispose()
    rows = [("W2 MLP train step (Adam), batch 128", t["fg"], t["np"], 1e3, "ms")]
    rows += [(f"W2 MLP train step [{peer}]", t[peer], t["np"], 1e3, "ms") for peer in others]
    rows += _w2_parts(reps, x, y, params)
    # the same training run with the whole step traced once and replayed: the NumPy
    # replay and (where numba is) the native one, each with its own variables and optimizer
    floor = _NumpyAdam(params)
    jitted = {}
    try:
        jitted["fg"] = _mlp_jit_step(x, y, params, "numpy")
        if NATIVE:
            jitted["native"] = _mlp_jit_step(x, y, params, "native")
        for _ in range(steps):
            last_np = floor.step(x, y)
            last = {k: step().item() for k, (step, _) in jitted.items()}
        for k in jitted:
            np.testing.assert_allclose(last[k], last_np, rtol=2e-3, err_msg=k)
        t = measure({**{k: step for k, (step, _) in jitted.items()},
                     "np": lambda: floor.step(x, y)}, reps, inner=5)
    finally:
        for _, free in jitted.values():
            free()
    rows.append(("W2 ..., tf.jit(minimize)", t["fg"], t["np"], 1e3, "ms"))
    if NATIVE:
        rows.append(("W2 ..., tf.jit native (minimize)", t["native"], t["np"], 1e3, "ms"))
    return rows


def _mlp_jit_step(x, y, params, backend):
    """W2's training step traced whole (forward, backward, Adam) by tf.jit on ``backend``,
    returning the loss as a tensor: what W2's jit rows time and bench/jit_cost.py compiles.
    Returns (step, free: disposes its variables and optimizer)."""
    vs, opt, loss = _mlp_flowgrad(x, y, params)

    def free():
        tf.dispose(vs)
        opt.dispose()
    return tf.jit(lambda: opt.minimize(loss, return_cost=True), backend=backend), free


def _w2_parts(reps, x, y, params):
    """W2's step in its two halves, each beside the same half of the floor: the gradients
    (forward and backward), and the Adam update from fixed gradients."""
    floor = _NumpyAdam(params)
    vs, opt, loss = _mlp_flowgrad(x, y, params)
    try:
        _, fixed = floor.fwd_bwd(x, y)
        gs = [tf.tensor(g) for g in fixed]
        pairs = list(zip(gs, vs))
        t = measure({"fg": lambda: tf.tidy(lambda: tf.variable_grads(loss)),
                     "np": lambda: floor.fwd_bwd(x, y),
                     "fg_up": lambda: opt.apply_gradients(pairs),
                     "np_up": lambda: floor.update(fixed)}, reps, inner=5)
    finally:
        tf.dispose(vs + gs)
        opt.dispose()
    return [("W2 ..., gradients only (variable_grads)", t["fg"], t["np"], 1e3, "ms"),
            ("W2 ..., Adam update only", t["fg_up"], t["np_up"], 1e3, "ms")]


# ---------------------------------------------------------------- W3: big elementwise

def w3(reps, sizes=(10**6, 10**7)):
    """Gradient of sum(exp(x) sin(x) + x x), against a fused floor that reuses buffers:
    eager (beside PyTorch eager and JAX jit), tf.jit's NumPy replay (beside the native
    one), and the NumPy replay on two threads."""
    rows = []
    for n in sizes:
        xn = np.linspace(-1, 1, n).astype(np.float32)
        x = tf.tensor(xn)
        e, out, tmp = np.empty_like(xn), np.empty_like(xn), np.empty_like(xn)

        def floor():
            # d/dx = e^x (sin x + cos x) + 2x, in three preallocated buffers
            np.exp(xn, out=e)
            np.sin(xn, out=out)
            np.cos(xn, out=tmp)
            np.add(out, tmp, out=out)
            np.multiply(out, e, out=out)
            np.multiply(xn, 2, out=tmp)
            return np.add(out, tmp, out=out)
        g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
        np.testing.assert_allclose(g(x).numpy(), floor(), rtol=1e-5, atol=1e-6)
        runs = {"fg": lambda: g(x), "np": floor}
        # the peers (PyTorch eager, JAX jit), measured in the same rounds
        for peer, run in (("torch", _torch_w3(xn)), ("jax", peers.jax_w3(xn))):
            if run is not None:
                np.testing.assert_allclose(run(), floor(), rtol=1e-5, atol=1e-6,
                                           err_msg=peer)
                runs[peer] = run
        t = measure(runs, reps)
        rows.append((f"W3 grad of sum(exp sin + x^2), {n:.0e}", t["fg"], t["np"], 1e3, "ms"))
        rows += [(f"W3 ... {n:.0e} [{peer}]", t[peer], t["np"], 1e3, "ms")
                 for peer in ("torch", "jax") if peer in t]
        # (threads: python -m bench --threads N, else 1)
        runs = _jitted(g, x, floor, rtol=1e-5, atol=1e-6)
        t = measure(runs, reps)
        rows += _jit_rows(f"W3 ... {n:.0e}", t, 1e3, "ms")
        # fused chains split among two threads, against the same one-thread floor
        jg2 = tf.jit(g, threads=2, backend="numpy")
        np.testing.assert_array_equal(jg2(x).numpy(), runs["fg"]().numpy())
        t = measure({"fg": lambda: jg2(x), "np": floor}, reps)
        rows.append((f"W3 ... {n:.0e}, tf.jit, 2 threads", t["fg"], t["np"], 1e3, "ms"))
    return rows


def _torch_grad_of(xn, grad):
    """A zero-argument PyTorch eager run (one thread) of ``grad(torch, x)`` on a fresh
    leaf x = xn requiring grad, returning NumPy; None without PyTorch."""
    torch = peers.torch_one_thread()
    if torch is None:
        return None
    x0 = torch.from_numpy(xn)

    def run():
        return grad(torch, x0.clone().requires_grad_(True)).numpy()
    return run


def _torch_w3(xn):
    """W3's gradient with PyTorch eager, or None without it."""
    def grad(torch, x):
        return torch.autograd.grad((torch.exp(x) * torch.sin(x) + x * x).sum(), x)[0]
    return _torch_grad_of(xn, grad)


# ---------------------------------------------------------------- W4a: grad of grad

def w4a(reps, n=10**6):
    """d2/dx2 of x^3 on 1e6 elements by grad of grad, against the closed form 6x: written
    x * x * x, and x.pow(3) (half the values negative: NumPy's power is slow on those).
    Eager beside PyTorch eager and JAX jit (x ** 3 for x.pow(3)); tf.jit's NumPy replay
    beside the native one."""
    xn = np.linspace(-1, 1, n).astype(np.float32)
    x = tf.tensor(xn)
    out = np.empty_like(xn)

    def closed():
        return np.multiply(xn, 6, out=out)
    rows = []
    for how, cube in (("x^3", lambda t: t * t * t), ("x.pow(3)", lambda t: t.pow(3))):
        d2 = tf.grad(tf.grad(cube))
        np.testing.assert_allclose(d2(x).numpy(), closed(), rtol=1e-5, atol=1e-5)
        runs = {"fg": lambda: d2(x), "np": closed}
        # the peers (PyTorch eager, JAX jit), measured in the same rounds
        for peer, run in (("torch", _torch_d2(xn, cube)), ("jax", peers.jax_w4a(xn, how))):
            if run is not None:
                np.testing.assert_allclose(run(), closed(), rtol=1e-5, atol=1e-5,
                                           err_msg=peer)
                runs[peer] = run
        t = measure(runs, reps)
        label = "W4a d2/dx2 of x^3, 1e6" + ("" if how == "x^3" else f" as {how}")
        rows.append((f"{label}, grad of grad", t["fg"], t["np"], 1e3, "ms"))
        rows += [(f"{label}, grad of grad [{peer}]", t[peer], t["np"], 1e3, "ms")
                 for peer in ("torch", "jax") if peer in t]
        t = measure(_jitted(d2, x, closed, rtol=1e-5, atol=1e-5), reps)
        rows += _jit_rows(label, t, 1e3, "ms")
    return rows


def _torch_d2(xn, cube):
    """d2/dx2 of cube(x) by autograd.grad twice (create_graph), or None without PyTorch
    (``cube`` is written with methods both libraries have)."""
    def grad(torch, x):
        y = cube(x)
        (g,) = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)
        return torch.autograd.grad(g, x, torch.ones_like(g))[0]
    return _torch_grad_of(xn, grad)


# ---------------------------------------------------------------- W5: tiny steps

def w5(reps, steps=10_000):
    """10,000 tiny SGD steps, each inside tidy; memory flat: the update written by hand
    (assign), and by an optimizer (minimize, whole-or-nothing: PyTorch's torch.optim.SGD
    beside it); each eager, by tf.jit's NumPy replay and by the native one. JAX: one
    jax.jit-compiled step called per step (the same computation for both variants)."""
    wn, xn, yn = np.float32(0.5), np.float32(2.0), np.float32(5.0)
    w = tf.variable(tf.scalar(0.5))
    x, y = tf.scalar(2.0), tf.scalar(5.0)
    opt = tf.train.sgd(0.01)

    def step():
        w.assign(w - tf.grad(lambda v: (v * x - y).square())(w) * 0.01)

    def loss():
        return (w * x - y).square()

    def opt_step():
        opt.minimize(loss)
    jstep, jopt = tf.jit(step, backend="numpy"), tf.jit(opt_step, backend="numpy")

    def loop(f):
        def run():
            for _ in range(steps):
                tf.tidy(f)
        return run

    def floor():
        v = np.array(wn)
        for _ in range(steps):
            g = 2 * (v * xn - yn) * xn
            v = v - np.float32(0.01) * g
        return v
    try:
        runs = {"fg": loop(step), "jit": loop(jstep), "min": loop(opt_step),
                "jmin": loop(jopt), "np": floor}
        if NATIVE:
            runs["nat"] = loop(tf.jit(step, backend="native"))
            runs["nmin"] = loop(tf.jit(opt_step, backend="native"))
        for k in [k for k in runs if k != "np"]:
            w.assign(tf.scalar(0.5))
            before = tf.memory().num_tensors
            runs[k]()
            assert tf.memory().num_tensors == before, f"W5 ({k}) leaked tensors"
            np.testing.assert_allclose(w.item(), floor(), rtol=1e-5)

        def tidy_alone():          # what every step of the workload pays before any kernel
            for _ in range(steps):
                tf.tidy(_nothing)
        runs["tidy"] = tidy_alone
        for key, optim in (("torch", False), ("torch_opt", True)):
            torch_steps = _torch_w5(wn, xn, yn, steps, optim)
            if torch_steps is not None:
                np.testing.assert_allclose(torch_steps(), floor(), rtol=1e-5)
                runs[key] = torch_steps
        # JAX: one row (an optimizer's SGD step compiles to the same computation)
        jax_steps = peers.jax_w5(wn, xn, yn, steps)
        if jax_steps is not None:
            np.testing.assert_allclose(jax_steps(), floor(), rtol=1e-5)
            runs["jax"] = jax_steps
        # the eager rows take ~1 s a run, the others ~10 ms: those get many more rounds, as
        # a single round of a 10 ms run (and of the floor) varied up to 1.6x between runs
        slow = ("fg", "min", "torch", "torch_opt")
        t = measure({k: f for k, f in runs.items() if k in slow}, max(3, reps // 2), warmup=1)
        t.update(measure({k: f for k, f in runs.items() if k not in slow}, max(9, 3 * reps),
                         warmup=1))
    finally:
        w.dispose()
    per = (1e6 / steps, "us/step")
    rows = [("W5 tiny SGD step in tidy", t["fg"], t["np"], *per),
            ("W5 ..., tf.jit", t["jit"], t["np"], *per),
            ("W5 ..., an empty tidy (no step)", t["tidy"], t["np"], *per),
            ("W5 minimize: tiny SGD by optimizer", t["min"], t["np"], *per),
            ("W5 minimize ..., tf.jit", t["jmin"], t["np"], *per)]
    if NATIVE:
        rows += [("W5 ..., tf.jit native", t["nat"], t["np"], *per),
                 ("W5 minimize ..., tf.jit native", t["nmin"], t["np"], *per)]
    if "torch" in t:
        rows.append(("W5 ... [torch]", t["torch"], t["np"], *per))
    if "torch_opt" in t:
        rows.append(("W5 minimize ... [torch]", t["torch_opt"], t["np"], *per))
    if "jax" in t:
        rows.append(("W5 ... [jax]", t["jax"], t["np"], *per))
    return rows


def _nothing():
    return None


def _torch_w5(wn, xn, yn, steps, optim=False):
    """The same steps with PyTorch eager, or None: autograd.grad and an in-place update, or
    (``optim``) torch.optim.SGD's zero_grad, backward and step."""
    torch = peers.torch_one_thread()
    if torch is None:
        return None
    x, y = torch.tensor(xn), torch.tensor(yn)

    def run():
        w = torch.tensor(wn, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.01) if optim else None
        for _ in range(steps):
            if optim:
                opt.zero_grad()
                (w * x - y).square().backward()
                opt.step()
                continue
            (g,) = torch.autograd.grad((w * x - y).square(), w)
            with torch.no_grad():
                w -= 0.01 * g
        return w.item()
    return run


from .checkpoint import ckpt  # noqa: E402  (save/restore of 100 MB against np.save/np.load)

from .per_example import pex  # noqa: E402  (per-example gradients with tf.vmap)

from .cockpit import cockpit  # noqa: E402  (the monitor's instruments against a plain step)

from .jit_cost import jitcost  # noqa: E402  (tf.jit native's first call: compile, cache load)

WORKLOADS.update({"W2": w2, "W3": w3, "W4a": w4a, "W5": w5, "ckpt": ckpt, "pex": pex,
                  "cockpit": cockpit, "jitcost": jitcost})
WORKLOADS = {k: WORKLOADS[k] for k in ("W1", "W2", "W3", "W4a", "W4b", "W5", "debug", "ckpt",
                                       "pex", "cockpit", "jitcost")}
