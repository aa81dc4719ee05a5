"""tf.debug.track_leaks (live tensors by this file's lines, the per-iteration trend) and
tf.profile / tf.time (TF.js's fields, numbers equal to memory() deltas)."""
import asyncio
import gc

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import engine as E
from flowgrad import interceptors
from flowgrad.errors import ArgumentError

HERE = __file__


def line_of(marker):
    """The line number in this file of the statement carrying ``# <marker>``."""
    for i, text in enumerate(open(HERE).read().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return i
    raise AssertionError(marker)


def instrumentation_is_off():
    return (E.make_tensor.__module__ == "flowgrad.engine"
            and E.account_new.__module__ == "flowgrad.engine"
            and E.run_kernel is interceptors.ENGINE_RUN and interceptors.layers() == [])


# ---------------------------------------------------------------- track_leaks

def test_a_deliberate_leak_is_found_at_its_line_with_count_bytes_and_trend():
    x = tf.tensor([1.0, 2.0, 3.0])
    kept = []
    with tf.debug.track_leaks() as leaks:
        for i in range(5):
            y = tf.tidy(lambda: x.square().sum())  # ALIVE
            kept.append(x.mul(2))  # LEAK
            leaks.step()
    assert leaks.steps == 5
    assert leaks.count == 6 and leaks.bytes == 5 * 12 + 4
    site, alive = leaks.sites                    # most bytes first
    assert (alive.lineno, alive.count, alive.trend, alive.growth) == (
        line_of("ALIVE"), 1, [1] * 5, 0)         # the last y: alive, but not growing
    assert (site.filename, site.lineno) == (HERE, line_of("LEAK"))
    assert site.count == 5 and site.bytes == 60 and site.ops == ("mul",)
    assert site.trend == [1, 2, 3, 4, 5] and site.growth == 1 and site.bytes_growth == 12
    assert site.line == "kept.append(x.mul(2))  # LEAK"
    report = leaks.report()
    assert report.growing == [site] and report.count == 6 and report.bytes == 64
    text = str(report)
    assert f"test_leaks_profile.py:{line_of('LEAK')}" in text
    assert "+1 tensor(s), +12 bytes per iteration (1 -> 2 -> 3 -> 4 -> 5)" in text
    assert "tf.tidy" in text
    del y


def test_a_tidy_loop_leaks_nothing():
    x = tf.tensor([1.0, 2.0])
    w = tf.variable(tf.scalar(0.5), name="w_tidy_leaks")
    try:
        losses = []
        with tf.debug.track_leaks() as leaks:
            for _ in range(4):
                losses.append(tf.tidy(lambda: tf.grad(lambda v: (x * v).sum())(w)).item())
                g = tf.tidy(lambda: (x * w).square().sum())
                g.dispose()
                leaks.step()
        assert leaks.count == 0 and leaks.bytes == 0 and leaks.sites == []
        report = leaks.report()
        assert not report and report.growing == []
        assert str(report).startswith("No leaked tensors")
        assert losses == [3.0] * 4
    finally:
        w.dispose()


def test_garbage_collected_and_disposed_tensors_are_not_leaks():
    x = tf.tensor([1.0, 2.0])
    with tf.debug.track_leaks() as leaks:
        for _ in range(3):
            a = x.exp()           # the previous a is garbage-collected when a is rebound
            b = x.neg()
            b.dispose()
            leaks.step()
    [site] = leaks.sites
    assert site.count == 1 and site.trend == [1, 1, 1] and site.growth == 0
    assert "No site grows" in str(leaks.report())
    del a


def test_entering_the_same_tracker_each_iteration_gives_the_trend():
    history = []
    leaks = tf.debug.track_leaks()
    for i in range(4):
        with leaks:
            history.append(tf.scalar(float(i)).add(1))  # LEAK2
        _ = tf.scalar(0.0).add(1)                       # outside the tracker: not seen
    assert leaks.steps == 4
    [site] = leaks.report().growing
    assert site.lineno == line_of("LEAK2") and site.trend == [1, 2, 3, 4]
    assert instrumentation_is_off()


def test_gradient_calls_and_variables_leak_at_the_calling_line():
    x = tf.scalar(3.0)
    grads, made = [], []
    try:
        with tf.debug.track_leaks() as leaks:
            for i in range(3):
                grads.append(tf.grad(lambda v: v.square())(x))  # GRADS
                made.append(tf.variable(tf.scalar(1.0), name=f"leak_var_{i}"))  # VARS
                leaks.step()
        by_line = {s.lineno: s for s in leaks.report().growing}
        assert by_line[line_of("GRADS")].trend == [1, 2, 3]
        assert by_line[line_of("VARS")].ops == ("variable",)   # its initial value is gone
        assert by_line[line_of("GRADS")].ops[0].startswith("grad")
        assert by_line[line_of("VARS")].trend == [1, 2, 3]
    finally:
        for v in made:
            v.dispose()


def test_inside_the_block_sites_are_live_and_trackers_nest():
    x = tf.tensor([1.0])
    with tf.debug.track_leaks() as outer:
        a = x.add(1)
        with tf.debug.track_leaks() as inner:
            b = x.add(2)
            assert inner.count == 1
        assert outer.count == 2 and inner.count == 1
        b.dispose()
        assert outer.count == 1
    assert outer.count == 1 and inner.count == 1    # inner: as it was at its exit
    assert instrumentation_is_off()
    del a


def test_track_leaks_costs_nothing_when_off():
    with tf.debug.track_leaks():
        assert not instrumentation_is_off()
    assert instrumentation_is_off()


# ---------------------------------------------------------------- profile

def test_profile_kernel_names_in_execution_order():
    x = tf.tensor([1.0, 2.0, 3.0])
    info = tf.profile(lambda: x.square().sum())
    assert info.kernel_names == ["Square", "Sum"]
    assert info.result.item() == 14.0
    info = tf.profile(lambda: x.square().add(x.square()).square())
    assert info.kernel_names == ["Square", "Add"]            # unique
    assert [k.name for k in info.kernels] == ["Square", "Square", "Add", "Square"]


def test_profile_fields_are_tfjs_ones_and_camel_case_resolves():
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    info = tf.profile(lambda: x.sum(axis=0))
    assert info.keys() == ["new_bytes", "new_tensors", "peak_bytes", "kernels", "result",
                           "kernel_names"]
    k = info.kernels[0]
    assert k.keys() == ["name", "bytes_added", "total_bytes_snapshot", "tensors_added",
                        "total_tensors_snapshot", "input_shapes", "output_shapes",
                        "kernel_time_ms", "extra_info"]
    assert (k.name, k.bytes_added, k.tensors_added) == ("Sum", 8, 1)
    assert k.input_shapes == [[2, 2]] and k.output_shapes == [[2]]
    assert "axes=(0,)" in k.extra_info and k.kernel_time_ms >= 0
    assert info.newBytes == info.new_bytes and info.kernelNames == ["Sum"]
    assert k.bytesAdded == 8 and k.outputShapes == [[2]]
    assert info["peak_bytes"] == info.peakBytes


def test_profile_numbers_match_memory_deltas():
    x = tf.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    m0 = tf.memory()
    info = tf.profile(lambda: [x.exp(), x.mat_mul(x.transpose()), tf.ones([4], "int32"),
                               tf.tensor([True, False])])
    m1 = tf.memory()
    assert info.new_tensors == m1.num_tensors - m0.num_tensors == 4
    assert info.new_bytes == m1.num_bytes - m0.num_bytes == 24 + 16 + 16 + 2
    assert info.peak_bytes >= m1.num_bytes >= info.new_bytes
    # each kernel's snapshot is the running total; bytes_added is what it made
    for k in info.kernels:
        assert k.bytes_added == sum(4 * int(np.prod(s)) for s in k.output_shapes) or \
            k.name in ("Fill",)
        assert k.total_bytes_snapshot <= info.peak_bytes
    tf.dispose(info.result)
    assert tf.memory().num_tensors == m0.num_tensors


def test_peak_bytes_sees_what_a_tidy_freed():
    x = tf.ones([1000])                                     # 4000 bytes
    m0 = tf.memory()
    info = tf.profile(lambda: tf.tidy(lambda: x.mul(2).add(1).sum()))
    assert info.new_tensors == 1 and info.new_bytes == 4
    assert info.new_tensors == tf.memory().num_tensors - m0.num_tensors
    assert info.peak_bytes >= m0.num_bytes + 8000            # mul and add alive together
    snaps = [k.total_bytes_snapshot for k in info.kernels]
    assert max(snaps) == info.peak_bytes
    tf.dispose(info.result)


def test_profile_includes_backward_kernels_and_nests():
    x = tf.tensor([1.0, 2.0])
    inner = []
    info = tf.profile(lambda: inner.append(tf.profile(lambda: x.exp())) or
                      tf.grad(lambda v: v.square().sum())(x))
    assert inner[0].kernel_names == ["Exp"]
    assert info.kernel_names[:3] == ["Exp", "Square", "Sum"]
    assert "SquareGrad" in info.kernel_names               # the backward pass
    assert info.result.numpy().tolist() == [2.0, 4.0]
    assert instrumentation_is_off()


def test_profile_is_awaitable_and_time_reports_kernel_and_wall_ms():
    x = tf.tensor([1.0, 2.0])

    async def main():
        info = await tf.profile(lambda: x.square())
        t = await tf.time(lambda: x.square())
        return info, t
    info, t = asyncio.run(main())
    assert info.kernel_names == ["Square"]
    assert t.keys() == ["kernel_ms", "wall_ms"] and 0 <= t.kernel_ms <= t.wall_ms
    assert t.kernelMs == t.kernel_ms
    assert tf.debug.profile is tf.profile and tf.debug.time is tf.time
    assert instrumentation_is_off()


def test_profile_errors_name_the_fix():
    with pytest.raises(ArgumentError, match=r"profile\(f\): f must be a function"):
        tf.profile(42)
    with pytest.raises(ArgumentError, match=r"time\(f\): f must be a function"):
        tf.time("f")

    async def f():
        return tf.scalar(1.0)
    with pytest.raises(ArgumentError, match="make f a plain function"):
        tf.profile(f)
    with pytest.raises(ValueError):
        tf.profile(lambda: tf.tensor([1.0, 2.0]).reshape([3]))
    assert instrumentation_is_off()                        # restored after an error
    gc.collect()


# ---------------------------------------------------------------- threads

def _beside(other, main):
    """Run ``other(go, done)`` in a second thread while this one runs ``main(go, done)``;
    the events let the two interleave on purpose. Returns other's result."""
    import threading
    go, done, out = threading.Event(), threading.Event(), {}

    def run():
        try:
            out["r"] = other(go, done)
        except BaseException as e:          # noqa: BLE001 - reported below
            out["r"] = e
    t = threading.Thread(target=run)
    t.start()
    try:
        main(go, done)
    finally:
        done.set()
        t.join(60)
    assert not isinstance(out.get("r"), BaseException), out.get("r")
    return out.get("r")


def test_a_profile_lists_only_its_own_thread_s_kernels():
    """Another thread's kernels (a data loader's) ran beside f, not in it: they were listed
    among f's, and the timing of one thread's kernel could be another's."""
    x = tf.tensor(np.ones(1000, np.float32))

    def loader(go, done):
        assert go.wait(20)
        while not done.is_set():
            tf.dispose(x.exp())
    infos = []

    def main(go, done):
        go.set()
        for _ in range(50):
            infos.append(tf.profile(lambda: x.square().sum()))
    import sys
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)             # (so that the threads interleave)
    try:
        _beside(loader, main)
    finally:
        sys.setswitchinterval(old)
    assert all(i.kernel_names == ["Square", "Sum"] and len(i.kernels) == 2 for i in infos)
    assert instrumentation_is_off()


