"""Fusion of elementwise chains in a ``tf.jit`` replay, evaluated in cache-sized blocks.

A replay runs one NumPy call per kernel: on large arrays every intermediate makes a round
trip through main memory, so a chain of k elementwise kernels streams ~3k arrays. Here a
maximal run of elementwise kernels (float ufuncs of one dtype, every input of the output's
size or of size 1) becomes one step that walks the arrays block by block (BLOCK_BYTES):
each kernel writes into a small block buffer reused along the chain, intermediates used only
inside the chain never leave the L2 cache, and only the chain's inputs and the outputs used
outside it touch main memory.

NOTE: exactness: every kernel still runs as the same ufunc on the same operands; only the
slicing differs. NumPy's ufunc loops compute each element independently of where the slice
starts or ends (SIMD tails included: tests/test_jit_fusion.py checks every fusable op), so
fused results equal eager ones bit for bit, with any block size and thread count. No
reduction is fused (a blockwise sum would change the summation order, hence the bits).
Under tf.jit's native backend a chain may also hold compiled loops of its arithmetic
kernels (jit_native's ``_split``), called on each block as a ufunc is: elementwise, exact
arithmetic, so the same bits too.

Threads: blocks are shared among ``threads`` workers (NumPy ufuncs release the GIL), each
with its own block buffers and a contiguous range of blocks; the default is
``tf.set_jit_threads(n)``, else the environment variable ``FLOWGRAD_JIT_THREADS``, else the
cores this process may run on. A chain splits only where each thread gets THREAD_MIN
elements or more, so small programs stay on the calling thread.
"""
from __future__ import annotations

import _thread
import contextvars
import math
import os
import queue
import threading
import time
import warnings
import weakref

import numpy as np

from . import engine as E
from .arg_checks import as_int
from .after_fork import after_fork

# 128 KB blocks (32768 float32): fastest of 32-256 KB on W3 (a 2 MB L2 holds the block
# buffers of a chain; smaller blocks pay more Python per element). On threads, twice that:
# each block's Python holds the GIL, and half as many hand-offs made W3 at 1e7 10% faster
# on 2 threads (1e6: 6%), where one thread loses 10% at 1e6
BLOCK_BYTES = 1 << 17
THREADS_BLOCK_FACTOR = 2
# smaller chains run as plain replays: their arrays stay in cache anyway, and one call a
# kernel is cheaper than a loop of blocks (measured on W3: equal at ~1 MB, fused 15% faster
# at 4 MB, 10% slower at 256 KB)
FUSE_MIN_BYTES = 1 << 20
THREAD_MIN = 1 << 18   # elements per thread below which a thread costs more than it saves


