"""``python -m bench [--quick] [--peers] [--threads N] [names...]``: run the workloads and
print a table of flowgrad's time, the NumPy floor's, and their ratio. Rows marked
``[torch]``, ``[jax]`` or ``[autograd]`` put that peer in flowgrad's column (measured only
where importable). ``--peers`` regroups the rows: one line per workload, its ratios to the
floor for flowgrad eager, tf.jit (the NumPy replay; native code; the NumPy replay on two
threads), PyTorch eager and JAX jit (issue 29's comparison: ``python -m bench --peers``).
``--threads N`` sets tf.jit's default thread count (1 otherwise: every row runs on one
thread, except those marked "2 threads"; JAX's only under ``taskset -c N``, see
bench/peers.py). ``--isa avx2`` runs on an AVX-512 x86 machine the code paths an AVX2-only
one takes (NumPy's loops, OpenBLAS's kernels, numba's, PyTorch's and XLA's): a proxy for
such a machine's instructions, not for its caches, memory or clock.

Workloads in OPT_IN run only when named: ``python -m bench jitcost`` (tf.jit native's
compile and cache-load times, in fresh processes: bench/jit_cost.py)."""
import argparse
import os
import re
import sys

from .workloads import WORKLOADS

# named only: not part of a run of every workload (jitcost: ~30 s of subprocesses measuring
# compile time, no NumPy floor; its own run: python -m bench jitcost)
OPT_IN = ("jitcost",)
PEERS_DEFAULT = ["W1", "W2", "W3", "W4a", "W4b", "W5"]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("names", nargs="*",
                   help=f"workloads (default all but {', '.join(OPT_IN)}: "
                        f"{', '.join(k for k in WORKLOADS if k not in OPT_IN)}; with --peers: "
                        f"{' '.join(PEERS_DEFAULT)})")
    p.add_argument("--quick", action="store_true", help="few repetitions (CI: results only)")
    p.add_argument("--reps", type=int, default=None, help="rounds per measurement")
    p.add_argument("--peers", action="store_true",
                   help="one line per workload: flowgrad eager/jit beside torch and jax")
    p.add_argument("--threads", type=int, default=None,
                   help="tf.jit's default thread count (default 1)")
    p.add_argument("--isa", choices=["avx2"], default=None,
                   help="run every side on the AVX2 code paths (x86 only; see isa_env)")
    args = p.parse_args(argv)
    if args.isa and os.environ.get("FLOWGRAD_BENCH_ISA") != args.isa:
        # every library reads its setting when it loads: start again with them set
        env = {**os.environ, **isa_env(args.isa), "FLOWGRAD_BENCH_ISA": args.isa}
        rest = sys.argv[1:] if argv is None else list(argv)
        os.execve(sys.executable, [sys.executable, "-m", "bench", *rest], env)
    if args.isa:
        print(isa_banner())
    # tf.jit's default thread count: one (every row runs on one thread) unless asked;
    # rows marked "2 threads" pass threads=2 themselves
    import flowgrad as tf
    tf.set_jit_threads(args.threads if args.threads is not None else 1)
    os.environ["FLOWGRAD_JIT_THREADS"] = str(tf.get_jit_threads())   # (subprocesses too)
    reps = args.reps or (2 if args.quick else 9)
    if args.peers:
        return peers_table(args.names or PEERS_DEFAULT, reps)
    names = args.names or [k for k in WORKLOADS if k not in OPT_IN]
    print(f"{'workload':54} {'flowgrad':>12} {'floor':>12} {'ratio':>7}")
    for name in names:
        for label, fg, floor, scale, unit in WORKLOADS[name](reps):
            print(f"{label:54} {fg * scale:9.3f} {unit:>2} {floor * scale:9.3f} {unit:>2} "
                  f"{fg / floor:7.2f}")
    return 0


