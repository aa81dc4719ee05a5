"""tf.jit's native code on disk (flowgrad/jit_native_cache.py) and on threads
(flowgrad/jit_native.py): a later process loads what an earlier one compiled, with numba
compiling nothing; two processes compiling at once leave a whole cache; a corrupt, stale or
foreign entry is compiled again, never run, never raised; an unwritable folder warns once
and compiles; FLOWGRAD_JIT_CACHE=0 turns it off; "auto" knows a cached program loads fast.
Threads: a large segment runs on threads with the same bits for any count, from two Python
threads at once, and in a forked child after its parent ran it on threads (each in a
subprocess, so that an abort fails the test instead of killing pytest)."""
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import jit_native, native_costs
from flowgrad import jit_native_cache as cache

needs_numba = pytest.mark.extra("numba", "jit")

# What every subprocess runs first: numba's compile events counted (numba compiles nothing
# when every segment is loaded), and the programs of these tests
PROLOGUE = """
import json, os, sys, threading, time
import numpy as np
import flowgrad as tf
from flowgrad import jit_native, jit_native_cache as cache, native_costs
from numba.core import event

compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        compiles.append(1)

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
# every segment that runs faster compiled is compiled, however little it saves (the cost
# model's compile payback aside: these are the cache's tests)
native_costs.PAYBACK_CALLS = 10 ** 12


def programs():
    f = tf.jit(tf.grad(lambda x: ((x * 1.5 + 0.25).sin() * x).sum()), backend="native")
    g = tf.jit(lambda x: x * 2.5 + x * x - 1, backend="native")
    x = tf.tensor(np.linspace(-1, 1, 64, dtype=np.float32))
    return [o.numpy().tobytes().hex() for o in (f(x), f(tf.scalar(0.5)), g(x))]


def report(**kw):
    print(json.dumps(dict(counts=cache.counts, compiles=len(compiles), **kw)))
"""


def run(code, folder, timeout=240, **env):
    """Run PROLOGUE + code in a new interpreter with the cache in ``folder``; its report."""
    e = dict(os.environ, FLOWGRAD_JIT_CACHE=str(folder), **env)
    out = subprocess.run([sys.executable, "-c", PROLOGUE + code], capture_output=True,
                         text=True, timeout=timeout, env=e)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def entries(folder):
    return sorted(p for p in os.listdir(folder) if p.endswith(cache.SUFFIX))


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """The cache in a folder of this test's, and no compiled segment kept in this process
    (each build goes to the folder). Yields the folder."""
    folder = tmp_path / "jit"
    monkeypatch.setenv(cache.ENV, str(folder))
    monkeypatch.setattr(jit_native, "_compiled", {})
    return folder


def small(x):
    return ((x * 0.5 - 1.25) * x).tanh() * 3 + x


def build_and_run(fn=small, n=33):
    """fn under backend="native" from a new tf.jit (a new trace: its segments are built),
    with the counts this build moved."""
    jit_native._compiled.clear()
    before = dict(cache.counts)
    f = tf.jit(fn, backend="native")
    out = f(tf.tensor(np.linspace(-2, 2, n, dtype=np.float32))).numpy()
    return out, {k: cache.counts[k] - before[k] for k in before}


# ---------------------------------------------------------------- across processes

@needs_numba
def test_a_later_process_loads_every_segment_and_numba_compiles_nothing(tmp_path):
    first = run("report(out=programs())", tmp_path)
    assert first["counts"]["compiled"] == 3 and first["counts"]["saved"] == 3
    assert first["compiles"] >= 3
    assert len(entries(tmp_path)) == 3
    second = run("report(out=programs())", tmp_path)
    assert second["counts"] == {"compiled": 0, "loaded": 3, "saved": 0, "refused": 0}
    assert second["compiles"] == 0          # numba's own count: nothing compiled
    assert second["out"] == first["out"]    # the same bits


