"""Every code example of the three seed tutorials (shared/seeds/), translated only in spelling.

000: tf.customGrad, 001: debugging gradients, 002: derivatives and gradients. Each test quotes
the seed line it translates. Where the seed starts from Math.random() / tf.randomNormal, the
test uses a fixed value and checks against the formula worked out by hand in float64 NumPy.
"""
import asyncio

import numpy as np
import pytest

import flowgrad as tf


@pytest.fixture
def owned():
    """Variables/optimizers a test creates, disposed even on failure (the registry is global)."""
    things = []
    yield things
    for t in things:
        if hasattr(t, "dispose") and not getattr(t, "is_disposed", False):
            t.dispose()


def printed(capsys):
    return capsys.readouterr().out


# ------------------------------------------------------------------ seed 000: tf.customGrad

def _custom_op(x, save):  # const customOp = tf.customGrad((x, save) => { save([x]); ...
    save([x])
    value = x.square()

    def grad_func(dy, saved):
        x, = saved
        return dy.mul(x.mul(2))  # Производная x^2 равна 2*x

    return {"value": value, "gradFunc": grad_func}  # return { value, gradFunc };


custom_op = tf.custom_grad(_custom_op)


def test_000_custom_op_square():
    # const customOp = tf.customGrad((x, save) => { ... return dy.mul(x.mul(2)); ... });
    x = tf.tensor1d([1, 2, 3])
    np.testing.assert_array_equal(custom_op(x).data_sync(), [1, 4, 9])
    dx = tf.grad(lambda x: custom_op(x).sum())(x)
    np.testing.assert_array_equal(dx.data_sync(), [2, 4, 6])


def test_000_custom_add_two_inputs():
    # const customAdd = tf.customGrad((a, b, save) => { ... return [dy, dy]; ... });
    def add(a, b, save):
        save([a, b])
        value = a.add(b)
        grad_func = lambda dy, saved: [dy, dy]  # noqa: E731
        return {"value": value, "gradFunc": grad_func}

    custom_add = tf.custom_grad(add)
    a, b = tf.tensor1d([1, 2, 3]), tf.tensor1d([10, 20, 30])
    np.testing.assert_array_equal(custom_add(a, b).data_sync(), [11, 22, 33])
    da, db = tf.grads(lambda a, b: custom_add(a, b).sum())([a, b])
    np.testing.assert_array_equal(da.data_sync(), [1, 1, 1])
    np.testing.assert_array_equal(db.data_sync(), [1, 1, 1])


def test_000_custom_exp_saves_its_output():
    # const customExp = tf.customGrad((x, save) => { const y = x.exp(); save([y]); ...
    def exp(x, save):
        y = x.exp()
        save([y])  # Сохраняем результат экспоненты
        grad_func = lambda dy, saved: dy.mul(saved[0])  # noqa: E731  Производная e^x = e^x
        return {"value": y, "gradFunc": grad_func}

    custom_exp = tf.custom_grad(exp)
    xs = [-1.0, 0.0, 0.5, 2.0]
    dx = tf.grad(lambda x: custom_exp(x).sum())(tf.tensor1d(xs))
    np.testing.assert_allclose(dx.data_sync(), np.exp(xs), rtol=1e-6)


def test_000_custom_clip_relu_gradient():
    # return dy.mul(x.greater(0).toFloat());  // Градиент ReLU
    def clip(x, save):
        y = x.relu()
        save([x])
        grad_func = lambda dy, saved: dy.mul(saved[0].greater(0).toFloat())  # noqa: E731
        return {"value": y, "gradFunc": grad_func}

    custom_clip = tf.custom_grad(clip)
    x = tf.tensor1d([-2, -0.5, 0, 0.5, 3])
    np.testing.assert_array_equal(custom_clip(x).data_sync(), [0, 0, 0, 0.5, 3])
    dx = tf.grad(lambda x: custom_clip(x).sum())(x)
    np.testing.assert_array_equal(dx.data_sync(), [0, 0, 0, 1, 1])  # 1 where x > 0, else 0


