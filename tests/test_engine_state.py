"""The engine's state under threads, interrupts and long-lived tapes (issue 15, items 1, 2, 4).

Threads own their scopes, recording gate and sessions; an interrupt anywhere leaves the
engine as before the interrupted call; a tape pins only the tensors it recorded.
"""
import gc
import queue
import signal
import sys
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import buffer_pool
from flowgrad import engine as E
from flowgrad import scopes, thread_state


def _clean():
    """This thread's engine is at rest: no scope, no recording, no backward pass."""
    st = thread_state.state()
    return (st.stack, st.scope, st.depth, st.recording, st.in_backward) == ([], None, 0,
                                                                            False, 0)


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond so that interleavings actually happen."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _rss_mb():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20
    except OSError:
        pytest.skip("RSS is read from /proc (Linux only)")


def _in_threads(worker, n):
    """Run ``worker(k)`` in n threads at once; the errors they raised."""
    errors = []

    def run(k):
        try:
            worker(k)
        except BaseException as e:          # noqa: BLE001 - reported by the test
            errors.append(f"thread {k}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


# ---------------------------------------------------------------- threads

# 7 elements, and enough that kernels write into pooled buffers (flowgrad/buffer_pool.py)
SIZES = [7, 2 * buffer_pool.MIN_ELEMENTS]


@pytest.mark.parametrize("n", SIZES)
def test_threads_compute_gradients_concurrently_with_exact_values(fast_switching, n):
    gc.collect()
    before = tf.memory().num_tensors
    errors, results = [], {}

    def worker(k):
        try:
            c = float(k + 1)
            x = tf.tensor(np.linspace(-1, 1, n) * c, dtype="float64")
            for i in range(150 if n < 100 else 15):
                # d/dx sum(c x^3 + x^2) = 3 c x^2 + 2 x, worked out by hand
                g = tf.tidy(lambda: tf.grad(lambda v: (v * v * v * c + v * v).sum())(x))
                want = 3 * c * x.numpy() ** 2 + 2 * x.numpy()
                if not np.allclose(g.numpy(), want, rtol=1e-12, atol=1e-12):
                    errors.append(f"thread {k} step {i}: wrong gradient {g.numpy()}")
                    return
                g.dispose()
            x.dispose()
            results[k] = True
        except BaseException as e:          # noqa: BLE001 - reported by the test
            errors.append(f"thread {k}: {type(e).__name__}: {e}")

    errors += _in_threads(worker, 4)
    assert not errors, errors[:3]
    assert len(results) == 4
    gc.collect()
    assert tf.memory().num_tensors == before       # counters exact over the threads


def test_persistent_tapes_in_threads_do_not_see_each_other(fast_switching):
    errors = []

    def worker(k):
        try:
            x = tf.scalar(float(k + 2), dtype="float64")
            for _ in range(60):
                with tf.GradientTape(persistent=True) as tape:
                    tape.watch(x)
                    y = x * x * x
                d1 = tape.gradient(y, x).item()
                d2 = tape.gradient(y, x)          # a second call: persistent
                if d1 != 3 * (k + 2) ** 2 or d2.item() != d1:
                    errors.append((k, d1))
                del tape
        except BaseException as e:          # noqa: BLE001
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]


def test_a_hook_runs_while_another_thread_runs_backward_passes(fast_switching):
    """A pass in another thread must never switch off a hook this thread just registered:
    it once reset the hook flag on seeing the table empty, between register_hook's two
    writes, and about 1% of the hooked passes here skipped their hook (a hook that clips or
    replaces a gradient then gives a wrong number, silently)."""
    stop = threading.Event()
    errors = []

    def other():
        try:
            x = tf.scalar(1.0)
            while not stop.is_set():
                tf.grad(lambda t: t * t)(x)
        except BaseException as e:          # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    missed = 0
    try:
        x = tf.scalar(1.0)
        for _ in range(1500):
            seen = []

            def f(x):
                y = x * 3
                y.register_hook(lambda g: seen.append(g.item()))
                return y * y
            assert tf.grad(f)(x).item() == 18.0
            missed += seen != [6.0]
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    assert missed == 0, f"{missed} of 1500 passes skipped their hook"


