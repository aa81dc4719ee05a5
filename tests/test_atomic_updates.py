"""Optimizer updates are whole or nothing (issue #15, item 3): an error or a
KeyboardInterrupt at any point of minimize/apply_gradients leaves every variable, slot
and the step count exactly as before, or (once the commit started) exactly as after a
full step; disposed variables are refused by name and their slots dropped."""
import dis
import gc
import os
import signal
import sys
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.tensor import registered_variables
from flowgrad.train import fused, optimizers

TRAIN_DIR = os.path.dirname(optimizers.__file__)
_THREADING = threading.__file__

MAKERS = {
    "sgd": lambda: tf.train.sgd(0.1),
    "momentum": lambda: tf.train.momentum(0.1, 0.9),
    "nesterov": lambda: tf.train.momentum(0.1, 0.9, use_nesterov=True),
    "adagrad": lambda: tf.train.adagrad(0.1),
    "adadelta": lambda: tf.train.adadelta(0.5),
    "adam": lambda: tf.train.adam(0.05),
    "adamw": lambda: tf.train.adamw(0.05, weight_decay=0.1),
    "adamax": lambda: tf.train.adamax(0.05),
    "rmsprop": lambda: tf.train.rmsprop(0.05, momentum=0.5),
    "rmsprop_centered": lambda: tf.train.rmsprop(0.05, momentum=0.5, centered=True),
}
KINDS = list(MAKERS)

INITS = [np.array([[0.5, -1.0], [2.0, 0.25]], np.float32), np.array([1.5, -0.5], np.float32),
         np.array(0.75, np.float32)]
GRADS = [np.array([[0.1, -0.2], [0.3, 0.05]], np.float32), np.array([-1.0, 0.5], np.float32),
         np.array(0.25, np.float32)]


class Setup:
    """Three named float variables and an optimizer that has made one step (so the slots
    exist), with fixed gradients for the next step."""

    def __init__(self, kind, warm=True):
        self.vars = [tf.variable(tf.tensor(a), name=f"atomic_{i}") for i, a in enumerate(INITS)]
        self.opt = MAKERS[kind]()
        self.grads = [tf.keep(tf.tensor(g)) for g in GRADS]
        if warm:
            self.opt.apply_gradients(self.pairs())

    def pairs(self):
        return list(zip(self.grads, self.vars))

    def loss(self):
        w, b, c = self.vars
        return (tf.mat_mul(w, w).tanh().sum() + (b * b).sum() * c + c.square())

    def dispose(self):
        tf.dispose(self.vars + self.grads)
        self.opt.dispose()


def state(opt):
    """Every variable, slot and count of a step, bitwise (names as keys; the slots of
    disposed variables are dead state, dropped at the next update)."""
    live = [e for e in opt.slot_table.values() if not e[0]()._disposed]
    out = {"iterations": opt.iterations, "skipped": opt.skipped_steps,
           "slot_tables": sorted(e[0]().name for e in live)}
    for name, v in registered_variables().items():
        if name.startswith("atomic_"):
            a = v.numpy()
            out[name] = (a.dtype.str, a.shape, a.tobytes())
    for ref, slots in live:
        for sname, s in slots.items():
            a = s.numpy()
            out[f"{ref().name}/{sname}"] = (a.dtype.str, a.shape, a.tobytes())
    return out


def counts():
    gc.collect()
    m = tf.memory()
    return m.num_tensors, m.num_data_buffers, m.num_bytes


def reference(kind, step, warm=True):
    """(state before, state after) one uninterrupted ``step(setup)``."""
    s = Setup(kind, warm)
    try:
        before = state(s.opt)
        step(s)
        return before, state(s.opt)
    finally:
        s.dispose()


@pytest.fixture
def compiled_updates(monkeypatch):
    """Every eager update of arrays as its compiled loop (needs numba: the [jit] extra)."""
    pytest.importorskip("numba", reason="compiled updates need numba: "
                                        "pip install 'flowgrad[jit]'")
    monkeypatch.setattr(fused, "NATIVE_UPDATES", "always")


# ---------------------------------------------------------------- errors in the middle

@pytest.mark.parametrize("kind", KINDS)
def test_an_int32_variable_moves_nothing_every_time(kind):
    s = Setup(kind)
    i = tf.variable(tf.tensor([1, 2], dtype="int32"), name="atomic_int")
    try:
        before, mem = state(s.opt), counts()
        for _ in range(3):
            with pytest.raises(tf.DtypeError, match="variable 'atomic_int' is int32"):
                s.opt.minimize(lambda: s.loss() + i.cast("float32").sum())
            with pytest.raises(tf.DtypeError, match="'atomic_int'"):
                s.opt.apply_gradients(s.pairs() + [(tf.tensor([1.0, 1.0]), i)])
            assert state(s.opt) == before and counts() == mem
        s.opt.minimize(s.loss)                  # and the optimizer still works
        assert s.opt.iterations == before["iterations"] + 1
    finally:
        i.dispose()
        s.dispose()