def test_000_scaled_grad_halves_the_derivative():
    # return dy.mul(x.mul(2).mul(0.5));  // Масштабируем производную
    def scaled(x, save):
        y = x.square()
        save([x])
        grad_func = lambda dy, saved: dy.mul(saved[0].mul(2).mul(0.5))  # noqa: E731
        return {"value": y, "gradFunc": grad_func}

    scaled_grad = tf.custom_grad(scaled)
    x = tf.tensor1d([1, -2, 3])
    dx = tf.grad(lambda x: scaled_grad(x).sum())(x)
    np.testing.assert_array_equal(dx.data_sync(), [1, -2, 3])  # x, not 2x


def test_000_training_loop_without_variables_is_an_error(owned):
    # optimizer.minimize(() => { const x = tf.tensor1d([1, 2, 3]); ... return y.sum(); });
    optimizer = tf.train.sgd(0.01)
    owned.append(optimizer)
    with pytest.raises(tf.FlowgradError) as err:
        for _ in range(100):
            optimizer.minimize(lambda: custom_op(tf.tensor1d([1, 2, 3])).sum())
    assert "Cannot find a connection between any variable" in str(err.value)
    assert "tf.variable" in str(err.value)


# ------------------------------------------------------------------ seed 001: debugging

X1, Y1 = np.array([1, 2, 3, 4], np.float64), np.array([1, 3, 5, 7], np.float64)


def _linear_model(owned, w0=0.5, b0=0.0):
    # const w = tf.variable(tf.scalar(Math.random())); const b = tf.variable(tf.scalar(0));
    w, b = tf.variable(tf.scalar(w0)), tf.variable(tf.scalar(b0))
    owned += [w, b]

    def f(w, b):  # const f = (w, b) => tf.tidy(() => { ... });
        def body():
            x = tf.tensor1d([1, 2, 3, 4])
            y = tf.tensor1d([1, 3, 5, 7])
            y_pred = x.mul(w).add(b)
            return y_pred.sub(y).square().mean()
        return tf.tidy(body)

    # const {value, grads} = tf.variableGrads(() => f(w, b));
    value, grads = tf.variable_grads(lambda: f(w, b))
    r = X1 * w0 + b0 - Y1  # by hand, float64
    expected = np.mean(r ** 2), np.mean(2 * r * X1), np.mean(2 * r)
    return w, b, value, grads, expected


def test_001_variable_grads_linear_model(owned, capsys):
    w, b, value, grads, (loss, dw, db) = _linear_model(owned)
    assert (loss, dw, db) == (10.375, -17.5, -5.5)  # w=0.5, b=0: exact in float32
    # console.log(value.dataSync()); console.log(grads[w].dataSync()); ...grads[b]...
    print(value.data_sync())
    print(grads[w].data_sync())
    print(grads[b].data_sync())
    expected = [np.array([v], np.float32) for v in (loss, dw, db)]
    assert printed(capsys) == "".join(f"{e}\n" for e in expected)
    np.testing.assert_allclose(value.data_sync(), [loss], rtol=1e-6)
    np.testing.assert_allclose(grads[w].data_sync(), [dw], rtol=1e-6)
    np.testing.assert_allclose(grads[b].data_sync(), [db], rtol=1e-6)
    assert grads[w.name] is grads[w] and grads[b.name] is grads[b]  # keyed by name too


def test_001_variable_grads_at_another_point(owned):
    # same example, another "Math.random()" start: the hand formula still holds
    w, b, value, grads, (loss, dw, db) = _linear_model(owned, w0=1.37, b0=-0.25)
    np.testing.assert_allclose(value.data_sync(), [loss], rtol=1e-5)
    np.testing.assert_allclose(grads[w].data_sync(), [dw], rtol=1e-5)
    np.testing.assert_allclose(grads[b].data_sync(), [db], rtol=1e-5)


def test_001_grads_of_closure_over_variables_then_assign(owned):
    # const x = tf.variable(tf.scalar(2)); const y = tf.variable(tf.scalar(3));
    x, y = tf.variable(tf.scalar(2)), tf.variable(tf.scalar(3))
    owned += [x, y]
    # const optimizer = tf.train.sgd(0.1);  (created, never used by the example)
    owned.append(tf.train.sgd(0.1))
    before = tf.memory().num_tensors
    seen = {}

    def body():
        f = lambda: x.square().add(y.square())  # noqa: E731  const f = () => ...
        grads = tf.grads(f)
        dx, dy = grads([x, y])  # const [dx, dy] = grads([x, y]);
        seen["dx"], seen["dy"] = dx.item(), dy.item()
        x.assign(x.sub(dx.mul(0.1)))
        y.assign(y.sub(dy.mul(0.1)))

    tf.tidy(body)
    assert (seen["dx"], seen["dy"]) == (4, 6)
    np.testing.assert_allclose(x.data_sync(), [1.6], rtol=1e-6)  # 2 - 0.1*4
    np.testing.assert_allclose(y.data_sync(), [2.4], rtol=1e-6)  # 3 - 0.1*6
    assert tf.memory().num_tensors == before