def test_a_pass_after_the_hooks_are_gone_frees_gradients_as_it_goes(monkeypatch):
    """Once the hooked nodes are gone, first-order passes run LITE again (engine.LITE)."""
    from flowgrad.ops import PRIMITIVES
    sin = PRIMITIVES["Sin"]
    rule, lite = sin.vjp, []

    def spy(*args, **kw):
        lite.append(thread_state.state().lite)
        return rule(*args, **kw)
    monkeypatch.setattr(sin, "vjp", spy)
    x = tf.scalar(0.5)

    def hooked(t):
        y = t.sin()
        y.register_hook(lambda g: None)
        return y.sin()
    tf.grad(hooked)(x)
    gc.collect()
    tf.grad(lambda t: t.sin().sin())(x)
    assert lite == [False, False, True, True]


def _trace_while(other, x):
    """Trace tf.jit(lambda t: t * 2 + 1)(x) in this thread while ``other(started, done)``
    runs in a second thread, switching its layer on once the trace has begun and using it
    after the trace has ended; returns (the jitted function, other's result)."""
    started, traced, done = threading.Event(), threading.Event(), threading.Event()
    out = {}

    def f(t):
        started.set()
        assert traced.wait(20)
        return t * 2 + 1
    jf = tf.jit(f)

    def run():
        try:
            out["r"] = other(started, traced, done)
        except BaseException as e:          # noqa: BLE001
            out["r"] = e
    th = threading.Thread(target=run)
    th.start()
    try:
        jf(x)
    finally:
        done.set()
        th.join(60)
    return jf, out["r"]


def test_a_trace_ending_leaves_another_thread_s_vmap_batched():
    """tf.jit's trace and tf.vmap's batching both wrap the kernel entry; a trace that ended
    during another thread's vmap used to put back the entry it had found, and the vmap ran
    the rest of its function unbatched (a (2, 2, 3) array of wrong values, no error)."""
    from flowgrad import interceptors
    rows = np.arange(6, dtype=np.float32).reshape(2, 3)

    def other(started, traced, done):
        assert started.wait(20)

        def g(row):
            traced.set()
            assert done.wait(20)             # the trace has ended by now
            return row.sum() * row
        return tf.vmap(g)(tf.tensor(rows)).numpy()
    x = tf.tensor(np.arange(4, dtype=np.float32))
    jf, got = _trace_while(other, x)
    assert not isinstance(got, BaseException), got
    np.testing.assert_array_equal(got, rows.sum(1, keepdims=True) * rows)
    # the trace is whole (another thread's vmap does not make it eager) and replays
    assert list(jf.traces.values())[0] is not None and len(jf.traces) == 1
    y = tf.tensor(np.array([5, 6, 7, 8], np.float32))
    np.testing.assert_array_equal(jf(y).numpy(), [11, 13, 15, 17])
    assert E.run_kernel is interceptors.ENGINE_RUN and interceptors.layers() == []


def test_an_unknown_layer_is_refused_by_name():
    from flowgrad import interceptors
    with pytest.raises(ValueError, match="unknown layer 'jit': one of \\('batch', 'trace'"):
        interceptors.set_layer("jit", lambda *a: None)
    assert interceptors.layers() == []


