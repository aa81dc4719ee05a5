"""A straight-through estimator with tf.custom_grad (seed 000: "operations with
non-standard gradient behaviour, e.g. approximating a function with jumps").

The weights of a linear model are quantized to multiples of 0.5 in the forward pass.
Rounding has a zero gradient almost everywhere, so through a plain round() nothing learns;
the straight-through estimator rounds in the forward pass and passes the gradient through
unchanged in the backward pass, so the latent float weights learn, and their rounded
values reach the target exactly.

    python examples/straight_through.py            # 200 steps
    python examples/straight_through.py --quick    # 60 steps
"""
import sys

import numpy as np

import flowgrad as tf

TARGET = [1.5, -0.5, 2.0]          # representable in steps of 0.5


def round_ste_fwd(x, save):
    return {"value": x.round(), "grad_func": lambda dy: dy}    # round; identity gradient


round_ste = tf.custom_grad(round_ste_fwd)


def quantize(w, straight_through):
    scaled = w.mul(2)
    return (round_ste(scaled) if straight_through else scaled.round()).div(2)


def train(steps, straight_through, xs, ys):
    w = tf.variable(tf.tensor([0.1, 0.1, 0.1]), name="w_latent")
    opt = tf.train.adam(0.05)

    def loss():
        return xs.mat_mul(quantize(w, straight_through).reshape([3, 1])).sub(ys).square().mean()

    first = loss().item()
    for _ in range(steps):
        opt.minimize(loss)
    out = {"loss_before": first, "loss_after": loss().item(),
           "quantized": quantize(w, straight_through).array_sync(),
           "gradient": tf.variable_grads(loss).grads[w].array_sync()}
    w.dispose()
    opt.dispose()
    return out


def main(quick=False):
    steps = 60 if quick else 200
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    xs = tf.tensor(x)
    ys = tf.tensor(x @ np.array(TARGET, np.float32)[:, None])
    plain = train(steps, False, xs, ys)
    ste = train(steps, True, xs, ys)
    print(f"plain round():          loss {plain['loss_before']:.4f} -> "
          f"{plain['loss_after']:.4f}, weights {plain['quantized']} (gradient "
          f"{plain['gradient']}: nothing learns)")
    print(f"straight-through round: loss {ste['loss_before']:.4f} -> "
          f"{ste['loss_after']:.4f}, weights {ste['quantized']} (target {TARGET})")
    return {"plain": plain, "straight_through": ste}


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
