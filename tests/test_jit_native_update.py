"""tf.jit's native backend compiles an optimizer's update with the gradient kernels before
it (flowgrad/train/fused.py ``expand``, flowgrad/jit_native.py ``expand``): the same bits
as eager steps for every optimizer, numbers read at every step, settings checked."""
import re

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import buffer_pool
from flowgrad import engine as E
from flowgrad.errors import JitError
from test_atomic_updates import MAKERS       # (every optimizer configuration)
from test_jit_native import always_native    # noqa: F401 (a fixture)

# (every segment compiled, whatever the cost model says: the tests check results)
pytestmark = [pytest.mark.extra("numba", "jit"), pytest.mark.usefixtures("always_native")]

OPTIMIZERS = {**MAKERS,
              "adam-schedule": lambda: tf.train.adam(tf.train.exponential_decay(0.02, 3, 0.5))}


def _train(make, x0, target, backend, steps=7):
    """Variable, slots and step count after ``steps`` minimize calls (eager: backend None)."""
    w = tf.variable(tf.tensor(x0))
    t = tf.tensor(target)
    opt = make()

    def step():
        # (arithmetic only: libm's sin would differ from NumPy's by an ulp or two)
        return opt.minimize(lambda: ((w - t).square() * 0.5 + w * w * 0.1).sum(),
                            return_cost=True)
    run = tf.jit(step, backend=backend) if backend else step
    costs = [tf.tidy(lambda: run().numpy().copy()) for _ in range(steps)]
    slots = [s.numpy().copy() for entry in opt.slot_table.values() for s in entry[1].values()]
    out = (costs, w.numpy().copy(), slots, opt.iterations)
    plan = run.explain() if backend else None
    w.dispose()
    opt.dispose()
    return out, plan


