"""The benchmark suite in its quick mode (each workload's result checked against its NumPy
floor, no timing asserted), and the malloc tuning that keeps big temporaries from
page-faulting."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow          # every workload, ~20 s: .ci/run runs it (pytest -m slow)
def test_quick_bench_checks_every_workload():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "bench", "--quick"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr      # a wrong result raises in the bench
    rows = [ln.split()[0] for ln in r.stdout.splitlines()[1:] if ln.strip()]
    for name in ("W1", "W2", "W3", "W4a", "W4b", "W5", "debug"):
        assert name in rows, r.stdout


FAULTS = """
import resource, numpy as np, flowgrad as tf
from flowgrad.backends import memory
x = tf.tensor(np.linspace(-1, 1, 10**6).astype(np.float32))
g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
g(x); g(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    g(x)
print(memory.state, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tunables")
def test_big_temporaries_reuse_freed_memory():
    """A 1e6-element gradient makes ~15 fresh 4 MB arrays per call: with the tunables they
    reuse freed memory (no page faults); with FLOWGRAD_MALLOC=system each page faults."""
    def faults(**env):
        r = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True,
                           env=dict(os.environ, **env), timeout=120)
        assert r.returncode == 0, r.stderr
        state, n = r.stdout.split()
        return state, float(n)
    state, tuned = faults()
    if state == "unsupported":
        pytest.skip("not glibc: malloc is left as it is")
    assert state == "glibc" and tuned < 100, tuned
    state, system = faults(FLOWGRAD_MALLOC="system")
    assert state == "system" and system > 1000, system      # 4 MB = 1000 pages per array