def isa_env(isa: str) -> dict:
    """The environment that keeps each library to ``isa``'s instructions: NumPy's
    dispatched loops above it switched off by name, OpenBLAS's Haswell kernels (what it runs
    on AVX2 AMD and Intel alike), numba's and XLA's code generated for that level, PyTorch's
    kernels and its MKL/oneDNN capped there."""
    import platform
    if isa != "avx2" or platform.machine().lower() not in ("x86_64", "amd64"):
        raise SystemExit(f"--isa {isa}: only avx2, on x86-64 (this is {platform.machine()})")
    from numpy._core._multiarray_umath import __cpu_dispatch__
    above = [f for f in __cpu_dispatch__ if f.startswith("AVX512") or f == "X86_V4"]
    return {"NPY_DISABLE_CPU_FEATURES": " ".join(above),
            "OPENBLAS_CORETYPE": "Haswell",
            "NUMBA_CPU_NAME": "haswell",
            "ATEN_CPU_CAPABILITY": "avx2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "DNNL_MAX_CPU_ISA": "AVX2",
            "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_max_isa=AVX2").strip()}


def isa_banner() -> str:
    """What --isa set, and what NumPy says it now dispatches to (checked, not assumed)."""
    from numpy._core._multiarray_umath import __cpu_features__
    on = [f for f, v in __cpu_features__.items() if v and (f.startswith("AVX512")
                                                            or f == "X86_V4")]
    dispatched = [f for f in on if f in os.environ.get("NPY_DISABLE_CPU_FEATURES", "")]
    if dispatched:
        raise SystemExit(f"--isa: NumPy still dispatches to {dispatched}")
    keys = ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE", "NUMBA_CPU_NAME",
            "ATEN_CPU_CAPABILITY", "XLA_FLAGS")
    return (f"# --isa {os.environ['FLOWGRAD_BENCH_ISA']}: "
            + "; ".join(f"{k}={os.environ.get(k, '')}" for k in keys))


COLUMNS = ("eager", "tf.jit", "jit native", "jit 2 threads", "torch", "jax")
_SIZE = re.compile(r"(\d+ elt|\d(?:\.\d+)?e[+-]?\d+)")


def _classify(label):
    """(workload key, column) of a row label: the key is the label's first word, its size
    ("1 elt", "1e+06") and what part or variant it measures; the column is the peer's
    bracket, else what the label says of tf.jit ("2 threads" first: it is a tf.jit row)."""
    if "[torch]" in label:
        col = "torch"
    elif "[jax]" in label:
        col = "jax"
    elif "2 threads" in label:
        col = "jit 2 threads"
    elif "tf.jit native" in label:
        col = "jit native"
    elif "tf.jit" in label:
        col = "tf.jit"
    else:
        col = "eager"
    size = _SIZE.search(label)
    key = label.split()[0] + (f" {size.group(1)}" if size else "")
    if "fwd only" in label:
        key += " fwd"
    if "empty tidy" in label:
        key += " tidy alone"
    if "gradients only" in label:
        key += " grads"
    if "update only" in label:
        key += " update"
    if " as x.pow(3)" in label:
        key += " pow"
    if "minimize" in label.split(",")[0]:       # (W5's optimizer variant: not W2's jit rows)
        key += " minimize"
    return key, col


def peers_table(names, reps):
    """The --peers table: ratios to the NumPy floor, each measured beside its floor."""
    table, order = {}, []
    for name in names:
        for label, fg, floor, scale, unit in WORKLOADS[name](reps):
            if "[autograd]" in label:
                continue
            key, col = _classify(label)
            if key not in table:
                table[key] = {"floor": f"{floor * scale:.3g} {unit}"}
                order.append(key)
            table[key][col] = fg / floor
    print(f"{'workload':16}" + "".join(f"{c:>15}" for c in COLUMNS) + f"{'NumPy floor':>16}")
    for key in order:
        row = table[key]
        cells = "".join(f"{row[c]:>14.2f}x" if c in row else f"{'-':>15}" for c in COLUMNS)
        print(f"{key:16}{cells}{row['floor']:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