def _cores():
    """The cores this process may run on (a container's or taskset's share, not the
    machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):      # (macOS, Windows)
        return os.cpu_count() or 1


ENV = "FLOWGRAD_JIT_THREADS"


def _env_threads():
    value = os.environ.get(ENV, "").strip()
    if not value:
        return _cores()
    try:
        n = int(value)
        if n >= 1:
            return n
    except ValueError:
        pass
    # (a warning, not an error: a speed setting should not stop the import)
    warnings.warn(f"{ENV}={value!r} in the environment is not a whole number >= 1: tf.jit "
                  f"runs fused chains on 1 thread (set it to a thread count, or unset it for "
                  f"the cores this process may run on)", RuntimeWarning, stacklevel=2)
    return 1


THREADS = _env_threads()       # default thread count of fused regions (tf.jit(threads=))


def set_jit_threads(threads: int | None) -> int:
    """Set how many threads the fused chains of a ``tf.jit`` function share when it was
    given no ``threads=``; returns the previous count. ``None`` goes back to the default:
    ``FLOWGRAD_JIT_THREADS``, else the cores this process may run on. Results are the same
    bits with any count; chains too small to pay for a thread stay on the calling thread.

    >>> import flowgrad as tf
    >>> previous = tf.set_jit_threads(1)
    >>> tf.get_jit_threads()
    1
    >>> tf.set_jit_threads(previous)
    1
    """
    global THREADS
    n = _env_threads() if threads is None else as_int(threads, "threads",
                                                      "set_jit_threads", 1)
    previous, THREADS = THREADS, n
    return previous


def get_jit_threads() -> int:
    """The thread count of ``tf.jit``'s fused chains when a function gives no ``threads=``
    (see ``set_jit_threads``).

    >>> import flowgrad as tf
    >>> tf.get_jit_threads() >= 1
    True
    """
    return THREADS


# The worker threads (started on first use, daemons) take jobs from a SimpleQueue: its put
# and get are C, so the interruptible calling thread never touches a Python-level lock
# (a ThreadPoolExecutor's submit and Future waits did, and a Ctrl-C inside them deadlocked
# the next call: see FusedChain.__call__)
_jobs = queue.SimpleQueue()
_workers = []
_workers_lock = threading.Lock()


def _submit(ctx, fn, *args):
    """Run ``fn(*args)`` in ``ctx`` (the caller's context: NumPy's errstate) on a worker."""
    if not _workers:
        with _workers_lock:
            while len(_workers) < max(1, _cores() - 1):
                t = threading.Thread(target=_work, name=f"flowgrad-jit-{len(_workers)}",
                                     daemon=True)
                _workers.append(t)
                t.start()
    _jobs.put((ctx, fn, args))


def _after_fork_in_child():
    """A forked child has only the thread that forked: the parent's workers are gone, and
    a job queued for them would wait forever (a threaded replay hung in a
    multiprocessing worker). The child starts workers of its own when it needs them."""
    global _jobs, _workers_lock
    _jobs = queue.SimpleQueue()
    _workers_lock = threading.Lock()
    _workers.clear()
    for chain in list(_chains):
        chain._running.clear()          # (workers that were running are not in the child)


_chains = weakref.WeakSet()     # every FusedChain (their running workers, after a fork)
after_fork(_after_fork_in_child)


def _work():
    while True:
        job = _jobs.get()
        job[0].run(job[1], *job[2])     # (fn reports its own errors: FusedChain._worker)
        # NOTE: let go of the job before waiting for the next: held, its arrays (the
        # replay's outputs) look in use to tf.jit, which then allocates new ones each call
        # instead of recycling them (page faults: W3 1e7 on 2 threads took 20 ms, not 17)
        job = None


def _fusable(st, meta, float_dtypes):
    """(size, dtype) of an elementwise kernel that may join a fused chain, else None: a
    NumPy ufunc's, or a compiled segment's meant for a chain's blocks (jit_native._split)."""
    if st[0] == "n" and st[1].blocked:
        # (not on variables, as ufuncs are not: the chain is made for the traced sizes)
        return None if any(r[0] == "v" for r in st[2]) else (st[1].n, st[1].dtype)
    if st[0] != "k":
        return None
    prim, refs, attrs, outs = st[1], st[2], st[3], st[4]
    if prim.ufunc is None or prim.multi or attrs or len(outs) != 1:
        return None
    shape, dt = meta[outs[0]]
    if dt not in float_dtypes:        # (the ufunc attribute holds for float inputs only)
        return None
    n = math.prod(shape)
    for kind, val in refs:
        if kind == "s":
            rshape, rdt = meta[val]
        elif kind == "c" and isinstance(val, (np.ndarray, np.generic)):
            rshape, rdt = val.shape, val.dtype
        else:                         # variables: their shape may change between calls
            return None
        if rdt != dt or math.prod(rshape) not in (n, 1):
            return None
    return n, dt


def fuse(steps, meta, escape, threads=None):
    """The replay's steps with each maximal elementwise chain of at least two kernels on
    FUSE_MIN_BYTES or more replaced by ``("f", FusedChain, inputs, None, outputs)``.

    Non-elementwise steps that do not read the open chain's results are moved before it
    (the chain runs where it ends), so a chain is not cut by an unrelated kernel."""
    if E.B.name != "numpy" or not E.B.supports_out:
        return steps
    readers = slot_readers(steps)
    out, chain, made, key = [], [], set(), None

    def close():
        if len(chain) >= 2:
            members = {i for i, _ in chain}
            out.append(_chain_step([st for _, st in chain], members, readers, escape,
                                   key, threads, meta))
        else:
            out.extend(st for _, st in chain)
        chain.clear()
        made.clear()

    for i, st in enumerate(steps):
        k = _fusable(st, meta, E.B.float_dtypes)
        if k is not None and k[0] * k[1].itemsize >= FUSE_MIN_BYTES:
            if k != key:
                close()
                key = k
            chain.append((i, st))
            made.update(st[4])
            continue
        refs = st[2] if st[0] != "a" else (st[2],)      # (a native segment's: a tuple)
        if chain and (any(r[0] == "s" and r[1] in made for r in refs) or st[0] == "cb" or
                      (st[0] == "k" and st[1].impure)):
            close()
        out.append(st)
    close()
    return out


def slot_readers(steps):
    """slot -> the indices of the replay's steps that read it."""
    readers = {}
    for i, st in enumerate(steps):
        for r in (st[2] if st[0] != "a" else (st[2],)):
            if r[0] == "s":
                readers.setdefault(r[1], []).append(i)
    return readers


def ref_key(ref):
    """A reference to a slot, or to a constant by identity (an array's == is elementwise)."""
    return ref if ref[0] == "s" else ("c", id(ref[1]))