def test_watches_end_in_any_order_and_leave_the_others_on():
    """Two tools watching the backward sweep, ended in the order they began (not nested):
    when the first ends, the second still sees every gradient, and when both end nothing is
    left on (each tool removes its own watch; none puts back what it found)."""
    from flowgrad import interceptors
    seen = {"a": 0, "b": 0}

    def counter(k):
        def dx(n, i, t, g, dy):
            seen[k] += 1
            return g
        return dx

    def one_pass():
        tf.grad(lambda v: (v * 3.0).sum())(tf.tensor([1.0, 2.0]))
    a = interceptors.watch("numerics", dx=counter("a"))
    b = interceptors.watch("graph", dx=counter("b"))
    one_pass()
    assert seen["a"] == seen["b"] > 0
    interceptors.unwatch(a)
    before = dict(seen)
    one_pass()
    assert seen["a"] == before["a"] and seen["b"] > before["b"]
    interceptors.unwatch(b)
    interceptors.unwatch(b)                    # (again: harmless)
    assert interceptors.dx_hook is None and interceptors.y_hook is None and interceptors.reader is None


def test_watches_are_called_in_their_fixed_order():
    from flowgrad import interceptors
    order = []
    late = interceptors.watch("graph", dx=lambda n, i, t, g, dy: order.append("graph") or g)
    early = interceptors.watch("numerics", dx=lambda n, i, t, g, dy: order.append("numerics") or g)
    try:
        tf.grad(lambda v: v * 2.0)(tf.scalar(1.0))
    finally:
        interceptors.unwatch(late)
        interceptors.unwatch(early)
    assert order == ["numerics", "graph"]
    with pytest.raises(ValueError, match="unknown watch 'jit'"):
        interceptors.watch("jit", read=print)


def test_a_debug_mode_switched_on_during_another_thread_s_trace_spoils_nothing():
    """Switching the debug seam on used to replace the entry outright, tracer included: the
    trace then missed its last kernels and replayed stale values."""
    from flowgrad import interceptors

    def other(started, traced, done):
        assert started.wait(20)
        tf.enable_debug_mode("raise")
        traced.set()
        assert done.wait(20)
        try:
            assert interceptors.layers() == ["debug"]
            with pytest.raises(tf.errors.FlowgradError, match="(?i)nan|inf"):
                tf.log(tf.tensor([-1.0]))          # the debug seam is still on
        finally:
            tf.disable_debug_mode()
        return True
    x = tf.tensor(np.arange(4, dtype=np.float32))
    jf, ok = _trace_while(other, x)
    assert ok is True, ok
    y = tf.tensor(np.array([5, 6, 7, 8], np.float32))
    np.testing.assert_array_equal(jf(y).numpy(), [11, 13, 15, 17])
    assert E.run_kernel is interceptors.ENGINE_RUN and interceptors.layers() == []


@pytest.mark.parametrize("fused_threads", [1, 2])
def test_threads_calling_one_jitted_function_get_their_own_results(fast_switching,
                                                                  fused_threads):
    """A replay writes into buffers of its own; two threads replaying one jitted function
    at once shared them, and 295 of 300 calls returned another call's values."""
    from flowgrad import fusion
    n = 2 * fusion.THREAD_MIN + 5       # fused, and split between two workers when asked
    g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
    # (the NumPy replay's fused chains: backend auto may compile the loop natively, whose
    # exp and sin are within a few ulp of these bits, not them)
    jg = tf.jit(g, threads=fused_threads, backend="numpy")
    xs = [tf.tensor(np.linspace(-1, 1, n).astype(np.float32) * (1 + k / 4))
          for k in range(4)]
    want = [g(x).numpy() for x in xs]
    jg(xs[0])
    bad = []

    def worker(k):
        for i in range(40):
            j = (k + i) % 4
            if not np.array_equal(jg(xs[j]).numpy(), want[j]):
                bad.append(j)
    errors = _in_threads(worker, 3)
    assert not errors, errors[:3]
    assert not bad, f"{len(bad)} of 120 calls returned wrong values"
    assert len(jg.traces) == 1
    chains = [v for p in jg.traces.values() for v in p.namespace.values()
              if isinstance(v, fusion.FusedChain)]
    assert chains and chains[0].threads == fused_threads


