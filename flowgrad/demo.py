"""``flowgrad demo``: the examples of the three seed tutorials, run and printed.

Each example is the tutorial's TF.js code with only its spelling translated to Python.
"""
import contextlib
import io
import textwrap
import traceback

SEEDS = [
    ("Custom gradients (tf.customGrad)", [
        ("A square with its derivative written by hand", """
            def square_fwd(x, save):
                save([x])                    # keep x for grad_func
                value = x.square()
                def grad_func(dy, saved):
                    x, = saved
                    return dy.mul(x.mul(2))  # d(x^2)/dx = 2x
                return {"value": value, "grad_func": grad_func}

            custom_op = tf.custom_grad(square_fwd)
            x = tf.tensor1d([1, 2, 3])
            tf.grad(lambda x: custom_op(x).sum())(x).print()    # [2, 4, 6]
        """),
        ("A sum: one gradient per input", """
            def add_fwd(a, b, save):
                save([a, b])
                return {"value": a.add(b), "grad_func": lambda dy, saved: [dy, dy]}

            custom_add = tf.custom_grad(add_fwd)
            da, db = tf.grads(lambda a, b: custom_add(a, b).sum())(
                [tf.tensor1d([1, 2]), tf.tensor1d([3, 4])])
            da.print()
            db.print()
        """),
        ("exp, saving its output", """
            def exp_fwd(x, save):
                y = x.exp()
                save([y])
                return {"value": y, "grad_func": lambda dy, saved: dy.mul(saved[0])}

            custom_exp = tf.custom_grad(exp_fwd)
            x = tf.scalar(1.0)
            tf.grad(custom_exp)(x).print()                 # e
            tf.grad(tf.grad(custom_exp))(x).print()        # e again: the second order works
        """),
        ("ReLU with a threshold gradient", """
            def clip_fwd(x, save):
                save([x])
                return {"value": x.relu(),
                        "grad_func": lambda dy, saved: dy.mul(saved[0].greater(0).to_float())}

            custom_clip = tf.custom_grad(clip_fwd)
            tf.grad(lambda x: custom_clip(x).sum())(tf.tensor1d([-1, 0.5, 2])).print()
        """),
        ("A scaled gradient", """
            def scaled_fwd(x, save):
                save([x])
                return {"value": x.square(),
                        "grad_func": lambda dy, saved: dy.mul(saved[0].mul(2).mul(0.5))}

            scaled_grad = tf.custom_grad(scaled_fwd)
            tf.grad(lambda x: scaled_grad(x).sum())(tf.tensor1d([1, 2, 3])).print()  # x, not 2x
        """),
        ("The tutorial's training loop (it has no variable to train)", """
            optimizer = tf.train.sgd(0.01)
            try:
                for i in range(100):
                    optimizer.minimize(lambda: custom_op(tf.tensor1d([1, 2, 3])).sum())
            except tf.GradientError as e:
                print("GradientError:", e)
            x = tf.variable(tf.tensor1d([1, 2, 3]))          # what it meant: a variable
            for i in range(100):
                optimizer.minimize(lambda: custom_op(x).sum())
            x.print()                                        # each step: x <- x - 0.01 * 2x
            x.dispose()
        """),
    ]),
    ("Debugging gradients", [
        ("variable_grads of a linear model's loss", """
            w = tf.variable(tf.scalar(0.5))
            b = tf.variable(tf.scalar(0))

            def f(w, b):
                def body():
                    x = tf.tensor1d([1, 2, 3, 4])
                    y = tf.tensor1d([1, 3, 5, 7])
                    y_pred = x.mul(w).add(b)
                    return y_pred.sub(y).square().mean()
                return tf.tidy(body)

            value, grads = tf.variable_grads(lambda: f(w, b))
            print(value.data_sync())
            print(grads[w].data_sync())
            print(grads[b].data_sync())
            tf.print(grads[w].clip_by_value(-1, 1))
            w.dispose(); b.dispose()
        """),
        ("grads of a closure over two variables, then a manual update", """
            x = tf.variable(tf.scalar(2))
            y = tf.variable(tf.scalar(3))

            def step():
                f = lambda: x.square().add(y.square())
                dx, dy = tf.grads(f)([x, y])
                x.assign(x.sub(dx.mul(0.1)))
                y.assign(y.sub(dy.mul(0.1)))
            tf.tidy(step)
            x.print()    # 2 - 0.1 * 4 = 1.6
            y.print()    # 3 - 0.1 * 6 = 2.4
            x.dispose(); y.dispose()
        """),
        ("memory(): tidy leaves nothing behind", """
            before = tf.memory().num_tensors
            for _ in range(100):
                tf.tidy(lambda: tf.grad(lambda x: x.square().add(10))(tf.scalar(3.0)))
            print("tensors before:", before, "after:", tf.memory().num_tensors)
        """),
    ]),
    ("Derivatives and gradients", [
        ("grad of x^2 + x at 3", """
            x = tf.scalar(3.0)
            f = lambda x: x.square().add(x)
            grad_func = tf.grad(f)
            dx = grad_func(x)
            dx.print()   # 2*3 + 1 = 7
        """),
        ("grads of x^2 + y^2 at (2, 3)", """
            f = lambda x, y: x.square().add(y.square())
            grad_func = tf.grads(f)
            dx, dy = grad_func([tf.scalar(2), tf.scalar(3)])
            dx.print()   # 4
            dy.print()   # 6
        """),
        ("One SGD step with minimize", """
            w = tf.variable(tf.scalar(0.5))
            b = tf.variable(tf.scalar(1.0))
            f = lambda x: w.mul(x).add(b)
            optimizer = tf.train.sgd(0.1)
            optimizer.minimize(lambda: f(tf.scalar(2)).sub(tf.scalar(5)).square())
            w.print()   # 0.5 - 0.1 * 2 * (2*0.5 + 1 - 5) * 2 = 1.7
            b.print()   # 1.0 - 0.1 * 2 * (2*0.5 + 1 - 5)     = 1.6
            w.dispose(); b.dispose()
        """),
        ("value_and_grads of x^3 + x at 2", """
            x = tf.scalar(2.0)
            f = lambda x: x.pow(tf.scalar(3)).add(x)
            value, grads = tf.value_and_grads(f)(x)
            value.print()      # 10
            grads[0].print()   # 3*2^2 + 1 = 13
        """),
        ("tidy frees intermediates", """
            def body():
                x = tf.scalar(2.0)
                y = tf.scalar(3.0)
                z = x.mul(y).add(x)
                z.print()   # 8
            tf.tidy(body)
        """),
        ("Training a linear model with Adam", """
            xs = tf.tensor2d([[1, 2], [3, 4]])
            ys = tf.tensor2d([[1], [0]])
            w = tf.variable(tf.random_normal([2, 1], seed=0))
            b = tf.variable(tf.zeros([1]))
            predict = lambda x: x.mat_mul(w).add(b)
            loss = lambda pred, label: pred.sub(label).square().mean()
            optimizer = tf.train.adam(0.01)
            print("loss before:", loss(predict(xs), ys).item())
            for i in range(100):
                optimizer.minimize(lambda: loss(predict(xs), ys))
            print("loss after 100 steps:", loss(predict(xs), ys).item())
            w.print()
            b.print()
            w.dispose(); b.dispose(); optimizer.dispose()
        """),
        ("Higher-order derivatives", """
            x = tf.scalar(2.0)
            f = lambda x: x.pow(tf.scalar(3))
            df = tf.grad(f)
            d2f = tf.grad(df)
            df(x).print()    # 3x^2 = 12
            d2f(x).print()   # 6x = 12
        """),
    ]),
]


