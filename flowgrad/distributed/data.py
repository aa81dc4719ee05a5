"""Each rank's part of the data: ``shard``, a seeded per-epoch shuffle every rank agrees on
(``epoch_permutation``), and ``batches`` that combine them.

Data is an array, a tensor, a list, or a tuple/dict of those with the same length (``(x,
y)``, ``{"x": x, "y": y}``); a tuple/dict comes back as the same structure of slices.
"""
import itertools

import numpy as np

from ..errors import ArgumentError
from ..tensor import Tensor
from .runtime import current_job, is_initialized
from .sync import set_batch


def _length(data, fn):
    if isinstance(data, dict) or (isinstance(data, tuple) and data and
                                  not isinstance(data[0], (int, float, bool))):
        parts = list(data.values()) if isinstance(data, dict) else list(data)
        lengths = {_length(p, fn) for p in parts}
        if len(lengths) > 1:
            raise ArgumentError(f"{fn}(): the parts of the data have different lengths "
                                f"{sorted(lengths)}; features and labels must have one "
                                f"row each per example")
        return lengths.pop() if lengths else 0
    if isinstance(data, Tensor):
        if data.rank == 0:
            raise ArgumentError(f"{fn}(): a scalar tensor has no examples to split; pass "
                                f"a tensor whose first axis holds the examples")
        return data.shape[0]
    try:
        return len(data)
    except TypeError:
        raise ArgumentError(f"{fn}(): data must be an array, a tensor, a list, or a "
                            f"tuple/dict of them; got {type(data).__name__} (for an "
                            f"iterator, use itertools.islice(it, rank, None, size))") from None


def _take(data, index):
    """Rows ``index`` (a slice or an int array) of data, in data's own structure."""
    if isinstance(data, dict):
        return type(data)((k, _take(v, index)) for k, v in data.items())
    if isinstance(data, tuple) and data and not isinstance(data[0], (int, float, bool)):
        return tuple(_take(p, index) for p in data)
    if isinstance(data, Tensor):
        from ..tensor import convert
        return convert(data.numpy()[index])
    if isinstance(data, np.ndarray):
        return data[index]
    if isinstance(index, slice):
        return data[index]
    return [data[i] for i in index]


def _rank_size(rank, size):
    if rank is None or size is None:
        s = current_job()
        rank = s.rank if rank is None else rank
        size = s.size if size is None else size
    for name, v in (("rank", rank), ("size", size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ArgumentError(f"{name} must be an int, got {v!r}")
    if size < 1 or not 0 <= rank < size:
        raise ArgumentError(f"rank={rank}, size={size}: need size >= 1 and 0 <= rank < size")
    return int(rank), int(size)


def shard(data, rank=None, size=None, drop_remainder=False):
    """This rank's contiguous part of ``data`` along the first axis (default ``rank`` and
    ``size``: this job's). Parts differ by at most one row, the first ranks taking the
    extra; ``drop_remainder=True`` gives every rank ``n // size`` rows, so per-rank mean
    losses weigh the same and averaged gradients equal the whole data's.

    >>> import flowgrad as tf, numpy as np
    >>> x = np.arange(10)
    >>> [tf.distributed.shard(x, r, 3).tolist() for r in range(3)]
    [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    >>> xs, ys = tf.distributed.shard((x, x * 10), 1, 3, drop_remainder=True)
    >>> xs.tolist(), ys.tolist()
    ([3, 4, 5], [30, 40, 50])
    """
    rank, size = _rank_size(rank, size)
    n = _length(data, "shard")
    if drop_remainder:
        per = n // size
        return _take(data, slice(rank * per, (rank + 1) * per))
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return _take(data, slice(start, start + base + (rank < extra)))


def epoch_permutation(n, epoch, seed=0):
    """The shuffled order of ``n`` examples for ``epoch``: a function of ``(seed, epoch)``
    only, so every rank computes the same one without talking, and each epoch differs.

    >>> import flowgrad as tf
    >>> p = tf.distributed.epoch_permutation(6, epoch=0, seed=1)
    >>> sorted(p.tolist()) == list(range(6))
    True
    >>> p.tolist() == tf.distributed.epoch_permutation(6, epoch=0, seed=1).tolist()
    True
    >>> p.tolist() == tf.distributed.epoch_permutation(6, epoch=1, seed=1).tolist()
    False
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ArgumentError(f"epoch_permutation(n={n!r}): n must be a count of examples "
                            f"(an int >= 0)")
    return np.random.default_rng([int(seed), int(epoch), 0x6667]).permutation(int(n))


def batches(data, global_batch_size, epoch=0, seed=0, shuffle=True, rank=None, size=None,
            drop_remainder=True):
    """This rank's share of each global batch of one epoch: the data in the order of
    ``epoch_permutation(n, epoch, seed)`` (if ``shuffle``), cut into global batches of
    ``global_batch_size`` rows, each split into ``size`` equal parts. With a loss that is
    the mean over the rank's rows, averaged gradients are the whole batch's. The last,
    short batch is dropped unless ``drop_remainder=False`` (it is then split as ``shard``
    does). In a job of several ranks, each collective checks that every rank is at the
    same global batch (a rank that skips one is out of step: a DistributedError), so
    iterate this job's batches on every rank alike (for rank-0-only work, slice the data
    yourself or pass ``rank=0, size=1``).

    >>> import flowgrad as tf, numpy as np
    >>> x = np.arange(8)
    >>> [b.tolist() for b in tf.distributed.batches(x, 4, shuffle=False, rank=1, size=2)]
    [[2, 3], [6, 7]]
    """
    rank, size = _rank_size(rank, size)
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size,
                                                             (int, np.integer)) \
            or global_batch_size < 1:
        raise ArgumentError(f"batches(global_batch_size={global_batch_size!r}): need a "
                            f"positive int")
    if global_batch_size % size:
        raise ArgumentError(f"batches(): global_batch_size={global_batch_size} does not "
                            f"split evenly over {size} ranks; use a multiple of {size} so "
                            f"every rank's mean loss weighs the same")
    n = _length(data, "batches")
    order = epoch_permutation(n, epoch, seed) if shuffle else np.arange(n)
    per = global_batch_size // size
    # this job's ranks: in step
    job = is_initialized() and size == current_job().size > 1
    for i, start in enumerate(range(0, n, global_batch_size)):
        idx = order[start:start + global_batch_size]
        if len(idx) < global_batch_size:
            if drop_remainder:
                return
            part = _take(data, shard(idx, rank, size))
        else:
            part = _take(data, idx[rank * per:(rank + 1) * per])
        if job:
            set_batch(epoch, i)
        yield part


def shard_iterable(iterable, rank=None, size=None):
    """Every ``size``-th item of an iterator (a generator, a file), starting at ``rank``.

    >>> import flowgrad as tf
    >>> list(tf.distributed.shard_iterable(range(7), 1, 3))
    [1, 4]
    """
    rank, size = _rank_size(rank, size)
    return itertools.islice(iterable, rank, None, size)