@needs_numba
def test_two_processes_compiling_at_once_leave_a_whole_cache(tmp_path):
    # both import and wait for "go", then compile the same programs at the same time
    go = tmp_path / "go"
    code = f"""
while not os.path.exists({str(go)!r}):
    time.sleep(0.005)
report(out=programs())
"""
    folder = tmp_path / "jit"
    e = dict(os.environ, FLOWGRAD_JIT_CACHE=str(folder))
    procs = [subprocess.Popen([sys.executable, "-c", PROLOGUE + code], env=e, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    time.sleep(0.5)
    go.write_text("")
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert reports[0]["out"] == reports[1]["out"]
    assert len(entries(folder)) == 3
    assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]
    third = run("report(out=programs())", folder)
    assert third["counts"] == {"compiled": 0, "loaded": 3, "saved": 0, "refused": 0}
    assert third["compiles"] == 0 and third["out"] == reports[0]["out"]


# ---------------------------------------------------------------- bad entries

def _rewrite_header(path, **changes):
    data = path.read_bytes()
    at = len(cache.MAGIC)
    n = int.from_bytes(data[at:at + 4], "little")
    head = json.loads(data[at + 4:at + 4 + n])
    head.update(changes)
    raw = json.dumps(head).encode()
    path.write_bytes(cache.MAGIC + len(raw).to_bytes(4, "little") + raw + data[at + 4 + n:])


CORRUPTIONS = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "garbage": lambda p: p.write_bytes(os.urandom(len(p.read_bytes()))),
    # one byte of the object code changed: its digest no longer matches
    "payload byte": lambda p: p.write_bytes(
        (lambda b: b[:-200] + bytes([b[-200] ^ 0x5A]) + b[-199:])(p.read_bytes())),
    "header byte": lambda p: p.write_bytes(
        (lambda b: b[:30] + bytes([b[30] ^ 0x01]) + b[31:])(p.read_bytes())),
    "another numba": lambda p: _rewrite_header(p, numba="0.1.0"),
    "another CPU": lambda p: _rewrite_header(p, target="('x86_64-unknown-linux-gnu', 'i386'"
                                                    ", '')"),
    "another key": lambda p: _rewrite_header(p, key="flowgrad 0.0.1\n\ndef seg(): pass"),
}


@needs_numba
@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_bad_entry_is_compiled_again_never_run(fresh, how):
    want, moved = build_and_run()
    assert moved["compiled"] == 1 and moved["saved"] == 1
    (name,) = entries(fresh)
    CORRUPTIONS[how](fresh / name)
    got, moved = build_and_run()
    assert moved == {"compiled": 1, "loaded": 0, "saved": 1, "refused": 1}
    np.testing.assert_array_equal(got, want)
    # the entry was written again, whole: the next build loads it
    got, moved = build_and_run()
    assert moved["loaded"] == 1 and moved["compiled"] == 0
    np.testing.assert_array_equal(got, want)


@needs_numba
def test_another_flowgrad_version_compiles_and_never_loads_the_old_entry(fresh, monkeypatch):
    want, _ = build_and_run()
    (old,) = entries(fresh)
    monkeypatch.setitem(cache.versions(), "flowgrad", "999.0.0")
    got, moved = build_and_run()
    assert moved["compiled"] == 1 and moved["loaded"] == 0 and moved["refused"] == 0
    np.testing.assert_array_equal(got, want)
    new = [e for e in entries(fresh) if e != old]
    assert len(new) == 1
    # the old version's file under the new name (a stale entry): refused, compiled again
    (fresh / new[0]).write_bytes((fresh / old).read_bytes())
    got, moved = build_and_run()
    assert moved["compiled"] == 1 and moved["refused"] == 1
    np.testing.assert_array_equal(got, want)


def test_the_key_holds_what_the_code_depends_on():
    # (no numba needed: the key and the file name are computed without it)
    k = cache.key("def seg(a):\n    pass", "<f4 (array) -> 1 arrays", False)
    v = cache.versions()
    for part in ("def seg(a)", "<f4 (array) -> 1 arrays", "parallel False", v["flowgrad"],
                 v["numba"], v["llvmlite"], v["python"], "error_model", cache.cpu_tag()):
        assert part in k, part
    others = [cache.key("def seg(a):\n    pass", "<f8 (array) -> 1 arrays", False),
              cache.key("def seg(a):\n    pass", "<f4 (array) -> 1 arrays", True),
              cache.key("def seg(b):\n    pass", "<f4 (array) -> 1 arrays", False)]
    assert len({cache.path_of(x, "/c") for x in [k] + others}) == 4


