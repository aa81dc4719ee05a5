"""Recycled buffers for big kernel outputs: the default memory policy, ``"pool"``.

NumPy allocates every result with ``malloc``, and glibc serves big blocks with fresh pages
from the OS and gives them back on ``free`` (backends/memory.py). An eager step that makes
a dozen 4 MB temporaries and frees them page-faults on every page of every new one: on W3
(the gradient of a 1e6-element function) that is 60% of the time. So, without touching
malloc: an array of ``MIN_ELEMENTS`` or more that a tensor lets go of, and that nothing
else refers to, waits here if a kernel has asked for its shape and dtype before (at most
``LIMIT_BYTES`` per thread), and the next such kernel writes into it: elementwise kernels
(``ufunc(..., out=buffer)``: the same ufunc loop, so the same bits), the NumPy backend's
matrix products (the same BLAS product) and the fused optimizer updates (train/fused.py,
which give their temporaries back too).

NOTE: "nothing else refers to it" is CPython's reference count, read right after the
tensor dropped the array: views (their ``base``), ``numpy()`` results, buffer exports
(memoryview, DLPack, torch.from_numpy) all hold a reference, and such an array is left to
NumPy. The same test guards tf.jit's recycled outputs.

Pooled arrays are not tensors: ``memory()`` does not count them. ``set_memory_policy``
("system" or "reuse") turns the pool off and empties it. Off the NumPy backend it is off.
"""
import threading
import weakref
from sys import getrefcount

import numpy as np

MIN_ELEMENTS = 1 << 16      # 256 KB of float32: smaller blocks come from malloc's heap anyway
LIMIT_BYTES = 256 << 20     # kept per thread; beyond it the oldest shapes go first
MAX_SHAPES = 256            # wanted shapes remembered per thread
enabled = True


class _Pool:
    __slots__ = ("lists", "nbytes", "__weakref__")

    def __init__(self):
        self.lists = {}         # wanted (shape, dtype) -> [arrays], oldest first
        self.nbytes = 0


_pools = weakref.WeakSet()      # every thread's, for clear()


class _Local(threading.local):
    # per thread: no lock on the kernel path, and a finished thread's buffers go with it
    def __init__(self):
        self.p = _Pool()
        _pools.add(self.p)


_local = _Local()


def take(shape, dtype):
    """A pooled array of ``shape`` and ``dtype``, or None (the shape is noted as wanted:
    only wanted shapes are kept, so gradients and weights that no kernel would reuse are
    never hoarded)."""
    f = _local.p
    key = (shape, dtype)
    lst = f.lists.get(key)
    if not lst:
        if lst is None:
            if len(f.lists) >= MAX_SHAPES:
                f.lists = {k: v for k, v in f.lists.items() if v}
            f.lists[key] = []
        return None
    a = lst.pop()
    f.nbytes -= a.nbytes
    return a


def offer(a):
    """Keep ``a``, an array a tensor has just let go of, if its shape is wanted and nothing
    else refers to it."""
    # NOTE: the references are the caller's local, this parameter and getrefcount's own
    if type(a) is not np.ndarray or a.base is not None or getrefcount(a) > 3 or \
            not enabled or not a.flags.writeable or not a.flags.c_contiguous:
        return
    f = _local.p
    lst = f.lists.get((a.shape, a.dtype))
    n = a.nbytes
    if lst is None or n > LIMIT_BYTES:
        return
    if f.nbytes + n > LIMIT_BYTES:
        for other in list(f.lists.values()):        # the oldest shapes give way first
            while other and f.nbytes + n > LIMIT_BYTES:
                f.nbytes -= other.pop().nbytes
            if f.nbytes + n <= LIMIT_BYTES:
                break
    lst.append(a)
    f.nbytes += n


def ufunc_out(fn, arrays, big):
    """``fn(*arrays)`` into a pooled buffer, when the output is ``big``'s shape and dtype
    (every operand of big's dtype, of its shape or a single element); None otherwise (the
    caller runs the kernel as usual). ``fn`` is the backend's function of a kernel's
    ``ufunc`` name: a NumPy ufunc, or an elementwise composite that takes ``out=`` and
    ``casting=`` as they do (backends/ext_math.py)."""
    dt = big.dtype
    if dt.kind != "f":
        return None
    shape = big.shape
    for x in arrays:
        if x is not big and (x.dtype != dt or x.shape != shape and
                             (x.size != 1 or x.ndim > big.ndim)):
            return None
    buf = take(shape, dt)
    if buf is None:
        return None
    # NOTE: casting="no": a ufunc whose result is not the operands' dtype (a comparison)
    # raises here instead of being cast into the buffer
    return fn(*arrays, out=buf, casting="no")


def clear():
    """Give every thread's pooled arrays back to NumPy."""
    for p in list(_pools):
        p.lists = {}
        p.nbytes = 0


def pooled_bytes():
    """Bytes this thread keeps for reuse."""
    return _local.p.nbytes