@pytest.mark.parametrize("shape", [(), (3, 4), (1000,)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_compiled_update_gives_eagers_bits(name, dtype, shape):
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=shape).astype(dtype)
    target = rng.normal(size=shape).astype(dtype)
    (c0, w0, s0, i0), _ = _train(OPTIMIZERS[name], x0, target, None)
    (c1, w1, s1, i1), plan = _train(OPTIMIZERS[name], x0, target, "native")
    assert "ApplyUpdate " not in plan and "ApplyUpdateSlots" not in plan, plan
    assert "Numbers" in plan and "native  " in plan, plan
    assert w1.dtype == w0.dtype and i1 == i0 == 7
    # (TF.js's centered RMSProp takes sqrt(ms - (mg^2 + eps)): NaN where the variance
    # estimate is under eps, eagerly too)
    assert np.isfinite(w0).all() or name == "rmsprop_centered"
    for a, b in zip([w0] + s0 + c0, [w1] + s1 + c1):
        assert np.array_equal(a, b, equal_nan=True), (a, b)     # arithmetic: the same bits


def test_two_optimizers_and_one_used_twice_in_one_step():
    def run(backend):
        a = tf.variable(tf.tensor(np.linspace(-1, 1, 6).astype(np.float32)))
        b = tf.variable(tf.tensor(np.linspace(2, 3, 6).astype(np.float32)))
        adam, mom = tf.train.adam(0.05), tf.train.momentum(0.1, 0.5)

        def step():
            adam.minimize(lambda: (a * b - 1).square().sum(), var_list=[a])
            mom.minimize(lambda: (a - b).square().sum(), var_list=[b])
            adam.minimize(lambda: (a * a).sum(), var_list=[a])   # (step count: 2 per call)
        f = tf.jit(step, backend=backend) if backend else step
        for _ in range(5):
            tf.tidy(f)
        out = a.numpy().copy(), b.numpy().copy(), adam.iterations, mom.iterations
        tf.dispose([a, b])
        return out
    eager, native = run(None), run("native")
    assert eager[2:] == native[2:] == (10, 5)
    np.testing.assert_array_equal(native[0], eager[0])
    np.testing.assert_array_equal(native[1], eager[1])


def _numbers_steps(plan):
    return sum(int(m.group(1) or 1) for m in re.finditer(r"Numbers(?: x(\d+))?:", plan))


def test_one_read_of_the_numbers_per_optimizer_between_commits():
    # three variables of one optimizer read its numbers once; a second minimize after the
    # commit (the step count moved on) reads them again
    def run(backend):
        vs = [tf.variable(tf.tensor(np.linspace(-1, 1, n).astype(np.float32) * k))
              for k, n in ((1, 5), (2, 7), (3, 1))]
        adam = tf.train.adam(0.05)

        def step():
            adam.minimize(lambda: sum((v * v - 1).square().sum() for v in vs))
            return adam.minimize(lambda: sum((v - 0.5).abs().sum() for v in vs),
                                 return_cost=True)
        f = tf.jit(step, backend=backend) if backend else step
        costs = [tf.tidy(lambda: f().numpy().copy()) for _ in range(4)]
        out = [v.numpy().copy() for v in vs] + costs, adam.iterations
        plan = f.explain() if backend else None
        tf.dispose(vs)
        adam.dispose()
        return out, plan
    (eager, i0), _ = run(None)
    (native, i1), plan = run("native")
    assert i0 == i1 == 8
    assert _numbers_steps(plan) == 2, plan
    for a, b in zip(eager, native):
        np.testing.assert_array_equal(a, b)


def test_settings_and_learning_rate_are_read_at_every_step():
    def run(backend):
        w = tf.variable(tf.tensor(np.array([1.0, -2.0, 3.0], np.float32)))
        opt = tf.train.adam(0.1)

        def step():
            opt.minimize(lambda: w.square().sum())
        f = tf.jit(step, backend=backend) if backend else step
        for i in range(6):
            if i == 3:
                opt.beta1 = 0.5             # a Python float: read by the next step
                opt.set_learning_rate(0.01)
            tf.tidy(f)
        out = w.numpy().copy()
        w.dispose()
        return out
    np.testing.assert_array_equal(run("native"), run(None))


def test_a_setting_of_another_type_is_an_error_naming_it_and_nothing_changes():
    w = tf.variable(tf.tensor(np.array([1.0, 2.0], np.float32)))
    opt = tf.train.adam(0.1)
    f = tf.jit(lambda: opt.minimize(lambda: w.square().sum()), backend="native")
    tf.tidy(f)
    before, it = w.numpy().copy(), opt.iterations
    # NOTE: NumPy computes with an np.float64 setting in float64: another result
    opt.beta1 = np.float64(0.8)
    with pytest.raises(JitError, match=r"Adam\.beta1 is a float64, a float when"):
        tf.tidy(f)
    np.testing.assert_array_equal(w.numpy(), before)
    assert opt.iterations == it
    w.dispose()


def test_a_flag_that_changed_is_an_error_naming_it():
    w = tf.variable(tf.tensor(np.array([1.0, 2.0], np.float32)))
    opt = tf.train.momentum(0.1, 0.9)
    f = tf.jit(lambda: opt.minimize(lambda: w.square().sum()), backend="native")
    tf.tidy(f)
    opt.use_nesterov = True
    with pytest.raises(JitError, match=r"Momentum\.use_nesterov is True, False when"):
        tf.tidy(f)
    w.dispose()


def test_the_new_values_are_fresh_arrays_never_the_replays_buffers():
    w = tf.variable(tf.tensor(np.arange(1000, dtype=np.float32)))
    opt = tf.train.adam(0.1)
    f = tf.jit(lambda: opt.minimize(lambda: w.square().sum()), backend="native")
    tf.tidy(f)
    held = w.numpy()
    copy = held.copy()
    for _ in range(3):
        tf.tidy(f)
    np.testing.assert_array_equal(held, copy)        # an array of step 1, untouched
    assert not np.array_equal(w.numpy(), copy)
    w.dispose()


def test_new_values_are_written_where_the_values_of_two_steps_ago_were(monkeypatch):
    # the commit gives the values it replaced to the buffer pool, and the compiled update
    # writes the next step's into them: no fresh arrays (a MB one page-faults on each page)
    if not buffer_pool.enabled:
        pytest.skip("FLOWGRAD_MEMORY_POLICY=system: no buffer pool")
    w = tf.variable(tf.tensor(np.arange(100_000, dtype=np.float32)))
    opt = tf.train.adam(0.1)
    f = tf.jit(lambda: opt.minimize(lambda: w.square().sum()), backend="native")
    for _ in range(3):
        tf.tidy(f)
    made = []
    empty = E.B.empty
    monkeypatch.setattr(E.B, "empty", lambda *a, **k: made.append(a) or empty(*a, **k))
    for _ in range(5):
        tf.tidy(f)
    assert made == []
    w.dispose()