@needs_numba
def test_an_unwritable_folder_compiles_without_the_cache_and_warns_once(monkeypatch, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(cache.ENV, str(blocker / "jit"))      # (root writes anywhere else)
    monkeypatch.setattr(jit_native, "_compiled", {})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        a, moved_a = build_and_run()
        b, moved_b = build_and_run(lambda x: (x * 3 - 1).sin() * x)
    msgs = [str(w.message) for w in seen if w.category is jit_native.JitCacheWarning]
    assert len(msgs) == 1, msgs
    assert str(blocker) in msgs[0] and cache.ENV in msgs[0]
    assert moved_a["compiled"] == moved_b["compiled"] == 1
    assert moved_a["saved"] == moved_b["saved"] == 0
    # (tanh: the C library's, a few ulp from NumPy's)
    np.testing.assert_allclose(a, small(tf.tensor(np.linspace(-2, 2, 33, dtype=np.float32)))
                               .numpy(), rtol=1e-6, atol=1e-6)


@needs_numba
@pytest.mark.parametrize("value", ["0", ""])
def test_the_cache_off_writes_nothing(monkeypatch, tmp_path, value):
    monkeypatch.setenv(cache.ENV, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(jit_native, "_compiled", {})
    assert cache.folder() is None
    _, moved = build_and_run()
    _, again = build_and_run()
    assert moved["compiled"] == again["compiled"] == 1
    assert moved["saved"] == again["saved"] == moved["loaded"] == again["loaded"] == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG folders: Linux")
def test_the_default_folder_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.folder() == str(tmp_path / "xdg" / "flowgrad" / "jit")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.folder() == str(tmp_path / ".cache" / "flowgrad" / "jit")
    monkeypatch.setenv(cache.ENV, str(tmp_path / "mine"))
    assert cache.folder() == str(tmp_path / "mine")


def test_pruning_removes_the_entries_used_least_recently(tmp_path):
    for i in range(5):
        p = tmp_path / f"{i:040d}{cache.SUFFIX}"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
    (tmp_path / f"{7:040d}{cache.SUFFIX}.1.ab.tmp").write_bytes(b"x")     # (a killed writer)
    os.utime(tmp_path / f"{7:040d}{cache.SUFFIX}.1.ab.tmp", (1000, 1000))
    assert cache.prune(str(tmp_path), limit=2500) == 4
    assert entries(tmp_path) == [f"{3:040d}{cache.SUFFIX}", f"{4:040d}{cache.SUFFIX}"]


# ---------------------------------------------------------------- auto

@needs_numba
def test_auto_knows_a_cached_program_loads_fast(fresh):
    def fn(x):
        return (x * 1.5 - 0.5).sin() * x + 1
    x = tf.tensor(np.linspace(-1, 1, 16, dtype=np.float32))
    f = tf.jit(fn)
    f(x)
    prog = next(iter(f.traces.values()))
    uncached = prog.pending
    prog.pending = 0.0          # (as if its replays had cost that much: compiled, and saved)
    f(x)
    assert prog.pending is None and entries(fresh)
    jit_native._compiled.clear()        # (another process, as far as the segments go)
    g = tf.jit(fn)
    g(x)
    cached = next(iter(g.traces.values())).pending
    load = sum(native_costs.LOAD_S[0] + native_costs.LOAD_S[1] * len(s.names)
               for s in next(iter(g.traces.values())).lowering.segments)
    assert cached == pytest.approx(load) and cached < uncached / 10, (cached, uncached)


# ---------------------------------------------------------------- threads and fork

# a segment on threads: every array segment pays for them here (PARALLEL_US tiny), numba
# and flowgrad told to use 2 threads (whatever cores the test may run on)
THREADS = """
native_costs.PARALLEL_US = 1e-3
n = 1 << 16
x = tf.tensor(np.linspace(-3, 3, n, dtype=np.float32))
f = tf.jit(lambda x: (x * 2.5 + x * x - 1) * (x - 0.5), backend="native")
want = tf.jit(lambda x: (x * 2.5 + x * x - 1) * (x - 0.5), backend="numpy")
want(x)
want = want(x).numpy()
got = f(x).numpy()
seg = [s for p in f.traces.values() for s in p.lowering.segments][0]
import numba
assert seg.threaded and seg.thread_count() == 2 and seg.pfn is not None, seg.thread_count()
"""
THREAD_ENV = {"NUMBA_NUM_THREADS": "2", "FLOWGRAD_JIT_THREADS": "2"}


@needs_numba
def test_a_large_segment_runs_on_threads_with_the_same_bits_for_any_count(tmp_path):
    r = run(THREADS + """
same = [bool(np.array_equal(got, want))]
for t in (1, 2, 1, 2):
    tf.set_jit_threads(t)
    same.append(bool(np.array_equal(f(x).numpy(), want)))
report(same=same, layer=numba.threading_layer(), serial=seg.fn is not None)
""", tmp_path, **THREAD_ENV)
    assert all(r["same"]) and r["serial"]
    assert r["layer"] in ("tbb", "workqueue")       # numba's fork-safe layers (not GNU omp)
    # the next process loads both (serial and parallel) instead of compiling
    again = run(THREADS + "report()", tmp_path, **THREAD_ENV)
    assert again["compiles"] == 0 and again["counts"]["loaded"] == 1


@needs_numba
def test_two_threads_run_one_parallel_segment_at_once(tmp_path):
    r = run(THREADS + """
bad = []

def work():
    for _ in range(150):
        if not np.array_equal(f(x).numpy(), want):
            bad.append(1)

ts = [threading.Thread(target=work) for _ in range(2)]
for t in ts:
    t.start()
for t in ts:
    t.join()
report(bad=len(bad), layer=numba.threading_layer())
""", tmp_path, **THREAD_ENV)
    assert r["bad"] == 0


@needs_numba
def test_a_forked_child_runs_it_after_its_parent_ran_it_on_threads(tmp_path):
    r = run(THREADS + """
import multiprocessing as mp
for _ in range(3):
    f(x)

def child(q):
    q.put([bool(np.array_equal(f(x).numpy(), want)) for _ in range(3)])

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
p.join(120)
report(exit=p.exitcode, ok=q.get(timeout=5) if p.exitcode == 0 else None,
       after=bool(np.array_equal(f(x).numpy(), want)), layer=numba.threading_layer())
""", tmp_path, **THREAD_ENV)
    assert r["exit"] == 0 and r["ok"] == [True] * 3 and r["after"], r