def test_001_variable_grads_of_function_returning_nothing(owned):
    # tf.variableGrads(() => { const tape = tf.grad((x) => x.square().add(10)); ... });
    x = tf.variable(tf.scalar(2))
    owned.append(x)
    before = tf.memory().num_tensors

    def f():
        tape = tf.grad(lambda x: x.square().add(10))
        grad = tape(x)  # noqa: F841  the seed computes it and returns nothing

    with pytest.raises(tf.GradientError, match="must be a tensor"):
        tf.tidy(lambda: tf.variable_grads(f))
    assert tf.memory().num_tensors == before


def test_001_tf_print_grads(owned, capsys):
    # tf.print(grads[w]); tf.print(grads[b]);
    w, b, _, grads, _ = _linear_model(owned)
    tf.print(grads[w])
    tf.print(grads[b])
    assert printed(capsys) == "Tensor\n    -17.5\nTensor\n    -5.5\n"


def test_001_clip_by_value(owned):
    # const clippedGrad = grads[w].clipByValue(-1, 1);
    w, b, _, grads, _ = _linear_model(owned)
    clipped_grad = grads[w].clip_by_value(-1, 1)
    assert clipped_grad.item() == -1  # -17.5 clipped
    assert grads[b].clipByValue(-10, 10).item() == -5.5  # inside the bounds: unchanged


def test_001_memory_and_next_frame(owned):
    # tf.nextFrame(); tf.memory() — количество занятых тензоров
    w, b, value, grads, _ = _linear_model(owned)
    before = tf.memory().num_tensors
    tf.dispose([value, grads[w], grads[b]])
    assert tf.memory().num_tensors == before - 3
    asyncio.run(tf.next_frame())


# ------------------------------------------------------------------ seed 002: derivatives

def test_002_grad_of_square_plus_x(capsys):
    # const gradFunc = tf.grad(f); const dx = gradFunc(x); dx.print();
    x = tf.scalar(3.0)
    f = lambda x: x.square().add(x)  # noqa: E731
    grad_func = tf.grad(f)
    dx = grad_func(x)
    dx.print()  # Выводит градиент функции f(x) = x^2 + x в точке x=3
    assert printed(capsys) == "Tensor\n    7\n"


def test_002_grads_of_two_variables(capsys):
    # const [dx, dy] = gradFunc([tf.scalar(2), tf.scalar(3)]); dx.print(); // 4
    f = lambda x, y: x.square().add(y.square())  # noqa: E731
    grad_func = tf.grads(f)
    dx, dy = grad_func([tf.scalar(2), tf.scalar(3)])
    dx.print()  # 4
    dy.print()  # 6
    assert printed(capsys) == "Tensor\n    4\nTensor\n    6\n"


def test_002_sgd_minimize_one_step(owned, capsys):
    # optimizer.minimize(() => { const loss = f(tf.scalar(2)).sub(tf.scalar(5)).square(); ...
    w0, b0 = 0.5, 1.0  # for Math.random()
    w, b = tf.variable(tf.scalar(w0)), tf.variable(tf.scalar(b0))
    owned += [w, b]
    f = lambda x: w.mul(x).add(b)  # noqa: E731
    optimizer = tf.train.sgd(0.1)
    owned.append(optimizer)
    assert optimizer.minimize(lambda: f(tf.scalar(2)).sub(tf.scalar(5)).square()) is None
    r = 2 * w0 + b0 - 5  # by hand: dL/dw = 2r*2, dL/db = 2r
    w1, b1 = w0 - 0.1 * (2 * r * 2), b0 - 0.1 * (2 * r)
    w.print()
    b.print()
    out = printed(capsys)  # "Tensor\n    1.7000000476837158\nTensor\n    1.600000023841858\n"
    assert out.startswith("Tensor\n    ") and out.count("Tensor\n    ") == 2
    np.testing.assert_allclose([float(o) for o in out.split("Tensor\n")[1:]], [w1, b1], rtol=1e-6)
    np.testing.assert_allclose([w.item(), b.item()], [1.7, 1.6], rtol=1e-6)


