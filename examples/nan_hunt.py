"""A NaN hunt with tf.debug.check_numerics: a logistic regression whose hand-written
cross-entropy turns NaN after a few steps, the op and the line where it was born, and the
fix.

With a large learning rate the logits grow until sigmoid() rounds to exactly 1 in float32;
log(1 - p) is then -Inf, and 0 × -Inf makes the loss NaN, and every weight after it.
check_numerics stops at the first non-finite value, forward or backward, and says which op
created it, on which line, from which input values.

    python examples/nan_hunt.py
"""
import contextlib
import sys

import numpy as np

import flowgrad as tf


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x[:, :1] + x[:, 1:] > 0).astype(np.float32)        # linearly separable
    return tf.tensor(x), tf.tensor(y)


def naive_loss(xs, ys, w, b):
    p = xs.mat_mul(w).add(b).sigmoid()
    log_p = p.log()
    log_not_p = (1 - p).log()                                # -Inf once p rounds to 1
    return -(ys * log_p + (1 - ys) * log_not_p).mean()


def stable_loss(xs, ys, w, b):
    return tf.losses.sigmoid_cross_entropy(ys, xs.mat_mul(w).add(b))   # from the logits


def train(loss_fn, steps, check=False):
    """Train from zeros; returns the losses (stops at the first non-finite one)."""
    xs, ys = data()
    w = tf.variable(tf.zeros([2, 1]))
    b = tf.variable(tf.zeros([1]))
    opt = tf.train.sgd(10.0)
    losses = []
    try:
        with tf.debug.check_numerics() if check else contextlib.nullcontext():
            for _ in range(steps):
                losses.append(opt.minimize(lambda: loss_fn(xs, ys, w, b),
                                           return_cost=True).item())
                if not np.isfinite(losses[-1]):
                    break
    finally:
        w.dispose()
        b.dispose()
    return losses


def main(quick=False):
    steps = 40 if quick else 100
    # 1. The symptom: the loss decreases, then is NaN.
    losses = train(naive_loss, steps)
    bad = len(losses) - 1
    print(f"1. loss: {losses[0]:.4f} at step 0, {losses[bad - 1]:.4f} at step {bad - 1}, "
          f"{losses[bad]} at step {bad}")

    # 2. The hunt: the same run under check_numerics stops where the first -Inf is made.
    try:
        train(naive_loss, steps, check=True)
        finding = None
    except tf.debug.NumericsError as e:
        finding = e
        print(f"2. check_numerics:\n{e}")

    # 3. The fix: compute the loss from the logits (log-sum-exp inside, no log(0)).
    fixed = train(stable_loss, steps)
    print(f"3. the stable loss: {fixed[0]:.4f} at step 0, {fixed[-1]:.4f} after {len(fixed)} "
          f"steps, all finite: {bool(np.isfinite(fixed).all())}")
    return {"nan_step": bad, "losses": losses, "finding": finding, "fixed": fixed}


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
