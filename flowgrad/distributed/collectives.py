"""Collectives on flowgrad tensors through MPI's buffer interface (``Allreduce`` / ``Bcast``
into preallocated NumPy buffers; the pickle-based lowercase API is ~15x slower).

Many tensors travel as ONE flat buffer per dtype (a bucket), not one MPI call per tensor;
the bucket is kept and reused while the layout (shapes, dtypes) stays the same. Each
collective first waits for every rank with the deadline and checks they are in step
(sync.enter), then moves the data on flowgrad's own duplicate of COMM_WORLD.
"""
import zlib
from collections import OrderedDict

import numpy as np

from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, DistributedError
from ..tensor import Tensor, Variable, convert, registered_variables
from . import sync
from .runtime import current_job

_REDUCE_OPS = ("sum", "mean", "max", "min")


class Bucket:
    """Arrays of fixed shapes and dtypes packed back to back, one flat buffer per dtype."""

    def __init__(self, layout):
        self.layout = tuple((tuple(shape), np.dtype(dt)) for shape, dt in layout)
        self.groups = {}        # dtype -> [buffer, [(index, offset, count, shape)]]
        for i, (shape, dt) in enumerate(self.layout):
            n = int(np.prod(shape, dtype=np.int64))
            g = self.groups.setdefault(dt, [0, []])
            g[1].append((i, g[0], n, shape))
            g[0] += n
        for dt, g in self.groups.items():
            g[0] = np.zeros(g[0], dt)
        self.values = sum(int(g[0].size) for g in self.groups.values())
        self.code = sync.layout_code(self.layout)     # the same in every rank's process

    def pack(self, arrays):
        """Copy ``arrays`` (None = zeros) into the buffers."""
        for buf, entries in self.groups.values():
            for i, off, n, _ in entries:
                a = arrays[i]
                if a is None:
                    buf[off:off + n] = 0
                else:
                    np.copyto(buf[off:off + n], np.reshape(a, -1), casting="unsafe")

    def unpack(self, scale=None):
        """Fresh arrays (the buffers are reused by the next step), scaled if asked."""
        out = [None] * len(self.layout)
        for buf, entries in self.groups.values():
            res = buf * buf.dtype.type(scale) if scale is not None else buf.copy()
            for i, off, n, shape in entries:
                out[i] = res[off:off + n].reshape(shape)
        return out

    def reduce(self, state, op):
        for buf, _ in self.groups.values():
            if buf.size:
                state.coll.Allreduce(state.MPI.IN_PLACE, buf, op=op)

    def bcast(self, state, root):
        for buf, _ in self.groups.values():
            if buf.size:
                state.coll.Bcast(buf, root=root)


class BucketCache:
    """The few most recent buckets, by layout: a training loop reuses one buffer forever."""

    def __init__(self, capacity=8):
        self.capacity = capacity
        self._buckets = OrderedDict()

    def get(self, layout):
        key = tuple((tuple(s), np.dtype(d).str) for s, d in layout)
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = Bucket(layout)
            while len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return b


_cache = BucketCache()


def _flatten(tensors, fn):
    """(list of tensors, rebuild(list) -> same structure as the input)."""
    if isinstance(tensors, dict):
        keys = list(tensors)
        return ([convert(tensors[k], f"tensors[{k!r}]", fn) for k in keys],
                lambda out: type(tensors)(zip(keys, out)))     # dict, GradMap, OrderedDict
    if isinstance(tensors, (list, tuple)) and (not tensors or isinstance(tensors[0], Tensor)
                                               or isinstance(tensors[0], np.ndarray)):
        kind = type(tensors)
        return ([convert(t, f"tensors[{i}]", fn) for i, t in enumerate(tensors)],
                lambda out: kind(out) if kind in (list, tuple) else list(out))
    return [convert(tensors, "tensors", fn)], lambda out: out[0]


