"""Per-example gradients (issue #18): an MLP 784-256-10, batch 128, float32, and a small
conv net against a loop. The goal is
per-example gradients with tf.vmap in at most 3x the time of one batched gradient of the
same loss (a Python loop over the examples is ~100x).

Rows: vmap against flowgrad's batched gradient (the goal); the loop against the same; vmap
against hand-written NumPy per-example gradients (the floor of that math); and, where torch
is importable, torch.func's vmap(grad) against torch's batched gradient (one thread).

Issue #30's row: per-example gradient NORMS by ghost norms (tf.debug.per_example_grad_norms,
method="ghost": ‖h_i‖·‖δ_i‖ per dense layer, no [B, D, H] tensor) against the same batched
gradient; the goal is at most 3x.

    python -m bench pex --reps 5
"""
import numpy as np

import flowgrad as tf

from .timing import measure

BATCH, D_IN, HIDDEN, D_OUT = 128, 784, 256, 10


def _data(seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal((BATCH, D_IN)).astype(np.float32)
    y = np.eye(D_OUT, dtype=np.float32)[r.integers(0, D_OUT, BATCH)]
    w1 = (r.standard_normal((D_IN, HIDDEN)) * np.sqrt(2 / D_IN)).astype(np.float32)
    w2 = (r.standard_normal((HIDDEN, D_OUT)) * np.sqrt(2 / HIDDEN)).astype(np.float32)
    return x, y, [w1, np.zeros(HIDDEN, np.float32), w2, np.zeros(D_OUT, np.float32)]


def _loss(params, x, y):
    w1, b1, w2, b2 = params
    logits = x.mat_mul(w1).add(b1).relu().mat_mul(w2).add(b2)
    return tf.losses.softmax_cross_entropy(y, logits)


def _numpy_per_example(x, y, params):
    """Each example's gradient of its softmax cross-entropy, by hand: [B, ...] arrays."""
    w1, b1, w2, b2 = params
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    z = h @ w2 + b2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    dz = p - y                                              # [B, 10]
    dh = (dz @ w2.T) * (h_pre > 0)                          # [B, 256]
    return [x[:, :, None] * dh[:, None, :], dh, h[:, :, None] * dz[:, None, :], dz]


def pex(reps):
    """Per-example gradients: ms per batch of 128, with the ratios the goal names."""
    x_np, y_np, p_np = _data()
    x, y = tf.tensor(x_np), tf.tensor(y_np)
    params = [tf.tensor(p) for p in p_np]

    # (tidy frees each call's results; eager kernels have run by the time it returns)
    def batched():
        tf.tidy(lambda: tf.grads(lambda *ps: _loss(list(ps), x, y))(params))

    def one(xi, yi):
        return tf.grads(lambda *ps: _loss(list(ps), xi.reshape([1, D_IN]),
                                          yi.reshape([1, D_OUT])))(params)

    per = tf.vmap(one)

    def vmapped():
        tf.tidy(lambda: per(x, y))

    def loop():
        tf.tidy(lambda: [one(x[i], y[i]) for i in range(BATCH)])

    # correctness first: vmap's per-example gradients are the hand-written ones
    from flowgrad import batching
    before = set(batching._warned)
    got = tf.tidy(lambda: [g.numpy() for g in per(x, y)])
    looped = sorted(set(batching._warned) - before)     # kernels with no batching rule
    for g, w in zip(got, _numpy_per_example(x_np, y_np, p_np)):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=1e-5)
    rounds = max(1, reps)
    t = measure({"vmap": vmapped, "batched": batched, "numpy": lambda: _numpy_per_example(
        x_np, y_np, p_np)}, rounds, warmup=1)
    t_loop = measure({"loop": loop}, max(1, rounds // 3), warmup=0)["loop"]
    rows = [
        (f"pex vmap(grads) vs one batched grad ({len(looped)} looped)", t["vmap"],
         t["batched"], 1e3, "ms"),
        ("pex loop of 128 grads vs one batched grad", t_loop, t["batched"], 1e3, "ms"),
        ("pex vmap(grads) vs NumPy per-example", t["vmap"], t["numpy"], 1e3, "ms"),
    ]
    rows += _ghost_rows(x, y, p_np, t["batched"], rounds)
    rows += _torch_rows(x_np, y_np, p_np, rounds)
    tf.dispose([x, y] + params)
    return rows + _conv_rows(rounds)


def _ghost_rows(x, y, p_np, t_batched, rounds):
    """Ghost norms of the same MLP (its weights as variables) against one batched gradient,
    after checking them against vmap's norms."""
    vs = [tf.variable(tf.tensor(p), name=f"bench_ghost_{i}") for i, p in enumerate(p_np)]

    def one(xi, yi):
        return _loss(vs, xi.reshape([1, D_IN]), yi.reshape([1, D_OUT]))

    def norms(method):
        return tf.debug.per_example_grad_norms(one, (x, y), method=method)
    got = tf.tidy(lambda: norms("ghost").numpy())
    want = tf.tidy(lambda: norms("vmap").numpy())
    np.testing.assert_allclose(got, want, rtol=1e-4)
    t = measure({"ghost": lambda: tf.tidy(lambda: norms("ghost"))}, rounds, warmup=1)
    tf.dispose(vs)
    return [("pex ghost norms vs one batched grad", t["ghost"], t_batched, 1e3, "ms")]


def _conv_rows(rounds):
    """Per-example gradients of a small conv net (64 images 12x12x1, 8 filters 3x3, dense to
    4 classes): vmap (the filter gradient has its own batching rule) against a loop."""
    r = np.random.default_rng(1)
    xs = tf.tensor(r.normal(size=(64, 12, 12, 1)).astype(np.float32))
    ys = tf.tensor(np.eye(4, dtype=np.float32)[r.integers(0, 4, 64)])
    k = tf.tensor((r.normal(size=(3, 3, 1, 8)) * 0.3).astype(np.float32))
    w = tf.tensor((r.normal(size=(12 * 12 * 8, 4)) * 0.05).astype(np.float32))

    def loss(k_, w_, x, y):
        h = tf.conv2d(x.reshape([1, 12, 12, 1]), k_, 1, "same").relu().reshape([1, -1])
        return tf.losses.softmax_cross_entropy(y.reshape([1, 4]), h.mat_mul(w_))

    def one(x, y):
        return tf.grads(lambda a, b: loss(a, b, x, y))([k, w])
    per = tf.vmap(one)
    got = tf.tidy(lambda: [g.numpy() for g in per(xs, ys)])
    for i in (0, 37):                                   # the loop's values
        want = tf.tidy(lambda i=i: [g.numpy() for g in one(xs[i], ys[i])])
        np.testing.assert_allclose(got[0][i], want[0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got[1][i], want[1], rtol=1e-5, atol=1e-7)
    t = measure({"vmap": lambda: tf.tidy(lambda: per(xs, ys)),
                 "loop": lambda: tf.tidy(lambda: [one(xs[i], ys[i]) for i in range(64)])},
                rounds, warmup=1)
    tf.dispose([xs, ys, k, w])
    return [("pex conv net, vmap(grads) vs a loop", t["vmap"], t["loop"], 1e3, "ms")]


def _torch_rows(x_np, y_np, p_np, rounds):
    try:
        import torch
        from torch.func import grad, vmap
    except ImportError:
        return []
    torch.set_num_threads(1)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    params = [torch.from_numpy(p.copy()) for p in p_np]

    def loss(ps, xs, ys):
        w1, b1, w2, b2 = ps
        logits = torch.relu(xs @ w1 + b1) @ w2 + b2
        return -(ys * torch.log_softmax(logits, -1)).sum(-1).mean()

    one = vmap(grad(lambda ps, xi, yi: loss(ps, xi[None], yi[None])), in_dims=(None, 0, 0))
    batched = grad(loss)
    t = measure({"vmap": lambda: one(params, x, y), "batched": lambda: batched(params, x, y)},
                rounds, warmup=1)
    return [("pex [torch] torch.func vmap(grad) vs batched", t["vmap"], t["batched"], 1e3,
             "ms")]
