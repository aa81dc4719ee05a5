"""Per-example gradient clipping, DP-SGD style, with tf.vmap.

Differentially private SGD bounds what one example can do to the model: each example's
gradient is clipped to norm C, the clipped gradients are averaged, and Gaussian noise of
scale sigma * C / batch is added before the update. That needs every example's own
gradient, which the batch's gradient (one sum) hides. ``tf.vmap`` of ``tf.grads`` gives them
at once, each kernel running on the whole batch; this script checks the clipped average
against a Python loop over the examples, then trains a logistic regression with it.

    python examples/dp_sgd.py            # 300 steps
    python examples/dp_sgd.py --quick    # 60 steps
"""
import sys

import numpy as np

import flowgrad as tf

CLIP = 1.0          # C: the largest norm one example's gradient may have
SIGMA = 0.5         # noise multiplier


def data(n=256, seed=0):
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, 5)).astype(np.float32)
    true_w = np.array([1.5, -2.0, 0.5, 0.0, 1.0], np.float32)
    y = (x @ true_w + 0.3 * r.normal(size=n) > 0).astype(np.float32)
    x[7] *= 50.0                # one outlier, whose gradient clipping must tame
    return x, y


def example_loss(w, b, x, y):
    """The logistic loss of one example (x: [5], y: a scalar)."""
    logit = x.mul(w).sum().add(b)
    return tf.losses.sigmoid_cross_entropy(y.reshape([1]), logit.reshape([1]))


def clipped_mean_grads(w, b, xs, ys):
    """The average of the per-example gradients, each clipped to norm CLIP: [dw, db]."""
    per = tf.vmap(lambda x, y: tf.grads(lambda w_, b_: example_loss(w_, b_, x, y))([w, b]))
    gw, gb = per(xs, ys)                                   # [batch, 5] and [batch]
    norms = gw.square().sum(1).add(gb.square()).sqrt()
    scale = tf.minimum(tf.ones_like(norms), norms.div(CLIP).reciprocal())
    return [gw.mul(scale.reshape([-1, 1])).mean(0), gb.mul(scale).mean()]


def clipped_mean_grads_loop(w, b, xs, ys):
    """The same, one example at a time (the check)."""
    gws, gbs = [], []
    for i in range(xs.shape[0]):
        gw, gb = tf.grads(lambda w_, b_: example_loss(w_, b_, xs[i], ys[i]))([w, b])
        norm = float(np.sqrt((gw.numpy() ** 2).sum() + gb.item() ** 2))
        s = min(1.0, CLIP / norm)
        gws.append(gw.numpy() * s)
        gbs.append(gb.item() * s)
    return [np.mean(gws, 0), np.mean(gbs)]


def main(quick=False):
    x_np, y_np = data()
    xs, ys = tf.tensor(x_np), tf.tensor(y_np)
    w, b = tf.variable(tf.zeros([5]), name="dp_w"), tf.variable(tf.scalar(0.0), name="dp_b")
    try:
        # 1. the vmapped clipped average equals the loop's, on the first 32 examples
        fast = clipped_mean_grads(w, b, xs[:32], ys[:32])
        slow = clipped_mean_grads_loop(w, b, xs[:32], ys[:32])
        gap = max(float(np.abs(fast[0].numpy() - slow[0]).max()),
                  abs(fast[1].item() - slow[1]))
        print(f"clipped per-example average, vmap vs loop: max difference {gap:.2e}")
        norms = tf.debug.per_example_grad_norms(
            lambda x, y: example_loss(w, b, x, y), (xs, ys), [w, b])
        worst = tf.debug.worst_examples(norms, 1)[0]
        print(f"largest per-example gradient: example {worst} "
              f"(norm {norms.numpy()[worst]:.1f}, clipped to {CLIP})")

        # 2. train with clipped, noised gradients
        rng = np.random.default_rng(1)
        opt = tf.train.sgd(0.5)
        steps, batch = (60 if quick else 300), 64
        losses = []
        for step in range(steps):
            idx = rng.choice(len(x_np), batch, replace=False)
            gw, gb = clipped_mean_grads(w, b, tf.tensor(x_np[idx]), tf.tensor(y_np[idx]))
            noise = SIGMA * CLIP / batch
            gw = gw.add(tf.tensor(rng.normal(0, noise, 5).astype(np.float32)))
            gb = gb.add(float(rng.normal(0, noise)))
            opt.apply_gradients({"dp_w": gw, "dp_b": gb})
            if step % 20 == 0 or step == steps - 1:
                loss = tf.vmap(lambda x, y: example_loss(w, b, x, y))(xs, ys).mean().item()
                losses.append(loss)
                print(f"step {step:3d}: loss {loss:.4f}")
        pred = xs.mul(w).sum(1).add(b).greater(0).numpy()
        accuracy = float((pred == (y_np > 0)).mean())
        print(f"accuracy {accuracy:.1%} with per-example clipping to {CLIP} and noise "
              f"multiplier {SIGMA}")
        opt.dispose()
        return {"gap": gap, "worst": worst, "losses": losses, "accuracy": accuracy}
    finally:
        tf.dispose([w, b])


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