def _check_dtypes(ts, fn, op=None):
    for t in ts:
        if t.dtype == dtypes.bool_:
            raise ArgumentError(f"{fn}(): bool tensors cannot be reduced or broadcast; cast "
                                f"them to int32 or float32 first")
        if op == "mean" and not dtypes.is_float(t.dtype):
            raise ArgumentError(f"{fn}(op='mean'): a {t.dtype} tensor of shape {t.shape} "
                                f"cannot hold a mean; use op='sum' (and divide), or cast it "
                                f"to float32 first")


def all_reduce(tensors, op="mean"):
    """The elementwise ``op`` ("mean", "sum", "max" or "min") of each tensor over all
    ranks, on every rank. Takes a tensor, a list/tuple or a dict of tensors (TensorLikes
    too) and returns new tensors in the same structure. All the tensors travel in one
    ``Allreduce`` per dtype (a reused buffer), not one call each. Every rank must pass the
    same shapes in the same order.

    >>> import flowgrad as tf
    >>> tf.distributed.all_reduce(tf.tensor([1.0, 2.0])).print()      # size 1: itself
    Tensor
        [1, 2]
    >>> out = tf.distributed.all_reduce({"loss": tf.scalar(0.5), "n": tf.scalar(3, "int32")},
    ...                                 op="sum")
    >>> out["loss"].item(), out["n"].item()
    (0.5, 3)
    """
    if op not in _REDUCE_OPS:
        raise ArgumentError(f"all_reduce(op={op!r}): op must be one of "
                            f"{', '.join(map(repr, _REDUCE_OPS))}")
    ts, rebuild = _flatten(tensors, "all_reduce")
    _check_dtypes(ts, "all_reduce", op)
    s = current_job()
    if s.size == 1:
        return rebuild([E.make_tensor(E.from_host(np.array(E.to_host(t._array())))) for t in ts])
    bucket = _cache.get([(t.shape, dtypes.NP[t.dtype]) for t in ts])
    sync.enter(sync.ALL_REDUCE, lambda: f"all_reduce(op={op!r}) of {_shapes(ts)}",
               arg=_REDUCE_OPS.index(op) + 1, values=bucket.values, layout=bucket.code)
    bucket.pack([E.to_host(t._array()) for t in ts])
    mpi_op = {"sum": s.MPI.SUM, "mean": s.MPI.SUM, "max": s.MPI.MAX, "min": s.MPI.MIN}[op]
    bucket.reduce(s, mpi_op)
    arrays = bucket.unpack(1.0 / s.size if op == "mean" else None)
    return rebuild([E.make_tensor(E.from_host(a)) for a in arrays])


def broadcast(tensors, root=0):
    """Rank ``root``'s values of ``tensors`` (a tensor, list, tuple or dict), on every
    rank, as new tensors in the same structure (one ``Bcast`` per dtype). Every rank must
    pass the same shapes.

    >>> import flowgrad as tf
    >>> tf.distributed.broadcast([tf.tensor([3, 4])])[0].print()
    Tensor
        [3, 4]
    """
    ts, rebuild = _flatten(tensors, "broadcast")
    _check_dtypes(ts, "broadcast")
    s = current_job()
    _check_root(root, s, "broadcast")
    if s.size == 1:
        return rebuild([E.make_tensor(E.from_host(np.array(E.to_host(t._array())))) for t in ts])
    bucket = _cache.get([(t.shape, dtypes.NP[t.dtype]) for t in ts])
    sync.enter(sync.BROADCAST, lambda: f"broadcast(root={root}) of {_shapes(ts)}",
               arg=root + 1, values=bucket.values, layout=bucket.code)
    if s.rank == root:
        bucket.pack([E.to_host(t._array()) for t in ts])
    bucket.bcast(s, root)
    return rebuild([E.make_tensor(E.from_host(a)) for a in bucket.unpack()])


def _shapes(ts, kind="tensor"):
    """'2 tensors: (3,) float32, () int32' (the first 4), for messages."""
    shown = ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in ts[:4])
    more = f", ... ({len(ts) - 4} more)" if len(ts) > 4 else ""
    return f"{len(ts)} {kind}{'s' if len(ts) != 1 else ''}: {shown}{more}"


