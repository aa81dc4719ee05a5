"""tf.jit's native backend: the elementwise segments of a replay compiled to machine code by
numba (the optional extra ``pip install 'flowgrad[jit]'``), imported only when a program is
compiled so.

After jit.py simplifies a trace, ``Lowering.lower`` splits its steps into segments: a
maximal run of elementwise kernels that have a native form (``Primitive.native``, declared
with each kernel in its family file), all of one float dtype, every input of the output's
size or of size 1 (a broadcast scalar), becomes ONE compiled function: one loop over the flat
elements that computes every kernel of the run per element, in registers, and writes only
the results used outside the run (into fresh arrays, or buffers private to the replay: two
threads never share them). A segment of 0-d values (a tiny SGD step) is a function of
scalars. Everything else (matrix products, reductions, reshapes, kernels with no native
form, integer kernels) stays a step of the NumPy replay, which calls the compiled segments
in order. A measured cost model (flowgrad/native_costs.py) keeps a segment on NumPy where
NumPy's vectorised loops beat numba's scalar libm calls (large blocks of exp, log, sin,
tanh...), and a float32 loop over large arrays computes exp, sin, cos and tanh inline as
vectorised float64 arithmetic (flowgrad/native_math.py). A run large enough for the NumPy
replay's fused chains that stays on NumPy (its libm functions are faster there) keeps its
chain of cache-sized blocks, and its runs of arithmetic become loops called on each block
(``_split``, fusion.py). A segment whose loop pays for threads (PARALLEL_US each) runs it
on tf.jit(threads=) / tf.get_jit_threads() threads (numba.prange; elementwise: the same
bits for any count), a smaller one on the calling thread. Compiled code is saved to disk
and loaded by later processes instead of compiled again (flowgrad/jit_native_cache.py).

NOTE: same numbers. Arithmetic runs in the segment's dtype operation by operation as
NumPy's ufuncs run it (``fastmath=False``: no reassociation, no fused multiply-add) and each
kernel's result is rounded to the dtype (``T(...)``), so +, -, *, /, sqrt, abs, max, min,
relu, clip, step, sign and floor, ceil, round (numba's np.floor, np.ceil, np.rint) are
NumPy's bits (-0.0, NaN and ties included); the transcendental functions are the C
library's (expf, sinf, tanh...) where NumPy has its own SIMD loops, so results differ from
the NumPy replay by a few ulp (ULP_BOUND, checked by tests/test_jit_native.py); native_math's
inline functions are within one ulp of the correctly rounded value (tests/test_native_math.py).
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys
import threading

import numpy as np

from . import batching
from . import engine as E
from . import fusion
from . import native_costs as costs
from . import native_math
from . import user_frames
from .after_fork import renew_after_fork
from .errors import MissingDependencyError
from .ops import PRIMITIVES
from .replay_buffers import PLANNED_MIN, Pooled

HINT = "pip install 'flowgrad[jit]'"
# Per kernel with a libm call, against the NumPy replay: measured at most 3 ulp (float32:
# log, tan, tanh, atan2, softplus; float64: softplus; most 1-2) over 200,000 random inputs
# from 1e-6 to 1e3 of either sign, or 1 eps absolute where the kernel's arithmetic takes the
# result below 1 (sigmoid's 0.5 + 0.5 tanh at x << 0); arithmetic is exact. Along a chain
# the differences add up as any rounding does.
ULP_BOUND = 4


# the reasons a kernel stays a NumPy step (explain())
NOT_ELEMENTWISE = "not elementwise (NumPy's own kernel)"
NOT_FLOAT = "integer or bool dtype"
MIXED = "inputs of other dtypes or shapes than its output"
NO_FORM = "no native form"
COST = "cost model: NumPy's vectorised loops are faster here"
SMALL_GAIN = (f"cost model: compiled, it would save too little per call to pay for "
              f"compiling within {costs.PAYBACK_CALLS:,} calls")
ASSIGN = "a variable assignment"
NUMBERS = "the update's numbers (learning rate, step...), read from the optimizer"
STATEFUL = "stateful (an optimizer's commit, random numbers): in order, as NumPy"
CALLBACK = "a tf.debug.callback (Python, in order)"


class JitFallbackWarning(UserWarning):
    """``tf.jit(fn, backend="native")`` runs a kernel of fn as a NumPy step: it has no native
    form (warned once per traced program, naming the kernel and the line that called it)."""


class JitCacheWarning(UserWarning):
    """tf.jit's native code cache cannot be written (its folder: ``FLOWGRAD_JIT_CACHE``, else
    the user's cache folder): programs compile as if it were off (warned once per process).
    """


_FOUND: list = []
_NUMBA: list = []               # numba, once imported by load_numba


def numba_installed() -> bool:
    """True when numba can be imported (looked up once, without importing it)."""
    if not _FOUND:
        _FOUND.append(importlib.util.find_spec("numba") is not None)
    return _FOUND[0]


def load_numba():
    """The numba module, imported on first use; MissingDependencyError naming the extra
    when it is missing."""
    try:
        import numba
    except ImportError as e:
        raise MissingDependencyError(f"tf.jit(backend='native') compiles with numba, which "
                                     f"cannot be imported ({e}): {HINT}") from e
    if not _NUMBA:
        _NUMBA.append(numba)
    return numba


# ---------------------------------------------------------------- exact peepholes

_MUL, _DIV, _ADD, _SUB, _POW = (PRIMITIVES[k] for k in ("Multiply", "RealDiv", "Add", "Sub",
                                                         "Pow"))


def _ref_meta(r, meta):
    if r[0] == "s":
        return meta[r[1]]
    a = r[1]._data if r[0] == "v" else r[1]
    return a.shape, a.dtype


def _number(r, dtype):
    """The value (a Python float) of a constant of ``dtype`` whose elements are all the same
    bits (one element, or a broadcast seed of ones), else None."""
    if r[0] != "c" or not isinstance(r[1], (np.ndarray, np.generic)) or \
            r[1].dtype != dtype or r[1].size == 0:
        return None
    flat = np.asarray(r[1]).reshape(-1)
    if flat.size > 1:
        bits = flat.view(np.uint32 if dtype.itemsize == 4 else np.uint64)
        if not (bits == bits[0]).all():
            return None
    return float(flat[0])


def rewrite(prim, refs, out_meta, meta):
    """An exact peephole of the native path: the ref whose value the step's output is
    (``("alias", ref)``), a step computing the same bits (``("step", prim, refs)``), or
    None. Only where NumPy's replay would give that very value:

    NOTE: x * 1, 1 * x, x / 1 and x ** 1 are x (fast_pow's positive for 1); x - 0.0 and
    x + (-0.0) are x, even at -0.0 — but x + 0.0 is kept: at x = -0.0 it is +0.0; x ** 2 is
    Multiply(x, x), as fast_pow computes it. The kept operand must have the output's shape
    and dtype (no broadcast), and be a slot or a constant (a variable may be assigned before
    the alias is read)."""
    dt = out_meta[1]
    if len(refs) != 2 or prim not in (_MUL, _DIV, _ADD, _SUB, _POW) or \
            dt not in E.B.float_dtypes:
        return None
    a, b = refs
    va, vb = _number(a, dt), _number(b, dt)
    if prim is _MUL:
        keep = a if vb == 1 else b if va == 1 else None
    elif prim is _DIV:
        keep = a if vb == 1 else None
    elif prim is _ADD:
        keep = a if vb == 0 and math.copysign(1, vb) < 0 else \
            b if va == 0 and math.copysign(1, va) < 0 else None
    elif prim is _SUB:
        keep = a if vb == 0 and math.copysign(1, vb) > 0 else None
    else:
        keep = a if vb in (1, 2) and np.ndim(b[1]) <= len(_ref_meta(a, meta)[0]) else None
    if keep is None or keep[0] == "v" or _ref_meta(keep, meta) != out_meta:
        return None
    if prim is _POW and vb == 2:
        return ("step", _MUL, (a, a))
    return ("alias", keep)


# ---------------------------------------------------------------- composite kernels

def _numbers(B, *, fn, dtype):
    # NOTE: Python numbers, not converted: the compiled segment's parameters of the dtype
    # round them as NumPy rounds a Python number an array of the dtype meets (to nearest),
    # and a NumPy step given one computes in the array's dtype (NEP 50): the same bits
    return fn()


# a step of the replay giving an expanded kernel's Python numbers at each call, for arrays
# of the dtype (0-d in the trace's meta)
_NUMBERS = E.Primitive("Numbers", _numbers, multi=True, vmap=batching.takes_no_tensors)


def expand(steps, meta):
    """The steps with each composite kernel that declares an expansion (``Primitive.expand``:
    an optimizer's update) replaced by a ``Numbers`` step and the elementwise kernels it
    declares, when all its inputs and outputs are arrays of one float dtype and size.
    Returns (steps, meta): the meta of the new slots appended to a copy."""
    if E.B.name != "numpy" or not any(st[0] == "k" and st[1].expand is not None
                                      for st in steps):
        return steps, meta
    meta, out = list(meta), []
    # one Numbers step per optimizer and dtype until a step with effects (a commit moves the
    # step count on): W2's six updates read the same numbers, 20 µs a read
    shared: dict = {}
    for st in steps:
        x = None
        if st[0] != "k" or st[1].impure and st[1].expand is None:
            shared.clear()
        if st[0] == "k" and st[1].expand is not None:
            shapes = {_ref_meta(r, meta) for r in st[2]} | {meta[o] for o in st[4]}
            if len(shapes) == 1:
                shape, dt = shapes.pop()
                if dt in E.B.float_dtypes and _size(shape) > 0:
                    x = st[1].expand(st[3], len(st[2]))
        if x is None:
            out.append(st)
            continue
        numbers, kernels, results = x
        n_numbers = 1 + max([r[1] for _, refs in kernels for r in refs if r[0] == "p"],
                            default=-1)
        same = (getattr(numbers, "func", numbers), *map(id, getattr(numbers, "args", ())),
                n_numbers, dt)
        ps = shared.get(same)
        if ps is None:
            ps = shared[same] = tuple(range(len(meta), len(meta) + n_numbers))
            meta += [((), dt)] * n_numbers
            out.append(("k", _NUMBERS, (), {"fn": numbers, "dtype": dt}, ps))
        made = {k: o for k, o in zip(results, st[4])}
        for k, (prim, refs) in enumerate(kernels):
            if k not in made:
                made[k] = len(meta)
                meta.append((shape, dt))
            args = tuple(st[2][r[1]] if r[0] == "in" else ("s", ps[r[1]]) if r[0] == "p"
                         else ("s", made[r[1]]) for r in refs)
            out.append(("k", prim, args, None, (made[k],)))
    return out, meta


def expanded_loop(kernels, results, n_in, n, dtype):
    """One segment computing an expansion (``Primitive.expand``'s ``kernels`` and
    ``results``, see ``expand``) on flat arrays of ``n`` > 1 elements of ``dtype``: its loop
    takes the ``n_in`` inputs, then the expansion's numbers (scalars of the dtype), then an
    output array per result. An optimizer's eager update runs it (train/fused.py)."""
    dt = np.dtype(dtype)
    n_numbers = 1 + max([r[1] for _, refs in kernels for r in refs if r[0] == "p"],
                        default=-1)
    base = n_in + n_numbers             # slots: inputs, numbers, then the kernels' results
    meta = [((n,), dt)] * n_in + [((), dt)] * n_numbers
    members = []
    for k, (prim, refs) in enumerate(kernels):
        args = tuple(("s", r[1] if r[0] == "in" else n_in + r[1] if r[0] == "p"
                      else base + r[1]) for r in refs)
        members.append(("k", prim, args, None, (base + k,)))
        meta.append(((n,), dt))
    return Segment(members, [("s", i) for i in range(base)], [base + k for k in results],
                   n, dt, meta)


# ---------------------------------------------------------------- segments

def _size(shape):
    return math.prod(shape)


def _inner(rshape, shape):
    """The inner extent m of an input of ``rshape`` broadcast to ``shape`` along its
    leading axes (a bias row: element j reads j % m) or its trailing ones (a column: j // m),
    else None (broadcast along axes in between)."""
    pad = (1,) * (len(shape) - len(rshape)) + tuple(rshape)
    a = next((k for k, d in enumerate(pad) if d != 1), len(pad))
    if pad[a:] == tuple(shape[a:]):                                     # a row
        return _size(shape[a:])
    b = len(pad) - next((k for k, d in enumerate(reversed(pad)) if d != 1), len(pad))
    if pad[:b] == tuple(shape[:b]):                                     # a column
        return _size(shape[b:])
    return None


def index_of(rshape, shape):
    """How a loop over ``shape``'s elements, split in rows of m (see _inner), reads an input
    of ``rshape``: "j" (its element j), "c" (j % m: broadcast along leading axes), "r"
    (j // m: along trailing axes)."""
    if _size(rshape) == _size(shape):
        return "j"
    pad = (1,) * (len(shape) - len(rshape)) + tuple(rshape)
    a = next((k for k, d in enumerate(pad) if d != 1), len(pad))
    return "c" if pad[a:] == tuple(shape[a:]) else "r"


def classify(st, meta):
    """(elements, dtype, grid) of a step that may join a native segment, else why it stays
    a NumPy step (one of the reasons above). ``grid``: None, or (output shape, m) where
    inputs are broadcast along leading or trailing axes (see _inner)."""
    if st[0] == "a":
        return ASSIGN
    if st[0] == "cb":
        return CALLBACK
    if E.B.name != "numpy":
        return f"arrays of the {E.B.name} backend"
    prim, refs, attrs, outs = st[1], st[2], st[3], st[4]
    if prim is _NUMBERS:
        return NUMBERS
    if prim.impure:
        return STATEFUL
    if prim.vmap_rule is not batching.elementwise or prim.multi or len(outs) != 1:
        return NOT_ELEMENTWISE
    shape, dt = meta[outs[0]]
    if dt not in E.B.float_dtypes:
        return NOT_FLOAT
    n = _size(shape)
    grid = None
    for r in refs:
        rshape, rdt = _ref_meta(r, meta)
        if rdt != dt:
            return NOT_FLOAT if rdt not in E.B.float_dtypes else MIXED
        if _size(rshape) not in (n, 1):
            m = _inner(rshape, shape)
            if m is None or (grid is not None and grid[1] != m):
                return MIXED
            grid = (tuple(shape), m)
    if n == 0:
        return MIXED
    if prim.native is None or prim.impure:
        return NO_FORM
    # attributes (LeakyRelu's alpha, ClipByValue's bounds): numbers only, each a literal of
    # the segment's source (native_expr); any other attribute keeps the step on NumPy
    for v in (attrs or {}).values():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            return NO_FORM
        try:
            float(v)
        except OverflowError:       # (an int beyond a float's range)
            return NO_FORM
    return n, dt, grid


def native_expr(prim, args, consts, attrs=None):
    """The kernel on one element: its native form with these operand names (constants:
    their values, for forms that read them) and the step's number attributes (``attrs``,
    which classify admitted): ``{alpha}`` in the form becomes the literal ``T(0.2)``, the
    attribute in the segment's dtype (``T(math.nan)``, ``T(math.inf)``...). A callable form
    is given the attributes' values as keywords, and what it returns may name them so too.
    """
    form = prim.native
    if not attrs:
        return form(args, consts) if callable(form) else form.format(*args)
    literals = {k: _literal(float(v)) for k, v in attrs.items()}
    if callable(form):
        return form(args, consts, **attrs).format(**literals)
    return form.format(*args, **literals)


def _literal(v):
    if math.isnan(v):
        return "T(math.nan)"
    if math.isinf(v):
        return "T(math.inf)" if v > 0 else "T(-math.inf)"
    return f"T({v!r})"


_compiled: dict = {}            # (source, dtype) -> numba dispatcher, shared by programs
_compiled_lock = threading.Lock()
_MAX_COMPILED = 128


def _cache_warning(message):
    user_frames.warn(message, JitCacheWarning)


# ---------------------------------------------------------------- threads

_LAYER: list = []               # the threading layer chosen (see below)
# one parallel call at a time in the process (see _choose_threading_layer); a forked child
# gets a fresh lock (one a parent's thread held at the fork would stay held)
_parallel_lock = threading.Lock()
renew_after_fork(globals(), "_parallel_lock", threading.Lock)


def _numba_threads():
    """The threads numba may use (NUMBA_NUM_THREADS: the cores this process may run on)."""
    return (_NUMBA[0] if _NUMBA else load_numba()).config.NUMBA_NUM_THREADS


def _choose_threading_layer(numba):
    """NOTE: numba's threading layers, measured: "workqueue" aborts the process when two
    threads run parallel code at once ("Terminating: Nested parallel kernel launch"), and
    GNU OpenMP ("omp", numba's choice on Linux without TBB) kills a forked child that runs
    parallel code after its parent did (a data-loader pool): so, before numba starts its
    threads, flowgrad asks for its fork-safe layers ("forksafe": TBB, else workqueue) unless
    the user chose one (NUMBA_THREADING_LAYER), and runs one parallel call at a time in the
    process (_parallel_lock), which makes workqueue safe from several threads. numba's
    workqueue starts its threads again in a forked child."""
    if not _LAYER:
        try:
            numba.threading_layer()         # (started already: the user's numba code)
        except ValueError:
            if "NUMBA_THREADING_LAYER" not in os.environ and \
                    str(numba.config.THREADING_LAYER).lower() == "default":
                numba.config.THREADING_LAYER = "forksafe"
        _LAYER.append(True)


def _loop(rows, body):
    """Lines of a segment's loop over its elements j running ``body``: flat, or in rows of
    m (inputs broadcast along rows or columns)."""
    ind = "    "
    if not rows:
        return [f"{ind}for j in range(n):"] + [ind * 2 + x for x in body]
    # NOTE: the flat index in unsigned arithmetic: numba wraps a signed index that may be
    # negative (j < 0: j + n), and that branch kept LLVM from vectorising the loop (W2's
    # bias-and-relu layers: 44 µs a call, 6 µs unsigned)
    return [f"{ind}for r in range(n // m):", f"{ind * 2}for c in range(m):",
            f"{ind * 3}j = U(r) * U(m) + U(c)"] + [ind * 3 + x for x in body]


class Segment:
    """One compiled segment: its kernels, inputs (refs), outputs (slots), elements and dtype,
    and the numba source of its loop (compiled on first emit)."""

    def __init__(self, members, ins, outs, n, dtype, meta, threads=None, grid=None):
        self.names = [st[1].name for st in members]
        self.members = members
        self.blocked = False            # its loop runs on a fused chain's blocks (_split)
        self.grid = grid                # (shape, m): inputs broadcast along rows (_inner)
        self.threads = threads          # tf.jit(threads=), else tf.get_jit_threads()
        self.ins, self.outs, self.n, self.dtype = ins, outs, n, dtype
        self.scalar = n == 1            # a function of scalars
        self.in_meta = [_ref_meta(r, meta) for r in ins]
        self.out_shapes = [meta[o][0] for o in outs]
        # (a constant of one value throughout, the broadcast seed of a gradient, is a literal)
        self.values = [_number(r, dtype) for r in ins]
        # an array parameter: of the output's size, or broadcast along rows or columns
        self.full = [not self.scalar and _size(m[0]) > 1 and v is None
                     for m, v in zip(self.in_meta, self.values)]
        self.index = [index_of(m[0], grid[0]) if grid and f else "j"
                      for m, f in zip(self.in_meta, self.full)]
        self.work = []                  # per kernel: (NumPy's call, its ns, numba's ns)
        self.source = self._source(members, meta)
        self.fn = self.pfn = None       # numba's dispatchers: serial, on threads
        # (a loop estimated at 2 x PARALLEL_US or more may pay for threads)
        self.native_us = self.costs()[1]
        self.threaded = not self.scalar and self.native_us >= 2 * costs.PARALLEL_US

    def __repr__(self):
        return f"<native {'+'.join(self.names)} on {self.n} elements>"

    def _source(self, members, meta):
        name, params, head, loads = {}, [], [], []
        for j, (r, full) in enumerate(zip(self.ins, self.full)):
            if r[0] == "c" and not full:
                name[fusion.ref_key(r)] = f"x{j}"
                head.append(f"x{j} = {_literal(self.values[j])}")
            elif full:
                params.append(f"i{j}")
                name[fusion.ref_key(r)] = f"x{j}"
                loads.append(f"x{j} = i{j}[{self.index[j]}]")
            else:
                params.append(f"k{j}")
                name[fusion.ref_key(r)] = f"k{j}"
        exprs = []
        # (values are named by their place in the segment, not by the trace's slots: the
        # same loop in another program or at another size is the same source, compiled and
        # cached once: W2's six Adam updates, its two relu layers)
        for k, st in enumerate(members):
            refs, o = st[2], st[4][0]
            consts = [_number(r, self.dtype) for r in refs]
            exprs.append(native_expr(st[1], [name[fusion.ref_key(r)] for r in refs], consts,
                                     st[3]))
            name[("s", o)] = f"t{k}"
        # a loop of float32 arrays computes exp/sin/cos/tanh inline (native_math), and again
        # with libm where an argument is out of its range (see below); a few of them
        calls = sum(len(native_math.calls(e)) for e in exprs)
        inline = self.dtype == np.float32 and calls <= costs.INLINE_MAX and \
            self.n * self.dtype.itemsize >= fusion.FUSE_MIN_BYTES
        self.inlined = calls if inline else 0
        body, fast = [], []
        for k, (st, expr) in enumerate(zip(members, exprs)):
            self.work.append(costs.work(st[1], expr, self.dtype, self.scalar and
                                   meta[st[4][0]][0] == (), inline))
            body.append(f"t{k} = T({expr})")
            if inline and native_math.calls(expr):
                lines, expr = native_math.inline(expr, f"t{k}")
                fast += lines
            fast.append(f"t{k} = T({expr})")
        ind = "    "
        if self.scalar:         # scalars in (Python floats), the results into one array
            lines = [f"def seg({', '.join(params + ['o'])}):"] + [ind + x for x in head + body]
            lines += [f"{ind}o[{j}] = {name[('s', o)]}" for j, o in enumerate(self.outs)]
            return "\n".join(lines)
        outs = [f"o{j}" for j in range(len(self.outs))]
        lines = [f"def seg({', '.join(params + outs)}):"] + [ind + x for x in head]
        lines.append(f"{ind}n = o0.shape[0]")
        # (broadcast inputs: the loop in rows of m, m read off the first such input)
        rows = [(f"i{j}", x) for j, x in enumerate(self.index) if x != "j"]
        if rows:
            p, x = rows[0]
            lines.append(f"{ind}m = {p}.shape[0]" if x == "c" else
                         f"{ind}m = n // max({p}.shape[0], 1)")
        sized = [(f"i{j}", {"j": "n", "c": "m", "r": "n // m"}[x])
                 for j, (x, f) in enumerate(zip(self.index, self.full))
                 if f and f"i{j}" in params] + [(o, "n") for o in outs[1:]]
        if sized:       # (the replay's shapes are the trace's: a guard, not a branch)
            cond = " or ".join(f"{p}.shape[0] != {size}" for p, size in sized)
            if rows:
                cond = f"m == 0 or n % m != 0 or {cond}"
            lines += [f"{ind}if {cond}:",
                      f"{ind * 2}raise ValueError('tf.jit: a native segment got arrays of "
                      f"another size than traced')"]
        stores = [f"o{j}[j] = {name[('s', o)]}" for j, o in enumerate(self.outs)]
        if fast == body:
            return "\n".join(lines + _loop(bool(rows), loads + body + stores))
        # NOTE: the inlined functions' guards count arguments out of their range in bad;
        # then the loop runs again with libm's functions, overwriting every output (each
        # element's inputs are read before its outputs are written, and an output is never
        # an input's buffer: the replay's own, pooled or fresh), so a call's results are
        # all of one kind
        lines.append(f"{ind}bad = 0")
        lines += _loop(bool(rows), loads + fast + stores)
        lines.append(f"{ind}if bad != 0:")
        lines += [ind + x for x in _loop(bool(rows), loads + body + stores)]
        return "\n".join(lines)

    def block_args(self, names):
        """The arguments (source) of a call of this segment's serial loop on one block of a
        fused chain (fusion.py), given the chain's names of its inputs (a block, or a
        one-element array); its outputs' blocks follow them."""
        return [names[j] if full else f"{names[j]}.reshape(-1)[0]"
                for j, (r, full) in enumerate(zip(self.ins, self.full))
                if not (r[0] == "c" and not full)]

    def costs(self):
        """(NumPy, native) estimated microseconds per call."""
        n = self.n
        numpy = sum(call + n * ns * 1e-3 for call, ns, _ in self.work)
        native = costs.NATIVE_CALL_US + \
            (0 if self.scalar else costs.NATIVE_ARRAYS_US * len(self.outs))
        return numpy, native + n * sum(ns for _, _, ns in self.work) * 1e-3

    def parallel_source(self):
        """The source of the loop on threads (numba.prange; None for a function of scalars)."""
        if self.scalar:
            return None
        if "    for r in range(n // m):" in self.source:
            return self.source.replace("    for r in range(n // m):",
                                       "    for r in prange(n // m):", 1)
        return self.source.replace("    for j in range(n):", "    for j in prange(n):", 1)

    def signature_text(self):
        """The dtype and kind of each parameter (part of the disk cache's key)."""
        kinds = ["array" if f else "scalar" for f, r in zip(self.full, self.ins)
                 if not (r[0] == "c" and not f)]
        return f"{self.dtype.str} ({', '.join(kinds)}) -> " + \
            ("one array of scalars" if self.scalar else f"{len(self.outs)} arrays")

    def thread_count(self):
        """Threads for a call now: tf.jit(threads=), else tf.get_jit_threads(), as many as
        the work pays for (costs.PARALLEL_US each) and numba has."""
        threads = self.threads or fusion.get_jit_threads()
        if threads < 2 or not self.threaded:
            return 1
        return max(1, min(threads, _numba_threads(),
                          int(self.native_us // costs.PARALLEL_US)))

    def dispatcher(self, parallel=False):
        """The numba dispatcher of this segment's loop, serial or on threads: compiled once
        per source and dtype in a process, loaded from the disk cache when a process before
        compiled it (flowgrad/jit_native_cache.py)."""
        have = self.pfn if parallel else self.fn
        if have is not None:
            return have
        source = self.parallel_source() if parallel else self.source
        key = (source, self.dtype.str)
        fn = _compiled.get(key)
        if fn is None:
            numba = load_numba()
            from . import jit_native_cache
            if parallel:
                _choose_threading_layer(numba)
            scalar = numba.from_dtype(self.dtype)
            array = numba.types.Array(scalar, 1, "C")
            sig = [array if f else scalar for f, r in zip(self.full, self.ins) if
                   not (r[0] == "c" and not f)]
            sig += [array] * (1 if self.scalar else len(self.outs))
            fn = jit_native_cache.build(numba, source, self.dtype, sig, self.signature_text(),
                                        parallel, _cache_warning)
            if self.scalar:
                # NOTE: scalars come as Python floats (float(x): 30 ns on a NumPy scalar or a
                # 0-d array alike, where x[()] takes 90 ns on a scalar), each exactly a
                # value of the dtype: converted to it, not compiled again for float64
                fn.disable_compile()
            # (arrays of other layouts, a strided input say, compile on first use)
            with _compiled_lock:
                if len(_compiled) >= _MAX_COMPILED:
                    _compiled.clear()
                _compiled[key] = fn
        if parallel:
            self.pfn = fn
        else:
            self.fn = fn
        return fn

    def in_process(self):
        """True when this process has the code a call would use now (compiled or loaded
        for another segment of the same source)."""
        parallel = self.threaded and (self.threads or fusion.get_jit_threads()) >= 2
        if (self.pfn if parallel else self.fn) is not None:
            return True
        source = self.parallel_source() if parallel else self.source
        return (source, self.dtype.str) in _compiled

    def compile(self):
        """The dispatcher a call would use now (compiled or loaded if needed)."""
        return self.dispatcher(self.thread_count() >= 2)

    def compile_estimate(self):
        """Estimated seconds to compile this segment's loop (on one thread): an inlined
        function's code, and the second loop with libm's, cost more."""
        k = len(self.names)
        c = costs.COMPILE_S
        return c[0] + c[1] * k + \
            (costs.INLINE_COMPILE_S * self.inlined + c[1] * k if self.inlined else 0.0)

    def build_seconds(self):
        """Estimated seconds to make this segment's code now: none when this process has
        it, a load when the disk cache has it, else a compile."""
        parallel = self.threaded and (self.threads or fusion.get_jit_threads()) >= 2
        source = self.parallel_source() if parallel else self.source
        if (source, self.dtype.str) in _compiled:
            return 0.0
        from . import jit_native_cache as cache
        k = len(self.names)
        if cache.cached(cache.key(source, self.signature_text(), parallel)):
            return costs.LOAD_S[0] + costs.LOAD_S[1] * k
        return self.compile_estimate() * (costs.PARALLEL_COMPILE if parallel else 1)

    def run(self, *args):
        """Call the loop (a segment that may pay for threads): on ``thread_count()`` threads
        when that is 2 or more, else on this one. The code of the other kind is made on the
        first call that needs it (tf.set_jit_threads changed since)."""
        t = self.thread_count() if self.threaded else 1
        if t < 2:
            return (self.fn or self.dispatcher(False))(*args)
        fn = self.pfn or self.dispatcher(True)
        with _parallel_lock:
            _NUMBA[0].set_num_threads(t)
            return fn(*args)

    def emit(self, i, args, ns, escape):
        """The replay's lines running this segment as its step ``i`` (``args``: the replay's
        names of its inputs), binding what they use in ``ns``."""
        fn = self.compile()
        p = f"n{i}"
        ns[p], ns[p + "t"], ns[p + "d"] = fn, self.dtype.type, self.dtype
        if self.threaded:           # (its thread count is chosen per call)
            ns[p] = self.run
        call = []
        for j, (r, a, full, (shape, _)) in enumerate(zip(self.ins, args, self.full,
                                                         self.in_meta)):
            if r[0] == "c":
                if full:
                    ns[f"{p}c{j}"] = np.ascontiguousarray(r[1]).reshape(-1)
                    call.append(f"{p}c{j}")
            elif full:
                call.append(a if len(shape) == 1 else f"{a}.ravel()")
            else:                       # a one-element input: its scalar
                item = f"{a}[{', '.join('0' * len(shape))}]" if shape else a
                # NOTE: a function of scalars takes float() (exact; its signature is fixed,
                # so the parameter rounds it back), a loop the dtype's scalar: a Python
                # number (an update's Numbers step) would compile a float64 loop for it
                call.append(f"float({item})" if self.scalar else
                            item if shape else f"{p}t({a})")
        lines, after = [], []
        if self.scalar:
            # the results in one array, read back as NumPy scalars (0-d results) or as
            # views: then a fresh array per call if one leaves the call, else the replay's own
            m = len(self.outs)
            fresh = any(shape != () and o in escape
                        for o, shape in zip(self.outs, self.out_shapes))
            if fresh:
                lines.append(f"    {p}o = np.empty({m}, {p}d)")
            else:
                ns[p + "o"] = np.empty(m, self.dtype)
            lines.append(f"    {p}({', '.join(call + [p + 'o'])})")
            for j, (o, shape) in enumerate(zip(self.outs, self.out_shapes)):
                val = f"{p}o[{j}]" if shape == () else f"{p}o" if shape == (1,) and m == 1 \
                    else f"{p}o[{j}:{j + 1}].reshape({shape!r})"
                after.append(f"    s{o} = {val}")
            return lines + after
        for j, (o, shape) in enumerate(zip(self.outs, self.out_shapes)):
            if o in escape:
                # leaves the call: an array of its own shape (not a view: a variable's new
                # value goes back to the buffer pool when replaced), pooled when large
                if self.n >= PLANNED_MIN:
                    ns[f"{p}r{j}"] = Pooled(tuple(shape), self.dtype)
                    lines.append(f"    {p}b{j} = {p}r{j}()")
                else:
                    lines.append(f"    {p}b{j} = np.empty({tuple(shape)!r}, {p}d)")
                after.append(f"    s{o} = {p}b{j}")
                call.append(f"{p}b{j}" if len(shape) == 1 else f"{p}b{j}.ravel()")
                continue
            # read by later steps only: this replay's own buffer
            buf = np.empty(self.n, self.dtype)
            ns[f"{p}o{j}"], ns[f"{p}v{j}"] = buf, buf.reshape(shape)
            after.append(f"    s{o} = {p}v{j}")
            call.append(f"{p}o{j}")
        lines.append(f"    {p}({', '.join(call)})")
        return lines + after


# ---------------------------------------------------------------- lowering a program

class Lowering:
    """The native backend's part of one traced program: ``lower`` (its segments), the plan
    ``explain()`` shows, and the fallback warning, given once.

    ``mode``: "native" (compiled at trace time, warning about kernels with no native form)
    or "auto" (compiled once the NumPy replay has cost what compiling would: jit.py).
    ``sites``: slot -> the user's line whose op made it (native mode), for the warning."""

    def __init__(self, mode, sites=None, label="fn", threads=None):
        self.mode, self.sites, self.label = mode, sites, label
        self.threads = threads      # tf.jit(threads=): the segments' threads (else the default)
        self.plan = None        # [(where, kernel names, detail)], in replay order
        self.segments = []
        self.warned = False
        self.failed = None      # why compiling failed (auto: it stays on NumPy)

    def lower(self, steps, meta, escape):
        """The replay's steps with each native segment as ``("n", Segment, inputs, None,
        outputs)``. Steps that do not read an open segment's results are moved before it
        (it runs where it ends), as fusion.fuse does; assignments and impure kernels end it.
        """
        readers = fusion.slot_readers(steps)
        out, plan, missing = [], [], {}
        run, made, key, grid = [], set(), None, None

        def close():
            nonlocal grid
            if run:
                seg = _segment(run, readers, escape, key, grid, meta, self.threads)
                # (decided below, once every segment is known: see _worth_compiling)
                out.append(("?", seg, list(run)))
                plan.append(seg)
            run.clear()
            made.clear()
            grid = None

        for i, st in enumerate(steps):
            c = classify(st, meta)
            if type(c) is tuple and _numpy_alone(st, c, meta):
                c = COST
            if type(c) is tuple:
                # (a run of broadcast steps is one grid: the same output shape and rows)
                if c[:2] != key or (c[2] is not None and grid is not None and c[2] != grid):
                    close()
                    key, grid = c[:2], None
                grid = c[2] or grid
                run.append((i, st))
                made.add(st[4][0])
                continue
            refs = st[2] if st[0] != "a" else (st[2],)
            if run and (st[0] in ("a", "cb") or st[1].impure or
                        any(r[0] == "s" and r[1] in made for r in refs)):
                close()
            out.append(st)
            plan.append(("numpy", [st[1].name if st[0] == "k" else
                                   "assign" if st[0] == "a" else "callback"], c))
            if c == NO_FORM:
                missing.setdefault(st[1].name, (self.sites or {}).get(st[4][0]))
        close()
        candidates = [st[1] for st in out if st[0] == "?"]
        chosen = costs.worth_compiling(candidates)
        # a run of a fused chain's size left to NumPy (its libm functions are faster
        # there): its runs of arithmetic compiled, called on the chain's blocks
        split = {seg: _split(run, readers, escape, meta)
                 for seg, run in ((st[1], st[2]) for st in out if st[0] == "?")
                 if seg not in chosen and seg.grid is None and
                 seg.n * seg.dtype.itemsize >= fusion.FUSE_MIN_BYTES}
        parts = [p for ps in split.values() for p in ps if type(p) is Segment]
        inner = costs.worth_compiling(parts)
        steps_out, segments = [], []
        for st in out:
            if st[0] != "?":
                steps_out.append(st)
            elif st[1] in chosen:
                steps_out.append(("n", st[1], st[1].ins, None, st[1].outs))
                segments.append(st[1])
            else:
                for p in split.get(st[1], st[2]):       # (segments, or (index, step))
                    if type(p) is not Segment:
                        steps_out.append(p[1])
                    elif p in inner:
                        steps_out.append(("n", p, p.ins, None, p.outs))
                        segments.append(p)
                    else:
                        steps_out.extend(p.members)
        for k, entry in reversed(list(enumerate(plan))):
            if isinstance(entry, Segment):
                seg = entry
                if seg in chosen:
                    plan[k] = ("native", seg.names, f"{seg.n} {seg.dtype} element" +
                               ("s" if seg.n != 1 else ""))
                    continue
                numpy, native = seg.costs()
                why = COST if native > numpy else SMALL_GAIN
                lines = []
                for p in split.get(seg, [(None, st) for st in seg.members]):
                    if type(p) is Segment and p in inner:
                        lines.append(("native", p.names, f"{p.n} {p.dtype} elements" +
                                      (", on the blocks of a fused chain" if p.blocked
                                       else "")))
                    else:
                        lines += [("numpy", [st[1].name], why) for st in
                                  (p.members if type(p) is Segment else [p[1]])]
                plan[k:k + 1] = lines
        out = steps_out
        self.plan, self.segments = plan, segments
        if self.mode == "native" and missing and not self.warned:
            self.warned = True
            parts = [f"{k} (at {s})" if s is not None else k for k, s in missing.items()]
            one = len(parts) == 1
            user_frames.warn(f"tf.jit({self.label}, backend='native'): {', '.join(parts)} "
                             f"{'has' if one else 'have'} no native form and "
                             f"{'runs' if one else 'run'} as NumPy steps between the compiled "
                             f"segments (explain() shows the plan)", JitFallbackWarning)
        return out

    def compile_seconds(self):
        """Estimated seconds to compile the planned segments, or to load those the disk
        cache holds (numba's import included)."""
        s = 0.0 if "numba" in sys.modules else costs.IMPORT_S
        return s + sum(g.build_seconds() for g in self.segments)

    def describe(self):
        """The plan, one line per segment or run of NumPy steps of one reason."""
        lines = []
        for where, names, detail in self.plan or ():
            if lines and where == "numpy" and lines[-1][0] == "numpy" and \
                    lines[-1][2] == detail:
                lines[-1][1].extend(names)
            else:
                lines.append([where, list(names), detail])
        out = []
        for where, names, detail in lines:
            if where == "native":
                out.append(f"  native  {len(names)} kernels in one loop over {detail}: "
                           f"{_names(names)}")
            else:
                out.append(f"  numpy   {_names(names)}: {detail}")
        return out


def _numpy_alone(st, c, meta):
    """True when a kernel that may join a segment is cheaper as a NumPy step by itself
    than inside a compiled loop (a libm function NumPy vectorises: sin, exp, tanh on a
    thousand values), on arrays too small for fused chains (fusion.FUSE_MIN_BYTES: above,
    a run is compiled whole or stays a fused chain, whose blocks stay in cache, with its
    arithmetic compiled on the blocks: _split). It then splits the run: the arithmetic
    around it is compiled, it runs on NumPy."""
    n, dt = c[0], c[1]
    if n == 1 or n * dt.itemsize >= fusion.FUSE_MIN_BYTES:
        return False
    prim = st[1]
    expr = native_expr(prim, [f"a{k}" for k in range(len(st[2]))],
                       [_number(r, dt) for r in st[2]], st[3])
    if not costs.libm_calls(expr):
        return False
    call, numpy_ns, native_ns = costs.work(prim, expr, dt, False)
    # (split, the run costs one more compiled call besides the kernel's NumPy call)
    return n * (native_ns - numpy_ns) * 1e-3 > \
        call + costs.NATIVE_CALL_US + costs.NATIVE_ARRAYS_US


def _names(names, limit=12):
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    shown = [f"{n} x{c}" if c > 1 else n for n, c in counts.items()]
    return ", ".join(shown[:limit]) + (f", ... ({len(shown) - limit} more)"
                                       if len(shown) > limit else "")


def _segment(run, readers, escape, key, grid, meta, threads=None):
    members = [st for _, st in run]
    ins, outs = fusion.run_boundary(members, {i for i, _ in run}, readers, escape)
    return Segment(members, ins, outs, key[0], key[1], meta, threads, grid)


def _split(run, readers, escape, meta):
    """A run as its kernels that call libm (sqrt aside), each ``(index, step)``, and
    Segments of the runs of two or more others between them, marked ``blocked``: their
    loops run on a fused chain's blocks (fusion.py), beside NumPy's vectorised functions."""
    out, part = [], []

    def close():
        if len(part) >= 2:
            st = part[0][1]
            seg = _segment(part, readers, escape, (_size(meta[st[4][0]][0]),
                                                   meta[st[4][0]][1]), None, meta)
            # (a loop reading a variable runs whole, as fused chains take no variable: the
            # chain is made for the traced sizes)
            if not any(r[0] == "v" for st in seg.members for r in st[2]):
                seg.blocked, seg.threaded = True, False    # (the chain shares blocks out)
            out.append(seg)
        else:
            out.extend(part)
        part.clear()
    for i, st in run:
        expr = native_expr(st[1], [f"a{k}" for k in range(len(st[2]))],
                           [_number(r, meta[st[4][0]][1]) for r in st[2]], st[3])
        if any(f != "sqrt" for f in costs.libm_calls(expr)):
            # (it runs before the open part when it reads none of its results: W3's x * 2
            # joins the arithmetic after sin's gradient)
            if any(r[0] == "s" and r[1] == p[4][0] for r in st[2] for _, p in part):
                close()
            out.append((i, st))
            continue
        part.append((i, st))
    close()
    return out
