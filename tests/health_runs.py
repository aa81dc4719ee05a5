"""Training runs for the gradient-health flags (issue 19): healthy ones trained to
convergence, and sick ones whose sickness is known. Each returns the GradientMonitor that
watched it; tests/test_health_flags.py checks what it flagged."""
import numpy as np

import flowgrad as tf


def _dense(rng, sizes, prefix, init):
    params = []
    for i, (m, n) in enumerate(sizes):
        params.append(tf.variable(tf.tensor(init(rng, m, n).astype(np.float32)),
                                  name=f"{prefix}/l{i + 1}/w"))
        params.append(tf.variable(tf.zeros([n]), name=f"{prefix}/l{i + 1}/b"))
    return params


def _he(rng, m, n):
    return rng.normal(0, np.sqrt(2.0 / m), (m, n))


def _train(params, loss, opt, steps, monitor_options=None):
    m = tf.debug.monitor(opt, **(monitor_options or {}))
    try:
        for _ in range(steps):
            opt.minimize(loss)
    finally:
        opt.monitor = None
        tf.dispose(params)
        opt.dispose()
    return m


def _mlp(params, x, act):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = act(h.mat_mul(params[i]).add(params[i + 1]))
    return h.mat_mul(params[-2]).add(params[-1])


def healthy_mlp(steps=300, **options):
    """8-64-64-1 relu MLP, He init, Adam 0.01, a smooth regression target."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(128, 8)).astype(np.float32)
    ys = np.sin(xs[:, :1]) + 0.5 * xs[:, 1:2] * xs[:, 2:3]
    x, y = tf.tensor(xs), tf.tensor(ys.astype(np.float32))
    params = _dense(rng, [(8, 64), (64, 64), (64, 1)], "mlp", _he)
    m = _train(params, lambda: _mlp(params, x, tf.relu).sub(y).square().mean(),
               tf.train.adam(0.01), steps, options)
    tf.dispose([x, y])
    return m


def healthy_spirals(steps=600, **options):
    """The demo's network: 2-32-32-2 tanh on two spirals, Adam 0.02."""
    from flowgrad.demo import two_spirals
    xs, ys = two_spirals()
    x, y = tf.tensor(xs), tf.tensor(ys)
    rng = np.random.default_rng(1)
    params = _dense(rng, [(2, 32), (32, 32), (32, 2)], "spirals",
                    lambda r, m, n: r.normal(0, 1 / np.sqrt(m), (m, n)))
    m = _train(params,
               lambda: tf.losses.softmax_cross_entropy(y, _mlp(params, x, tf.tanh)),
               tf.train.adam(0.02), steps, options)
    tf.dispose([x, y])
    return m


def healthy_conv(steps=150, **options):
    """A small conv net (conv 3x3x1x4, relu, conv 3x3x4x4, relu, dense) telling a bright
    square's corner, Adam 0.01."""
    rng = np.random.default_rng(2)
    n = 64
    imgs = rng.normal(0, 0.1, (n, 8, 8, 1)).astype(np.float32)
    labels = rng.integers(0, 4, n)
    for k, c in enumerate(labels):
        r, s = divmod(int(c), 2)
        imgs[k, r * 4:r * 4 + 4, s * 4:s * 4 + 4, 0] += 1.0
    x, y = tf.tensor(imgs), tf.tensor(np.eye(4, dtype=np.float32)[labels])
    k1 = tf.variable(tf.tensor(rng.normal(0, np.sqrt(2 / 9), (3, 3, 1, 4)).astype(np.float32)),
                     name="conv/k1")
    k2 = tf.variable(tf.tensor(rng.normal(0, np.sqrt(2 / 36), (3, 3, 4, 4)).astype(np.float32)),
                     name="conv/k2")
    w = tf.variable(tf.tensor(rng.normal(0, np.sqrt(2 / 256), (256, 4)).astype(np.float32)),
                    name="conv/dense/w")
    b = tf.variable(tf.zeros([4]), name="conv/dense/b")

    def loss():
        h = tf.conv2d(x, k1, 1, "same").relu()
        h = tf.conv2d(h, k2, 1, "same").relu().reshape([n, 256])
        return tf.losses.softmax_cross_entropy(y, h.mat_mul(w).add(b))
    m = _train([k1, k2, w, b], loss, tf.train.adam(0.01), steps, options)
    tf.dispose([x, y])
    return m


def _chain_data(rng, width):
    xs = rng.normal(size=(64, width)).astype(np.float32)
    ys = (xs[:, :1] > 0).astype(np.float32)
    return tf.tensor(xs), tf.tensor(ys)


def sigmoid_chain(steps=200, depth=12, **options):
    """A deep sigmoid chain with small weights: the first layers' gradients vanish."""
    rng = np.random.default_rng(3)
    x, y = _chain_data(rng, 8)
    sizes = [(8, 8)] * (depth - 1) + [(8, 1)]
    params = _dense(rng, sizes, "sig", lambda r, m, n: r.normal(0, 0.5 / np.sqrt(m), (m, n)))
    m = _train(params, lambda: _mlp(params, x, tf.sigmoid).sub(y).square().mean(),
               tf.train.sgd(0.1), steps, options)
    tf.dispose([x, y])
    return m


def large_init_chain(steps=20, depth=8, **options):
    """A deep linear chain with weights 4x too large: gradients explode toward the input."""
    rng = np.random.default_rng(4)
    x, y = _chain_data(rng, 8)
    sizes = [(8, 8)] * (depth - 1) + [(8, 1)]
    params = _dense(rng, sizes, "big", lambda r, m, n: r.normal(0, 4 / np.sqrt(m), (m, n)))
    m = _train(params, lambda: _mlp(params, x, lambda h: h).sub(y).square().mean(),
               tf.train.sgd(1e-3), steps, options)
    tf.dispose([x, y])
    return m


def dead_relu_layer(steps=100, **options):
    """An MLP whose first layer's biases are so negative that its relus never fire."""
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(128, 8)).astype(np.float32)
    x, y = tf.tensor(xs), tf.tensor(np.sin(xs[:, :1]).astype(np.float32))
    params = _dense(rng, [(8, 32), (32, 32), (32, 1)], "dead", _he)
    params[1].assign(tf.fill([32], -100.0))
    m = _train(params, lambda: _mlp(params, x, tf.relu).sub(y).square().mean(),
               tf.train.adam(0.01), steps, options)
    tf.dispose([x, y])
    return m


def lr_too_high(steps=30, **options):
    """The healthy MLP with SGD at a learning rate 1000x too high: it diverges."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(128, 8)).astype(np.float32)
    ys = np.sin(xs[:, :1])
    x, y = tf.tensor(xs), tf.tensor(ys.astype(np.float32))
    params = _dense(rng, [(8, 64), (64, 64), (64, 1)], "lr", _he)
    m = _train(params, lambda: _mlp(params, x, tf.relu).sub(y).square().mean(),
               tf.train.sgd(5.0), steps, options)
    tf.dispose([x, y])
    return m


HEALTHY = {"mlp": healthy_mlp, "spirals": healthy_spirals, "conv": healthy_conv}
SICK = {"sigmoid_chain": sigmoid_chain, "large_init_chain": large_init_chain,
        "dead_relu_layer": dead_relu_layer, "lr_too_high": lr_too_high}