class Boom(RuntimeError):
    pass


def fail_on_call(fn, k):
    """fn, raising Boom on its k-th call."""
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            raise Boom(f"call {k}")
        return fn(*args, **kwargs)
    return wrapped


def check_failures(kind, warm, monkeypatch, ks, fail):
    """For each k of ``ks``: ``fail(m, k)`` patches (in a monkeypatch context ``m``) what
    raises Boom at the k-th variable's update; that step changes nothing, and the same step
    again, unpatched, gives the state of a step that never failed."""
    _, after = reference(kind, lambda s: s.opt.apply_gradients(s.pairs()), warm)
    for k in ks:
        s = Setup(kind, warm)
        try:
            before, mem = state(s.opt), counts()
            with monkeypatch.context() as m:
                fail(m, k)
                with pytest.raises(Boom):
                    s.opt.apply_gradients(s.pairs())
            assert state(s.opt) == before and counts() == mem
            s.opt.apply_gradients(s.pairs())      # the same step again, now whole
            assert state(s.opt) == after
        finally:
            s.dispose()


@pytest.mark.parametrize("fused_path", [True, False], ids=["fused", "op_by_op"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("warm", [True, False], ids=["slots", "first_step"])
def test_an_error_in_the_middle_of_an_update_changes_nothing(kind, fused_path, warm,
                                                             monkeypatch):
    cls = type(MAKERS[kind]())
    if not fused_path:
        monkeypatch.setattr(optimizers, "_FUSED", {})

    def fail(m, k):
        if fused_path:
            m.setitem(optimizers._FUSED, cls, fail_on_call(optimizers._FUSED[cls], k))
        else:
            m.setattr(cls, "update_rule", fail_on_call(cls.update_rule, k))
    # the second or third variable's update fails
    check_failures(kind, warm, monkeypatch, (2, 3), fail)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("warm", [True, False], ids=["slots", "first_step"])
def test_an_error_in_a_compiled_update_changes_nothing(kind, warm, compiled_updates,
                                                       monkeypatch):
    from flowgrad import jit_native

    def fail(m, k):
        m.setattr(jit_native.Segment, "run", fail_on_call(jit_native.Segment.run, k))
    # the first or second variable's loop fails (the third is 0-d: NumPy scalars)
    check_failures(kind, warm, monkeypatch, (1, 2), fail)


# ---------------------------------------------------------------- interrupts anywhere

def _points(code):
    """Offsets in ``code`` where CPython checks for a pending signal: a loop's back-edge,
    and the instruction after a call (a call into C checks when it returns)."""
    pts, after_call = set(), False
    for ins in dis.get_instructions(code):
        if after_call:
            pts.add(ins.offset)
        after_call = ins.opname == "CALL"
        if ins.opname == "JUMP_BACKWARD":
            pts.add(ins.offset)
    return pts


_POINTS = {}
COMMIT = ("commit", "commit_fully", "_store", "_finish")    # train/update.py: the commit phase


class Interrupter:
    """A trace function raising KeyboardInterrupt at the k-th point where a real Ctrl-C
    could land: any Python function's entry, and inside flowgrad/train/ also every loop
    back-edge and every return from a call (k=None counts the points)."""

    def __init__(self, k=None):
        self.k, self.n, self.fired = k, 0, False
        self.commit_points = []        # (counting) the points inside the commit

    def _hit(self, frame):
        self.n += 1
        if frame.f_code.co_name in COMMIT:
            self.commit_points.append(self.n)
        if self.n == self.k:
            self.fired = True
            sys.settrace(None)
            return True
        return False

    def __call__(self, frame, event, arg):
        if event != "call" or self.fired:
            return None
        if frame.f_code.co_filename == _THREADING:
            # NOTE: not inside Python's own threading.Condition: an interrupt there (at
            # _acquire_restore) makes Condition.wait raise "release unlocked lock" and
            # breaks the condition, whoever called it (a CPython limitation, not ours)
            return None
        if self._hit(frame):
            raise KeyboardInterrupt
        if frame.f_code.co_filename.startswith(TRAIN_DIR):
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "opcode" and not self.fired:
            code = frame.f_code
            pts = _POINTS.get(code)
            if pts is None:
                pts = _POINTS[code] = _points(code)
            if frame.f_lasti in pts and self._hit(frame):
                raise KeyboardInterrupt
        return self._local


def run_interrupted(fn, k):
    tracer = Interrupter(k)
    sys.settrace(tracer)
    try:
        fn()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return tracer


def check_every_point(kind, step, warm=True, stride=1):
    """Interrupt ``step`` at every stride-th point (and at every point of the commit and
    its neighbours): each time, the state is exactly before or exactly after the step."""
    before, after = reference(kind, step, warm)
    assert before != after
    s = Setup(kind, warm)
    try:
        counted = run_interrupted(lambda: step(s), None)
        n = counted.n
        assert state(s.opt) == after
    finally:
        s.dispose()
    assert counted.commit_points
    ks = set(range(1 + KINDS.index(kind) % stride, n + 1, stride)) | {n}
    near_commit = {k + d for k in counted.commit_points for d in (-1, 0, 1)}
    ks |= near_commit
    seen, fired, base = {"before": 0, "after": 0}, 0, counts()
    # (the number of points varies a little from run to run: finalizers run at times)
    for i, k in enumerate(sorted(ks)):
        s = Setup(kind, warm)
        try:
            t = run_interrupted(lambda: step(s), k)
            got = state(s.opt)
            assert got in (before, after), f"{kind}: half a step after an interrupt at " \
                                           f"point {k} of {n}"
            seen["before" if got == before else "after"] += 1
            fired += t.fired
        finally:
            s.dispose()
        # memory counts exact once all is disposed (gc is slow: not after every run)
        if k in near_commit or i % 5 == 0:
            assert counts() == base, f"{kind}: counts off after an interrupt at {k}"
    assert seen["before"] and seen["after"] and fired > 0.9 * len(ks)
    return n


# The default run samples the points (every 25th, and every point in and around the
# commit); `pytest -m slow` (run by .ci/run) sweeps every point for Adam and every 7th
# for the others: minutes, since each point is a traced run of the whole step.
SAMPLED, FULL = 25, {"adam": 1}


def _sweep_apply(kind, stride):
    check_every_point(kind, lambda s: s.opt.apply_gradients(s.pairs()), stride=stride)


@pytest.mark.parametrize("kind", KINDS)
def test_an_interrupt_at_any_point_of_apply_gradients_is_all_or_nothing(kind):
    _sweep_apply(kind, SAMPLED)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_an_interrupt_at_every_point_of_apply_gradients_is_all_or_nothing(kind):
    _sweep_apply(kind, FULL.get(kind, 7))


@pytest.mark.parametrize("kind", ["adam", "rmsprop_centered"])
def test_an_interrupt_at_any_point_of_a_compiled_update_is_all_or_nothing(kind,
                                                                           compiled_updates):
    check_every_point(kind, lambda s: s.opt.apply_gradients(s.pairs()), stride=SAMPLED)
    check_every_point(kind, lambda s: s.opt.apply_gradients(s.pairs()), warm=False,
                      stride=SAMPLED)


@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop_centered"])
def test_an_interrupt_at_any_point_of_a_first_step_is_all_or_nothing(kind):
    check_every_point(kind, lambda s: s.opt.apply_gradients(s.pairs()), warm=False,
                      stride=SAMPLED)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_an_interrupt_at_any_point_of_minimize_is_all_or_nothing(kind):
    n = check_every_point(kind, lambda s: tf.tidy(lambda: s.opt.minimize(s.loss)),
                          stride=SAMPLED)
    assert n > 100


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_an_interrupt_at_every_ninth_point_of_minimize_is_all_or_nothing(kind):
    check_every_point(kind, lambda s: tf.tidy(lambda: s.opt.minimize(s.loss)), stride=9)


@pytest.mark.slow      # (tests/test_engine_state.py times interrupts into minimize too)
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_timer_interrupts_inside_minimize_leave_whole_steps():
    before, after = reference("adam", lambda s: s.opt.minimize(s.loss))
    rng = np.random.default_rng(15)

    def alarm(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, alarm)
    hits, base = 0, counts()
    try:
        for i in range(150):
            s = Setup("adam")
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, float(rng.uniform(1e-5, 2e-3)))
                    try:
                        tf.tidy(lambda: s.opt.minimize(s.loss))
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except KeyboardInterrupt:
                    hits += 1
                got = state(s.opt)
                assert got in (before, after)
            finally:
                s.dispose()
            if i % 5 == 0:
                assert counts() == base
    finally:
        signal.signal(signal.SIGALRM, old)
    assert hits


# ---------------------------------------------------------------- skip_nonfinite

def test_a_skipped_step_changes_nothing_but_the_skip_count():
    s = Setup("adam")
    try:
        before = state(s.opt)
        bad = s.pairs()[:2] + [(tf.scalar(float("nan")), s.vars[2])]
        with pytest.warns(tf.train.NonFiniteGradientWarning, match="'atomic_2'"):
            assert s.opt.apply_gradients(bad, skip_nonfinite=True) is False
        after = state(s.opt)
        assert after.pop("skipped") == before.pop("skipped") + 1 and after == before
    finally:
        s.dispose()


# ---------------------------------------------------------------- disposed variables

def test_updating_a_disposed_variable_is_an_error_naming_it():
    s = Setup("momentum")
    gone = tf.variable(tf.tensor([1.0, 2.0]), name="atomic_gone")
    try:
        s.opt.apply_gradients([(tf.tensor([1.0, 1.0]), gone)])
        gone.dispose()
        before = state(s.opt)
        with pytest.raises(tf.DisposedError, match="variable 'atomic_gone' is disposed"):
            s.opt.apply_gradients(s.pairs() + [(tf.tensor([1.0, 1.0]), gone)])
        assert state(s.opt) == before
        with pytest.raises(tf.DisposedError, match="variable 'atomic_gone' is disposed"):
            s.opt.minimize(s.loss, var_list=s.vars + [gone])
        assert state(s.opt) == before
        assert s.opt.apply_gradients([(None, gone)]) is True     # no gradient: no update
    finally:
        s.dispose()


def test_slots_of_a_disposed_variable_are_dropped():
    s = Setup("adam")
    try:
        names = lambda: [r.name for r in s.opt.get_weights()]          # noqa: E731
        assert "atomic_1/m" in names()
        n_before = tf.memory().num_tensors
        s.vars[1].dispose()
        assert "atomic_1/m" not in names() and "atomic_1/v" not in names()
        assert tf.memory().num_tensors == n_before - 1 - 2       # the variable, m and v
        assert len(s.opt.slot_table) == 2
        s.opt.apply_gradients([s.pairs()[0]])
        assert len(s.opt.slot_table) == 2
        # a long-lived optimizer: variables come and go, its state does not grow
        for i in range(5):
            v = tf.variable(tf.tensor([1.0]), name=f"atomic_tmp{i}")
            s.opt.apply_gradients([(tf.tensor([1.0]), v)])
            v.dispose()
        s.opt.apply_gradients([s.pairs()[0]])
        assert sorted(e[0]().name for e in s.opt.slot_table.values()) == ["atomic_0", "atomic_2"]
    finally:
        s.dispose()


def test_get_weights_and_set_weights_after_a_dispose():
    s = Setup("rmsprop")
    try:
        saved = s.opt.get_weights()
        s.vars[2].dispose()
        fresh = tf.train.rmsprop(0.05, momentum=0.5)
        with pytest.raises(tf.ArgumentError, match="no variable named 'atomic_2'"):
            fresh.set_weights(saved)
        assert fresh.iterations == 0 and not fresh.slot_table          # all or nothing
        fresh.set_weights([w for w in saved if not w.name.startswith("atomic_2/")])
        assert [w.name for w in fresh.get_weights()] == \
            [w.name for w in s.opt.get_weights()]
        fresh.dispose()
    finally:
        s.dispose()


def test_set_weights_is_all_or_nothing():
    s = Setup("adam")
    try:
        before = state(s.opt)
        saved = s.opt.get_weights()
        bad = [tf.scalar(7, "int32"), saved[1], ("atomic_0/q", saved[2].tensor)]
        with pytest.raises(tf.ArgumentError, match="has no slot 'q'"):
            s.opt.set_weights(bad)
        assert state(s.opt) == before
    finally:
        s.dispose()


def test_updating_one_variable_twice_in_a_step_is_refused():
    s = Setup("sgd")
    try:
        before = state(s.opt)
        with pytest.raises(tf.ArgumentError, match="'atomic_0' has two gradients"):
            s.opt.apply_gradients(s.pairs() + [s.pairs()[0]])
        assert state(s.opt) == before
    finally:
        s.dispose()


# ---------------------------------------------------------------- memory and tf.jit

@pytest.mark.parametrize("kind", KINDS)
def test_steps_keep_memory_counts_flat(kind):
    s = Setup(kind)
    try:
        mem = counts()
        for _ in range(3):
            s.opt.apply_gradients(s.pairs())
            tf.tidy(lambda: s.opt.minimize(s.loss))
        assert counts() == mem
    finally:
        s.dispose()


@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop_centered", "adadelta"])
def test_a_jitted_step_from_a_fresh_optimizer_equals_the_eager_one(kind):
    runs = []
    for jit in (False, True):
        s = Setup(kind, warm=False)
        # a variable whose buffer is shared with a live tensor (a replay must count the
        # new buffer it hands the variable)
        held = tf.tensor([0.5, 0.25])
        extra = tf.variable(held, name="atomic_shared")
        try:
            loss = lambda: s.loss() + (extra * extra).sum()                 # noqa: E731
            step = (lambda: s.opt.minimize(loss))
            if jit:
                step = tf.jit(step)
            tf.tidy(step)
            mem = counts()
            for _ in range(4):
                tf.tidy(step)
            assert counts() == mem
            runs.append((state(s.opt), extra.numpy(),
                         [(w.name, w.tensor.numpy()) for w in s.opt.get_weights()]))
        finally:
            extra.dispose()
            held.dispose()
            s.dispose()
    (a, ea, wa), (b, eb, wb) = runs
    assert a == b and a["iterations"] == 5
    np.testing.assert_array_equal(ea, eb)
    assert [n for n, _ in wa] == [n for n, _ in wb]
    for (_, x), (_, y) in zip(wa, wb):
        np.testing.assert_array_equal(x, y)


def test_fused_kernels_return_fresh_arrays():
    # the commit hands the kernels' outputs to variables: they must alias no input
    from flowgrad import engine as E
    B = E.B
    for kind in KINDS:
        opt = MAKERS[kind]()
        rule = optimizers._FUSED[type(opt)]
        from flowgrad import buffer_pool
        big = (buffer_pool.MIN_ELEMENTS,)      # fresh arrays from the pool: still fresh
        for shape in [(3,), (), big, big]:
            w = np.full(shape, 0.5, np.float32)
            g = np.full(shape, 0.25, np.float32)
            slots = tuple(np.full(shape, 0.125, np.float32) for _ in opt.slot_names)
            if shape == big:
                buffer_pool.clear()               # (an empty pool: what comes back shows)
            outs = fused._update(B, w, g, slots, rule, opt)
            if shape == big:
                # a rule's temporary goes back to the pool (its shape is wanted now)
                temps = kind in ("adadelta", "adam", "adamw", "rmsprop", "rmsprop_centered")
                assert buffer_pool.pooled_bytes() == 4 * big[0] * temps, kind
            if shape == big:                      # (what a commit's carriers give back)
                given, outs = list(outs), None
                before = buffer_pool.pooled_bytes()
                while given:
                    a = given.pop()
                    buffer_pool.offer(a)
                    del a
                assert buffer_pool.pooled_bytes() > before
                outs = fused._update(B, w, g, slots, rule, opt)
            assert len(outs) == 1 + len(slots)
            for o in outs:
                assert o.shape == shape and o.dtype == np.float32
                assert not any(np.shares_memory(o, x) for x in (w, g) + slots)
            for i, o in enumerate(outs):
                assert not any(np.shares_memory(o, p) for p in outs[i + 1:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_0d_variable_steps_as_a_1_element_one_to_the_bit(dtype):
    # the 0-d path computes on NumPy scalars (fused._Scalars), the 1-element path with the
    # ufuncs: same operations, same roundings, for every rule over random steps
    from flowgrad import engine as E
    rng = np.random.default_rng(7)
    for kind in KINDS:
        opt = MAKERS[kind]()
        rule = optimizers._FUSED[type(opt)]
        for _ in range(20):
            w = dtype(rng.standard_normal())
            g = dtype(rng.standard_normal() * 10.0 ** rng.integers(-8, 8))
            # (rmsprop's centered mg small beside its rms: a real square root)
            slots = [dtype(abs(rng.standard_normal()) + 1) if name != "mg" else
                     dtype(0.1 * rng.standard_normal()) for name in opt.slot_names]
            opt.iterations = int(rng.integers(0, 50))
            scalar = fused._update(E.B, np.array(w), g, tuple(np.array(s) for s in slots),
                                   rule, opt)
            vector = fused._update(E.B, np.array([w]), np.array([g]),
                                   tuple(np.array([s]) for s in slots), rule, opt)
            assert len(scalar) == len(vector)
            for a, b in zip(scalar, vector):
                # (a NumPy scalar: immutable, so no one else can change the variable's
                # value, and the next step's operators on it stay scalar arithmetic)
                assert type(a) is np.dtype(dtype).type and a.dtype == dtype, kind
                assert a.tobytes() == b.tobytes(), (kind, a, b)
