"""tf.jit: a replay gives the eager results to the bit; retracing, value reads, variables,
training steps, buffer safety, output structures, memory."""
import numpy as np
import pytest

import flowgrad as tf

X = np.linspace(-1.3, 1.7, 5000).astype(np.float32)      # above the pooling threshold

FUNCTIONS = [
    ("chain", lambda x: (x * 1.01 + 0.1).sin().exp().tanh()),
    ("w3", lambda x: (x.exp() * x.sin() + x * x).sum()),
    ("softmax_xent", lambda x: tf.log_softmax(x.reshape([50, 100])).mean()),
    ("reductions", lambda x: x.square().max() + x.abs().mean() * x[:20].prod().abs().log1p()),
    ("shapes", lambda x: tf.concat([x[:2500], x[2500:] * 2]).reshape([50, -1]).transpose()),
]


@pytest.mark.parametrize("name, f", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_replay_equals_eager_to_the_bit(name, f):
    g = tf.grad(lambda x: f(x).sum())
    jg = tf.jit(g)
    x = tf.tensor(X)
    eager = g(x).numpy()
    first = jg(x)                     # traced (runs eagerly)
    second = jg(x)                    # replayed
    np.testing.assert_array_equal(first.numpy(), eager)
    np.testing.assert_array_equal(second.numpy(), eager)
    x2 = tf.tensor(X[::-1].copy())    # same signature, new values: replayed
    np.testing.assert_array_equal(jg(x2).numpy(), g(x2).numpy())
    assert len(jg.traces) == 1


def test_second_order_and_jacobians_replay():
    d2 = tf.grad(tf.grad(lambda t: t * t * t))
    jd2 = tf.jit(d2)
    x = tf.tensor(X)
    jd2(x)
    np.testing.assert_array_equal(jd2(x).numpy(), d2(x).numpy())
    W = tf.tensor(np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32))
    h = tf.jit(tf.hessian(lambda v: tf.dot(W, v).tanh().sum()))
    v = tf.tensor(np.linspace(0, 1, 8).astype(np.float32))
    h(v)
    np.testing.assert_array_equal(h(v).numpy(),
                                  tf.hessian(lambda v: tf.dot(W, v).tanh().sum())(v).numpy())


def test_new_shapes_trace_again():
    f = tf.jit(lambda x: x * 2)
    f(tf.zeros([2]))
    f(tf.zeros([3]))
    f(tf.zeros([3], dtype="float64"))
    f(tf.zeros([2]))
    assert len(f.traces) == 3
    assert f([1, 2]).numpy().tolist() == [2, 4]          # TensorLikes are converted


def test_outputs_do_not_alias_buffers_across_calls():
    f = tf.jit(lambda x: x.exp() + 1)
    x = tf.tensor(X)
    f(x)
    a = f(x)
    keep = a.numpy()
    b = f(tf.tensor(X * 2))
    np.testing.assert_array_equal(a.numpy(), keep)       # still the first result
    assert not np.shares_memory(a._data, b._data)


def test_an_output_computed_in_place_is_not_overwritten_while_held():
    """W3's last add runs in place over a dying intermediate's buffer, and that buffer is
    the output: a held result keeps its values, a dropped one's buffer is reused."""
    g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
    jg = tf.jit(g)
    x, x2 = tf.tensor(X), tf.tensor(X[::-1].copy())
    jg(x)
    assert "b0 = rb0()" in next(iter(jg.traces.values())).source    # handed out
    a = jg(x)
    b = jg(x2)
    np.testing.assert_array_equal(a.numpy(), g(x).numpy())
    np.testing.assert_array_equal(b.numpy(), g(x2).numpy())
    assert not np.shares_memory(a._data, b._data)
    kept = id(b._data)          # (holding the array itself would keep it busy)
    del b
    c = jg(x)                                            # b's buffer is free again
    assert id(c._data) == kept
    np.testing.assert_array_equal(c.numpy(), g(x).numpy())


def test_x_plus_x_replays_as_two_x():
    f = tf.jit(lambda t: (t.exp() + t.exp()).sum())
    g = tf.grad(lambda t: t * t)
    jg = tf.jit(g)
    x = tf.tensor(X)
    jg(x)
    src = next(iter(jg.traces.values())).source
    assert "c0" in src                                   # the 2, as a constant
    np.testing.assert_array_equal(jg(x).numpy(), g(x).numpy())
    np.testing.assert_array_equal(jg(x).numpy(), 2 * X)
    f(x)
    assert f(x).item() == tf.sum(x.exp() + x.exp()).item()


def test_reading_a_value_while_tracing_is_an_error():
    def f(x):
        y = x * 2
        if y.sum().item() > 0:       # Python control flow on a value
            return y
        return -y
    with pytest.raises(tf.JitError, match="reads the value of a tensor it computed"):
        tf.jit(f)(tf.tensor([1.0]))


def test_creating_variables_inside_is_an_error():
    made = []

    def f(x):
        made.append(tf.variable(x * 2))
        return x
    with pytest.raises(tf.JitError, match="created or disposed variables"):
        tf.jit(f)(tf.tensor([1.0]))
    tf.dispose(made)