def test_a_checkpoint_written_beside_a_training_thread_holds_one_step(fast_switching,
                                                                      tmp_path):
    """A checkpoint saved from another thread (to keep the writing off the training loop)
    read the variables, the slots and the step count while a step was committing: 19 of
    300 snapshots held two variables of different steps, or a step count of a third."""
    a = tf.variable(tf.fill([64], 1e6), name="ckpt_thread_a")
    b = tf.variable(tf.fill([64], 1e6), name="ckpt_thread_b")
    opt = tf.train.sgd(0.5)         # d/dw of sum(a) + sum(b) is 1: w = 1e6 - 0.5 step
    ck = tf.train.Checkpoint(optimizer=opt, a=a, b=b)
    stop = threading.Event()
    errors = []

    def train():
        try:
            while not stop.is_set():
                opt.minimize(lambda: a.sum() + b.sum())
        except BaseException as e:          # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=train)
    t.start()
    paths = []
    try:
        for i in range(60):
            paths.append(ck.write(str(tmp_path / f"c{i}.safetensors")))
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    a2 = tf.variable(tf.zeros([64]))
    b2 = tf.variable(tf.zeros([64]))
    opt2 = tf.train.sgd(0.5)
    ck2 = tf.train.Checkpoint(optimizer=opt2, a=a2, b=b2)
    torn = []
    try:
        for p in paths:
            ck2.restore(p)
            want = np.float32(1e6 - 0.5 * opt2.iterations)
            if not (np.all(a2.numpy() == want) and np.all(b2.numpy() == want)):
                torn.append((opt2.iterations, a2.numpy()[0], b2.numpy()[0]))
    finally:
        tf.dispose([a, b, a2, b2])
    assert opt.iterations > 0
    assert not torn, f"{len(torn)} of {len(paths)} checkpoints torn: {torn[:3]}"


def _in_a_forked_child(fn):
    """Run ``fn()`` in a forked child (a hang dies by SIGALRM); its exit code: 0 if fn
    returned True."""
    import os
    import signal
    pid = os.fork()
    if pid == 0:                            # (the child: never returns into pytest)
        code = 1
        try:
            signal.alarm(20)
            code = 0 if fn() is True else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork (POSIX)")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")      # (3.12: fork with threads)
def test_a_forked_child_runs_threaded_replays_and_takes_the_locks_others_held():
    """A data-loader pool forks the process: the child has only the forking thread. A
    threaded replay queued work for the parent's workers, which are not there, and hung;
    a lock another thread held at the fork stayed held in the child forever."""
    from flowgrad import fusion, interceptors
    from flowgrad.train import update
    n = 2 * fusion.THREAD_MIN + 5
    x = tf.tensor(np.linspace(-1, 1, n).astype(np.float32))
    jf = tf.jit(lambda t: (t.exp() * t.sin() + t).square(), threads=2)
    jf(x)
    want = jf(x).numpy()                    # a replay: the parent's workers exist now
    assert fusion._workers
    holding, release = threading.Event(), threading.Event()

    def hold():
        with interceptors._lock, update.STATE_LOCK:
            holding.set()
            release.wait(30)
    t = threading.Thread(target=hold)
    t.start()
    assert holding.wait(20)

    def child():
        w = tf.variable(tf.tensor([1.0, 2.0]))
        tf.train.sgd(0.5).minimize(lambda: w.sum())             # takes STATE_LOCK
        rows = tf.vmap(lambda r: r * 2)(tf.tensor([[1.0], [2.0]]))  # takes the interceptors' lock
        return (np.array_equal(jf(x).numpy(), want) and w.numpy().tolist() == [0.5, 1.5]
                and rows.numpy().tolist() == [[2.0], [4.0]])
    try:
        assert _in_a_forked_child(child) == 0
    finally:
        release.set()
        t.join(30)


