"""The benchmark suite in its quick mode (each workload's result checked against its NumPy
floor, no timing asserted). (The memory policy that keeps big temporaries from
page-faulting is tested in test_import_side_effects.py.)"""
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
    for name in ("W1", "W2", "W3", "W4a", "W4b", "W5", "debug", "ckpt", "pex"):
        assert name in rows, r.stdout




@pytest.mark.slow          # ~15 s
def test_peers_table_has_one_line_per_workload():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "bench", "--peers", "--quick", "--threads", "2",
                        "W3", "W4a"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["workload", "eager", "tf.jit", "jit"]
    rows = {ln.split("  ")[0].strip(): ln for ln in lines[1:]}
    assert set(rows) == {"W3 1e+06", "W3 1e+07", "W4a 1e6", "W4a 1e6 pow"}, rows
    for ln in rows.values():
        assert ln.split()[-2].replace(".", "", 1).isdigit()        # the floor's time
