"""tf.debug.callback: values out of a jitted step (every replay calls it, in order), and
tf.debug.monitor over a jitted training step (issue 29: it raised a JitError blaming the
user's function for the monitor's own reads)."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError, DisposedError, JitError

BACKENDS = ["numpy", pytest.param("native", marks=pytest.mark.extra("numba", "jit"))]


def test_callback_eagerly_gets_read_only_arrays():
    seen = []
    x = tf.tensor([1.0, 2.0])
    tf.debug.callback(lambda a, b: seen.append((a.copy(), b.copy(), a.flags.writeable)),
                      x, x * 3)
    (a, b, writeable), = seen
    assert a.tolist() == [1, 2] and b.tolist() == [3, 6] and writeable is False


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_replay_calls_back_with_its_values(backend):
    seen = []

    def f(x):
        y = x.sin() * x
        tf.debug.callback(lambda a: seen.append(a.copy()), y)
        return y + 1
    jf = tf.jit(f, backend=backend)
    xs = [np.array([0.5, -1.0, 2.0], np.float32) * k for k in (1, 2, 3, 4)]
    outs = [jf(tf.tensor(x)).numpy() for x in xs]
    assert len(seen) == 4                     # the trace, then three replays
    for x, y, out in zip(xs, seen, outs):
        want = np.sin(x) * x                  # (within a few ulp: native's libm)
        np.testing.assert_allclose(y, want, rtol=1e-6)
        np.testing.assert_allclose(out, want + 1, rtol=1e-6)


def test_callbacks_run_in_program_order_around_assignments():
    w = tf.variable(tf.tensor([1.0, 2.0]), name="cb_order")
    seen = []

    def step():
        tf.debug.callback(lambda a: seen.append(("before", a.tolist())), w)
        w.assign(w * 2)
        tf.debug.callback(lambda a: seen.append(("after", a.tolist())), w)
    try:
        jstep = tf.jit(step, backend="numpy")
        jstep()
        jstep()
        assert seen == [("before", [1, 2]), ("after", [2, 4]),
                        ("before", [2, 4]), ("after", [4, 8])]
    finally:
        w.dispose()


def test_a_callbacks_own_ops_and_reads_are_not_traced():
    # what the callback computes with flowgrad runs eagerly, at the trace and every replay;
    # its reads of values are not the jitted function's (no JitError)
    seen = []

    def report(a):
        seen.append(tf.tensor(a).square().sum().item())

    def f(x):
        y = x + 1
        tf.debug.callback(report, y)
        return y * 2
    jf = tf.jit(f, backend="numpy")
    for v in (1.0, 2.0, 3.0):
        assert jf(tf.tensor([v, v])).numpy().tolist() == [2 * (v + 1)] * 2
    assert seen == [2 * (v + 1) ** 2 for v in (1.0, 2.0, 3.0)]
    assert "(backend 'numpy'; 2 kernels)" in jf.explain()      # x + 1, then * 2


def test_a_callback_inside_a_fused_chain_sees_its_intermediate():
    # 1 MB and more: the elementwise chain is fused block by block; the value the callback
    # reads in its middle must still be whole when it is called
    seen = []

    def f(x):
        y = x.exp() * 2
        tf.debug.callback(lambda a: seen.append(a.copy()), y)
        return (y + x).sqrt()
    x = np.linspace(0, 1, 600_000, dtype=np.float32)
    jf = tf.jit(f, backend="numpy", threads=1)
    for _ in range(3):
        out = jf(tf.tensor(x)).numpy()
    np.testing.assert_array_equal(seen[-1], np.exp(x) * np.float32(2))
    np.testing.assert_array_equal(out, np.sqrt(np.exp(x) * np.float32(2) + x))


def test_callback_arguments_are_checked():
    with pytest.raises(ArgumentError, match="fn must be a function"):
        tf.debug.callback(3, tf.scalar(1.0))
    with pytest.raises(ArgumentError, match=r"tensors\[1\] must be a Tensor"):
        tf.debug.callback(print, tf.scalar(1.0), [1, 2])
    t = tf.scalar(1.0)
    t.dispose()
    with pytest.raises(DisposedError):
        tf.debug.callback(print, t)


def _monitored_run(jit, backend="numpy", n=512, steps=5):
    rng = np.random.default_rng(3)
    w = tf.variable(tf.tensor(rng.standard_normal(n).astype(np.float32)), name="mon_jit_w")
    b = tf.variable(tf.scalar(0.5), name="mon_jit_b")
    opt = tf.train.adam(0.05)
    mon = tf.debug.monitor(opt)
    try:
        def step():
            return opt.minimize(lambda: (w * w * w).sum() + (b * w).square().mean(),
                                return_cost=True)
        run = tf.jit(step, backend=backend) if jit else step
        losses = [run().item() for _ in range(steps)]
        return losses, mon.history, w.numpy()
    finally:
        mon.detach()
        tf.dispose([w, b])
        opt.dispose()


@pytest.mark.parametrize("n", [512, 300_000])     # 300,000 floats: fused chains too
def test_a_monitor_records_a_jitted_step_as_an_eager_one(n):
    losses, h, w = _monitored_run(False, n=n)
    jlosses, jh, jw = _monitored_run(True, n=n)
    assert jlosses == losses and np.array_equal(jw, w)
    assert list(jh.steps) == list(h.steps) == list(range(5))
    np.testing.assert_array_equal(jh.loss, h.loss)
    np.testing.assert_array_equal(jh.global_norm, h.global_norm)
    for name in ("mon_jit_w", "mon_jit_b"):
        for metric in ("grad_norm", "update_ratio", "weight_norm", "max_abs", "zero_fraction"):
            np.testing.assert_array_equal(jh[name][metric], h[name][metric])


@pytest.mark.extra("numba", "jit")
def test_a_monitor_records_a_natively_compiled_step():
    losses, h, w = _monitored_run(False)
    jlosses, jh, jw = _monitored_run(True, backend="native")
    np.testing.assert_allclose(jlosses, losses, rtol=1e-5)
    np.testing.assert_allclose(jh["mon_jit_w"]["grad_norm"], h["mon_jit_w"]["grad_norm"],
                               rtol=1e-5)
    assert list(jh.steps) == list(range(5))


def test_instruments_under_jit_are_refused_naming_them():
    w = tf.variable(tf.tensor([1.0, 2.0]), name="mon_jit_ins")
    opt = tf.train.sgd(0.1)
    loss = lambda: w.square().sum()        # noqa: E731
    mon = tf.debug.monitor(opt, instruments="economy", loss_fn=lambda x: loss(),
                           inputs=tf.tensor([[1.0], [2.0]]))
    try:
        # the monitor named as the cause (not the user's function), its instruments listed,
        # and both ways out
        with pytest.raises(JitError, match=r"cannot replay tf\.debug\.monitor\(opt, "
                           r"instruments=\.\.\.\): the instruments \(\w+(, \w+)*\) run "
                           r"extra passes .* without instruments, or run the instrumented "
                           r"steps eagerly"):
            tf.jit(lambda: opt.minimize(loss), backend="numpy")()
    finally:
        mon.detach()
        w.dispose()
        opt.dispose()


def test_a_callback_that_does_not_fit_its_tensors_is_an_argument_error():
    x = tf.scalar(1.0)
    with pytest.raises(ArgumentError, match="takes 0 positional argument.*given 1"):
        tf.debug.callback(lambda: None, x)
    jf = tf.jit(lambda x: tf.debug.callback(lambda a, b: None, x) or x + 1, backend="numpy")
    with pytest.raises(ArgumentError, match="takes 2 positional argument.*given 1"):
        jf(x)
    # fn's own TypeError on the values: an ArgumentError naming fn and what it was given
    with pytest.raises(ArgumentError, match=r"fn \(len\) cannot take .*float32 \[\]"):
        tf.debug.callback(len, x)
