"""``python -m bench.gpu``: the check to run on a machine with a CUDA GPU (the backends issue).

    pip install -e '.[test,cuda]' && python -m bench.gpu

1. every op table of tests/ on the ``cupy`` backend (each row: forward in float64 and
   float32, gradients to its order against finite differences, no leaked tensor);
2. W2 (MLP 784-256-256-10 train step, Adam, batch 128) and W3 (gradient of
   sum(exp(x) sin(x) + x²) at 1e6 and 1e7 elements), eager and under tf.jit, on ``cupy``
   against the same on ``numpy``, with the device synchronized before each clock reading;
3. device memory: ``tf.memory().num_bytes_in_gpu`` before, during and after a tidy.

``--backends numpy,array_api_strict`` runs the same on other backends (how the script is
tested without a GPU); ``--quick`` takes few repetitions; ``--no-tables`` skips part 1.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import flowgrad as tf
from flowgrad import backends

from .timing import measure
from .workloads import _mlp_data, _mlp_flowgrad

ROOT = Path(__file__).resolve().parents[1]


def _sync():
    getattr(backends.active(), "synchronize", lambda: None)()


def _timed(fn):
    def run():
        r = fn()
        _sync()
        return r
    return run


def w2(reps, steps=20):
    x, y, params = _mlp_data()
    vs, opt, loss = _mlp_flowgrad(x, y, params)
    try:
        for _ in range(steps):
            opt.minimize(loss)
        eager = measure({"s": _timed(lambda: opt.minimize(loss))}, reps, inner=5)["s"]
        jitted = float("nan")            # (a replayed update needs out= buffers)
        if backends.active().supports_out:
            step = tf.jit(lambda: opt.minimize(loss, return_cost=True))
            jitted = measure({"s": _timed(step)}, reps, inner=5)["s"]
        final = float(opt.minimize(loss, return_cost=True).item())
    finally:
        tf.dispose(vs)
        opt.dispose()
    return {"W2 MLP train step, eager": eager, "W2 MLP train step, tf.jit": jitted}, final


def w3(reps, sizes=(10**6, 10**7)):
    rows, check = {}, {}
    for n in sizes:
        x = tf.tensor(np.linspace(-1, 1, n).astype(np.float32))
        g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
        jg = tf.jit(g)
        check[n] = float(g(x).sum().item())
        rows[f"W3 grad, {n:.0e}, eager"] = measure({"s": _timed(lambda: g(x))}, reps)["s"]
        jg(x)
        rows[f"W3 grad, {n:.0e}, tf.jit"] = measure({"s": _timed(lambda: jg(x))}, reps)["s"]
        x.dispose()
    return rows, check


def memory_check():
    """num_bytes_in_gpu rises with a 40 MB tensor and falls back when its tidy ends."""
    before = tf.memory()
    if "num_bytes_in_gpu" not in before:
        return "no device memory on this backend"
    during = []

    def body():
        t = tf.ones([10**7])
        during.append(tf.memory().num_bytes_in_gpu)
        t.shape        # noqa: B018 - alive until here
    tf.tidy(body)
    after = tf.memory().num_bytes_in_gpu
    ok = during[0] - before.num_bytes_in_gpu >= 4 * 10**7 and after <= before.num_bytes_in_gpu
    return (f"num_bytes_in_gpu: {before.num_bytes_in_gpu} before, {during[0]} with a 1e7 "
            f"float32 tensor, {after} after its tidy: {'OK' if ok else 'NOT FREED'}")


def tables(backend):
    env = dict(os.environ, FLOWGRAD_TEST_BACKENDS=backend)
    files = sorted(str(p) for p in (ROOT / "tests").glob("test_ops_*.py"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "-k", "backend or case", *files], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    return r.returncode, "\n".join(lines[-15:])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.gpu")
    p.add_argument("--backends", default="numpy,cupy")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-tables", action="store_true")
    args = p.parse_args(argv)
    names = args.backends.split(",")
    reps = 2 if args.quick else 7
    sizes = (10**5,) if args.quick else (10**6, 10**7)
    results, checks = {}, {}
    for name in names:
        try:
            prev = tf.set_backend(name)
        except tf.FlowgradError as e:
            print(f"backend {name}: not usable here: {e}")
            return 1
        try:
            if name != "numpy":
                print(f"== {name}: {memory_check()}")
            r2, loss = w2(reps, steps=3 if args.quick else 20)
            r3, sums = w3(reps, sizes)
            results[name] = {**r2, **r3}
            checks[name] = (loss, sums)
        finally:
            tf.set_backend(prev)
    base = names[0]
    print(f"\n{'workload':34}" + "".join(f"{n:>18}" for n in names) + "   ratio")
    for label in results[base]:
        row = "".join(f"{results[n][label] * 1e3:15.3f} ms" for n in names)
        print(f"{label:34}{row}   {results[names[-1]][label] / results[base][label]:.3f}")
    for n in names[1:]:
        lb, sb = checks[base]
        ln, sn = checks[n]
        same = abs(ln - lb) <= 1e-3 * max(1.0, abs(lb)) and all(
            abs(sn[k] - sb[k]) <= 1e-3 * max(1.0, abs(sb[k])) for k in sb)
        print(f"results on {n} {'match' if same else 'DIFFER FROM'} {base}'s "
              f"(W2 loss {ln:.6g} vs {lb:.6g})")
        if not same:
            return 1
    rc = 0
    if not args.no_tables:
        for n in names[1:]:
            code, summary = tables(n)
            print(f"\n== op tables on {n} (rc {code}):\n{summary}")
            rc |= code
    return rc


if __name__ == "__main__":
    sys.exit(main())
