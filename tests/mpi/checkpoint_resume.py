"""Run by tests/test_checkpoint_mpi.py as ``mpiexec -n 2 python checkpoint_resume.py MODE
DIR OUT STOP``: 2-rank training of train_mlp.py's MLP (DistributedOptimizer over Adam) with
a CheckpointManager in DIR saving every SAVE_EVERY steps, up to step STOP. Each rank writes
OUT.rank<r>.npz: the first step it ran, the loss of each step, its final weights, and how
many files it wrote itself.

MODE ``fresh``: ranks start from different weights, the manager's ``init_fn`` broadcasts
rank 0's (there is no checkpoint yet). MODE ``resume``: every rank builds different weights
again and ``restore_or_initialize()`` must give all of them the checkpoint's, with no
broadcast, then training continues from the restored step.
"""
import os
import sys

import numpy as np

import flowgrad as tf
from flowgrad.train import checkpoint_file as CF

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import GLOBAL_BATCH, build, dataset, loss_fn  # noqa: E402

SAVE_EVERY = 3

_writes = []
_write = CF.write


def _counting_write(path, *args):            # only rank 0 may ever get here
    _writes.append(os.path.basename(path))
    return _write(path, *args)


CF.write = _counting_write


def train(mode, folder, stop, rank, size):
    params = build(100 + rank)                 # different on each rank until restored
    opt = tf.distributed.DistributedOptimizer(tf.train.adam(0.01))
    ckpt = tf.train.Checkpoint(optimizer=opt, params=params)
    manager = tf.train.CheckpointManager(
        ckpt, folder, max_to_keep=2,
        init_fn=lambda: tf.distributed.broadcast_variables(params))
    restored = manager.restore_or_initialize()
    assert (restored is None) == (mode == "fresh"), (mode, restored)
    save = manager.save_every_n_steps(SAVE_EVERY)
    x, y = dataset()
    per_epoch = len(x) // GLOBAL_BATCH
    start = opt.iterations
    losses = []
    for epoch in range(start // per_epoch, stop // per_epoch + 1):
        for i, (xb, yb) in enumerate(tf.distributed.batches(
                (x, y), GLOBAL_BATCH, epoch=epoch, seed=7, rank=rank, size=size)):
            step = epoch * per_epoch + i
            if step < start:
                continue                       # done before the checkpoint
            if step >= stop:
                break
            xb, yb = tf.tensor(xb), tf.tensor(yb)
            loss = opt.minimize(lambda: loss_fn(params, xb, yb), return_cost=True)
            losses.append(loss.item())
            save(opt.iterations)               # every rank calls it; rank 0 writes
    out = {"start": np.array(start), "losses": np.array(losses),
           "iterations": np.array(opt.iterations), "writes": np.array(len(_writes)),
           "checkpoints": np.array(len(manager.checkpoints))}
    out.update({"final/" + v.name: v.numpy() for v in params})
    for v in params:
        v.dispose()
    opt.dispose()
    return out


if __name__ == "__main__":
    mode, folder, out, stop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rank, size, _ = tf.distributed.init(timeout=20)
    results = train(mode, folder, stop, rank, size)
    np.savez(f"{out}.rank{rank}.npz", **results)