def run_example(code, namespace):
    """Run one example; returns what it printed (or the error it raised)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, "<example>", "exec"), namespace)
        except Exception:  # shown to the user: the demo goes on
            traceback.print_exc(limit=1, file=out)
    return out.getvalue()


def main(quick=False, out="flowgrad-report", train=True, show_code=True):
    """``flowgrad demo``: (1) the seed tutorials' examples, (2) a training run with its
    gradient monitor, gradient check and HTML report in ``out``, (3) four bugs caught."""
    print("flowgrad: the automatic differentiation of TensorFlow.js, in Python.\n"
          "1. The examples of the three seed tutorials, run.")
    run(show_code=show_code)
    if train:
        print("\n2. Training a small network on two spirals, watching its gradients.")
        path = train_run(quick=quick, out=out)
        print(f"\n   The gradient report: {path}")
    print("\n3. What went wrong: four bugs, caught.")
    what_went_wrong()
    return 0


def two_spirals(n=200, noise=0.05, seed=0):
    """A two-class dataset made here (no download): two interleaved spirals."""
    import numpy as np
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    a = np.stack([t * np.cos(t), t * np.sin(t)], 1) / (3 * np.pi)
    x = np.concatenate([a, -a]) + rng.normal(0, noise, (2 * n, 2))
    y = np.concatenate([np.zeros(n, int), np.ones(n, int)])
    return x.astype(np.float32), np.eye(2, dtype=np.float32)[y]


def train_run(quick=False, out="flowgrad-report", log=print):
    """Train a 2-32-32-2 tanh network with Adam, under a GradientMonitor and a progress bar;
    check the loss's gradients against finite differences; write the HTML report."""
    import os

    import numpy as np

    import flowgrad as tf
    x_np, y_np = two_spirals()
    x, y = tf.tensor(x_np), tf.tensor(y_np)
    rng = np.random.default_rng(1)
    sizes = [(2, 32), (32, 32), (32, 2)]
    params = []
    for i, (m, n) in enumerate(sizes):
        params.append(tf.variable(tf.tensor(rng.normal(0, 1 / np.sqrt(m), (m, n)),
                                            dtype="float32"), name=f"layer{i + 1}/w"))
        params.append(tf.variable(tf.zeros([n]), name=f"layer{i + 1}/b"))

    def logits(ps, inputs):
        h = inputs
        for i in range(0, len(ps) - 2, 2):
            h = h.mat_mul(ps[i]).add(ps[i + 1]).tanh()
        return h.mat_mul(ps[-2]).add(ps[-1])

    def loss():
        return tf.losses.softmax_cross_entropy(y, logits(params, x))

    opt = tf.train.adam(0.02)
    monitor = tf.debug.monitor(opt)
    steps = 150 if quick else 600
    try:
        for _ in tf.train.progress(range(steps), opt, desc="training"):
            opt.minimize(loss)
        pred = logits(params, x).arg_max(1).numpy()
        accuracy = float((pred == y_np.argmax(1)).mean())
        log(f"   {steps} Adam steps: loss {monitor.last_loss:.4f}, accuracy {accuracy:.1%}")
        # the model's loss as a function of its parameters, checked in float64
        check = tf.debug.check_grads(
            lambda *ps: tf.losses.softmax_cross_entropy(y, logits(list(ps), x)),
            [p.numpy() for p in params], max_elements=256, raise_on_fail=False)
        log(f"   gradient check of the loss: {'passed' if check.passed else 'FAILED'}")
        flags = monitor.flags
        log(f"   gradient flags: {', '.join(f'{f.variable} {f.kind} from step {f.start}' for f in flags) or 'none'}")
        os.makedirs(out, exist_ok=True)
        path = tf.debug.report(monitor, os.path.join(out, "report.html"),
                               checks={"loss of the spirals network": check},
                               title="flowgrad demo: two spirals")
        return os.path.abspath(path)
    finally:
        opt.monitor = None
        tf.dispose(params)
        opt.dispose()