def test_a_leak_tracker_notes_only_its_own_thread_s_tensors():
    made = []

    def loader(go, done):
        assert go.wait(20)
        made.append(tf.ones([5]))           # kept by the loader: not the tracked block's
        done.wait(20)
        return True

    def main(go, done):
        with tf.debug.track_leaks() as leaks:
            go.set()
            while not made:
                pass
            mine = tf.ones([3]) * 2  # MINE
        assert leaks.count == 1 and [s.lineno for s in leaks.sites] == [line_of("MINE")]
        mine.dispose()
    _beside(loader, main)
    tf.dispose(made)
    assert instrumentation_is_off()


def test_a_trace_in_another_thread_leaves_a_leak_tracker_on():
    """tf.jit's trace and the leak tracker both wrap make_tensor: a trace that began before
    the tracker and ended inside it put back the entry it had found, switching the tracker
    off, so the block's later tensors went unseen."""
    import threading
    traced, tracking = threading.Event(), threading.Event()

    def f(t):
        traced.set()
        assert tracking.wait(20)            # the tracker is on now; the trace then ends
        return t.square() + 1
    jf = tf.jit(f)

    def tracer(go, done):
        return jf(tf.tensor([1.0, 2.0])).numpy()

    def main(go, done):
        assert traced.wait(20)
        with tf.debug.track_leaks() as leaks:
            tracking.set()
            while jf.traces == {}:
                pass                        # (the trace has ended)
            kept = [tf.tensor([1.0, 2.0]), tf.ones([4]) + 1]  # KEPT
        assert leaks.count == 2 and [s.lineno for s in leaks.sites] == [line_of("KEPT")]
        tf.dispose(kept)
    np.testing.assert_array_equal(_beside(tracer, main), [2.0, 5.0])
    np.testing.assert_array_equal(jf(tf.tensor([3.0, 4.0])).numpy(), [10.0, 17.0])
    assert instrumentation_is_off()
