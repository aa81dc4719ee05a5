"""``tf.jit``: trace a function's kernels once per input signature, replay them as straight
Python code over arrays.

The first call with a given signature (the shapes and dtypes of the tensor arguments, the
values of the others) runs the function eagerly and records every kernel it reaches —
forward passes, backward passes, optimizer steps — with where each input came from: an
argument, an earlier kernel, a variable (read afresh at every call) or a constant. Later
calls run the recorded kernels in order, with no tensors, tape, scopes or checks in
between, freeing each intermediate after its last use. Large float intermediates of
elementwise kernels are written into buffers preallocated once and reused as lifetimes
allow (no page faults on fresh arrays, accumulation in place); large chains of elementwise
kernels are fused and run block by block in cache (flowgrad/fusion.py).

What a trace cannot see: Python decisions on tensor values (reading a value while tracing
raises JitError), and what the function reads from outside its arguments: those tensors
are constants of the trace, variables are read afresh (and assigned) at every call. A
replay first checks that the names it read such tensors and variables through (closure,
globals, the functions it calls: flowgrad/jit_closures.py) still hold them, and raises
JitError naming the ones that changed: pass changing tensors as arguments. Python numbers
that change between calls are constants too, and are not checked.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar, overload
import threading
import time
import weakref

import numpy as np

from . import batching as _batching
from . import fusion as _fusion
from . import jit_closures
from . import jit_native
from . import engine as E
from . import float_errors
from .float_errors import QUIET as _QUIET, fpe_put as _fpe_put, fpe_saved as _fpe_saved
from . import interceptors
from . import tape as _tape
from . import user_frames
from .arg_checks import as_int, check_arity
from .errors import ArgumentError, JitError, MissingDependencyError
from .camel_case import Result
from .ops import PRIMITIVES
from .thread_state import LOCAL
from .replay_buffers import Recycled, plan, ufunc_target
from . import tensor as _tensor_module
from .tensor import Tensor, Variable, convert

MAX_TRACES = 32
BACKENDS = ("auto", "native", "numpy")
_tracing = threading.Lock()     # one trace at a time: E.run_kernel is swapped process-wide


class _Tracer:
    def __init__(self, sites=False):
        self.steps = []            # ("k", prim, refs, attrs, out_slots) / ("a", var, ref)
        self.slot_of = {}          # id(tensor) -> slot
        self.arr_slot = {}         # id(array) -> slot: tensors made from kernel outputs
        self.meta = []             # slot -> (shape, dtype)
        self.keep = []             # keeps traced objects alive so their ids stay unique
        self.reads = {}            # id(array) -> array: values of outside tensors read
        self.made = {}             # id(array) -> array: constants made while tracing
        self.plain_run = E.run_kernel      # what lies below the tracer (interceptors.set_layer)
        self.plain_make = E.make_tensor
        self.thread = threading.get_ident()     # other threads' ops are not traced
        # backend="native": slot -> the user's line whose op made it (for its warning)
        self.sites = {} if sites else None
        self.paused = 0            # >0 while a tf.debug.callback runs: its work is not traced
        self.untraceable = False   # True: no program (tf.vmap or a gradient hook ran inside)
        self.variables_changed = False     # this thread created or disposed a variable

    def new_slot(self, t):
        k = len(self.meta)
        self.meta.append((t._data.shape, t._data.dtype))
        self.slot_of[id(t)] = k
        self.arr_slot[id(t._data)] = k
        self.keep.append(t)
        return k

    def ref(self, t):
        k = self.slot_of.get(id(t))
        if k is not None:
            return ("s", k)
        if isinstance(t, Variable):
            return ("v", t)
        return ("c", t._data)

    def link(self, run, make):
        self.plain_run, self.plain_make = run, make

    # the seams
    def traces_this_thread(self):
        """Whether this thread's kernels are being traced now (not another thread's, and
        not a callback's)."""
        return threading.get_ident() == self.thread and not self.paused

    def on_callback(self, fn, tensors):
        """tf.debug.callback while tracing: a step that calls ``fn`` with the values at
        every replay, and the call now, with tracing paused (fn's own ops, reads and
        assignments are not part of the step)."""
        self.steps.append(("cb", fn, tuple(self.ref(t) for t in tensors)))
        self.paused += 1
        try:
            fn(*[E.host_view(t._data) for t in tensors])
        finally:
            self.paused -= 1

    def untraced(self, fn, *args):
        """``fn(*args)`` outside the trace, which then becomes no program (the function
        runs eagerly for these shapes): Python that must run at every call, which a
        replay would skip (a gradient hook)."""
        self.untraceable = True
        self.paused += 1
        try:
            return fn(*args)
        finally:
            self.paused -= 1

    def run_kernel(self, prim, inputs, attrs=None):
        out = self.plain_run(prim, inputs, attrs)
        if threading.get_ident() != self.thread or self.paused:
            return out
        refs = tuple(self.ref(t) for t in inputs)
        outs = out if isinstance(out, tuple) else (out,)
        slots = tuple(self.new_slot(o) for o in outs)
        self.steps.append(("k", prim, refs, attrs, slots))
        if self.sites is not None:
            self.sites[slots[0]] = user_frames.capture(1)
        return out

    def make_tensor(self, a):
        t = self.plain_make(a)
        if threading.get_ident() != self.thread or self.paused:
            return t
        k = self.arr_slot.get(id(a))
        if k is not None:          # a new tensor over a kernel's output (a saved output)
            self.slot_of[id(t)] = k
            self.keep.append(t)
        else:                      # made while tracing: not a tensor read from outside
            self.made[id(a)] = a
        return t

    def on_assign(self, var, value):
        if self.paused and threading.get_ident() == self.thread:
            return                  # (a callback's: it runs at every replay anyway)
        if threading.get_ident() != self.thread:
            raise JitError("tf.jit: a variable was assigned from another thread while a "
                           "function was being traced; the trace cannot tell whether the "
                           "replay should repeat it. Trace (call the jitted function once) "
                           "before other threads update its variables.")
        self.steps.append(("a", var, self.ref(value)))

    def on_read(self, t):
        if threading.get_ident() != self.thread or self.paused:
            return
        if id(t) not in self.slot_of:       # a tensor from outside: its value is baked in
            self.reads[id(t._data)] = t._data
        else:
            raise JitError("tf.jit: the function reads the value of a tensor it computed "
                           "(item(), numpy(), print, bool()...) while being traced, so its "
                           "Python control flow may depend on values, which a replay cannot "
                           "follow. Remove the read from the jitted function, or do not jit "
                           "it.")