def what_went_wrong(log=print):
    """A custom gradient with a wrong factor, named by check_grads; a NaN gradient from the
    where trap, named by check_numerics; a poisoned example, named by per-example
    gradient norms; a learning rate past the stability limit, named by diagnose."""
    import warnings

    import flowgrad as tf

    def square(x, save):
        save([x])
        return {"value": x.square(), "grad_func": lambda dy, saved: dy * saved[0] * 3}
    my_square = tf.custom_grad(square)
    report = tf.debug.check_grads(lambda x: my_square(x).sum(), tf.tensor([0.5, 2.0]),
                                  raise_on_fail=False)
    log("   A custom square whose gradient is 3x instead of 2x:")
    log("\n".join("   " + line for line in str(report).splitlines()))
    log("   A NaN gradient though the value is fine (where(x > 0, sqrt(x), 0) at x = -1):")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tf.debug.check_numerics(mode="warn") as check:
            tf.grad(lambda x: tf.where(x > 0, x.sqrt(), 0))(tf.tensor([-1.0, 4.0]))
    log("\n".join("   " + line for line in str(check.findings[0]).splitlines()))
    worst = poisoned_example(log)
    diagnosis = too_fast(log)
    return report, check.findings, worst, diagnosis


def poisoned_example(log=print):
    """One example of a batch of 64 has a wild label: per-example gradient norms (tf.vmap)
    name it by index, where the batch's gradient (one sum) hides it."""
    import numpy as np

    import flowgrad as tf
    rng = np.random.default_rng(7)
    x_np = rng.normal(size=(64, 3)).astype(np.float32)
    y_np = (x_np @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    y_np[37] = 1e4
    w = tf.variable(tf.zeros([3, 1]), name="demo/w")
    b = tf.variable(tf.zeros([1]), name="demo/b")
    try:
        def one_loss(x, y):
            return x.reshape([1, 3]).mat_mul(w).add(b).sub(y).square().mean()
        norms = tf.debug.per_example_grad_norms(one_loss, (tf.tensor(x_np), tf.tensor(y_np)),
                                                [w, b]).numpy()
        worst = tf.debug.worst_examples(norms, 2)
        log("   One poisoned example in a batch of 64: tf.debug.per_example_grad_norms")
        log(f"   (tf.vmap of the gradient) names it: example {worst[0]}, gradient norm "
            f"{norms[worst[0]]:.3g}; the next largest {norms[worst[1]]:.3g}, the median "
            f"{float(np.median(norms)):.3g}.")
        return worst[0]
    finally:
        tf.dispose([w, b])


def too_fast(log=print):
    """Every gradient right, and the loss still blows up: tf.debug.diagnose measures the
    curvature (lr x lambda_max against SGD's limit of 2) and names the learning rate."""
    import numpy as np

    import flowgrad as tf
    rng = np.random.default_rng(3)
    x_np = rng.normal(size=(32, 3))
    y_np = x_np @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=32)
    w = tf.variable(tf.zeros([3], "float64"), name="demo/lr_w")
    try:
        d = tf.debug.diagnose(lambda x, y: (x * w).sum().sub(y).square(),
                              (tf.tensor(x_np), tf.tensor(y_np)), tf.train.sgd(1.5))
        log("   Training that diverges although every gradient is right: tf.debug.diagnose")
        log("\n".join("   " + line for line in str(d).splitlines()))
        return d
    finally:
        w.dispose()


def run(show_code=True, out=print):
    """Print every seed example: its code (``|``) and what it printed (``>``)."""
    import flowgrad as tf
    for title, examples in SEEDS:
        out(f"\n=== {title} ===")
        namespace = {"tf": tf}      # the examples of one tutorial build on each other
        for name, code in examples:
            code = textwrap.dedent(code).strip("\n")
            out(f"\n--- {name}")
            if show_code:
                out(textwrap.indent(code, "  | ", lambda line: True))
            out(textwrap.indent(run_example(code, namespace).rstrip(), "  > "))
