"""``tf.distributed``: data-parallel training over MPI, with the losses of one process.

Run the same script on N processes (``mpiexec -n 4 python train.py``, ``srun``, an MPIJob);
each rank trains on its shard of every global batch and gradients are averaged over the
ranks before each update (Horovod's pattern, on MPI). The loop::

    import flowgrad as tf
    rank, size, _ = tf.distributed.init()                # size 1 under plain `python`
    ... build the model (the same variables on every rank) ...
    tf.distributed.broadcast_variables()                 # everyone starts from rank 0's
    opt = tf.distributed.DistributedOptimizer(tf.train.adam(1e-3))
    for epoch in range(epochs):
        for xb, yb in tf.distributed.batches((x, y), 128, epoch=epoch, seed=0):
            loss = opt.minimize(lambda: loss_fn(xb, yb), return_cost=True)
        tf.distributed.root_print(epoch, loss.item())    # only rank 0 prints / writes

mpi4py is optional (``pip install 'flowgrad[mpi]'``) and imported only when the process was
launched under MPI. An uncaught exception on any rank aborts the whole job with that
rank's traceback (``init()`` installs the hook; ``guard()`` for code that catches); so do a
rank that ends while others wait in a collective, a collective not reached by every rank
within ``init(timeout=...)`` (default 30 min), and ranks out of step (sync.py).
"""
from ..camel_case import camel_to_snake as _camel_to_snake
from .collectives import all_reduce, broadcast, broadcast_variables
from .data import batches, epoch_permutation, shard, shard_iterable
from .optimizer import DistributedOptimizer
from ..errors import DistributedError, MPIUnavailableError
from .runtime import (abort, barrier, guard, init,
                      install_abort_hook, is_initialized, is_root, launched_under_mpi,
                      local_rank, rank, root_print, size)

__all__ = sorted(n for n in globals() if not n.startswith("_"))


def __getattr__(name):
    snake = _camel_to_snake(name)
    if snake != name and snake in globals():
        return globals()[snake]
    raise AttributeError(f"module 'flowgrad.distributed' has no attribute '{name}'")
