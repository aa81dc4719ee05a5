"""Run by tests/test_distributed.py as ``mpiexec -n 2 python faults.py MODE``.

raise   rank 1's loss raises at step 3 while rank 0 waits in the gradient all-reduce:
        the hook init() installs must end both ranks with rank 1's message.
guard   rank 1 raises inside ``tf.distributed.guard()`` and a try/except swallows it
        (as a framework would); the guard must still end the job.
shapes  rank 1 builds a hidden layer of 12 instead of 16: the first step must fail on
        every rank with the clear disagreement error.
"""
import os
import sys

import flowgrad as tf

MESSAGE = "rank one could not read shard 7"


def main(mode):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_mlp import build, dataset, loss_fn
    rank, size, _ = tf.distributed.init()
    params = build(0, hidden=12 if (mode == "shapes" and rank == 1) else 16)
    opt = tf.distributed.DistributedOptimizer(tf.train.sgd(0.1))
    x, y = (tf.tensor(a) for a in tf.distributed.shard(dataset(), rank, size))

    def loss(step):
        if rank == 1 and step == 3:
            if mode == "raise":
                raise ValueError(MESSAGE)
            if mode == "guard":
                try:
                    with tf.distributed.guard():
                        raise ValueError(MESSAGE)
                except ValueError:
                    pass                 # swallowed: without guard() rank 0 would hang
                sys.exit(0)
        return loss_fn(params, x, y)

    for step in range(10**6 if mode != "shapes" else 5):
        opt.minimize(lambda: loss(step))
    print("finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
