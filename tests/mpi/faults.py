"""Run by tests/test_distributed*.py as ``mpiexec -n 2 python faults.py MODE``, with
``init(timeout=10)``; rank 1 misbehaves at step 5 (3 for raise/guard) while rank 0 trains on.

raise   rank 1's loss raises while rank 0 waits in the gradient all-reduce: the hook init()
        installs must end both ranks with rank 1's message.
guard   rank 1 raises inside ``tf.distributed.guard()`` and a try/except swallows it
        (as a framework would); the guard must still end the job.
shapes  rank 1 builds a hidden layer of 12 instead of 16: the first step must fail on
        every rank with the clear disagreement error.
exit0   rank 1 calls sys.exit(0) / sys.exit(1) / returns from main: rank 0, waiting for
exit1   it in the all-reduce, must end the job at once (not hang, not wait for the timeout).
return
sleep   rank 1 stalls forever: rank 0 must end the job after the 10 s timeout, naming the
        collective, the step and rank 1.
skip    rank 1 skips one batch (``continue``): out of step, a DistributedError on every rank
        instead of averaging misaligned gradients.
extra   rank 1 makes one all_reduce more (a metric under ``if rank == 1``): out of step.
"""
import itertools
import os
import sys
import time

import flowgrad as tf

MESSAGE = "rank one could not read shard 7"
TIMEOUT = 10


def main(mode):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_mlp import build, dataset, loss_fn
    rank, size, _ = tf.distributed.init(timeout=TIMEOUT)
    params = build(0, hidden=12 if (mode == "shapes" and rank == 1) else 16)
    opt = tf.distributed.DistributedOptimizer(tf.train.sgd(0.1))
    data = dataset()

    def global_batches():                       # 4 global batches of 16 an epoch, forever
        for epoch in itertools.count():
            yield from tf.distributed.batches(data, 16, epoch=epoch, seed=1)

    def loss(step, xb, yb):
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
        return loss_fn(params, tf.tensor(xb), tf.tensor(yb))

    steps = 5 if mode == "shapes" else 10**6
    for step, (xb, yb) in zip(range(steps), global_batches()):
        if rank == 1 and step == 5:
            print(f"rank 1 at step {step}: {mode}", flush=True)
            if mode == "exit0":
                sys.exit(0)
            if mode == "exit1":
                sys.exit(1)
            if mode == "return":
                return
            if mode == "sleep":
                time.sleep(10**6)
            if mode == "skip":
                continue
            if mode == "extra":
                tf.distributed.all_reduce(tf.scalar(1.0))
        opt.minimize(lambda: loss(step, xb, yb))
    print(f"rank {rank} finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