def test_a_loader_thread_feeds_a_training_loop(fast_switching):
    """Tensors made by a data-loader thread while the trainer is inside tidy() belong to
    no scope of the trainer: they reach it alive, and the trainer's numbers are exact."""
    gc.collect()
    before = tf.memory().num_tensors
    q = queue.Queue(maxsize=4)
    n_batches = 120
    made = []

    def loader():
        rng = np.random.default_rng(0)
        for _ in range(n_batches):
            xb = tf.tensor(rng.normal(size=(16, 3)))
            made.append(xb)
            q.put(xb)
        q.put(None)

    w = tf.variable(tf.tensor([[0.5], [-0.25], [1.0]]), name="loader_w")
    th = threading.Thread(target=loader)
    th.start()
    seen = 0
    try:
        while True:
            xb = q.get(timeout=60)
            if xb is None:
                break
            assert not xb.is_disposed, "the trainer's tidy disposed the loader's tensor"

            def step():
                # grad of mean((x w)^2) w.r.t. w is 2/n x^T x w, checked against NumPy
                g = tf.grad(lambda v: xb.mat_mul(v).square().mean())(w)
                xa, wa = xb.numpy().astype(np.float64), w.numpy().astype(np.float64)
                np.testing.assert_allclose(g.numpy(), 2 / xa.shape[0] * xa.T @ xa @ wa,
                                           rtol=1e-5, atol=1e-6)
                return g
            tf.tidy(step)
            xb.dispose()
            seen += 1
    finally:
        th.join(60)
        w.dispose()
    assert seen == n_batches
    del made, xb
    gc.collect()
    assert tf.memory().num_tensors == before


def test_a_thread_cannot_close_another_threads_scope():
    inside = threading.Event()
    release = threading.Event()
    kept = []

    def other():
        def body():
            kept.append(tf.scalar(1.0))
            inside.set()
            release.wait(30)
            return None
        tf.tidy(body)

    th = threading.Thread(target=other)
    th.start()
    assert inside.wait(30)
    mine = tf.tidy(lambda: tf.scalar(2.0) + 1)       # opens and closes a scope here
    assert not kept[0].is_disposed                    # the other thread's scope is open
    release.set()
    th.join(30)
    assert kept[0].is_disposed and not mine.is_disposed
    assert scopes.scope_name() is None and _clean()
    mine.dispose()


def test_memory_counts_tensors_made_in_one_thread_and_freed_in_another():
    gc.collect()
    before = tf.memory()
    box = []
    th = threading.Thread(target=lambda: box.extend(tf.ones([10, 10]) for _ in range(5)))
    th.start()
    th.join(30)
    assert tf.memory().num_tensors == before.num_tensors + 5
    assert tf.memory().num_bytes == before.num_bytes + 5 * 400
    for t in box[:2]:
        t.dispose()
    del box[:]
    gc.collect()
    after = tf.memory()
    assert (after.num_tensors, after.num_bytes, after.num_data_buffers) == (
        before.num_tensors, before.num_bytes, before.num_data_buffers)


# ---------------------------------------------------------------- tapes pin what they recorded

def test_a_persistent_tape_pins_only_what_it_recorded():
    x = tf.tensor([1.0, 2.0, 3.0], dtype="float64")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        h = x.exp()
        y = (h * x).sum()
    h.dispose()                       # the tape still needs h's values: parked, not freed
    assert h._data is not None
    unrelated = [tf.zeros([1000]) for _ in range(5)]
    for t in unrelated:
        t.dispose()
    assert all(t._data is None for t in unrelated)   # nobody recorded them: freed at once
    # d/dx sum(x e^x) = e^x (1 + x), by hand
    np.testing.assert_allclose(tape.gradient(y, x).numpy(),
                               np.exp([1., 2., 3.]) * (1 + np.array([1., 2., 3.])))
    del tape
    gc.collect()
    assert h._data is None            # dropping the tape released what it pinned
    x.dispose()


