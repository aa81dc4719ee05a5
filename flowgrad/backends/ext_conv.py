"""Array-API extensions used by the kernels of convolutions and pooling (see ext.py).

The windowed ops read a padded input [N, *spatial, ...] through windows: window cell j
(row-major over the kernel's k cells) of output o is the input cell o*s + j*d (strides s,
dilations d); their gradients write back through the adjoint. The extensions are what the
standard cannot do fast:

- ``windows``: every window as one array [N, *out, *k, ...] (NumPy, CuPy: a strided view);
- ``reduce_windows``: the sum or max over each window (NumPy, CuPy: in place, ``out=``);
- ``scatter_windows``: the adjoint, one part per window cell added onto a zero grid
  (NumPy, CuPy: strided ``+=`` into one buffer);
- ``dilate_windows``: the max over each window of the input plus the filter's cell
  (morphological dilation; NumPy, CuPy: in place, ``out=``);
- ``depthwise_dot``: the per-channel contraction of windows with a depthwise filter
  (NumPy: ``einsum`` on the strided view);
- ``contiguous``: a row-major copy, where the library has a memory layout.

The generic versions use the standard alone and never write into an array, so they run on
any array API library; they copy more (``windows``: k times the output), which only the
backends without overrides pay.

>>> import numpy as np
>>> import flowgrad.backends as bk
>>> B = bk.namespace("numpy")
>>> B.windows(np.arange(5.0)[None, :, None], (2,), (2,), (1,), (2,))[0, :, :, 0]
array([[0., 1.],
       [2., 3.]])
"""
import itertools

import numpy as np

# ---------------------------------------------------------------- host-side geometry

def cell_slices(out, s, d, k, lead=1):
    """For each window cell j (row-major), the strided slice of the padded input that cell
    reads across all outputs: ``lead`` whole axes, the spatial axes, then ``...``."""
    n = len(k)
    for j in itertools.product(*(range(v) for v in k)):
        yield (slice(None),) * lead + tuple(
            slice(j[i] * d[i], j[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i])
            for i in range(n)) + (Ellipsis,)


