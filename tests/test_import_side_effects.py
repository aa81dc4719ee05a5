"""Importing flowgrad leaves the process as it was: no warnings filter, malloc untouched
(a user's freed big array goes back to the OS); flowgrad's kernels never warn, the user's
NumPy code still does; the memory policy "reuse" is an explicit opt-in. (One hook is
chained, sys.unraisablehook, for the Ctrl-Cs CPython swallows in flowgrad's own
finalizers: tests/test_finalizer_interrupts.py.)"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import flowgrad as tf

LINUX = sys.platform.startswith("linux")


def run(code, **env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, **env), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


WARNINGS = """
import warnings
import numpy                # (NumPy's own import adds filters of its own)
before = list(warnings.filters)
import flowgrad as tf
x = tf.tensor([0.0, 1.0])
tf.grad(lambda t: tf.log(t).sum())(x); tf.tidy(lambda: tf.exp(x) / x)
print(warnings.filters == before, len(before))
"""


def test_import_and_ops_leave_the_warnings_filters_unchanged():
    same, n = run(WARNINGS).split()
    assert same == "True", n


RSS = """
import os, numpy as np, flowgrad as tf
x = tf.tensor(np.linspace(-1, 1, 10**6).astype(np.float32))
g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
for _ in range(3):
    g(x)
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
{policy}
base = rss()
a = np.ones(200 * 2**20 // 8)          # 200 MB, every page touched
peak = rss()
del a
print(round(base), round(peak), round(rss()))
"""


@pytest.mark.skipif(not LINUX, reason="reads /proc/self/statm")
@pytest.mark.parametrize("policy, kept", [("", False), ("tf.set_memory_policy('reuse')", True),
                                          ("tf.set_memory_policy('reuse'); "
                                           "tf.set_memory_policy('system')", False)])
def test_a_freed_big_array_leaves_the_process(policy, kept):
    """By default (the pool keeps flowgrad's own arrays only) and back on "system", RSS
    falls back after the user frees 200 MB of NumPy; with "reuse" glibc keeps it (the
    opt-in's documented cost; not glibc: nothing is kept)."""
    base, peak, after = map(int, run(RSS.format(policy=policy)).split())
    assert peak - base > 150, (base, peak)               # the array was resident
    from flowgrad.backends import memory
    if kept and memory._glibc() is not None:
        assert after - base > 150, (base, peak, after)
    else:
        assert after - base < 50, (base, peak, after)


FAULTS = """
import resource, numpy as np, flowgrad as tf
from flowgrad.backends import memory
x = tf.tensor(np.linspace(-1, 1, 10**6).astype(np.float32))
g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
g(x); g(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    g(x)
print(tf.get_memory_policy(), memory.state,
      (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


@pytest.mark.skipif(not LINUX, reason="counts page faults")
def test_policies_keep_big_temporaries_from_faulting():
    """A 1e6-element gradient makes ~15 fresh 4 MB arrays a call. "system": each page of
    each faults (malloc as it is, nothing kept); "pool" (the default): flowgrad's kernels
    write into the arrays its tensors let go of, with malloc untouched; "reuse": glibc
    keeps freed memory."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWGRAD_MEMORY_POLICY"}
    r = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True,
                       env=env, timeout=120)
    policy, state, pooled = r.stdout.split()
    assert (policy, state) == ("pool", "untouched") and float(pooled) < 100, pooled
    policy, state, system = run(FAULTS, FLOWGRAD_MEMORY_POLICY="system").split()
    assert (policy, state) == ("system", "untouched") and float(system) > 1000, system
    policy, state, reused = run(FAULTS, FLOWGRAD_MEMORY_POLICY="reuse").split()
    if state == "unsupported":
        pytest.skip("not glibc: malloc is left as it is")
    assert (policy, state) == ("reuse", "glibc") and float(reused) < 100, reused


def test_memory_policy_errors_name_the_choices():
    with pytest.raises(tf.ArgumentError, match="'pool'.*'reuse'.*'system'"):
        tf.set_memory_policy("fast")
    out = subprocess.run([sys.executable, "-c", "import flowgrad"], capture_output=True,
                         text=True, env=dict(os.environ, FLOWGRAD_MEMORY_POLICY="fast"))
    assert out.returncode != 0 and "FLOWGRAD_MEMORY_POLICY='fast'" in out.stderr
    assert tf.get_memory_policy() == "pool"
    assert tf.setMemoryPolicy is tf.set_memory_policy


# ------------------------------------------------------------------ kernels never warn

def _quiet_cases():
    z, one, big = tf.tensor([0.0]), tf.tensor([1.0]), tf.tensor([1000.0])
    yield "log(0)", lambda: tf.log(z), -np.inf
    yield "0/0", lambda: tf.div(z, z), np.nan
    yield "1/0", lambda: tf.div(one, z), np.inf
    yield "exp overflow", lambda: tf.exp(big), np.inf
    yield "sqrt(-1)", lambda: tf.sqrt(-one), np.nan
    yield "d log(x) at 0", lambda: tf.grad(tf.log)(z), np.inf
    yield "d x/x at 0", lambda: tf.grad(lambda x: tf.div(x, x))(z), np.nan
    yield "d exp at 1000", lambda: tf.grad(tf.exp)(big), np.inf
    yield "d sqrt at 0", lambda: tf.grad(tf.sqrt)(z), np.inf
    yield "d2 log at 0", lambda: tf.grad(tf.grad(tf.log))(z), -np.inf
    yield "tidy", lambda: tf.tidy(lambda: tf.log(z) * tf.exp(big)), -np.inf
    yield "value_and_grad", lambda: tf.value_and_grad(lambda x: tf.log(x).sum())(z)[1], np.inf


@pytest.mark.parametrize("name", [c[0] for c in _quiet_cases()])
def test_flowgrad_ops_never_warn(name):
    fn, want = next((f, w) for n, f, w in _quiet_cases() if n == name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fn().data_sync()
    np.testing.assert_allclose(got, [want])              # TF.js's -Inf / NaN / Inf


def test_user_numpy_code_keeps_its_warnings():
    """After flowgrad ran kernels (forward and backward, warning-prone ones included), the
    user's np.log(0) still warns: the kernels' errstate is restored each time."""
    z = tf.tensor([0.0])
    tf.grad(tf.log)(z)
    tf.div(z, z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            np.log(np.zeros(1))
        with pytest.raises(RuntimeWarning, match="invalid value"):
            np.zeros(1) / np.zeros(1)
    with pytest.raises(FloatingPointError):          # the user's own errstate is theirs
        with np.errstate(all="raise"):
            tf.log(z)
            np.log(np.zeros(1))


def test_errstate_is_restored_when_a_kernel_or_rule_fails():
    def bad_rule(x):
        return {"value": tf.log(x), "grad_func": lambda dy: 1 / 0}
    with pytest.raises(ZeroDivisionError):
        tf.grad(tf.custom_grad(bad_rule))(tf.tensor([0.0]))
    with pytest.raises(tf.FlowgradError):
        tf.add(tf.ones([2]), tf.ones([3]))
    assert np.geterr()["divide"] == "warn" and np.geterr()["invalid"] == "warn"
    from flowgrad import recording
    assert not recording.in_backward()
