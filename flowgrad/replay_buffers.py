"""tf.jit's buffers: which outputs of a replay are written into preallocated buffers
(reused once the slots using them are dead) or into recycled ones (an output the caller
dropped since the last call), so that a replay allocates almost nothing."""
import sys

import numpy as np

from . import buffer_pool as _pool
from . import engine as E

# elements: smaller outputs are cheaper to allocate than to plan buffers for. NOTE: not the
# eager buffer pool's threshold (buffer_pool.MIN_ELEMENTS, 16x this): a replay's buffers are
# planned once per trace and reused with no reference-count test, so they pay off on arrays
# that malloc would still serve from its heap; the eager pool pays a test per tensor freed
PLANNED_MIN = 4096


def _big_float_ufunc(tr, prim, refs, outs):
    # buffers need ufuncs that take out= (NumPy, CuPy; the array API standard has none)
    if prim.ufunc is None or len(outs) != 1 or not E.B.supports_out:
        return False
    shape, dt = tr.meta[outs[0]]
    if dt not in E.B.float_dtypes or int(np.prod(shape)) < PLANNED_MIN:
        return False
    return all(r[0] != "s" or tr.meta[r[1]][1] == dt for r in refs)


def ufunc_target(tr, prim, refs, outs, pools, escape):
    """Where a kernel's output goes: "pool" (its planned buffer), "recycle" (a returned
    output's buffer from the last call), or None (a fresh array from the kernel)."""
    if outs[0] in pools:
        return "pool"
    if outs[0] in escape and _big_float_ufunc(tr, prim, refs, outs):
        return "recycle"
    return None


class Recycled:
    """The buffer of an output returned by the previous call, reused when nothing holds it
    any more (so a loop over a jitted function does not page-fault on fresh arrays)."""
    __slots__ = ("arr", "shape", "dtype")

    def __init__(self, shape, dtype, arr=None):
        self.arr, self.shape, self.dtype = arr, shape, dtype

    def __call__(self):
        a = self.arr
        # NOTE: references: self.arr, the local a, getrefcount's argument
        if a is None or sys.getrefcount(a) > 3:
            a = self.arr = E.B.empty(self.shape, dtype=self.dtype)
        return a


class Pooled(Recycled):
    """A buffer for an output that outlives the call, of its own shape: one the buffer pool
    holds (the arrays tensors let go of, and the values an optimizer's commit replaced under
    tf.jit: a variable's new value is written where its value of two steps ago was), else
    as Recycled. NOTE: a fresh array of a MB page-faults on every page (W2's first layer:
    three 800 KB values a step)."""
    __slots__ = ()

    def __call__(self):
        if E.POOL_MIN <= self.size():
            a = _pool.take(self.shape, self.dtype)
            # NOTE: not kept here (as Recycled keeps its array): a reference of ours would
            # stop the buffer going back to the pool when its holder lets go of it
            return a if a is not None else E.B.empty(self.shape, dtype=self.dtype)
        return Recycled.__call__(self)

    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def plan(tr, steps, last, escape):
    """Preallocated buffers for large float outputs of elementwise kernels, reused once the
    slots using them are dead. Returns the slot -> buffer map and the buffers handed out
    as outputs (id -> number): an output computed in place over a dying input's buffer.

    NOTE: in place matters beyond allocation: on 40 MB arrays ``add(a, b, out=a)`` runs
    2-3x faster than into a third buffer (two memory streams, not three)."""
    free = {}                 # (shape, dtype) -> [buffer]
    release = {}              # step -> [(key, buffer)]
    pools = {}
    handed = {}
    for i, st in enumerate(steps):
        for key, buf in release.pop(i - 1, ()):
            free.setdefault(key, []).append(buf)
        if st[0] == "f":
            for o in st[4]:
                if o not in escape:
                    key = tr.meta[o]
                    buf = free[key].pop() if free.get(key) else E.B.empty(key[0], dtype=key[1])
                    pools[o] = buf
                    release.setdefault(last.get(o, i), []).append((key, buf))
            continue
        if st[0] != "k":
            continue
        prim, refs, outs = st[1], st[2], st[4]
        if not _big_float_ufunc(tr, prim, refs, outs):
            continue
        key = tr.meta[outs[0]]
        if outs[0] in escape:
            for r in refs:
                if r[0] == "s" and last.get(r[1]) == i and r[1] in pools and \
                        tr.meta[r[1]] == key and r[1] not in escape:
                    buf = pools[r[1]]
                    lst = release.get(i, [])
                    if any(b is buf for _, b in lst):
                        release[i] = [(k, b) for k, b in lst if b is not buf]
                        pools[outs[0]] = buf
                        handed.setdefault(id(buf), len(handed))
                        break
            continue
        # an input dying here may lend its buffer to the output (elementwise: in place)
        for r in refs:
            if r[0] == "s" and last.get(r[1]) == i and r[1] in pools and \
                    tr.meta[r[1]] == key:
                lst = release.get(i, [])
                for j, (k2, b2) in enumerate(lst):
                    if b2 is pools[r[1]]:
                        free.setdefault(key, []).append(lst.pop(j)[1])
                        break
        buf = free[key].pop() if free.get(key) else E.B.empty(key[0], dtype=key[1])
        pools[outs[0]] = buf
        release.setdefault(last.get(outs[0], i), []).append((key, buf))
    return pools, handed
