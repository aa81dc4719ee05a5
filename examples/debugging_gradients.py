"""Debugging gradients (seed 001): check a custom gradient against finite differences,
find the op where a NaN was born, and ask why a gradient is missing.

    python examples/debugging_gradients.py
"""
import flowgrad as tf


def main():
    # 1. A custom gradient with a mistake: check_grads names the op and the line.
    def square(x, save):
        save([x])
        return {"value": x.square(), "grad_func": lambda dy, s: dy * s[0] * 3}   # should be 2
    my_square = tf.custom_grad(square)
    report = tf.debug.check_grads(lambda x: my_square(x).sum(), tf.tensor([0.5, 2.0]),
                                  raise_on_fail=False)
    print(report, end="\n\n")

    # 2. The where trap: the forward value is fine, the gradient is NaN.
    x = tf.tensor([-1.0, 4.0])
    with tf.debug.check_numerics(mode="warn") as check:
        tf.grad(lambda x: tf.where(x > 0, x.sqrt(), 0))(x)
    print(check.findings[0], end="\n\n")

    # 3. Why is this gradient zero?
    print(tf.debug.explain_gradient(lambda x: x.round() * 2, tf.scalar(1.3)))


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore", tf.debug.NumericsWarning)
    main()
