"""Linear regression with tf.variable_grads and a hand-written gradient-descent update
(seed 001: "variable_grads returns the gradient of every variable, to update the weights
directly").

    python examples/linear_regression.py            # 300 steps
    python examples/linear_regression.py --quick    # 100 steps
"""
import sys

import numpy as np

import flowgrad as tf

TRUE_W, TRUE_B = 2.0, -1.0


def main(quick=False):
    steps, lr = (100 if quick else 300), 0.1
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 100).astype(np.float32)
    y = (TRUE_W * x + TRUE_B + rng.normal(0, 0.1, 100)).astype(np.float32)
    xs, ys = tf.tensor(x), tf.tensor(y)
    w = tf.variable(tf.scalar(0.0), name="w")
    b = tf.variable(tf.scalar(0.0), name="b")

    def loss():
        return xs.mul(w).add(b).sub(ys).square().mean()

    def step():
        value, grads = tf.variable_grads(loss)       # the loss and d loss / d variable
        w.assign(w.sub(grads[w].mul(lr)))            # grads[w] or grads["w"]
        b.assign(b.sub(grads[b].mul(lr)))
        return value.item()

    for i in range(steps):
        value = tf.tidy(step)                        # frees the gradients each step
        if i % (steps // 5) == 0:
            print(f"step {i:3d}: loss {value:.5f}, w = {w.item():.4f}, b = {b.item():.4f}")
    # the least-squares solution, for comparison
    best_w, best_b = np.polyfit(x, y, 1)
    result = {"w": w.item(), "b": b.item(), "loss": loss().item(),
              "least_squares": (float(best_w), float(best_b))}
    print(f"w = {result['w']:.4f}, b = {result['b']:.4f} (least squares: {best_w:.4f}, "
          f"{best_b:.4f}; data made with {TRUE_W}, {TRUE_B}); loss {result['loss']:.5f}")
    w.dispose()
    b.dispose()
    return result


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