def test_sources_disposed_after_the_block_stay_readable_by_the_tape_and_pullback():
    w = tf.tensor([0.5, -1.5], dtype="float64")
    x = tf.tensor([2.0, 3.0], dtype="float64")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = (w * x).sin().sum()
    val, pullback = tf.vjp(lambda a: (a * w).sin().sum(), x)
    w.dispose()                       # a leaf both recorded: pinned when they were detached
    want = np.cos([1.0, -4.5]) * np.array([0.5, -1.5])     # d/dx sum(sin(w x)), by hand
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(pullback(tf.scalar(1.0, dtype="float64"))[0].numpy(), want,
                               rtol=1e-12)
    assert w._data is not None
    del tape, pullback
    gc.collect()
    assert w._data is None            # both gone: the array is freed
    x.dispose()


def test_a_live_persistent_tape_does_not_keep_unrelated_memory():
    x = tf.scalar(2.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
    gc.collect()
    rss0 = _rss_mb()
    held = []
    for _ in range(5):
        big = tf.ones([16 * 2**20])           # 64 MB each (pages written), unrelated
        big.dispose()
        held.append(big)                      # the user still holds the disposed tensor
    gc.collect()
    # freed at dispose, the allocator reuses one block (~64 MB); pinned, all five stay
    assert _rss_mb() - rss0 < 160, "disposed tensors stayed resident while a tape lived"
    assert all(t._data is None for t in held)
    assert tape.gradient(y, x).item() == 4.0
    del tape


def test_a_tensor_recorded_by_two_live_sessions_lives_until_both_end():
    x = tf.scalar(3.0, dtype="float64")
    tapes = []
    for _ in range(2):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            s = x.sin()
            y = s * s
        tapes.append((t, y))
    x_sin = s
    x_sin.dispose()
    del tapes[0]
    gc.collect()
    t, y = tapes[0]
    # d/dx sin(x)^2 = 2 sin x cos x = sin 2x
    assert abs(t.gradient(y, x).item() - np.sin(6.0)) < 1e-12
    del t, tapes
    gc.collect()
    assert x_sin._data is None


# ---------------------------------------------------------------- interrupts

class _Alarm:
    """Raise KeyboardInterrupt (as a notebook's Ctrl-C) once, after ``delay`` seconds."""

    def __init__(self):
        self.armed = False
        self.fired = 0
        self.old = signal.signal(signal.SIGALRM, self._handler)

    def _handler(self, signum, frame):
        if self.armed:
            self.armed = False            # one interrupt per arming, never outside the test
            self.fired += 1
            raise KeyboardInterrupt

    def arm(self, delay):
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, delay)

    def disarm(self):
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)

    def close(self):
        self.disarm()
        signal.signal(signal.SIGALRM, self.old)


def _interrupted(n, step, max_delay, seed=0):
    """Call step() n times, each with an interrupt set for a random moment inside it."""
    rng = np.random.default_rng(seed)
    alarm = _Alarm()
    hits = 0
    try:
        for _ in range(n):
            try:
                try:
                    alarm.arm(float(rng.uniform(1e-6, max_delay)))
                    step()
                finally:
                    alarm.disarm()        # (the interrupt may land here too: caught below)
            except KeyboardInterrupt:
                hits += 1
    finally:
        alarm.close()
    return hits


def _step_seconds(step, reps=20):
    import time
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    return (time.perf_counter() - t0) / reps


needs_itimer = pytest.mark.skipif(not hasattr(signal, "setitimer"),
                                  reason="timer interrupts use signal.setitimer (Unix)")
# an interrupt that lands in a finalizer (Tensor.__del__) is printed and dropped by Python
finalizers_interrupted = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning")


