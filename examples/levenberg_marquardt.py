"""Fit y = a·exp(b·t) by Levenberg-Marquardt, with the jacobian of the residuals from
tf.jacobian (one vectorised backward pass per iteration) and the damped Gauss-Newton step
(JᵀJ + λI)·δ = -Jᵀr solved by tf.linalg.solve, all in flowgrad ops.

    python examples/levenberg_marquardt.py
"""
import numpy as np

import flowgrad as tf

t = np.linspace(0, 3, 12)
data = 2.0 * np.exp(-0.7 * t) + np.random.default_rng(0).normal(0, 0.01, t.size)


def residuals(p):
    return p[0] * (tf.tensor(t, dtype="float64") * p[1]).exp() - tf.tensor(data, dtype="float64")


def cost(p):
    return residuals(p).square().sum().item()


def lm_step(p, lam):
    """The Levenberg-Marquardt step δ = -(JᵀJ + λI)⁻¹·Jᵀr at p, by a solve."""
    J = tf.jacobian(residuals)(p)
    r = residuals(p)
    A = tf.mat_mul(J, J, True, False) + lam * tf.eye(2, dtype="float64")
    return tf.linalg.solve(A, -tf.dot(r, J))


def main():
    p, lam = tf.tensor([1.0, 0.0], dtype="float64"), 1e-2
    for it in range(100):
        step = lm_step(p, lam)
        if cost(p + step) < cost(p):
            p, lam = p + step, lam / 3
        else:
            lam *= 3
        if step.abs().max().item() < 1e-12:
            break
    a, b = p.numpy()
    print(f"a = {a:.4f}, b = {b:.4f} after {it + 1} iterations (true 2, -0.7)")
    return p.numpy()


if __name__ == "__main__":
    main()