def _flatten(obj, leaves):
    """A template of obj's structure, with its tensors appended to leaves."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, Result):
        return ("R", type(obj), tuple((k, _flatten(getattr(obj, k), leaves))
                                      for k in obj._fields))
    if isinstance(obj, dict):
        return ("D", type(obj), tuple((k, _flatten(v, leaves)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return ("L", type(obj), tuple(_flatten(v, leaves) for v in obj))
    return ("X", obj)


def _unflatten(tpl, leaves):
    kind = tpl[0]
    if kind == "T":
        return leaves[tpl[1]]
    if kind == "R":
        return tpl[1](**{k: _unflatten(v, leaves) for k, v in tpl[2]})
    if kind == "D":
        d = tpl[1]()
        for k, v in tpl[2]:
            d[k] = _unflatten(v, leaves)
        return d
    if kind == "L":
        items = [_unflatten(v, leaves) for v in tpl[2]]
        return tpl[1](items) if tpl[1] in (list, tuple) else tpl[1](*items)
    return tpl[1]


class _Trace:
    """What compiling a trace takes (its steps and slot shapes), without the traced
    tensors."""
    __slots__ = ("steps", "meta", "sites")

    def __init__(self, tracer):
        self.steps, self.meta, self.sites = tracer.steps, tracer.meta, tracer.sites

    @classmethod
    def of(cls, steps, meta, sites):
        tr = cls.__new__(cls)
        tr.steps, tr.meta, tr.sites = steps, meta, sites
        return tr


class _Program:
    """A trace compiled to a Python function over arrays.

    NOTE: a replay writes into buffers of its own (intermediates, recycled outputs, fused
    chains' blocks), so two threads must never run the same one at once: each call takes
    a replay no call is running, compiling another (with its own buffers) when every one
    is busy, and puts it back when done. Calls from three threads used to share one, and
    107-114 of 120 returned wrong values (tests/test_engine_state.py). A replay with no
    buffer of its own (no pooled or recycled output, fused chain, compiled segment or
    callback: a program of small values, as a tiny training step) is run directly by any
    number of threads at once, in each thread's quiet context (float_errors.quiet_context).

    Backends: "numpy" replays every kernel as a NumPy call; "native" compiles the replay's
    elementwise segments with numba now (flowgrad/jit_native.py); "auto" (with numba
    installed) starts as "numpy" and compiles natively once its replays have taken as long
    as compiling is estimated to take (``pending`` seconds): a function called a few times
    never pays for a compile, one called in a loop pays at most twice what it would have.
    """

    def __init__(self, tracer, n_args, out_refs, template, threads=None, watch=None,
                 backend="numpy", label="fn"):
        self.template = template
        self.watch = watch          # the tensors and variables it read by name, or None
        self.var_ids = frozenset()  # ids of the variables it reads (set by _trace)
        self.out_kinds = [r[0] for r in out_refs]
        self.backend = backend
        self.lowering = None if backend == "numpy" else \
            jit_native.Lowering(backend, tracer.sites, label, threads)
        self.pending = None         # auto: seconds of replays after which it compiles
        self.spent = 0.0
        self._switching = threading.Lock()
        trace = _Trace(tracer)
        self._spec = (trace, n_args, out_refs, threads, watch,
                      self.lowering if backend == "native" else None)
        self.fn, self.namespace = _compile(*self._spec)
        self.source = self.namespace["__source__"]      # the replay, as Python code
        self._idle = [self.fn]      # replays no call is running (list pop/append: atomic)
        if backend == "auto":
            _plan(trace, out_refs, self.lowering)
            if self.lowering.segments:
                self.pending = self.lowering.compile_seconds()
        # a replay with no buffer of its own (a program of small values) serves every thread
        # at once: no replay taken from _idle and put back (never while replays are timed)
        self._direct = self.fn if self.namespace["__reentrant__"] and self.pending is None \
            else None

    def __call__(self, arrays):
        direct = self._direct
        # (kernels return -Inf/NaN silently, as in eager runs; float_errors' primitives
        # inline: W5's whole step is ~2 µs, each call frame ~0.07)
        if direct is not None:
            if _fpe_saved() is _QUIET:
                outs = direct(arrays)
            else:
                # in this thread's quiet context: a replay of kernels reads no other
                # context variable (one with a callback is never direct)
                st = LOCAL.s
                ctx = st.quiet
                if ctx is None:
                    ctx = st.quiet = float_errors.quiet_context()
                if ctx is not None:
                    outs = ctx.run(direct, arrays)
                else:
                    q = _fpe_saved()
                    try:
                        _fpe_put(_QUIET)
                        outs = direct(arrays)
                    finally:
                        _fpe_put(q)
        else:
            pending = self.pending          # (auto, before compiling: replays are timed)
            if pending is not None:
                t0 = time.perf_counter()
            idle = self._idle
            try:
                fn = idle.pop()
            except IndexError:          # every replay is running in another thread
                fn = _compile(*self._spec)[0]
            q = _fpe_saved()
            try:
                _fpe_put(_QUIET)
                outs = fn(arrays)
            finally:
                _fpe_put(q)
                idle.append(fn)         # (an interrupt before this only loses a replay)
            if pending is not None:
                self.spent += time.perf_counter() - t0
                if self.spent >= pending:
                    self._go_native()
        if outs is None:            # a name it read by now holds another tensor (or none)
            self.watch.fail()       # (raises, naming it)
        if not outs and self.template[0] == "X":
            return self.template[1]          # a step run for its side effects
        leaves = []
        for kind, val in zip(self.out_kinds, outs):
            leaves.append(val if kind == "v" else E.make_tensor(val))
        return _unflatten(self.template, leaves)

    def _go_native(self):
        """auto: compile the native replay and use it from now on (one thread compiles;
        the others go on replaying NumPy meanwhile)."""
        if not self._switching.acquire(blocking=False):
            return
        try:
            if self.pending is None:
                return
            spec = self._spec[:5] + (self.lowering,)
            try:
                fn, ns = _compile(*spec)
            except Exception as e:      # (numba refused the code: stay on NumPy, say why)
                self.lowering.failed = f"{type(e).__name__}: {e}"
                self.pending = None
                return
            self._direct = None     # (first: no call may take the new fn as direct)
            self._spec, self.fn, self.namespace = spec, fn, ns
            self.source = ns["__source__"]
            self._idle = [fn]       # (replays running now go back to the old list)
            self._direct = fn if ns["__reentrant__"] else None
            self.pending = None
        finally:
            self._switching.release()

    def explain(self, key, why="backend 'numpy'"):
        """What runs native and what stays NumPy, for the signature ``key`` (``why``: why
        a program of the NumPy backend is one)."""
        sig = ", ".join(f"{np.dtype(e[1]).name}{list(e[0])}" if len(e) == 2 and
                        isinstance(e[0], tuple) and not isinstance(e[1], int) else
                        "variables " + ", ".join(f"args[{i}]" for i, _ in e)
                        for e in key) if isinstance(key, tuple) else "()"
        head = f"signature ({sig}):"
        low = self.lowering
        if low is None:
            k = _count(self)
            return [f"{head} NumPy replay ({why}; {k} kernel{'s' if k != 1 else ''})"]
        if low.failed is not None:
            return [f"{head} NumPy replay: compiling failed ({low.failed})"]
        if self.pending is not None:
            head += (f" NumPy replay for now: compiled once replays have taken "
                     f"{self.pending * 1e3:.0f} ms (so far {self.spent * 1e3:.1f} ms); the "
                     f"plan:")
        elif not low.segments:
            head += " NumPy replay: no segment is worth compiling (the cost model)"
        return [head] + low.describe()


# The kernels the peepholes below know, by identity (a kernel renamed fails here, at import).
# Which kernels a replay keeps even unused is each kernel's own declaration (impure=True).
_FILL, _ADD, _MULTIPLY = PRIMITIVES["Fill"], PRIMITIVES["Add"], PRIMITIVES["Multiply"]
# kernels that keep an all-ones tensor so
_ONES_KEEP = (PRIMITIVES["Reshape"], PRIMITIVES["BroadcastTo"], PRIMITIVES["Identity"])


def _count(prog):
    return sum(1 for st in prog._spec[0].steps if st[0] == "k")


def _simplify(tr, out_refs, exact=False):
    """Peepholes on the trace: a pure kernel of constants only (a gradient's seed of ones,
    its reshapes and broadcasts) is computed once, here, and becomes a constant;
    multiplications by the all-ones seed of a gradient are dropped (x * 1 == x to the bit),
    then kernels whose results nobody uses (the value of a loss whose gradient alone is
    returned...) are removed. ``exact``: the native path's peepholes too
    (jit_native.rewrite: x * 1, x ** 1, x ** 2 as x * x...; the same bits)."""
    alias, ones, steps = {}, set(), []
    ones_c = []         # folded all-ones constants (arrays: by identity, never by ==)
    returned = {r[1] for r in out_refs if r[0] == "s"}

    def sub(r):
        while r[0] == "s" and r[1] in alias:
            r = alias[r[1]]
        return r
    for st in tr.steps:
        if st[0] == "a":
            steps.append(("a", st[1], sub(st[2])))
            continue
        if st[0] == "cb":
            steps.append(("cb", st[1], tuple(sub(r) for r in st[2])))
            continue
        _, prim, refs, attrs, outs = st
        refs = tuple(sub(r) for r in refs)
        if len(outs) == 1 and outs[0] not in returned and not prim.multi and \
                all(r[0] == "c" for r in refs) and not prim.impure:
            val = _fold(prim, refs, attrs)
            alias[outs[0]] = ("c", val)
            if prim is _FILL and attrs.get("value") == 1 or \
                    prim in _ONES_KEEP and _is_one(refs[0][1], ones_c):
                ones_c.append(val)
            continue
        # kinds first: a constant ref holds an array, whose == is elementwise
        kernel = prim
        if kernel is _ADD and refs[0][0] == "s" == refs[1][0] and refs[0][1] == refs[1][1] and \
                tr.meta[refs[0][1]][1] in E.B.float_dtypes:
            # x + x is 2 * x to the bit (both round the exact double), and one stream
            # fewer to read
            prim, refs = _MULTIPLY, (refs[0], ("c", _two(tr.meta[refs[0][1]][1])))
        if kernel is _FILL and attrs.get("value") == 1:
            ones.add(outs[0])
        elif kernel in _ONES_KEEP and refs[0][0] == "s" and refs[0][1] in ones:
            ones.add(outs[0])
        elif kernel is _MULTIPLY:
            out_meta = tr.meta[outs[0]]
            for a, b in (refs, refs[::-1]):
                if (b[0] == "s" and b[1] in ones or b[0] == "c" and _is_one(b[1], ones_c)) \
                        and a[0] == "s" and tr.meta[a[1]] == out_meta:
                    alias[outs[0]] = a
                    break
            if outs[0] in alias:
                continue
        if exact and not attrs and len(outs) == 1:
            rw = jit_native.rewrite(prim, refs, tr.meta[outs[0]], tr.meta)
            if rw is not None and rw[0] == "alias":
                alias[outs[0]] = rw[1]
                continue
            if rw is not None:
                prim, refs = rw[1], rw[2]
        steps.append(("k", prim, refs, attrs, outs))
    out_refs = [sub(r) for r in out_refs]
    live = {r[1] for r in out_refs if r[0] == "s"}
    kept = []
    for st in reversed(steps):
        if st[0] == "k" and not any(o in live for o in st[4]) and not st[1].impure:
            continue
        kept.append(st)
        for r in _reads(st):
            if r[0] == "s":
                live.add(r[1])
    return kept[::-1], out_refs


def _fold(prim, refs, attrs):
    """A pure kernel of constant arrays, run once at trace time (its value is a constant
    of the trace, as the inputs are)."""
    saved = float_errors.fpe_saved()
    try:
        float_errors.fpe_quiet()
        arrays = [r[1] for r in refs]
        return prim.fwd(E.B, *arrays, **attrs) if attrs else prim.fwd(E.B, *arrays)
    finally:
        float_errors.fpe_restore(saved)


def _is_one(val, ones_c):
    return any(v is val for v in ones_c)


_TWOS: dict[Any, Any] = {}


def _two(dtype):
    key = (E.B.name, dtype)
    if key not in _TWOS:
        _TWOS[key] = E.B.asarray(2, dtype=dtype)
    return _TWOS[key]


def _reads(st):
    return st[2] if st[0] != "a" else (st[2],)


def _liveness(steps, out_refs):
    """The last step reading each slot, and the slots that outlive the replay (returned,
    assigned to variables, or viewed by those)."""
    last = {}
    for i, st in enumerate(steps):
        for r in _reads(st):
            if r[0] == "s":
                last[r[1]] = i
    escape = {r[1] for r in out_refs if r[0] == "s"}
    escape |= {st[2][1] for st in steps if st[0] == "a" and st[2][0] == "s"}
    # a stateful kernel may keep what it is given: an optimizer's commit makes its inputs
    # the variables' values, so they are fresh arrays, never the replay's own buffers
    escape |= {r[1] for st in steps if st[0] == "k" and st[1].impure for r in st[2]
               if r[0] == "s"}
    # a non-elementwise kernel may return a view of its input: inputs of views that escape
    # escape too, and an input lives as long as the output that may view it
    for st in reversed(steps):
        if st[0] == "k" and st[1].ufunc is None:
            outs = st[4]
            for r in st[2]:
                if r[0] == "s":
                    if any(o in escape for o in outs):
                        escape.add(r[1])
                    last[r[1]] = max([last.get(o, -1) for o in outs] + [last.get(r[1], -1)])
    return last, escape


def _plan(tr, out_refs, lowering):
    """The native plan of a trace (lowering.plan, lowering.segments), compiling nothing."""
    steps, out_refs = _simplify(tr, out_refs, True)
    steps, meta = jit_native.expand(steps, tr.meta)
    lowering.lower(steps, meta, _liveness(steps, out_refs)[1])


def _compile(tr, n_args, out_refs, threads=None, watch=None, lowering=None):
    steps, out_refs = _simplify(tr, out_refs, lowering is not None)
    # __name__: NumPy's warnings from the replay are flowgrad's (filtered like kernels')
    ns = {"np": np, "B": E.B, "_set": _set_var, "__name__": "flowgrad.jit.replay"}
    names = {}

    def name_of(ref):
        kind, val = ref
        if kind == "s":
            return f"s{val}"
        key = (kind, id(val))
        if key not in names:
            names[key] = f"{kind}{len(names)}"
            # NOTE: a 0-d constant as a NumPy scalar: scalar arithmetic is several times
            # faster than ufuncs on 0-d arrays, with the same dtype and result
            ns[names[key]] = val[()] if isinstance(val, np.ndarray) and val.ndim == 0 else val
        return names[key] + ("._data" if kind == "v" else "")

    if lowering is not None:
        # an optimizer's update as elementwise kernels (new slots: a trace of their meta)
        steps, meta = jit_native.expand(steps, tr.meta)
        if meta is not tr.meta:
            tr = _Trace.of(steps, meta, tr.sites)
    last, escape = _liveness(steps, out_refs)
    if lowering is not None:        # native segments first: fusion takes what stays NumPy
        steps = lowering.lower(steps, tr.meta, escape)
        last, escape = _liveness(steps, out_refs)
    steps = _fusion.fuse(steps, tr.meta, escape, threads)
    if any(st[0] == "f" for st in steps):
        last, escape = _liveness(steps, out_refs)
    pools, handed = plan(tr, steps, last, escape)
    lines = ["def replay(args):"]
    if watch is not None:   # first, the names it read by: unchanged, or return None
        lines += watch.lines(ns)
    bound = set()          # handed-out buffers already fetched in this call
    lines += [f"    s{i} = args[{i}]" for i in range(n_args)]
    dead_after = {}
    for slot, i in last.items():
        dead_after.setdefault(i, []).append(slot)
    reentrant = True        # no buffer of its own: any number of threads may run it at once
    for i, st in enumerate(steps):
        if st[0] == "a":
            var, val = name_of(('c', st[1])), name_of(st[2])
            # (_set_var's path for a variable that shares no buffer, inlined)
            lines.append(f"    if {var}._buf is None: {var}._data = {val}")
            lines.append(f"    else: _set({var}, {val})")
        elif st[0] == "cb":        # tf.debug.callback: fn with read-only views of the values
            reentrant = False       # (user code: run in the caller's context, never direct)
            ns[f"cb{i}"], ns["_view"] = st[1], E.host_view
            lines.append(f"    cb{i}({', '.join(f'_view({name_of(r)})' for r in st[2])})")
        elif st[0] == "n":         # a compiled segment (jit_native.Segment)
            reentrant = False
            lines += st[1].emit(i, [name_of(r) for r in st[2]], ns, escape)
        elif st[0] == "f":
            reentrant = False
            # a fused chain: its outputs in pooled buffers, or recycled where returned
            _, fc, refs, _, outs = st
            ns[f"g{i}"] = fc
            bufs = []
            for o in outs:
                if o in pools:
                    ns[f"p{o}"] = pools[o]
                    bufs.append(f"p{o}")
                else:
                    ns[f"r{o}"] = Recycled(*tr.meta[o])
                    bufs.append(f"r{o}()")
            args = "".join(name_of(r) + ", " for r in refs)
            target = "".join(f"s{o}, " for o in outs)
            lines.append(f"    {target}= g{i}(({args}), ({''.join(b + ', ' for b in bufs)}))")
        else:
            _, prim, refs, attrs, outs = st
            args = ", ".join(name_of(r) for r in refs)
            target = ", ".join(f"s{o}" for o in outs) + ("," if prim.multi and len(outs) == 1
                                                        else "")
            kind = ufunc_target(tr, prim, refs, outs, pools, escape)
            if kind is not None:
                reentrant = False
            if kind == "pool":
                ns[f"u{i}"] = getattr(E.B, prim.ufunc)
                buf = pools[outs[0]]
                if id(buf) in handed:
                    # this buffer leaves as an output: fetched once per call, fresh when
                    # the caller still holds the previous call's
                    name = f"b{handed[id(buf)]}"
                    if name not in bound:
                        bound.add(name)
                        ns["r" + name] = Recycled(buf.shape, buf.dtype, buf)
                        lines.append(f"    {name} = r{name}()")
                    lines.append(f"    {target} = u{i}({args}, out={name})")
                else:
                    ns[f"p{outs[0]}"] = buf
                    lines.append(f"    {target} = u{i}({args}, out=p{outs[0]})")
            elif kind == "recycle":
                ns[f"u{i}"] = getattr(E.B, prim.ufunc)
                ns[f"r{outs[0]}"] = Recycled(*tr.meta[outs[0]])
                lines.append(f"    {target} = u{i}({args}, out=r{outs[0]}())")
            elif not attrs and prim.expr is not None and _all_float(tr, refs):
                # the kernel's own body (its fwd is this operator on floats: its declared
                # expr) without the call: on the 0-d values of small steps the call costs
                # as much as the math
                lines.append(f"    {target} = {prim.expr.format(*args.split(', '))}")
            elif not attrs and prim.ufunc is not None and E.B.supports_out and \
                    _all_float(tr, refs):
                # the backend function its fwd calls on floats, without the fwd's frame
                # (ufunc names: NumPy's and CuPy's, the backends that take out=)
                ns[f"u{i}"] = getattr(E.B, prim.ufunc)
                lines.append(f"    {target} = u{i}({args})")
            else:
                ns[f"f{i}"] = prim.fwd
                call = ", ".join(["B"] + ([args] if args else []))
                if attrs:
                    ns[f"a{i}"] = attrs
                    lines.append(f"    {target} = f{i}({call}, **a{i})")
                else:
                    lines.append(f"    {target} = f{i}({call})")
        for slot in dead_after.get(i, ()):
            # (a 0-d value outside every pool frees nothing worth a line: W5's step is 2 µs)
            if slot not in escape and (tr.meta[slot][0] != () or slot in pools):
                lines.append(f"    del s{slot}")
    outs = ", ".join(name_of(("c", r[1])) if r[0] == "v" else name_of(r) for r in out_refs)
    lines.append(f"    return ({outs}{',' if len(out_refs) == 1 else ''})")
    src = "\n".join(lines)
    exec(compile(src, "<flowgrad.jit>", "exec"), ns)
    ns["__source__"] = src
    ns["__reentrant__"] = reentrant and not pools
    return ns["replay"], ns


def _all_float(tr, refs):
    for kind, val in refs:
        if kind == "s":
            dt = tr.meta[val][1]
        elif kind == "c":
            dt = getattr(val, "dtype", None)
        else:                         # a variable: its dtype is fixed (assign keeps it)
            dt = val._data.dtype
        if dt not in E.B.float_dtypes:
            return False
    return True


def _set_var(var, arr):
    """Variable.assign for a replay: the variable takes the array (accounting updated)."""
    b = var._buf                # (release_buffer, then a new buffer: inlined)
    if b is not None:
        b[0] -= 1
        if b[0]:
            E.count_buffers(1)      # the old buffer lives on in other tensors
    var._buf = None
    var._data = arr


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def jit(fn: _F, *, max_traces: int = ..., threads: int | None = ...,
        backend: str = ...) -> _F: ...
@overload
def jit(fn: None = None, *, max_traces: int = ..., threads: int | None = ...,
        backend: str = ...) -> Callable[[_F], _F]: ...


def jit(fn: Any = None, *, max_traces: int = MAX_TRACES, threads: int | None = None,
        backend: str = "auto") -> Any:
    """Trace ``fn`` once per input signature and replay its kernels as flat NumPy code, or
    compile them to native code (``backend``).

    The same results as calling fn, for functions whose Python control flow does not
    depend on tensor values. Inside a recording gradient function fn runs eagerly (so it
    can be differentiated). So it does while ``tf.debug.check_numerics``, debug mode or
    ``explain_gradient`` is on (a replay runs each kernel and gradient with no Python
    around it, which those tools must see), for the shapes whose trace ran a gradient hook
    (``register_hook`` inside fn), and in a call where a tensor with a hook
    (``tf.debug.on_gradient``, ``register_hook``) is an argument or a variable fn reads:
    every hook runs at every call, registered before or after the trace.

    Chains of elementwise kernels (forward and backward) on arrays of 1 MB or more are
    fused (flowgrad/fusion.py): each chain runs block by block (128 KB) through
    small reused buffers, so its intermediates stay in cache; the results are eager's to
    the bit. ``threads`` splits the blocks of each fused chain among that many threads
    (default: ``tf.set_jit_threads``, else the environment variable
    ``FLOWGRAD_JIT_THREADS``, else the cores this process may use); any thread count gives
    the same bits. Any number of threads may call one jitted function at once, each call
    computing from its own arguments.

    Tensors fn reads from outside its arguments — from its closure, its module's globals,
    or those of the functions it calls — are constants of the trace; variables are state,
    read and assigned afresh at every call. Each call first checks that the names fn read
    them through still hold the same tensors (not disposed) and the same variables, and
    raises ``JitError`` naming those that changed (``DisposedError`` for a disposed one),
    never silently reusing what was traced: a tensor that changes between calls (a
    mini-batch) must be an argument. Checked: closure cells and globals, items of dicts,
    lists and tuples held there (two levels), attributes one level down (``model.mask``,
    ``self.w``, ``Config.x``), for fn and the Python functions and methods it reaches by
    name; and the objects held there that the trace ran with (an optimizer whose
    ``minimize`` fn calls, a model holding the weights). Not checked (still constants):
    longer attribute chains, tensors made inside fn from Python data, and Python numbers.
    The check costs about 50 ns per name watched. A variable passed as an argument is part
    of the signature (each such variable traces once, and its replays update that very
    variable); setting a variable's ``trainable`` flag drops every trace, since a traced
    ``minimize`` chose the variables it trains; a list of tensors as an argument is a
    ``JitError`` (a trace would make it one constant): pass them one by one.

    >>> import flowgrad as tf
    >>> step = tf.jit(tf.grad(lambda x: (x.sin() * x).sum()))
    >>> step(tf.tensor([1.0, 2.0])).shape, step(tf.tensor([3.0, 4.0])).shape
    ((2,), (2,))
    >>> f = tf.jit(lambda x: x.exp() * x.sin() + x * x, threads=2)
    >>> x = tf.linspace(-1, 1, 1_000_000)     # 4 MB: fused
    >>> _ = f(x)  # traced
    >>> bool((f(x).numpy() == (x.exp() * x.sin() + x * x).numpy()).all())
    True
    >>> xb = tf.tensor([1.0, 2.0])
    >>> total = tf.jit(lambda: (xb * 2).sum())     # xb: a constant of the trace
    >>> total().item(), total().item()             # traced, then replayed
    (6.0, 6.0)
    >>> xb = tf.tensor([5.0, 5.0])                 # another batch, through the same name
    >>> total()                                    # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowgrad.errors.JitError: tf.jit(<lambda>): `xb` (a global of module ...) held a ...
    >>> total = tf.jit(lambda xb: (xb * 2).sum())  # the fix: an argument
    >>> total(xb).item()
    20.0

    Native code: ``backend="native"`` compiles each run of elementwise kernels of the
    trace (forward and backward: +, -, *, /, exp, log, sin, cos, tanh, sqrt, pow, max,
    min, relu, sigmoid and their gradient kernels...; every kernel whose declaration
    gives a native form) into one loop over the elements, with numba, the optional extra
    ``pip install 'flowgrad[jit]'``; a program of scalars (a tiny SGD step) becomes one
    compiled call. Matrix products, reductions, reshapes, integer kernels and kernels with
    no native form stay NumPy steps between the compiled segments (a kernel with no native
    form is warned about once per traced signature, naming it and its line), and so do
    large blocks of exp/log/sin/tanh, where NumPy's vectorised loops are faster than
    numba's (a measured cost model chooses per segment). ``explain()`` on the jitted
    function says, per traced signature, which segments run native and why the others
    do not. ``"auto"`` (the default) is ``"native"`` where numba is installed, compiling
    once the NumPy replays of a signature have taken about as long as compiling it would
    (about 0.1 s; a function called a few times never compiles), else ``"numpy"``:
    today's NumPy replay, which gives eager's bits. Native results are those of the
    NumPy replay within 4 ulp per kernel that calls a transcendental function
    (``jit_native.ULP_BOUND``; numba calls the C library's exp, sin, tanh... where NumPy
    has its own SIMD loops; 3 ulp measured), adding up along a chain as roundings do;
    +, -, *, /, sqrt, abs, max, min and relu give the same bits, and float32 stays
    float32 (every constant is typed).

    >>> f = tf.jit(lambda x: x * 2 + 1)       # "auto": native code where numba is installed
    >>> [f(tf.tensor([1.0, 2.0])).numpy().tolist() for _ in range(3)]
    [[3.0, 5.0], [3.0, 5.0], [3.0, 5.0]]
    >>> step = tf.jit(tf.grad(lambda x: (x.sin() * x).sum()), backend="numpy")
    >>> step(tf.tensor([1.0, 2.0])).dtype       # traced
    'float32'
    >>> print(step.explain())                   # doctest: +ELLIPSIS
    tf.jit(grad(<lambda>)), backend 'numpy': 1 traced signature
    signature (float32[2]): NumPy replay (backend 'numpy'; ... kernels)
    >>> tf.jit(abs, backend="llvm")             # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowgrad.errors.ArgumentError: tf.jit(fn, backend='llvm'): backend must be one of ...
    """
    if threads is not None:
        threads = as_int(threads, "threads", "tf.jit", 1)
    max_traces = as_int(max_traces, "max_traces", "tf.jit", 1)
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ArgumentError(f"tf.jit(fn, backend={backend!r}): backend must be one of "
                            f"{', '.join(repr(b) for b in BACKENDS)} (\"auto\": native code "
                            f"where numba is installed, else the NumPy replay)")
    asked = backend
    if backend != "numpy" and not jit_native.numba_installed():
        if backend == "native":
            raise MissingDependencyError(
                f"tf.jit(fn, backend='native') compiles with numba, which is not installed: "
                f"{jit_native.HINT} (or backend='numpy', or 'auto': native where numba is "
                f"installed)")
        backend = "numpy"
    if fn is None:
        return functools.partial(jit, max_traces=max_traces, threads=threads,
                                 backend=backend)
    if not callable(fn):
        raise ArgumentError(f"tf.jit(fn): fn must be a function, got {type(fn).__name__}")
    programs: dict[Any, Any] = {}
    # the same programs' bound __call__ (calling a _Program instance costs ~0.15 µs more)
    calls: dict[Any, Any] = {}
    label = getattr(fn, "__name__", type(fn).__name__)

    @functools.wraps(fn)
    def wrapper(*args):
        guard = interceptors.jit_guard
        if guard and interceptors.eager_only or LOCAL.s.recording or _batching.users:
            # differentiated (is_recording, inlined), inside an outer trace, inside tf.vmap
            # (batched tensors: the trace would see per-example shapes), or while a tool
            # must see every kernel or gradient (check_numerics, explain_gradient): eagerly
            return fn(*args)
        if not args and not guard:
            call = calls.get(())
            if call is not None:
                return call(()) if call is not _EAGER else fn()
        ts = [a if isinstance(a, Tensor) else _argument(a, i, label)
              for i, a in enumerate(args)]
        arrays = []
        held = None
        for i, t in enumerate(ts):
            if t._disposed:
                t.throw_if_disposed()
            arrays.append(t._data)
            if isinstance(t, Variable):
                # a variable argument is state: its trace assigns that very variable
                held = (held or ()) + ((i, id(t)),)
        key = tuple((a.shape, a.dtype) for a in arrays)
        if held:
            key += (held,)
        call = calls.get(key)
        if call is not None:
            if call is _EAGER or guard and _hooks_reach(programs.get(key), ts):
                return fn(*args)
            if guard and interceptors.replay_hook is not None:
                return _reported(label, programs.get(key), call, arrays, ts)
            return call(arrays)
        check_arity(fn, len(args), "tf.jit(fn)(*args)")     # (only on a trace: cheap)
        if not _tracing.acquire(blocking=False):
            return fn(*args)           # another thread is tracing: this call runs eagerly
        try:
            epoch = _epoch[0]
            result, prog = _trace(fn, ts, threads, backend, label)
            if epoch != _epoch[0]:
                return result       # traces were dropped meanwhile: this one may be stale
            if len(programs) >= max_traces:      # (under the lock: one writer at a time)
                old = next(iter(programs))
                calls.pop(old, None)
                programs.pop(old)
            programs[key] = _EAGER if prog is None else prog
            calls[key] = _EAGER if prog is None else prog.__call__
        finally:
            _tracing.release()
        return result

    def explain():
        """Per traced signature: which segments run native and why the others stay NumPy."""
        progs = [(k, p) for k, p in list(programs.items()) if p is not _EAGER]
        head = f"tf.jit({label}), backend {asked!r}: {len(progs)} traced signature" + \
            ("s" if len(progs) != 1 else "")
        if not progs:
            return head + " (call it once to trace it)"
        why = "numba is not installed: " + jit_native.HINT if asked != backend else \
            "backend 'numpy'"
        return "\n".join([head] + [line for k, p in progs for line in p.explain(k, why)])

    wrapper.traces = programs  # type: ignore[attr-defined]
    wrapper.explain = explain  # type: ignore[attr-defined]
    _caches[id(wrapper)] = (programs, calls)
    weakref.finalize(wrapper, _caches.pop, id(wrapper), None)
    return wrapper


# every jitted function's traces (id of its wrapper -> (programs, calls)), for the state
# changes after which no trace may replay: a variable's trainable flag (which variables a
# trace's minimize trains was chosen when it traced)
_caches: dict[int, tuple[dict, dict]] = {}
_epoch = [0]


def drop_all_traces(*_):
    """Forget every jitted function's traces: each traces again at its next call."""
    with _tracing:
        _epoch[0] += 1
        for programs, calls in list(_caches.values()):
            calls.clear()
            programs.clear()


_tensor_module.on_trainable_change.append(drop_all_traces)


def _argument(a, i, label):
    """A jitted function's argument that is not a tensor, as a tensor (never a list of
    tensors or variables stacked into a constant: a replay would not read them again)."""
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
        raise JitError(f"tf.jit({label}): args[{i}] is a {type(a).__name__} of tensors, "
                       f"which a trace would turn into one constant tensor; pass each "
                       f"tensor as its own argument (*tensors), or stack them with "
                       f"tf.stack first")
    return convert(a, f"args[{i}]", "jit")


_EAGER = object()   # a program for these shapes: run fn eagerly (tf.vmap, hooks in it)


def _reported(label, prog, call, arrays, ts):
    """A replay timed and reported to the profile that runs (tf.profile, tf.time): its
    kernels run with no kernel entry to time them one by one."""
    hook = interceptors.replay_hook
    t0 = time.perf_counter()
    out = call(arrays)
    dt = time.perf_counter() - t0
    if hook is not None:
        leaves = []
        _flatten(out, leaves)
        hook(f"jit({label})", dt, ts, [t for t in leaves if isinstance(t, Tensor)],
             _count(prog) if prog is not None else 0)
    return out


def _hooks_reach(prog, ts):
    """Whether a tensor with a gradient hook is one of this call's arguments or a variable
    ``prog`` reads: a replay would skip the hook, so fn runs eagerly, hooks and all."""
    var_ids = prog.var_ids if prog is not None else ()
    for ref, _ in list(_tape.source_hooks.values()):
        x = ref()
        if x is not None and (id(x) in var_ids or any(x is t for t in ts)):
            return True
    return False


def _trace(fn, ts, threads=None, backend="numpy", label="fn"):
    tr = _Tracer(sites=backend == "native")
    for t in ts:
        tr.new_slot(t)
    captures = jit_closures.find(fn)      # what fn reaches by name, before it runs
    w = interceptors.watch("trace", owner=tr, read=tr.on_read, assign=tr.on_assign)
    try:
        interceptors.set_layer("trace", tr.run_kernel, tr.make_tensor, tr.link)
        result = fn(*ts)
    finally:
        interceptors.unwatch(w)
        try:
            interceptors.set_layer("trace", None)
        except BaseException:       # (interrupted on the way out: the tracer must go)
            interceptors.set_layer("trace", None)
            raise
    if tr.untraceable:
        return result, None     # tf.vmap ran inside: its batched kernels bypass the trace
    if tr.variables_changed:
        raise JitError("tf.jit: the function created or disposed variables while being "
                       "traced; a replay would not: create variables outside the jitted "
                       "function.")
    leaves = []
    template = _flatten(result, leaves)
    out_refs = [tr.ref(t) for t in leaves]
    reads = _outside_reads(tr, out_refs)
    watch = captures.watch(*reads)
    prog = _Program(tr, len(ts), out_refs, template, threads, watch, backend, label)
    prog.var_ids = frozenset(reads[1])
    return result, prog


def _outside_reads(tr, out_refs):
    """The arrays of the constants the trace used or read (id -> array), the ids of the
    variables it used, and the arrays of the constants made while tracing."""
    consts, variables = dict(tr.reads), set()
    for st in tr.steps:
        refs = st[2] if st[0] != "a" else (st[2], ("v", st[1]))
        for kind, val in refs:
            if kind == "c":
                consts[id(val)] = val
            elif kind == "v":
                variables.add(id(val))
    for kind, val in out_refs:
        if kind == "c":
            consts[id(val)] = val
        elif kind == "v":
            variables.add(id(val))
    return consts, variables, tr.made