@needs_itimer
@finalizers_interrupted
@pytest.mark.parametrize("n", [64, 2 * buffer_pool.MIN_ELEMENTS])
def test_interrupts_inside_grad_and_tidy_leave_the_engine_as_before(n):
    x = tf.tensor(np.linspace(0.1, 1, n), dtype="float64")
    c = tf.tensor(np.linspace(1, 2, n), dtype="float64")

    def step():
        # (disposed, not left to the collector: a Ctrl-C landing in a finalizer is
        # swallowed by Python, whatever the finalizer does)
        tf.tidy(lambda: tf.grad(lambda v: ((v * c).sin().exp() * v).sum())(x)).dispose()

    gc.collect()
    before = tf.memory()
    hits = _interrupted(300 if n < 100 else 60, step, _step_seconds(step))
    assert hits >= (60 if n < 100 else 12)     # many steps were really interrupted
    assert _clean()
    gc.collect()
    after = tf.memory()
    assert (after.num_tensors, after.num_bytes, after.num_data_buffers) == (
        before.num_tensors, before.num_bytes, before.num_data_buffers)
    # and the engine still computes: d/dx sum(exp(sin(c x)) x) by hand
    g = tf.grad(lambda v: ((v * c).sin().exp() * v).sum())(x).numpy()
    xa, ca = x.numpy(), c.numpy()
    e = np.exp(np.sin(ca * xa))
    np.testing.assert_allclose(g, e + xa * e * np.cos(ca * xa) * ca, rtol=1e-12)


@needs_itimer
@finalizers_interrupted
def test_interrupts_inside_minimize_lose_nothing():
    """Hundreds of Ctrl-Cs inside tidy(minimize): afterwards every variable is equal (the
    set-up is symmetric, so a half-applied step would show), the engine is clean, and a
    plain training loop keeps tensors and RSS flat."""
    rng = np.random.default_rng(1)
    xs = tf.tensor(rng.normal(size=(32, 64)).astype(np.float32))
    init = rng.normal(size=(64, 64)).astype(np.float32) * 0.1
    ws = [tf.variable(tf.tensor(init), name=f"intr_w{i}") for i in range(8)]
    opt = tf.train.adam(0.01)

    def loss():
        return tf.add_n([xs.mat_mul(w).tanh().square().mean() for w in ws])

    def step():
        cost = tf.tidy(lambda: opt.minimize(loss, return_cost=True))
        cost.dispose()

    try:
        step()
        hits = _interrupted(400, step, _step_seconds(step, 10), seed=2)
        assert hits >= 80
        assert _clean()
        first = ws[0].numpy()
        for w in ws[1:]:
            assert np.array_equal(w.numpy(), first), "a step was half applied"
        gc.collect()
        n0 = tf.memory().num_tensors
        rss0 = _rss_mb()
        for _ in range(300):
            step()
        gc.collect()
        assert tf.memory().num_tensors == n0
        assert _rss_mb() - rss0 < 32, "RSS grew over a plain loop after interrupts"
        for w in ws[1:]:
            assert np.array_equal(w.numpy(), ws[0].numpy())
    finally:
        opt.dispose()
        for w in ws:
            w.dispose()
        xs.dispose()


def test_threads_replaying_one_small_program_at_once_get_their_own_results(fast_switching):
    """A replay of small values has no buffer of its own, so every thread runs the same one
    at once (no replay taken and put back); each call must still compute from its own
    arguments, and NumPy's error state stay each thread's."""
    f = tf.jit(lambda a, b: (a * b - b).square() / (a - 1.0), backend="numpy")
    xs = [(tf.scalar(1.0 + k / 8), tf.scalar(2.0 - k / 16)) for k in range(8)]
    want = [((a * b - b).square() / (a - 1.0)).item() for a, b in xs]     # eager's bits
    assert np.isnan(want[0])                # (0 / 0 at xs[0]: NaN, silently)
    f(*xs[1])
    bad = []

    def worker(k):
        with np.errstate(all="raise"):          # this thread's own state: never consulted
            for i in range(300):
                j = (k + i) % 8
                v = f(*xs[j]).item()
                if not (v == want[j] or np.isnan(v) and np.isnan(want[j])):
                    bad.append((j, v))
            with pytest.raises(FloatingPointError):
                np.log(np.zeros(1))         # ... and still this thread's after the calls
    errors = _in_threads(worker, 3)
    assert not errors, errors[:3]
    assert not bad, f"{len(bad)} of 900 calls returned wrong values: {bad[:3]}"
    assert len(f.traces) == 1
