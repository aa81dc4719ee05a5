"""``python -m bench.distributed [--ranks 2] [--steps 50]``: the W2 model (MLP
784-256-256-10, relu, softmax cross-entropy, global batch 128, Adam 1e-3) trained with
tf.distributed on N ranks (each on 128/N rows) against one process on the whole batch.

Prints medians over the steps: the step time, the all-reduce time inside the step
(DistributedOptimizer's arrival header, pack + Allreduce + unpack of the 269,322 gradient
floats and the loss, in one buffer) and, in a second run of steps with a Barrier before
each reduction, that time split into waiting for the slower rank (on a busy machine, most
of it) and the transfer (the header, which checks the ranks are in step, included); then the same reduction done alone: the buffer API into a reused buffer,
tf.distributed.all_reduce, the buffer API one call per variable, and mpi4py's pickle API
(lowercase ``allreduce``). BLAS is kept single-threaded (OMP_NUM_THREADS=1) so ranks do
not fight over cores. Needs mpi4py and mpiexec (``pip install 'flowgrad[mpi]'``).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

GLOBAL_BATCH = 128
SHAPES = [(784, 256), (256,), (256, 256), (256,), (256, 10), (10,)]


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _model(tf, rank, size):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((GLOBAL_BATCH, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, GLOBAL_BATCH)]
    params = [(rng.standard_normal(s) * np.sqrt(2 / s[0])).astype(np.float32)
              if len(s) == 2 else np.zeros(s, np.float32) for s in SHAPES]
    vs = [tf.variable(tf.tensor(p), name=f"w2/{i}") for i, p in enumerate(params)]
    xs, ys = (tf.tensor(a) for a in tf.distributed.shard((x, y), rank, size))

    def loss():
        W1, b1, W2, b2, W3, b3 = vs
        h = xs.mat_mul(W1).add(b1).relu().mat_mul(W2).add(b2).relu()
        return tf.losses.softmax_cross_entropy(ys, h.mat_mul(W3).add(b3))
    return vs, loss


def worker(steps, warmup=5):
    import flowgrad as tf
    rank, size, _ = tf.distributed.init()
    vs, loss = _model(tf, rank, size)
    opt = tf.distributed.DistributedOptimizer(tf.train.adam(1e-3))
    losses = [opt.minimize(loss, return_cost=True).item() for _ in range(warmup)]
    tf.distributed.barrier()
    times, comm = [], []
    for _ in range(steps):
        c0, t0 = opt.comm_seconds, time.perf_counter()
        losses.append(opt.minimize(loss, return_cost=True).item())
        times.append(time.perf_counter() - t0)
        comm.append(opt.comm_seconds - c0)
    out = {"size": size, "step_ms": 1e3 * statistics.median(times),
           "comm_ms": 1e3 * statistics.median(comm), "losses": losses}
    if size > 1:
        out.update(_split(opt, loss, steps))
        out.update(_alone(tf, [v.numpy() for v in vs], steps))
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def _split(opt, loss, steps):
    """The in-step all-reduce split in two: waiting at a Barrier for the slower rank, and
    the transfer itself (pack, Allreduce, unpack). Medians over steps."""
    from mpi4py import MPI
    from flowgrad.distributed import sync
    comm = MPI.COMM_WORLD
    enter, waits = sync.enter, []

    def timed_enter(*args, **kwargs):      # the header waits for the slower rank: wait first
        t0 = time.perf_counter()
        comm.Barrier()
        waits.append(time.perf_counter() - t0)
        enter(*args, **kwargs)
    sync.enter = timed_enter
    transfer = []
    try:
        for _ in range(steps):
            c0 = opt.comm_seconds
            opt.minimize(loss)
            transfer.append(opt.comm_seconds - c0 - waits[-1])
    finally:
        sync.enter = enter
    return {"wait_ms": 1e3 * statistics.median(waits),
            "transfer_ms": 1e3 * statistics.median(transfer)}


def _alone(tf, grads, reps):
    """The same gradients reduced outside training: ms per step, three ways."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    flat = np.concatenate([g.ravel() for g in grads])
    res = {}

    def timed(name, fn):
        fn()
        comm.Barrier()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        res[name] = 1e3 * statistics.median(ts)
    timed("bucket_ms", lambda: comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM))
    timed("barrier_ms", tf.distributed.barrier)          # the header alone
    timed("per_variable_ms", lambda: [comm.Allreduce(MPI.IN_PLACE, g, op=MPI.SUM)
                                      for g in grads])
    timed("pickle_ms", lambda: comm.allreduce(grads, op=_add_lists))
    ts = [tf.tensor(g) for g in grads]
    timed("all_reduce_api_ms", lambda: tf.distributed.all_reduce(ts))
    return res


def _add_lists(a, b):
    return [x + y for x, y in zip(a, b)]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.distributed")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.steps)
        return 0
    exe = shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        print("no mpiexec: pip install 'flowgrad[mpi]'", file=sys.stderr)
        return 1
    me = [sys.executable, "-m", "bench.distributed", "--worker", "--steps", str(args.steps)]
    over = ["--oversubscribe"] if args.ranks > (os.cpu_count() or 1) else []
    runs = {}
    for label, cmd in (("1 process", me),
                       (f"{args.ranks} ranks", [exe, "-n", str(args.ranks)] + over + me)):
        p_ = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600,
                            stdin=subprocess.DEVNULL)
        line = [s for s in p_.stdout.splitlines() if s.startswith("RESULT ")]
        if p_.returncode or not line:
            print(p_.stdout + p_.stderr, file=sys.stderr)
            return 1
        runs[label] = json.loads(line[0][7:])
    one, many = runs["1 process"], runs[f"{args.ranks} ranks"]
    n = args.ranks
    same = np.allclose(one["losses"], many["losses"], rtol=1e-4)
    print(f"W2 (MLP 784-256-256-10, Adam, global batch {GLOBAL_BATCH}), "
          f"{args.steps} steps, single-threaded BLAS")
    print(f"{'1 process, batch 128: step':48} {one['step_ms']:8.3f} ms")
    print(f"{f'{n} ranks, batch {GLOBAL_BATCH // n} each: step':48} {many['step_ms']:8.3f} ms")
    print(f"{'  of which gradient all-reduce (median, in step)':48} {many['comm_ms']:8.3f} ms")
    print(f"{'    = waiting for the slower rank':48} {many['wait_ms']:8.3f} ms")
    print(f"{'    + transfer (pack, Allreduce, unpack)':48} {many['transfer_ms']:8.3f} ms")
    for key, label in (("bucket_ms", "Allreduce alone, one reused buffer"),
                       ("all_reduce_api_ms", "tf.distributed.all_reduce(6 tensors)"),
                       ("barrier_ms", "tf.distributed.barrier (the header alone)"),
                       ("per_variable_ms", "Allreduce alone, one call per variable"),
                       ("pickle_ms", "pickle allreduce (lowercase API)")):
        print(f"{'  ' + label:48} {many[key]:8.3f} ms")
    print(f"losses equal to one process (rtol 1e-4): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
