"""An optimizer's eager update runs as one compiled loop where numba is installed
(flowgrad/train/fused.py, "the update, native"): the same bits as the NumPy steps for every
optimizer and dtype, the auto policy (compiled once the NumPy steps have cost what
compiling would), settings that change between steps, threads, and the switch that turns
it off."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import jit_native
from flowgrad.train import fused
from test_atomic_updates import MAKERS       # (every optimizer configuration)

pytestmark = pytest.mark.extra("numba", "jit")

# a matrix whose gradient is a product's, a vector whose gradient is a broadcast view of
# ones (sum's), and one of two elements: every layout the loop is handed
SHAPES = [(30, 7), (7,), (2,)]


STEPS = 5


@pytest.fixture
def loops_run(monkeypatch):
    """The number of compiled update loops run (jit_native.Segment.run) so far."""
    calls = [0]
    run = jit_native.Segment.run

    def counted(self, *args):
        calls[0] += 1
        return run(self, *args)
    monkeypatch.setattr(jit_native.Segment, "run", counted)
    return calls


def _train(make, dtype, mode, steps=STEPS, seed=1):
    """The variables and slots after ``steps`` minimize calls with NATIVE_UPDATES = mode."""
    fused.NATIVE_UPDATES = mode
    rng = np.random.default_rng(seed)
    vs = [tf.variable(tf.tensor(rng.standard_normal(s).astype(dtype))) for s in SHAPES]
    xs = tf.tensor(rng.standard_normal((5, 30)).astype(dtype))
    opt = make()

    def loss():
        total = xs.mat_mul(vs[0]).tanh().sum()
        if len(vs) > 1:
            total = total + vs[1].sum() * 0.5
        if len(vs) > 2:
            total = total + vs[2].square().sum()
        return total
    for _ in range(steps):
        opt.minimize(loss)
    out = [v.numpy().copy() for v in vs] + \
        [s.numpy().copy() for entry in opt.slot_table.values() for s in entry[1].values()]
    tf.dispose(vs + [xs])
    opt.dispose()
    return out


@pytest.fixture(autouse=True)
def _restore():
    was = fused.NATIVE_UPDATES
    yield
    fused.NATIVE_UPDATES = was


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    ints = np.uint32 if a.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(a.view(ints), b.view(ints))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_the_compiled_update_gives_the_numpy_steps_bits(name, dtype, loops_run):
    numpy = _train(MAKERS[name], dtype, "0")
    assert loops_run[0] == 0
    native = _train(MAKERS[name], dtype, "always")
    assert loops_run[0] == STEPS * len(SHAPES)         # (every update compiled)
    assert len(numpy) == len(native) >= len(SHAPES)
    # (centered RMSProp's sqrt(ms - (mg^2 + eps)) is NaN where the variance estimate is
    # under eps: NaN's bits the same too)
    assert all(np.isfinite(a).all() for a in numpy) or name == "rmsprop_centered"
    for a, b in zip(numpy, native):
        _same_bits(a, b)


def test_auto_compiles_once_the_numpy_steps_have_cost_what_compiling_would(monkeypatch,
                                                                            loops_run):
    jit_native.load_numba()         # (its import is not part of the estimate then)
    monkeypatch.setattr(jit_native.Segment, "in_process", lambda self: False)
    # an hour to compile: five steps never pay for it
    monkeypatch.setattr(jit_native.Segment, "build_seconds", lambda self: 3600.0)
    monkeypatch.setattr("test_native_updates.SHAPES", [(30, 11), (11,)])
    _train(MAKERS["adam"], "float32", "auto")
    assert loops_run[0] == 0
    # a nanosecond: the first update's NumPy steps pay for it, and every later one is native
    monkeypatch.setattr(jit_native.Segment, "build_seconds", lambda self: 1e-9)
    monkeypatch.setattr("test_native_updates.SHAPES", [(30, 13), (13,)])
    numpy = _train(MAKERS["adam"], "float32", "0")
    auto = _train(MAKERS["adam"], "float32", "auto")
    assert loops_run[0] == (STEPS - 1) * 2
    for a, b in zip(numpy, auto):
        _same_bits(a, b)


def _changing(mode):
    """Momentum whose settings change between steps: its momentum (a number, then an int),
    then its Nesterov flag (the loop's very kernels)."""
    fused.NATIVE_UPDATES = mode
    rng = np.random.default_rng(3)
    w = tf.variable(tf.tensor(rng.standard_normal((4, 5)).astype("float32")))
    opt = tf.train.momentum(0.1, 0.9)
    out = []

    def loss():
        return (w * w * w).sum()
    for change in (None, ("momentum", 0.5), ("momentum", 1), ("use_nesterov", True)):
        if change:
            setattr(opt, *change)
        for _ in range(2):
            opt.minimize(loss)
        out.append(w.numpy().copy())
    w.dispose()
    opt.dispose()
    return out


def test_settings_changed_between_steps_are_read_again(loops_run):
    numpy = _changing("0")
    native = _changing("always")
    assert loops_run[0] == 8
    for a, b in zip(numpy, native):
        _same_bits(a, b)
    assert not np.array_equal(numpy[0], numpy[1])


def test_two_threads_updating_at_once_get_the_sequential_bits(loops_run):
    numpy = [_train(MAKERS[k], "float32", "0") for k in ("adam", "rmsprop")]
    fused.NATIVE_UPDATES = "always"
    got, errors = {}, []
    start = threading.Barrier(2)

    def run(k):
        try:
            start.wait()
            got[k] = _train(MAKERS[k], "float32", "always", steps=STEPS)
        except BaseException as e:          # (reported below)
            errors.append(e)
    threads = [threading.Thread(target=run, args=(k,)) for k in ("adam", "rmsprop")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert loops_run[0] == 2 * STEPS * len(SHAPES)
    for ref, k in zip(numpy, ("adam", "rmsprop")):
        for a, b in zip(ref, got[k]):
            _same_bits(a, b)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_compiled_update_changes_no_array_anyone_holds(name, loops_run):
    fused.NATIVE_UPDATES = "always"
    v = tf.variable(tf.tensor(np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)))
    g = tf.tensor(np.full((3, 4), 0.5, "float32"))
    opt = MAKERS[name]()
    try:
        opt.apply_gradients([(g, v)])
        slots = [s for entry in opt.slot_table.values() for s in entry[1].values()]
        held = [v.numpy(), g.numpy()] + [s.numpy() for s in slots]
        copies = [h.copy() for h in held]
        opt.apply_gradients([(g, v)])
        assert loops_run[0] == 2
        for h, c in zip(held, copies):
            _same_bits(h, c)
        assert not np.array_equal(v.numpy(), copies[0])
    finally:
        tf.dispose([v, g])
        opt.dispose()


@pytest.mark.parametrize("value, mode", [("0", "0"), ("off", "0"), ("always", "always"),
                                         ("auto", "auto"), ("", "auto"), ("yes", "auto")])
def test_the_environment_sets_the_mode(value, mode):
    code = "from flowgrad.train import fused; print(fused.NATIVE_UPDATES)"
    run = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                         text=True, env={**os.environ, "FLOWGRAD_NATIVE_UPDATES": value},
                         check=True)
    assert run.stdout.strip() == mode
    # (a value it does not know says so, naming those it knows)
    assert ("none of 0, off, auto, always" in run.stderr) == (value == "yes"), run.stderr


def test_an_optimizer_whose_updates_were_compiled_is_freed(loops_run):
    import gc
    import weakref
    fused.NATIVE_UPDATES = "always"
    v = tf.variable(tf.tensor(np.ones((4, 3), "float32")))
    opt = tf.train.adam(0.1)
    opt.minimize(lambda: (v * v).sum())
    assert loops_run[0] == 1
    ref = weakref.ref(opt)
    opt.dispose()
    del opt
    gc.collect()
    assert ref() is None        # (nothing the compiled update keeps holds it)
    v.dispose()
