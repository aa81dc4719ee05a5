"""Newton's method on the Rosenbrock function with tf.hessian and tf.linalg.solve (seed 002:
"optimisation with the Hessian matrix"). Pure Newton from (-1.2, 1) reaches the minimum
(1, 1) in 6 steps. Each step p - H⁻¹g is computed with flowgrad ops, so the step is itself
differentiable: its jacobian at the minimum is zero, which is why Newton converges
quadratically there.

    python examples/newton_rosenbrock.py
"""
import numpy as np

import flowgrad as tf


def rosenbrock(p):
    x, y = p[0], p[1]
    return (1 - x) ** 2 + (y - x * x) ** 2 * 100


def newton_step(p):
    """p - H(p)⁻¹·∇f(p), by a solve (never an inverse)."""
    g = tf.grad(rosenbrock)(p)
    H = tf.hessian(rosenbrock)(p)
    return p - tf.linalg.solve(H, g)


def main():
    p = start = tf.tensor([-1.2, 1.0], dtype="float64")
    for step in range(1, 20):
        p = newton_step(p)
        print(f"step {step}: p = {p.numpy()}, f = {rosenbrock(p).item():.3e}")
        if np.abs(p.numpy() - 1).max() < 1e-10:
            break
    # (third derivatives of f) the jacobian of the Newton map, I - H⁻¹H - (dH⁻¹)·g, is
    # small where g is: zero at the minimum
    far, near = (np.abs(tf.jacobian(newton_step)(q).numpy()).max() for q in (start, p))
    print(f"jacobian of the Newton step: max |dN/dp| = {far:.2f} at the start, "
          f"{near:.0e} at the minimum")
    return step


if __name__ == "__main__":
    main()
