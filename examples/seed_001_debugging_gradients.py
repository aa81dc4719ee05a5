"""Every example of the debugging-gradients tutorial (seed 001), in Python.

docs/debugging-gradients.md walks through it, then through tf.debug; see also
examples/debugging_gradients.py and examples/nan_hunt.py.

    python examples/seed_001_debugging_gradients.py
"""
import flowgrad as tf


def main(quick=False):
    r = {}
    print("== variables (the tutorial starts w from Math.random(); here 0.5)")
    w = tf.variable(tf.scalar(0.5), name="w")
    b = tf.variable(tf.scalar(0), name="b")

    print("== variable_grads of a linear model's loss, in tidy")

    def f(w, b):
        def body():
            x = tf.tensor1d([1, 2, 3, 4])
            y = tf.tensor1d([1, 3, 5, 7])
            y_pred = x.mul(w).add(b)
            return y_pred.sub(y).square().mean()
        return tf.tidy(body)

    value, grads = tf.variable_grads(lambda: f(w, b))
    print(value.data_sync())
    print(grads[w].data_sync())     # the Variable works as a key (TF.js: undefined)
    print(grads[b].data_sync())
    r["value"], r["grad_w"], r["grad_b"] = value.item(), grads[w].item(), grads[b].item()

    print("== the tutorial's \"GradientTape\": grads of a closure, then a manual update")
    x = tf.variable(tf.scalar(2), name="x")
    y = tf.variable(tf.scalar(3), name="y")

    def step():
        f = lambda: x.square().add(y.square())
        dx, dy = tf.grads(f)([x, y])
        x.assign(x.sub(dx.mul(0.1)))
        y.assign(y.sub(dy.mul(0.1)))

    tf.tidy(step)
    x.print()
    y.print()
    r["x"], r["y"] = x.item(), y.item()

    print("== its second snippet returns nothing from variable_grads' function")

    def no_result():
        tape = tf.grad(lambda x: x.square().add(10))
        grad = tape(x)              # noqa: F841 - as in the tutorial

    try:
        tf.tidy(lambda: tf.variable_grads(no_result))
    except tf.GradientError as e:
        print("GradientError:", e)
        r["no_result_error"] = str(e)

    print("== flowgrad's real GradientTape")
    with tf.GradientTape() as tape:
        loss = x.square().add(y.square())
    dx, dy = tape.gradient(loss, [x, y])
    r["tape"] = (dx.item(), dy.item())
    print("d/dx, d/dy:", r["tape"])

    print("== tf.print of the gradients")
    tf.print(grads[w])
    tf.print(grads[b])

    print("== a numerical check: f(x) = x², gradient 2x")
    report = tf.debug.check_grads(lambda x: x.square(), tf.tensor([1.0, -2.0, 3.0]))
    print(report.passed and "check_grads: passed")
    r["check_passed"] = report.passed

    print("== clipping")
    clipped = grads[w].clip_by_value(-1, 1)
    clipped.print()
    r["clipped"] = clipped.item()
    r["clipped_by_norm"] = tf.clip_by_norm(tf.tensor([3.0, 4.0]), 1.0).array_sync()
    print("clip_by_norm([3, 4], 1):", r["clipped_by_norm"])

    print("== memory(): tidy leaves nothing behind")
    before = tf.memory().num_tensors
    for _ in range(100):
        tf.tidy(lambda: tf.grad(lambda x: x.square().add(10))(tf.scalar(3.0)))
    r["leaked"] = tf.memory().num_tensors - before
    print("tensors left by 100 gradient computations:", r["leaked"])

    for v in (w, b, x, y):
        v.dispose()
    return r


if __name__ == "__main__":
    main()