def test_002_value_and_grads_bare_tensor(capsys):
    # const {value, grads} = fAndGrads(x); value.print(); grads[0].print();
    x = tf.scalar(2.0)
    f = lambda x: x.pow(tf.scalar(3)).add(x)  # noqa: E731
    f_and_grads = tf.value_and_grads(f)
    value, grads = f_and_grads(x)
    value.print()  # f(x) = x^3 + x
    grads[0].print()  # df/dx = 3*x^2 + 1
    assert printed(capsys) == "Tensor\n    10\nTensor\n    13\n"
    result = f_and_grads(x)
    assert result.value.item() == 10 and result.grads[0].item() == 13


def test_002_tidy_frees_intermediates(capsys):
    # tf.tidy(() => { const x = ...; const z = x.mul(y).add(x); z.print(); });
    before = tf.memory().num_tensors
    made = []

    def body():
        x = tf.scalar(2.0)
        y = tf.scalar(3.0)
        z = x.mul(y).add(x)
        z.print()
        made.extend([x, y, z])

    tf.tidy(body)
    assert printed(capsys) == "Tensor\n    8\n"
    # после выполнения z, x и y освобождаются автоматически
    assert all(t.is_disposed for t in made)
    assert tf.memory().num_tensors == before


def test_002_tidy_in_a_loop_does_not_leak(owned):
    # "Это предотвращает утечки памяти при повторных вычислениях градиентов в циклах обучения."
    w = tf.variable(tf.scalar(0.5))
    owned.append(w)
    grad_f = tf.grad(lambda x: x.square().add(x))
    tf.tidy(lambda: grad_f(w))  # warm-up: anything cached once is not a leak
    before = tf.memory().num_tensors
    for _ in range(10_000):
        tf.tidy(lambda: grad_f(w.mul(2)).add(1))
    assert tf.memory().num_tensors == before


def test_002_adam_training_loop(owned, capsys):
    # for (let i = 0; i < 100; i++) { optimizer.minimize(() => loss(predict(xs), ys)); }
    xs = tf.tensor2d([[1, 2], [3, 4]])
    ys = tf.tensor2d([[1], [0]])
    w0 = np.array([[0.3], [-0.7]])  # for tf.randomNormal([2, 1])
    w = tf.variable(tf.tensor2d(w0.tolist()))
    b = tf.variable(tf.zeros([1]))
    owned += [w, b]
    predict = lambda x: x.mat_mul(w).add(b)  # noqa: E731
    loss = lambda pred, label: pred.sub(label).square().mean()  # noqa: E731
    optimizer = tf.train.adam(0.01)
    owned.append(optimizer)
    for _ in range(100):
        optimizer.minimize(lambda: loss(predict(xs), ys))
    w.print()
    b.print()
    assert printed(capsys).startswith("Tensor\n    [[")

    # The same 100 steps by hand, float64, TF.js's Adam rule (epsilon 1e-7 outside the root)
    X, Y = np.array([[1., 2.], [3., 4.]]), np.array([[1.], [0.]])
    params = {"w": w0.copy(), "b": np.zeros(1)}
    m = {k: np.zeros_like(p) for k, p in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    b1, b2, lr, eps = 0.9, 0.999, 0.01, 1e-7
    for t in range(1, 101):
        r = X @ params["w"] + params["b"] - Y
        g = {"w": X.T @ (2 * r / r.size), "b": (2 * r / r.size).sum(axis=0)}
        for k in params:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            params[k] -= lr * (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps)
    np.testing.assert_allclose(w.data_sync(), params["w"].ravel(), atol=1e-4)
    np.testing.assert_allclose(b.data_sync(), params["b"], atol=1e-4)


def test_002_second_derivative(capsys):
    # const df = tf.grad(f); const d2f = tf.grad(df); df(x).print(); d2f(x).print();
    x = tf.scalar(2.0)
    f = lambda x: x.pow(tf.scalar(3))  # noqa: E731
    df = tf.grad(f)
    d2f = tf.grad(df)
    df(x).print()  # 3 * x^2 = 12
    d2f(x).print()  # 6 * x = 12
    assert printed(capsys) == "Tensor\n    12\nTensor\n    12\n"
