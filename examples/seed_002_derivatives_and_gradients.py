"""Every example of the derivatives-and-gradients tutorial (seed 002), in Python.

docs/derivatives-and-gradients.md walks through it, then through higher order, jacobians,
Hessians, forward mode and tf.jit; examples/newton_rosenbrock.py is the "optimisation with
the Hessian matrix" it points to.

    python examples/seed_002_derivatives_and_gradients.py
"""
import flowgrad as tf


def main(quick=False):
    r = {}
    print("== grad of x² + x at 3")
    x = tf.scalar(3.0)
    f = lambda x: x.square().add(x)
    grad_func = tf.grad(f)
    dx = grad_func(x)
    dx.print()
    r["grad"] = dx.item()

    print("== grads of x² + y² at (2, 3)")
    f = lambda x, y: x.square().add(y.square())
    grad_func = tf.grads(f)
    dx, dy = grad_func([tf.scalar(2), tf.scalar(3)])
    dx.print()
    dy.print()
    r["grads"] = (dx.item(), dy.item())

    print("== one SGD step with minimize (the tutorial starts from random values)")
    w = tf.variable(tf.scalar(0.5))
    b = tf.variable(tf.scalar(1.0))
    f = lambda x: w.mul(x).add(b)
    optimizer = tf.train.sgd(0.1)
    optimizer.minimize(lambda: f(tf.scalar(2)).sub(tf.scalar(5)).square())
    w.print()
    b.print()
    r["sgd"] = (w.item(), b.item())
    w.dispose()
    b.dispose()

    print("== value_and_grads of x³ + x at 2")
    x = tf.scalar(2.0)
    f = lambda x: x.pow(tf.scalar(3)).add(x)
    value, grads = tf.value_and_grads(f)(x)    # a bare tensor: TF.js throws, flowgrad takes it
    value.print()
    grads[0].print()
    r["value_and_grads"] = (value.item(), grads[0].item())

    print("== tidy frees the intermediates")
    before = tf.memory().num_tensors

    def body():
        x = tf.scalar(2.0)
        y = tf.scalar(3.0)
        z = x.mul(y).add(x)
        z.print()
        return z.item()

    r["tidy"] = tf.tidy(body)
    r["tidy_left"] = tf.memory().num_tensors - before

    print("== a linear model trained with Adam")
    xs = tf.tensor2d([[1, 2], [3, 4]])
    ys = tf.tensor2d([[1], [0]])
    w = tf.variable(tf.random_normal([2, 1], seed=0))
    b = tf.variable(tf.zeros([1]))
    predict = lambda x: x.mat_mul(w).add(b)
    loss = lambda pred, label: pred.sub(label).square().mean()
    optimizer = tf.train.adam(0.01)
    r["loss_before"] = loss(predict(xs), ys).item()
    for i in range(100):
        optimizer.minimize(lambda: loss(predict(xs), ys))
    r["loss_after"] = loss(predict(xs), ys).item()
    print(f"loss {r['loss_before']:.4f} -> {r['loss_after']:.4f}")
    w.print()
    b.print()
    w.dispose()
    b.dispose()
    optimizer.dispose()

    print("== higher-order derivatives of x³ at 2")
    x = tf.scalar(2.0)
    f = lambda x: x.pow(tf.scalar(3))
    df = tf.grad(f)
    d2f = tf.grad(df)
    df(x).print()
    d2f(x).print()
    r["higher"] = (df(x).item(), d2f(x).item())
    return r


if __name__ == "__main__":
    main()