def _check_root(root, s, fn):
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < s.size:
        raise ArgumentError(f"{fn}(root={root!r}): root must be a rank, an int in "
                            f"0..{s.size - 1} (this job has {s.size} rank(s))")


# ---------------------------------------------------------------- agreement between ranks

def signature(variables):
    """``[(name, shape, dtype)]``: what ranks must agree on before sharing variables."""
    return [(v.name, tuple(v.shape), str(v.dtype)) for v in variables]


def check_agreement(sig, what, fix):
    """All-gather each rank's signature (once: the pickle API is fine for this) and raise
    the same DistributedError on every rank when they differ. Returns rank 0's order of
    names, the order every rank then packs in."""
    s = current_job()
    if s.size == 1:
        return [n for n, _, _ in sig]
    sync.enter(sync.AGREE, lambda: f"the check that ranks agree on {what}",
               arg=zlib.crc32(what.encode()))
    sigs = s.coll.allgather(sig)
    problems = _differences(sigs)
    if problems:
        shown = problems[:8] + ([f"... and {len(problems) - 8} more"]
                                if len(problems) > 8 else [])
        raise DistributedError(f"ranks disagree on {what}: " + "; ".join(shown) + f". {fix}")
    return [n for n, _, _ in sigs[0]]


def _fmt(entry):
    shape, dt = entry
    return f"{shape} {dt}"


def _differences(sigs):
    ref = {n: (sh, dt) for n, sh, dt in sigs[0]}
    out = []
    for r, sig in enumerate(sigs[1:], 1):
        mine = {n: (sh, dt) for n, sh, dt in sig}
        for n, e in ref.items():
            if n not in mine:
                out.append(f"'{n}' {_fmt(e)} is on rank 0 but not on rank {r}")
            elif mine[n] != e:
                out.append(f"'{n}' is {_fmt(e)} on rank 0 but {_fmt(mine[n])} on rank {r}")
        for n, e in mine.items():
            if n not in ref:
                out.append(f"'{n}' {_fmt(e)} is on rank {r} but not on rank 0")
    return out


_SAME_MODEL = ("Every rank must build the same model: the same variables with the same "
               "names, shapes and dtypes (create them in the same order, or name them).")


def broadcast_variables(variables=None, root=0):
    """Give every rank rank ``root``'s values of ``variables`` (default: every registered
    variable), so all ranks start from the same weights: call it once after building the
    model and before training. Ranks must have the same variables (names, shapes, dtypes),
    else a DistributedError on every rank says which differ. Returns the variables.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 2.0]), name="w_bcast_doc")
    >>> [v.name for v in tf.distributed.broadcast_variables([w])]
    ['w_bcast_doc']
    >>> w.dispose()
    """
    if variables is None:
        variables = list(registered_variables().values())
    elif isinstance(variables, dict):
        variables = list(variables.values())
    elif isinstance(variables, Variable):
        variables = [variables]
    variables = list(variables)
    for i, v in enumerate(variables):
        if not isinstance(v, Variable):
            raise ArgumentError(f"broadcast_variables(): variables[{i}] is a "
                                f"{type(v).__name__}, not a Variable; pass tf.variable(...) "
                                f"objects (or nothing, for every registered variable)")
        v.throw_if_disposed()
    s = current_job()
    _check_root(root, s, "broadcast_variables")
    if s.size == 1:
        return variables
    order = check_agreement(signature(variables), "the variables to broadcast", _SAME_MODEL)
    by_name = {v.name: v for v in variables}
    ordered = [by_name[n] for n in order]
    bucket = _cache.get([(v.shape, dtypes.NP[v.dtype]) for v in ordered])
    sync.enter(sync.BCAST_VARS, lambda: f"broadcast_variables(root={root}) of "
               f"{_shapes(ordered, 'variable')}", arg=root + 1, values=bucket.values,
               layout=bucket.code)
    if s.rank == root:
        bucket.pack([E.to_host(v._array()) for v in ordered])
    bucket.bcast(s, root)
    for v, a in zip(ordered, bucket.unpack()):
        t = E.make_tensor(E.from_host(a))
        v.assign(t)
        t.dispose()
    return variables