def run_boundary(members, indices, readers, escape):
    """``(inputs, outputs)`` of a run of kernel steps (``indices``: their places in the
    replay) made one step: the references it reads from outside, each once, and its results
    read after it (or returned, or assigned to a variable)."""
    made = {o for st in members for o in st[4]}
    outs = tuple(s for st in members for s in st[4]
                 if s in escape or any(j not in indices for j in readers.get(s, ())))
    ins, seen = [], set()
    for st in members:
        for r in st[2]:
            if (r[0] != "s" or r[1] not in made) and ref_key(r) not in seen:
                seen.add(ref_key(r))
                ins.append(r)
    return tuple(ins), outs


def _chain_step(members, indices, readers, escape, key, threads, meta):
    ins, outs = run_boundary(members, indices, readers, escape)
    # which inputs are sliced per block (the others have one element: broadcast whole)
    full = tuple(math.prod(meta[r[1]][0] if r[0] == "s" else r[1].shape) == key[0] for r in ins)
    fc = FusedChain(members, ins, full, outs, key[0], key[1], threads)
    return ("f", fc, ins, None, outs)


class FusedChain:
    """One fused chain: ``fc(inputs, outputs)`` fills the output arrays (full size, given by
    the replay) from the inputs, block by block, and returns them."""

    def __init__(self, members, ins, full, outs, n, dtype, threads):
        self.n, self.dtype, self.threads = n, dtype, threads
        size = BLOCK_BYTES * (1 if (threads or THREADS) <= 1 else THREADS_BLOCK_FACTOR)
        self.block = max(1, size // np.dtype(dtype).itemsize)
        self.ins, self.outs, self.full = ins, outs, full     # full: sliced per block
        self.names = [st[1].name if st[0] == "k" else "+".join(st[1].names)
                      for st in members]
        self._tmp_cache = {}       # worker -> its block buffers, made on first use
        self._gen = 0              # calls so far, and interrupted ones again (see _settle)
        self._running = set()      # the workers running now
        _chains.add(self)
        self.run, self.n_tmp, self.source = _compile(members, ins, full, outs, self.block)

    def __repr__(self):
        return f"<fused {'+'.join(self.names)} on {self.n} elements>"

    def __call__(self, ins, outs):
        flat_in = [a.reshape(-1) if getattr(a, "ndim", 0) else a for a in ins]
        flat_out = [o.reshape(-1) for o in outs]
        threads = self.threads or THREADS
        n = self.n
        t = min(threads, max(1, n // THREAD_MIN))
        if t <= 1:
            self.run(0, n, flat_in, flat_out, self._tmps(0))
            return outs
        # contiguous ranges of whole blocks, one per worker; this thread takes the first
        per = -(-n // (t * self.block)) * self.block
        self._settle()
        self._gen += 1
        gen = self._gen
        done, errors = [], []
        try:
            for w, lo in enumerate(range(per, n, per), 1):
                lk = _thread.allocate_lock()
                lk.acquire()
                _submit(contextvars.copy_context(), self._worker, gen, lk, errors, lo,
                        min(lo + per, n), flat_in, flat_out, self._tmps(w))
                done.append(lk)
            self.run(0, min(per, n), flat_in, flat_out, self._tmps(0))
        except BaseException:
            self._gen += 1                  # a worker not started yet will not start
            raise
        finally:
            # never leave a worker writing into buffers the replay hands out or reuses
            for lk in done:
                lk.acquire()                # (its worker releases it when it ends)
            self._settle()
        if errors:
            raise errors[0]
        return outs

    # NOTE: a Ctrl-C may end a call at any bytecode, including inside a wait. So the
    # calling thread waits on nothing with Python-level locking (an interrupt inside a
    # Condition's code can leave its lock held, and the next wait deadlocks; a
    # ThreadPoolExecutor's did): each worker releases a plain lock of its own when it ends,
    # registers in a set while it runs, and runs only if its call's generation is still
    # current; what an interrupted call left running, the next call waits out by polling.
    def _settle(self):
        while self._running:
            time.sleep(1e-4)

    def _worker(self, gen, lk, errors, lo, hi, flat_in, flat_out, tmps):
        running = self._running
        running.add(lk)
        try:
            if gen == self._gen:
                self.run(lo, hi, flat_in, flat_out, tmps)
        except BaseException as e:      # (handed to the calling thread)
            errors.append(e)
        finally:
            running.discard(lk)
            lk.release()

    def _tmps(self, worker):
        bufs = self._tmp_cache.get(worker)
        if bufs is None:
            bufs = self._tmp_cache[worker] = [np.empty(self.block, self.dtype)
                                    for _ in range(self.n_tmp)]
        return bufs


def _compile(members, ins, full, outs, block):
    """The block loop as Python source: names i* (inputs), o* (outputs), t* (block
    buffers), u* (ufuncs)."""
    ns = {}
    name = {}           # slot / input key -> expression inside a block
    pre = []            # per-block slicing of inputs and outputs
    for j, r in enumerate(ins):
        key = ref_key(r)
        if r[0] == "c" and not full[j]:
            # NOTE: a size-1 constant as a NumPy scalar of its dtype: the same result as
            # broadcasting the array (NumPy 2: a typed scalar keeps its dtype)
            ns[f"k{j}"] = r[1].reshape(())[()]
            name[key] = f"k{j}"
        elif full[j]:
            pre.append(f"x{j} = i{j}[a:b]")
            name[key] = f"x{j}"
        else:
            name[key] = f"i{j}"       # a size-1 slot: broadcast whole
    out_pos = {s: j for j, s in enumerate(outs)}
    # liveness inside the chain: the last member reading each internal slot
    last = {}
    for m, st in enumerate(members):
        for r in st[2]:
            if r[0] == "s":
                last[r[1]] = m
    free, n_tmp, body = [], 0, []
    tmp_of = {}
    for m, st in enumerate(members):
        if st[0] == "n":        # a compiled loop (jit_native.Segment.blocked) on the block
            seg, refs = st[1], st[2]
            args = seg.block_args([name[ref_key(r)] for r in refs])
            targets = []
            for o in st[4]:     # (outputs first, then the inputs dying here are freed)
                if o in out_pos:
                    pre.append(f"y{out_pos[o]} = o{out_pos[o]}[a:b]")
                    targets.append(f"y{out_pos[o]}")
                else:
                    t = free.pop() if free else n_tmp
                    n_tmp = max(n_tmp, t + 1)
                    tmp_of[o] = t
                    targets.append(f"t{t}")
                name[("s", o)] = targets[-1]
            ns[f"u{m}"] = seg.dispatcher(False)
            body.append(f"u{m}({', '.join(args + targets)})")
            for s in dict.fromkeys(r[1] for r in refs if r[0] == "s" and r[1] in tmp_of and
                                   last[r[1]] == m):
                free.append(tmp_of.pop(s))
            continue
        prim, refs, o = st[1], st[2], st[4][0]
        fn = getattr(E.B, prim.ufunc)
        # a composite's ufunc steps (backends/ext_math.py) are written inline
        steps = getattr(fn, "steps", None)
        args = [name[ref_key(r)] for r in refs]
        dying = list(dict.fromkeys(r[1] for r in refs if r[0] == "s" and r[1] in tmp_of and
                                   last[r[1]] == m))
        if steps is None:
            for s in dying:      # elementwise: an input dying here may take the output
                free.append(tmp_of.pop(s))
        if o in out_pos:
            target = f"y{out_pos[o]}"
            pre.append(f"{target} = o{out_pos[o]}[a:b]")
        elif o not in last:
            continue             # (unread and not an output: cannot happen after _simplify)
        else:
            t = free.pop() if free else n_tmp
            n_tmp = max(n_tmp, t + 1)
            tmp_of[o] = t
            target = f"t{t}"
        name[("s", o)] = target
        if steps is None:
            ns[f"u{m}"] = fn
            body.append(f"u{m}({', '.join(args)}, out={target})")
            continue
        # (its target was taken before its dying inputs were freed: later steps read them)
        for k, (uname, ops) in enumerate(steps):
            ns[f"u{m}_{k}"] = getattr(E.B, uname)
            vals = [target if x == "r" else args[int(x[1:])] if isinstance(x, str) else repr(x)
                    for x in ops]
            body.append(f"u{m}_{k}({', '.join(vals)}, out={target})")
        for s in dying:
            free.append(tmp_of.pop(s))
    tmps = ", ".join(f"t{t}" for t in range(n_tmp))
    lines = ["def run(lo, hi, ins, outs, tmps):"]
    lines += [f"    {', '.join(f'i{j}' for j in range(len(ins)))}, = ins"] if ins else []
    lines += [f"    {', '.join(f'o{j}' for j in range(len(outs)))}, = outs"]
    lines += [f"    {tmps}, = tmps"] if n_tmp else []
    lines += [f"    for a in range(lo, hi, {block}):",
              f"        b = a + {block}",
              "        if b > hi:",
              "            b = hi"]
    lines += [f"            t{t} = t{t}[:b - a]" for t in range(n_tmp)]
    lines += [f"        {line}" for line in pre + body]
    src = "\n".join(lines)
    ns["__name__"] = "flowgrad.jit.replay"      # (warnings filtered like kernels')
    exec(compile(src, "<flowgrad.fusion>", "exec"), ns)
    return ns["run"], n_tmp, src