def test_variables_are_read_at_every_call():
    w = tf.variable(tf.tensor([1.0, 2.0]))
    try:
        f = tf.jit(lambda x: w * x)
        x = tf.tensor([3.0, 3.0])
        f(x)
        f(x)
        w.assign(tf.tensor([10.0, 20.0]))
        assert f(x).numpy().tolist() == [30, 60]
    finally:
        w.dispose()


@pytest.mark.parametrize("make", [lambda: tf.train.adam(0.05),
                                  lambda: tf.train.sgd(tf.train.exponential_decay(0.1, 2, 0.5)),
                                  lambda: tf.train.rmsprop(0.01, momentum=0.9)])
def test_a_jitted_training_step_follows_the_eager_trajectory(make):
    init = np.array([[0.5, -1.0], [2.0, 0.3]], np.float32)
    runs = []
    for jit in (False, True):
        w = tf.variable(tf.tensor(init))
        opt = make()
        loss = lambda: (tf.mat_mul(w, w).tanh() - 0.5).square().sum()   # noqa: E731
        step = tf.jit(lambda: opt.minimize(loss, return_cost=True)) if jit else \
            (lambda: opt.minimize(loss, return_cost=True))
        costs = [step().item() for _ in range(6)]
        runs.append((costs, w.numpy(), opt.iterations))
        w.dispose()
        opt.dispose()
    assert runs[0][0] == runs[1][0] and runs[0][2] == runs[1][2] == 6
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_structures_come_back():
    w = tf.variable(tf.scalar(3.0), name="w_jit_struct")
    try:
        vg = tf.jit(lambda: tf.variable_grads(lambda: w.square()))
        vg()
        value, grads = vg()
        assert value.item() == 9 and grads[w].item() == 6 and type(grads).__name__ == "GradMap"
        vag = tf.jit(tf.value_and_grad(lambda x: x.square()))
        vag(tf.scalar(2.0))
        r = vag(tf.scalar(2.0))
        assert (r.value.item(), r.grad.item()) == (4, 4)
        both = tf.jit(lambda x: {"a": x * 2, "b": [x, None, 3]})
        both(tf.scalar(1.0))
        out = both(tf.scalar(1.0))
        assert out["a"].item() == 2 and out["b"][1] is None and out["b"][2] == 3
    finally:
        w.dispose()


def test_random_kernels_draw_again_at_every_replay():
    f = tf.jit(lambda x: x + tf.random_normal([4]))
    x = tf.zeros([4])
    a, b = f(x).numpy(), f(x).numpy()
    assert not np.array_equal(a, b)


def test_inside_a_gradient_function_it_runs_eagerly_and_differentiates():
    f = tf.jit(lambda x: x.sin())
    f(tf.scalar(0.5))
    assert tf.grad(lambda x: f(x))(tf.scalar(0.5)).item() == pytest.approx(np.cos(0.5))


def test_no_tensor_leaks_across_replays():
    g = tf.jit(tf.grad(lambda x: (x.exp() * x).sum()))
    x = tf.tensor(X)
    g(x)
    before = tf.memory().num_tensors
    for _ in range(20):
        tf.tidy(lambda: g(x))
    assert tf.memory().num_tensors == before


def test_disposed_argument_and_bad_function():
    f = tf.jit(lambda x: x * 2)
    x = tf.tensor([1.0])
    f(x)
    x.dispose()
    with pytest.raises(tf.DisposedError, match="Tensor is disposed"):
        f(x)
    with pytest.raises(tf.FlowgradError, match="fn must be a function"):
        tf.jit(3)


def test_the_replay_is_flat_code_with_dead_kernels_removed():
    g = tf.jit(tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum()))
    g(tf.tensor(X))
    src = next(iter(g.traces.values())).source
    # the loss value itself (its sum) is not needed for the gradient: gone from the replay
    assert src.count("\n") < 20 and "out=p" in src


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_arithmetic_written_as_operators_gives_eager_bits(dtype):
    """+ - * / and negation on floats replay as Python operators (their kernels' own
    bodies); int32 division floors, so it stays a kernel call."""
    w = tf.variable(tf.tensor(np.array([7, -3, 5]).astype(dtype)))

    def f(a, s):
        return ((a + w) * s - a / s - (-w)) / (a - s)
    a = tf.tensor(np.array([3, 11, -4]).astype(dtype))
    s = tf.tensor(np.array(2).astype(dtype))
    want = f(a, s).numpy()
    jf = tf.jit(f)
    jf(a, s)
    src = next(iter(jf.traces.values())).source
    assert ("(B, " in src) == (dtype == "int32"), src       # kernel calls only for int32
    for _ in range(2):
        np.testing.assert_array_equal(jf(a, s).numpy(), want)
    w.assign(tf.tensor(np.array([1, 2, 4]).astype(dtype)))
    np.testing.assert_array_equal(jf(a, s).numpy(), f(a, s).numpy())
    w.dispose()