def clipped_cells(size, out, s, d, k, before, lead):
    """For each window cell j, (source, destination) index tuples that add the outputs
    whose cell j lands in [0, size) (position o*s + j*d - before) to those positions, or
    None where no output's does (a cell that only ever reads padding)."""
    n = len(k)
    for j in itertools.product(*(range(v) for v in k)):
        src, dst = [], []
        for i in range(n):
            off = j[i] * d[i] - before[i]
            lo = max(0, -(off // s[i]))                    # ceil(-off / s)
            hi = min(out[i], (size[i] - 1 - off) // s[i] + 1)
            if hi <= lo:
                break
            t = lo * s[i] + off
            src.append(slice(lo, hi))
            dst.append(slice(t, t + (hi - lo - 1) * s[i] + 1, s[i]))
        else:
            whole = (slice(None),) * lead
            yield whole + tuple(src) + (Ellipsis,), whole + tuple(dst) + (Ellipsis,)
            continue
        yield None


# ---------------------------------------------------------------- windows

def windows(B, xp, out, s, d, k):
    """The windows [N, *out, *k, ...] of a padded xp [N, *spatial, ...]: a stack of one
    strided slice per window cell (a copy, k times the output's size)."""
    n = len(k)
    cells = B.stack([xp[sl] for sl in cell_slices(out, s, d, k)], axis=1 + n)
    return B.reshape(cells, xp.shape[:1] + tuple(out) + tuple(k) + xp.shape[1 + n:])


def _strided_windows(as_strided, xp, out, s, d, k):
    n = len(k)
    st = xp.strides
    shape = xp.shape[:1] + tuple(out) + tuple(k) + xp.shape[1 + n:]
    strides = (st[:1] + tuple(st[1 + i] * s[i] for i in range(n))
               + tuple(st[1 + i] * d[i] for i in range(n)) + st[1 + n:])
    return as_strided(xp, shape, strides)


def _numpy_windows(xp, out, s, d, k):
    """A read-only strided view: no copy until a reshape makes the columns (im2col)."""
    return _strided_windows(
        lambda a, sh, st: np.lib.stride_tricks.as_strided(a, sh, st, writeable=False),
        xp, out, s, d, k)


def _cupy_windows(xp, out, s, d, k):
    import cupy
    return _strided_windows(cupy.lib.stride_tricks.as_strided, xp, out, s, d, k)


# ---------------------------------------------------------------- window reductions

def reduce_windows(B, xp, out, s, d, k, kind):
    """The ``kind`` ('sum' or 'max') of each window of a padded xp: [N, *out, ...]."""
    op = B.add if kind == "sum" else B.maximum
    cells = [xp[sl] for sl in cell_slices(out, s, d, k)]
    if len(cells) == 1:
        return B.asarray(cells[0], copy=True)      # a new array, never a view of xp
    acc = op(cells[0], cells[1])
    for c in cells[2:]:
        acc = op(acc, c)
    return acc


def _reduce_in_place(mod, xp, out, s, d, k, kind):
    # NOTE: one strided slice per window cell, accumulated in place: 5x faster than
    # reducing the window view (1.8 vs 10 ms for a 3x3 max on [32, 32, 32, 16])
    op = mod.add if kind == "sum" else mod.maximum
    acc = None
    for sl in cell_slices(out, s, d, k):
        acc = xp[sl].copy() if acc is None else op(acc, xp[sl], out=acc)
    return acc


def _numpy_reduce_windows(xp, out, s, d, k, kind):
    return _reduce_in_place(np, xp, out, s, d, k, kind)


def _cupy_reduce_windows(xp, out, s, d, k, kind):
    import cupy
    return _reduce_in_place(cupy, xp, out, s, d, k, kind)


# ---------------------------------------------------------------- dilation

def _cells(k):
    return itertools.product(*(range(v) for v in k))


def dilate_windows(B, xp, w, out, s, d, k):
    """max over the window cells j of xp's cell plus w[j]: a padded xp [N, *spatial, C]
    and a filter w [*k, C] give [N, *out, C] (grayscale morphological dilation)."""
    acc = None
    for j, sl in zip(_cells(k), cell_slices(out, s, d, k)):
        c = xp[sl] + w[j + (Ellipsis,)]
        acc = c if acc is None else B.maximum(acc, c)
    return acc


def _dilate_in_place(mod, xp, w, out, s, d, k):
    # NOTE: one strided slice per window cell, the sum and the max in two buffers: no
    # window view is ever materialised
    acc = tmp = None
    for j, sl in zip(_cells(k), cell_slices(out, s, d, k)):
        if acc is None:
            acc = xp[sl] + w[j]                 # a new array, never a view of xp
            continue
        tmp = mod.add(xp[sl], w[j], out=tmp)
        mod.maximum(acc, tmp, out=acc)
    return acc


def _numpy_dilate_windows(xp, w, out, s, d, k):
    return _dilate_in_place(np, xp, w, out, s, d, k)


def _cupy_dilate_windows(xp, w, out, s, d, k):
    import cupy
    return _dilate_in_place(cupy, xp, w, out, s, d, k)


# ---------------------------------------------------------------- the adjoint of windows

def scatter_windows(B, parts, shape, lead, out, s, d, k, before):
    """The adjoint of the windows: zeros of ``shape`` (spatial axes from ``lead``) plus, for
    each window cell j, ``parts``' j-th array [..., *out, ...] at the positions
    o*s + j*d - before that fall inside. ``parts`` is an iterable of k arrays (a
    generator: each part is made only when it is needed).

    Generic: the parts stacked, spread to stride 1 (zeros interleaved) and framed in zeros
    once, so that each cell's contribution is one slice of the stack, and their sum.
    """
    n = len(k)
    size = shape[lead:lead + n]
    p = B.stack(list(parts), axis=0)                        # [k, ..., *out, ...]
    first = []
    for i in range(n):
        ax = 1 + lead + i
        if s[i] > 1:                                        # row o moves to o*s
            p = B.stack([p] + [B.zeros_like(p)] * (s[i] - 1), axis=ax + 1)
            p = B.reshape(p, p.shape[:ax] + (out[i] * s[i],) + p.shape[ax + 2:])
        left = max(0, (k[i] - 1) * d[i] - before[i])
        right = max(0, size[i] + before[i] - out[i] * s[i])
        blocks = [B.zeros(p.shape[:ax] + (w,) + p.shape[ax + 1:], dtype=p.dtype)
                  for w in (left, right)]
        p = B.concat([b for b in (blocks[0], p, blocks[1]) if b.shape[ax]], axis=ax)
        first.append(left + before[i])                      # cell j starts at first - j*d
    acc = None
    for c, j in enumerate(itertools.product(*(range(v) for v in k))):
        cell = p[(c,) + (slice(None),) * lead + tuple(
            slice(first[i] - j[i] * d[i], first[i] - j[i] * d[i] + size[i])
            for i in range(n)) + (Ellipsis,)]
        acc = cell if acc is None else acc + cell
    return acc


def _scatter_in_place(zeros, parts, shape, lead, out, s, d, k, before):
    # NOTE: one strided add per window cell into one buffer: no copies of the parts
    size = shape[lead:lead + len(k)]
    acc = None
    for part, cell in zip(parts, clipped_cells(size, out, s, d, k, before, lead)):
        if acc is None:
            acc = zeros(shape, dtype=part.dtype)
        if cell is not None:
            acc[cell[1]] += part[cell[0]]
    return acc


def _numpy_scatter_windows(parts, shape, lead, out, s, d, k, before):
    return _scatter_in_place(np.zeros, parts, shape, lead, out, s, d, k, before)


def _cupy_scatter_windows(parts, shape, lead, out, s, d, k, before):
    import cupy
    return _scatter_in_place(cupy.zeros, parts, shape, lead, out, s, d, k, before)


# ---------------------------------------------------------------- depthwise, layout

def depthwise_dot(B, cols, w):
    """sum over the window cells of windows cols [N, *out, *k, C] times a depthwise filter
    w [*k, C, M]: [N, *out, C, M] (one matrix product per channel)."""
    n = w.ndim - 2
    c, m = w.shape[-2:]
    rows = cols.shape[:1 + n]
    r = 1
    for v in rows:
        r *= v
    a = B.permute_dims(B.reshape(cols, (r, -1, c)), (2, 0, 1))            # [C, R, K]
    b = B.permute_dims(B.reshape(w, (-1, c, m)), (1, 0, 2))               # [C, K, M]
    return B.reshape(B.permute_dims(B.matmul(a, b), (1, 0, 2)), rows + (c, m))


def _numpy_depthwise_dot(cols, w):
    # NOTE: einsum over the strided view, 2x faster than the channel-batched matmul (its
    # products [N*P, K] @ [K, M] per channel are too thin for BLAS)
    n = w.ndim - 2
    o, k = "abd"[:n], "fgh"[:n]
    return np.einsum(f"n{o}{k}c,{k}cm->n{o}cm", cols, w, optimize=True)


def contiguous(B, x):
    """x in row-major memory order, for the libraries that have a memory layout (the
    standard has none: x itself)."""
    return x


def _cupy_contiguous(x):
    import cupy
    return cupy.ascontiguousarray(x)


# ---------------------------------------------------------------- what ext.py collects

# the generic implementations, f(B, ...), each under its own name
EXTENSIONS = (windows, reduce_windows, dilate_windows, scatter_windows, depthwise_dot,
              contiguous)
# the backends' own implementations, f(...) without B: (backend, extension) -> f
OVERRIDES = {
    ("numpy", "windows"): _numpy_windows,
    ("cupy", "windows"): _cupy_windows,
    ("numpy", "reduce_windows"): _numpy_reduce_windows,
    ("cupy", "reduce_windows"): _cupy_reduce_windows,
    ("numpy", "dilate_windows"): _numpy_dilate_windows,
    ("cupy", "dilate_windows"): _cupy_dilate_windows,
    ("numpy", "scatter_windows"): _numpy_scatter_windows,
    ("cupy", "scatter_windows"): _cupy_scatter_windows,
    ("numpy", "depthwise_dot"): _numpy_depthwise_dot,
    ("numpy", "contiguous"): np.ascontiguousarray,
    ("cupy", "contiguous"): _cupy_contiguous,
}
