"""The checkpoint workload (issue #16): save and restore of 100 MB of float32 variables with
tf.train.Checkpoint, next to np.save / np.load of the same arrays in the same folder (the
floor). The goal is at least half np.save's speed: a time ratio of at most 2.

A checkpoint does more than np.save: a SHA-256 of the tensor bytes, an fsync and a rename
(atomic and durable), the optimizer's state. np.save does not fsync, so its time is the
page cache's; the row "np.save + fsync" shows what durability alone costs on this disk.

    python -m bench ckpt --reps 3
    BENCH_CKPT_DIR=/some/disk python -m bench ckpt     # the folder (default: a temp dir)
"""
import os
import shutil
import tempfile

import numpy as np

import flowgrad as tf

from .timing import measure

N_VARS, N_ELEMENTS = 10, 2_500_000              # 10 x 10 MB = 100 MB of float32


def _np_save(arrays, paths, fsync=False):
    for a, p in zip(arrays, paths):
        with open(p, "wb") as f:
            np.save(f, a)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


def _np_load(paths):
    return [np.load(p) for p in paths]


def ckpt(reps):
    """Checkpoint.write / restore of 100 MB against np.save / np.load; ms per 100 MB, the
    throughputs in MB/s in the labels."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(N_ELEMENTS, dtype=np.float32) for _ in range(N_VARS)]
    mb = sum(a.nbytes for a in arrays) / 1e6
    folder = tempfile.mkdtemp(prefix="flowgrad-bench-ckpt-", dir=os.environ.get("BENCH_CKPT_DIR"))
    variables = [tf.variable(tf.tensor(a), name=f"bench_ckpt/w{i}") for i, a in enumerate(arrays)]
    try:
        checkpoint = tf.train.Checkpoint(weights=variables)
        path = os.path.join(folder, "bench.safetensors")
        np_paths = [os.path.join(folder, f"w{i}.npy") for i in range(N_VARS)]
        # correctness first: what restore reads back is what was saved, bit for bit
        checkpoint.write(path)
        for v in variables:
            v.assign(tf.zeros_like(v))
        checkpoint.restore(path)
        for v, a in zip(variables, arrays):
            np.testing.assert_array_equal(v.numpy(), a, err_msg=f"{v.name} after restore")
        _np_save(arrays, np_paths)
        for a, b in zip(arrays, _np_load(np_paths)):
            np.testing.assert_array_equal(a, b)

        rounds = max(1, reps)
        t = measure({"save": lambda: checkpoint.write(path),
                     "np.save": lambda: _np_save(arrays, np_paths),
                     "np.save+fsync": lambda: _np_save(arrays, np_paths, fsync=True)},
                    rounds, warmup=1)
        r = measure({"restore": lambda: checkpoint.restore(path),
                     "np.load": lambda: _np_load(np_paths)}, rounds, warmup=1)
        for v, a in zip(variables, arrays):
            np.testing.assert_array_equal(v.numpy(), a, err_msg=f"{v.name} after the runs")
    finally:
        for v in variables:
            v.dispose()
        shutil.rmtree(folder, ignore_errors=True)

    def speed(seconds):
        return f"{mb / seconds:.0f}"
    scale = 1e3 * 100 / mb                      # ms per 100 MB
    return [
        (f"ckpt save {mb:.0f} MB, MB/s {speed(t['save'])} vs np.save {speed(t['np.save'])}",
         t["save"], t["np.save"], scale, "ms"),
        (f"ckpt save vs np.save+fsync ({speed(t['np.save+fsync'])} MB/s)",
         t["save"], t["np.save+fsync"], scale, "ms"),
        (f"ckpt restore, MB/s {speed(r['restore'])} vs np.load {speed(r['np.load'])}",
         r["restore"], r["np.load"], scale, "ms"),
    ]
