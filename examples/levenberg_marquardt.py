"""Fit y = a·exp(b·t) by Levenberg-Marquardt, with the jacobian of the residuals from
tf.jacobian (one vectorised backward pass per iteration).

    python examples/levenberg_marquardt.py
"""
import numpy as np

import flowgrad as tf

t = np.linspace(0, 3, 12)
data = 2.0 * np.exp(-0.7 * t) + np.random.default_rng(0).normal(0, 0.01, t.size)


def residuals(p):
    return p[0] * (tf.tensor(t, dtype="float64") * p[1]).exp() - tf.tensor(data, dtype="float64")


def cost(p):
    return float((residuals(tf.tensor(p, dtype="float64")).numpy() ** 2).sum())


def main():
    p, lam = np.array([1.0, 0.0]), 1e-2
    for it in range(100):
        J = tf.jacobian(residuals)(tf.tensor(p, dtype="float64")).numpy()
        r = residuals(tf.tensor(p, dtype="float64")).numpy()
        step = np.linalg.solve(J.T @ J + lam * np.eye(2), -J.T @ r)
        if cost(p + step) < cost(p):
            p, lam = p + step, lam / 3
        else:
            lam *= 3
        if np.abs(step).max() < 1e-12:
            break
    print(f"a = {p[0]:.4f}, b = {p[1]:.4f} after {it + 1} iterations (true 2, -0.7)")
    return p


if __name__ == "__main__":
    main()
