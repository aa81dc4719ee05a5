"""Newton's method on the Rosenbrock function with tf.hessian (seed 002: "optimisation with
the Hessian matrix"). Pure Newton from (-1.2, 1) reaches the minimum (1, 1) in 6 steps.

    python examples/newton_rosenbrock.py
"""
import numpy as np

import flowgrad as tf


def rosenbrock(p):
    x, y = p[0], p[1]
    return (1 - x) ** 2 + (y - x * x) ** 2 * 100


def main():
    p = tf.tensor([-1.2, 1.0], dtype="float64")
    for step in range(1, 20):
        g = tf.grad(rosenbrock)(p)
        H = tf.hessian(rosenbrock)(p)
        p = tf.tensor(p.numpy() - np.linalg.solve(H.numpy(), g.numpy()), dtype="float64")
        print(f"step {step}: p = {p.numpy()}, f = {rosenbrock(p).item():.3e}")
        if np.abs(p.numpy() - 1).max() < 1e-10:
            break
    return step


if __name__ == "__main__":
    main()
