"""Debugging tools on jitted functions: a replay runs kernels and gradients with no Python
around them, so while a tool must see them (check_numerics, debug mode, gradient hooks) the
jitted function runs eagerly; once the tool is off, it replays again."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.debug.numerics import NumericsError

BACKENDS = ["numpy"] + (["native"] if tf.jit_native.numba_installed() else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def _traced(f, *args):
    """f jitted, traced and replayed once (so the next call would be a replay)."""
    for _ in range(2):
        f(*args)
    assert f.traces, "the function was not traced"
    return f


def test_check_numerics_sees_a_replayed_forward(backend):
    jf = _traced(tf.jit(lambda t: (t.log() * 2).sum(), backend=backend),
                 tf.tensor([1.0, 2.0]))
    with tf.debug.check_numerics(), pytest.raises(NumericsError, match="NaN created by log"):
        jf(tf.tensor([-1.0, 2.0]))
    # off again: the replay, NaN and all, as eager without the check
    assert np.isnan(jf(tf.tensor([-1.0, 2.0])).item())


def test_check_numerics_sees_a_replayed_backward(backend):
    g = _traced(tf.jit(tf.grad(lambda t: t.sqrt().sum()), backend=backend), tf.tensor([1.0]))
    with tf.debug.check_numerics(), \
            pytest.raises(NumericsError, match="Inf created in the gradient of sqrt"):
        g(tf.tensor([0.0]))


def test_debug_mode_sees_a_replayed_training_step(backend):
    w = tf.variable(tf.tensor([1.0, 2.0]))
    opt = tf.train.sgd(0.1)
    scale = tf.variable(tf.scalar(1.0))
    step = _traced(tf.jit(lambda: opt.minimize(lambda: (w * w).sum().mul(scale.log()),
                                               return_cost=True), backend=backend))
    scale.assign(tf.scalar(-1.0))
    tf.enable_debug_mode()
    try:
        with pytest.raises(NumericsError, match="NaN created by log"):
            step()
    finally:
        tf.disable_debug_mode()
    tf.dispose([w, scale])
    opt.dispose()


def test_on_gradient_registered_after_the_trace_runs_at_every_call(backend):
    w = tf.variable(tf.tensor([1.0, 2.0]))
    opt = tf.train.sgd(0.1)
    step = _traced(tf.jit(lambda: opt.minimize(lambda: (w * w).sum()), backend=backend))
    before = w.numpy().copy()
    seen = []
    h = tf.debug.on_gradient(w, lambda g: (seen.append(g.numpy().copy()), g * 0)[1])
    step()
    step()
    np.testing.assert_array_equal(w.numpy(), before)           # frozen by the hook
    np.testing.assert_allclose(seen[-1], 2 * before)           # d(w·w)/dw, by hand
    assert len(seen) == 2
    h.remove()
    step()                                                     # replays again: w moves
    np.testing.assert_allclose(w.numpy(), before - 0.1 * 2 * before, rtol=1e-6)
    tf.dispose(w)
    opt.dispose()


def test_a_hook_on_an_unrelated_variable_leaves_the_replay_alone(backend):
    w, other = tf.variable(tf.tensor([1.0])), tf.variable(tf.tensor([5.0]))
    opt = tf.train.sgd(0.5)
    step = _traced(tf.jit(lambda: opt.minimize(lambda: (w * w).sum()), backend=backend))
    h = tf.debug.on_gradient(other, lambda g: g * 0)
    try:
        # the hook is not on w: the call replays (one profile entry for the replay, where
        # the eager step runs Multiply, Sum and the rest one by one)
        assert tf.profile(step).kernel_names == ["jit(<lambda>)"]
    finally:
        h.remove()
    h = tf.debug.on_gradient(w, lambda g: g)
    assert "Sum" in tf.profile(step).kernel_names             # w's hook: eagerly
    h.remove()
    assert tf.profile(step).kernel_names == ["jit(<lambda>)"]
    np.testing.assert_allclose(w.numpy(), [0.0])               # 1 - 0.5·2·1
    tf.dispose([w, other])
    opt.dispose()


def test_a_hook_on_an_argument_runs_at_every_call(backend):
    g = _traced(tf.jit(tf.grad(lambda x: (x * x).sum()), backend=backend), tf.tensor([3.0]))
    x = tf.tensor([3.0])
    seen = []
    x.register_hook(lambda gx: seen.append(gx.item()))
    assert g(x).item() == 6.0 and g(x).item() == 6.0
    assert seen == [6.0, 6.0]


def test_register_hook_inside_the_jitted_function_runs_at_every_call(backend):
    seen = []

    def f(x):
        y = x * 3
        y.register_hook(lambda gy: seen.append(gy.item()))
        return (y * y).sum()
    jg = tf.jit(tf.grad(f), backend=backend)
    out = [jg(tf.scalar(v)).item() for v in (1.0, 2.0, 1.0)]
    assert out == [18.0, 36.0, 18.0]                           # d(9x²)/dx = 18x
    assert seen == [6.0, 12.0, 6.0]                            # 2y at y = 3x
    # a replacing hook inside fn: applied at every call, not baked into a replay
    scale = [1.0]

    def h(x):
        y = x * 3
        y.register_hook(lambda gy: gy * scale[0])
        return (y * y).sum()
    jh = tf.jit(tf.grad(h), backend=backend)
    assert jh(tf.scalar(1.0)).item() == 18.0
    scale[0] = 0.0
    assert jh(tf.scalar(1.0)).item() == 0.0


def test_profile_and_time_see_a_replay_as_one_entry(backend):
    jf = _traced(tf.jit(lambda t: (t.log() * 2).sum(), backend=backend), tf.tensor([1.0, 2.0]))
    x = tf.tensor([1.0, 4.0])
    info = tf.profile(lambda: jf(x))
    (k,) = info.kernels
    assert k.name == "jit(<lambda>)" and k.input_shapes == [[2]] and k.output_shapes == [[]]
    assert k.kernel_time_ms > 0 and "tf.jit replay of" in k.extra_info
    assert info.result.item() == pytest.approx(2 * np.log(4.0), rel=1e-6)
    assert tf.time(lambda: jf(x)).kernel_ms > 0            # (0 before: nothing was timed)
