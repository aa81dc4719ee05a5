"""A two-layer network on two spirals, trained with Adam (seed 002: "gradients in neural
networks"). The data is generated here; the training step runs under tf.jit, with the data
passed as arguments: a jitted function reads its arguments afresh at every call, while the
tensors it reads from its closure are constants of its trace (rebinding one between calls,
to swap mini-batches, raises tf.JitError rather than train on the first batch again).

    python examples/mlp_adam.py            # 1000 steps, about a second
    python examples/mlp_adam.py --quick    # 200 steps
"""
import sys

import numpy as np

import flowgrad as tf


def two_spirals(n, noise=0.1, seed=0):
    """n points per class on two interleaved spirals of 1.5 turns, radius up to 3."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.random(n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], 1) / np.pi
    x = np.concatenate([arm, -arm]) + rng.normal(0, noise, (2 * n, 2))
    y = np.concatenate([np.zeros(n), np.ones(n)])[:, None]
    return x.astype(np.float32), y.astype(np.float32)


def dense(n_in, n_out, seed):
    """A layer's weights (Glorot-normal) and biases, as variables."""
    std = np.sqrt(2.0 / (n_in + n_out))
    return (tf.variable(tf.random_normal([n_in, n_out], 0, std, seed=seed)),
            tf.variable(tf.zeros([n_out])))


def main(quick=False):
    steps = 200 if quick else 1000
    x, y = two_spirals(200, seed=0)
    x_test, y_test = two_spirals(100, seed=1)
    xs, ys = tf.tensor(x), tf.tensor(y)
    layers = [dense(2, 64, 1), dense(64, 64, 2), dense(64, 1, 3)]

    def model(inputs):
        h = inputs
        for i, (w, b) in enumerate(layers):
            h = h.mat_mul(w).add(b)
            if i < len(layers) - 1:
                h = h.tanh()
        return h                                   # logits

    def loss(inputs, labels):
        return tf.losses.sigmoid_cross_entropy(labels, model(inputs))

    def accuracy(inputs, labels):
        return float(((model(tf.tensor(inputs)).numpy() > 0) == (labels > 0.5)).mean())

    opt = tf.train.adam(0.02)
    # the batch is an argument, not a tensor the step closes over: traced once for its
    # shapes, each call trains on the batch it is given (mini-batches of one size: call
    # train_step(xb, yb) with each, still one trace)
    train_step = tf.jit(lambda xb, yb: opt.minimize(lambda: loss(xb, yb), return_cost=True))
    first = loss(xs, ys).item()
    for step in tf.train.progress(range(steps), opt, desc="two spirals"):
        cost = train_step(xs, ys)         # here the whole training set: one batch
        if step % (steps // 4) == 0:
            print(f"step {step:4d}: loss {cost.item():.4f}")
    result = {"loss_before": first, "loss_after": loss(xs, ys).item(),
              "train_accuracy": accuracy(x, y), "test_accuracy": accuracy(x_test, y_test)}
    print(f"loss {result['loss_before']:.4f} -> {result['loss_after']:.4f}; accuracy "
          f"{result['train_accuracy']:.1%} (train), {result['test_accuracy']:.1%} (test)")
    for w, b in layers:
        w.dispose()
        b.dispose()
    opt.dispose()
    return result


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
