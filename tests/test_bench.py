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
@pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"),
                    reason="--isa avx2 emulates an x86-64 instruction level")
def test_isa_avx2_runs_every_side_below_avx512():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    r = subprocess.run([sys.executable, "-m", "bench", "--isa", "avx2", "--quick", "W1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    banner, header = r.stdout.splitlines()[:2]
    assert banner.startswith("# --isa avx2:") and "OPENBLAS_CORETYPE=Haswell" in banner
    assert "--xla_cpu_max_isa=AVX2" in banner and header.split()[0] == "workload"
    # a process started in isa_env's environment has NumPy's AVX-512 loops off (where the
    # machine has any: elsewhere they are off anyway)
    probe = (
        "import os, subprocess, sys\n"
        "import bench.__main__ as m\n"
        "code = 'from numpy._core._multiarray_umath import __cpu_features__ as f; "
        "print(f[\"X86_V4\"], f[\"AVX512_SKX\"])'\n"
        "env = {**os.environ, **m.isa_env('avx2')}\n"
        "print(subprocess.run([sys.executable, '-c', code], env=env, text=True,\n"
        "                     capture_output=True).stdout)\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split() == ["False", "False"], r.stdout + r.stderr


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
