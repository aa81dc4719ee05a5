"""What tf.jit's native backend costs before its first result (issue 29): the first call of
a jitted function with ``backend="native"`` in a fresh process, which traces it, imports
numba and compiles its segments (or loads them from the disk cache), measured in a
subprocess (``sys.executable -c``) per sample with ``FLOWGRAD_JIT_CACHE`` in a temporary
folder of its own:

- cold: an empty cache folder, so every segment is compiled (issue 29's target: 1.5 s);
- cached: a second process on the folder the cold one filled (target: 0.3 s);

for W2's training step (tf.jit of the whole Adam step, built by bench/workloads.py's own
functions) and W1's 200-op chain gradient on one element. Each row's "floor" is its target,
so its ratio is the fraction of the target taken; each time is the median of 3 process runs
(1 with --quick). Only the first call is timed: not Python's start, flowgrad's import or
building the model. Each run also checks what it did (the cold one compiled and loaded
nothing, the cached one loaded and compiled nothing) and its result against the floor's.

    python -m bench jitcost

Needs numba (no rows without it). Not part of ``python -m bench``'s run of every workload
(bench/__main__.py OPT_IN): ~30 s of subprocesses, and its times are seconds of compiling,
not ratios to a NumPy floor.
"""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

TARGETS = {"cold": 1.5, "cached": 0.3}      # seconds: issue 29's targets for a first call
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))    # (bench's parent)

# Each program builds its jitted function and input, computes the floor's result, then
# times the first call alone. numba must not be imported before it: its import is part of
# what a first call costs.
_COMMON = """
import json, sys, time
import numpy as np
import flowgrad as tf
from flowgrad import jit_native_cache
"""
PROGRAMS = {
    "W2": """
from bench.workloads import _mlp_data, _mlp_jit_step, _NumpyAdam
x, y, params = _mlp_data()
step, free = _mlp_jit_step(x, y, params, "native")
expected = _NumpyAdam(params).step(x, y)
call = step
""",
    "W1 1 elt": """
from bench.workloads import _chain, _chain_floor
a = np.linspace(0.1, 0.5, 1).astype(np.float32)
x = tf.tensor(a)
g = tf.jit(tf.grad(lambda t: _chain(t, 200)), backend="native")
expected = _chain_floor(a, 200)()
call = lambda: g(x)
""",
}
_TIMED = """
assert "numba" not in sys.modules, "numba was imported before the first call"
t0 = time.perf_counter()
out = call()
seconds = time.perf_counter() - t0
np.testing.assert_allclose(out.numpy(), expected, rtol=2e-3)
print(json.dumps({"seconds": seconds, "counts": jit_native_cache.counts}))
"""


def first_call(program, cache):
    """(seconds of the first call, the cache's counts) of ``program`` in a fresh process
    whose FLOWGRAD_JIT_CACHE is ``cache``."""
    env = dict(os.environ, FLOWGRAD_JIT_CACHE=cache)
    done = subprocess.run([sys.executable, "-c", _COMMON + PROGRAMS[program] + _TIMED],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"jitcost {program}: the subprocess failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["seconds"], out["counts"]


def jitcost(reps):
    """Rows: each program's first native call, cold and cached, against its target (s)."""
    if importlib.util.find_spec("numba") is None:
        return []
    runs = 3 if reps > 2 else 1
    rows = []
    for program in PROGRAMS:
        times = {"cold": [], "cached": []}
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="flowgrad-jitcost-") as cache:
                for kind in ("cold", "cached"):
                    seconds, counts = first_call(program, cache)
                    # cold: every segment compiled; cached: every one loaded
                    compiled, loaded = (counts["compiled"], counts["loaded"])
                    ok = (compiled > 0 and loaded == 0) if kind == "cold" else \
                        (loaded > 0 and compiled == 0)
                    assert ok, (f"jitcost {program} ({kind}): the cache's counts {counts} "
                                f"(cached: a key differs from the cold run's, e.g. flowgrad's "
                                f"jit_native*.py edited in between, or the cache is unused)")
                    times[kind].append(seconds)
        for kind, target in TARGETS.items():
            what = "1st call" + (", cached" if kind == "cached" else ", compiling")
            rows.append((f"jitcost {program} {what} (target {target} s)",
                         statistics.median(times[kind]), target, 1, "s"))
    return rows
