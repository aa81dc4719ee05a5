"""Every example of the custom-gradients tutorial (seed 000, tf.customGrad), in Python.

The TF.js code is translated only in spelling: customGrad -> custom_grad, gradFunc ->
grad_func, arrow functions -> def/lambda. docs/custom-gradients.md walks through it.

    python examples/seed_000_custom_gradients.py
"""
import flowgrad as tf


def square_fwd(x, save):
    save([x])                       # keep x for grad_func
    value = x.square()

    def grad_func(dy, saved):
        x, = saved
        return dy.mul(x.mul(2))     # d(x²)/dx = 2x

    return {"value": value, "grad_func": grad_func}


def add_fwd(a, b, save):
    save([a, b])
    value = a.add(b)

    def grad_func(dy, saved):
        return [dy, dy]             # d(a+b)/da = d(a+b)/db = 1

    return {"value": value, "grad_func": grad_func}


def exp_fwd(x, save):
    y = x.exp()
    save([y])                       # save the result of the exponential

    def grad_func(dy, saved):
        y, = saved
        return dy.mul(y)            # d(eˣ)/dx = eˣ

    return {"value": y, "grad_func": grad_func}


def clip_fwd(x, save):
    y = x.relu()
    save([x])

    def grad_func(dy, saved):
        x, = saved
        return dy.mul(x.greater(0).to_float())     # ReLU's gradient

    return {"value": y, "grad_func": grad_func}


def scaled_fwd(x, save):
    y = x.square()
    save([x])

    def grad_func(dy, saved):
        x, = saved
        return dy.mul(x.mul(2).mul(0.5))           # a scaled derivative

    return {"value": y, "grad_func": grad_func}


custom_op = tf.custom_grad(square_fwd)
custom_add = tf.custom_grad(add_fwd)
custom_exp = tf.custom_grad(exp_fwd)
custom_clip = tf.custom_grad(clip_fwd)
scaled_grad = tf.custom_grad(scaled_fwd)


def show(title, t):
    print(f"{title}: {t.array_sync()}")
    return t.array_sync()


def main(quick=False):
    r = {}
    x = tf.tensor1d([1, 2, 3])
    print("== the basics: a square with its derivative written by hand")
    r["square"] = show("custom_op(x)", custom_op(x))
    r["square_grad"] = show("grad", tf.grad(lambda x: custom_op(x).sum())(x))

    print("== the arguments of grad_func: one gradient per input")
    da, db = tf.grads(lambda a, b: custom_add(a, b).sum())([tf.tensor1d([1, 2]),
                                                             tf.tensor1d([3, 4])])
    r["add_grads"] = [show("d/da", da), show("d/db", db)]

    print("== saving tensors: exp saves its output")
    one = tf.scalar(1.0)
    r["exp_grad"] = show("exp'(1)", tf.grad(custom_exp)(one))
    r["exp_grad2"] = show("exp''(1), through grad_func", tf.grad(tf.grad(custom_exp))(one))

    print("== custom gradients in training")
    optimizer = tf.train.sgd(0.01)
    try:                            # the tutorial's loop: a constant tensor, nothing to train
        optimizer.minimize(lambda: custom_op(tf.tensor1d([1, 2, 3])).sum())
        r["no_variable_error"] = None
    except tf.GradientError as e:
        r["no_variable_error"] = str(e)
        print("GradientError:", str(e).split(".")[0] + ".")
    w = tf.variable(tf.tensor1d([1, 2, 3]))            # what it meant: a variable
    for i in range(100):
        optimizer.minimize(lambda: custom_op(w).sum())  # minimize the sum of squares
    r["trained"] = show("after 100 steps (x·0.98¹⁰⁰)", w)
    w.dispose()

    print("== non-standard gradients")
    r["clip_grad"] = show("ReLU-style gradient at [-1, 0.5, 2]",
                          tf.grad(lambda x: custom_clip(x).sum())(tf.tensor1d([-1, 0.5, 2])))
    r["scaled_grad"] = show("scaled gradient at [1, 2, 3]",
                            tf.grad(lambda x: scaled_grad(x).sum())(x))

    print("== mixing custom ops with the others")
    m = tf.tensor2d([[1, 2], [3, 4]])
    r["composed_grad"] = show("grad of sum((x·m)²) at [[1, 1], [0, 1]]",
                              tf.grad(lambda x: custom_op(x.mat_mul(m)).sum())(
                                  tf.tensor2d([[1, 1], [0, 1]])))
    return r


if __name__ == "__main__":
    main()
