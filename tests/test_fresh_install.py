"""The README's main-job command in a fresh virtual environment: a missing dependency in
pyproject.toml cannot hide behind packages this machine happens to have."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow          # a venv and a pip install (10 s to minutes): .ci/run runs it
def test_fresh_venv_installs_and_runs_the_demo(tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here: {made.stderr.strip()[:200]}")
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    pip = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        if "Could not find a version" in pip.stderr or "connection" in pip.stderr.lower():
            pytest.skip(f"no package index reachable: {pip.stderr.strip()[-200:]}")
        raise AssertionError(pip.stderr)
    done = subprocess.run([str(bindir / "flowgrad"), "demo", "--quick", "--no-code",
                           "--out", str(tmp_path / "report")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stdout
    assert "gradient check of the loss: passed" in done.stdout
    assert (tmp_path / "report" / "report.html").exists()
