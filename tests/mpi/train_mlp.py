"""Run by tests/test_distributed.py as ``mpiexec -n 2 python train_mlp.py OUT``; each rank
writes OUT.rank<r>.npz. Imported by the test for the one-process reference (``train``).

Ranks start from different weights (seed 100 + rank); broadcast_variables makes them
rank 0's; then 20 Adam steps of an MLP, each on the rank's half of a shuffled global batch.
"""
import sys

import numpy as np

import flowgrad as tf

N, FEATURES, HIDDEN, CLASSES = 64, 8, 16, 3
GLOBAL_BATCH, EPOCHS = 16, 5              # 4 batches an epoch: 20 steps
NAMES = ("mlp/w1", "mlp/b1", "mlp/w2", "mlp/b2")


def dataset():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, FEATURES)).astype(np.float32)
    labels = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    return x, np.eye(CLASSES, dtype=np.float32)[labels]


def build(seed, hidden=HIDDEN):
    rng = np.random.default_rng(seed)
    shapes = [(FEATURES, hidden), (hidden,), (hidden, CLASSES), (CLASSES,)]
    return [tf.variable(tf.tensor((rng.standard_normal(s) * 0.5).astype(np.float32)),
                        name=n) for n, s in zip(NAMES, shapes)]


def loss_fn(params, xb, yb):
    w1, b1, w2, b2 = params
    logits = (xb @ w1 + b1).relu() @ w2 + b2
    return -(logits.log_softmax() * yb).sum(1).mean()     # mean over this rank's rows


def train(rank, size, distributed=True):
    """Return {name: array}: initial weights (after broadcast), final weights, losses."""
    params = build(100 + rank)
    out = {"before/" + v.name: v.numpy() for v in params}
    if distributed:
        tf.distributed.broadcast_variables(params)
    out.update({"init/" + v.name: v.numpy() for v in params})
    opt = tf.train.adam(0.01)
    if distributed:
        opt = tf.distributed.DistributedOptimizer(opt)
    x, y = dataset()
    losses = []
    for epoch in range(EPOCHS):
        for xb, yb in tf.distributed.batches((x, y), GLOBAL_BATCH, epoch=epoch, seed=7,
                                             rank=rank, size=size):
            xb, yb = tf.tensor(xb), tf.tensor(yb)
            loss = opt.minimize(lambda: loss_fn(params, xb, yb), return_cost=True)
            losses.append(loss.item())
    out.update({"final/" + v.name: v.numpy() for v in params})
    out["losses"] = np.array(losses)
    out["steps"] = np.array(opt.iterations)
    for v in params:
        v.dispose()
    opt.dispose()
    return out


def collectives(rank, size):
    """all_reduce / broadcast of rank-dependent values, for the test to check."""
    r = float(rank + 1)
    d = tf.distributed
    res = {
        "mean": d.all_reduce(tf.tensor([r, 2 * r])).numpy(),
        "sum": d.all_reduce([tf.tensor([r, -r]), tf.scalar(rank + 1, "int32")], op="sum"),
        "max": d.all_reduce({"a": tf.tensor([[r]])}, op="max")["a"].numpy(),
        "bcast": d.broadcast(tf.tensor([r, r, r]), root=1).numpy(),
    }
    res["sum_f"], res["sum_i"] = res["sum"][0].numpy(), res["sum"][1].numpy()
    del res["sum"]
    return {"coll/" + k: v for k, v in res.items()}


def partial_gradients(rank, size):
    """A variable with a gradient on rank 0 only counts as zero on rank 1; one with no
    gradient anywhere is left alone; apply_gradients averages a hand-made gradient."""
    a = tf.variable(tf.tensor([1.0, 2.0]), name="part/a")
    b = tf.variable(tf.tensor([3.0]), name="part/b")
    c = tf.variable(tf.tensor([5.0]), name="part/c")
    opt = tf.distributed.DistributedOptimizer(tf.train.sgd(0.5))
    f = (lambda: (a * a).sum() + (b * b).sum()) if rank == 0 else (lambda: (a * a).sum())
    cost = opt.minimize(f, return_cost=True, var_list=[a, b, c]).item()
    res = {"cost": np.array(cost), "a1": a.numpy(), "b1": b.numpy(), "c1": c.numpy()}
    opt.apply_gradients({"part/a": tf.tensor([rank + 1.0, 0.0])})
    res.update(a2=a.numpy(), iterations=np.array(opt.iterations))
    for v in (a, b, c):
        v.dispose()
    return {"part/" + k: v for k, v in res.items()}


if __name__ == "__main__":
    rank, size, local = tf.distributed.init(timeout=10)    # a healthy job never waits that long
    results = train(rank, size)
    results.update(collectives(rank, size))
    results.update(partial_gradients(rank, size))
    results["size"] = np.array(size)
    np.savez(f"{sys.argv[1]}.rank{rank}.npz", **results)
