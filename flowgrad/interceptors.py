"""The layers over the kernel entry and the backward sweep, composed in one place.

Kernel layers: tf.vmap's batching, tf.jit's tracer and the debug instrumentation each wrap
``engine.run_kernel`` (the tracer ``engine.make_tensor`` too) while they are on. They come and go in any order and from any thread, so no layer saves
"what was there" to put back: this module composes the layers that are on, in one fixed
order (batching outermost, then the tracer, then the debug seam, then the leak tracker's
tensor seam, then the engine's own entries), under a lock, and tells each layer what lies
below it whenever that changes.

NOTE: when each layer saved and restored the entry itself, a trace ending in one thread
put back the entry it had found, dropping the tf.vmap batching another thread had switched
on meanwhile: that thread's batched function then ran unbatched and returned wrong values,
silently (tests/test_engine_state.py).

Watches: tools that observe rather than wrap (tf.jit's tracer and explain_gradient see
tensor values read out and variables assigned; check_numerics, explain_gradient and graph
see every gradient of the backward sweep) register a :class:`Watch`; the composition of
the ones that are on is what Tensor and tape call (``reader``, ``assigner``, ``dx_hook``,
``y_hook``: each None when nothing watches, so nothing is paid). Same rule: a tool removes
its own watch (``unwatch``), never puts back what it found.

>>> from flowgrad import engine as E, interceptors
>>> E.run_kernel is interceptors.ENGINE_RUN        # no layer is on
True
>>> interceptors.reader is None and interceptors.dx_hook is None
True
"""
import threading

from .after_fork import renew_after_fork
from . import engine as E

ORDER = ("batch", "trace", "debug", "profile", "leaks")    # outermost first
ENGINE_RUN, ENGINE_MAKE = E.run_kernel, E.make_tensor    # the engine's own entries
ENGINE_ACCOUNT = E.account_new

_on = {}                    # kind -> (run, make, link, record): any but link may be None
_lock = threading.RLock()
renew_after_fork(globals(), "_lock", threading.RLock)     # (flowgrad/after_fork.py)


def set_layer(kind, run, make=None, link=None, record=None):
    """Turn the layer ``kind`` (one of ORDER) on, or off when ``run``, ``make`` and
    ``record`` are all None.

    ``run`` (or None) wraps run_kernel, ``make`` (or None) wraps make_tensor, ``record(node)``
    (or None) sees the nodes recorded outside run_kernel (custom gradients, tf.vmap's), and
    ``link(run_below, make_below)`` is called, under the lock, with the entries the layer
    must call, now and whenever the layers below it change.
    """
    if kind not in ORDER:
        raise ValueError(f"unknown layer {kind!r}: one of {ORDER}")
    with _lock:
        if run is None and make is None and record is None:
            _on.pop(kind, None)
        else:
            _on[kind] = (run, make, link, record)
        try:
            _compose()
        except BaseException:       # (interrupted half way: composing again is harmless)
            _compose()
            raise


def _compose():
    run, make = ENGINE_RUN, ENGINE_MAKE
    records = []
    for kind in reversed(ORDER):
        layer = _on.get(kind)
        if layer is None:
            continue
        r, m, link, rec = layer
        if rec is not None:
            records.append(rec)
        if link is not None:
            link(run, make)
        if r is not None:
            run = r
        if m is not None:
            make = m
    E.on_record = records[0] if len(records) == 1 else (
        (lambda n: [f(n) for f in records]) if records else None)
    E.run_kernel, E.make_tensor = run, make


def layers():
    """The kinds of the layers that are on, outermost first."""
    with _lock:
        return [k for k in ORDER if k in _on]


# ---------------------------------------------------------------- kernel checkers

# Callables ``(prim, inputs, attrs, out) -> None`` run after every kernel while a debug mode
# wants them (check_numerics, leak tracking, the graph, profiles: flowgrad/debug/sites.py
# adds and removes them); the batched entry (flowgrad/batching.py) runs them too, so a
# kernel inside tf.vmap is checked as in eager runs. Empty otherwise: nothing is paid.
CHECKERS = []


# ---------------------------------------------------------------- watches

WATCH_ORDER = ("trace", "explain", "numerics", "graph")     # called in this order

reader = None       # fn(tensor): a tensor's values are read out (Tensor._array)
assigner = None     # fn(variable, new value): Variable.assign
dx_hook = None      # fn(node, i, input, dx, dy) -> dx: every gradient of a backward sweep
y_hook = None       # fn(y): the output a backward sweep starts from
tracer = None       # the owner of the "trace" watch: tf.jit's tracer while it traces

_watches = []       # the watches that are on, in WATCH_ORDER, then oldest first


class Watch:
    """One tool's observers, on until :func:`unwatch` (see the module doc)."""
    __slots__ = ("kind", "owner", "read", "assign", "dx", "y")

    def __init__(self, kind, owner, read, assign, dx, y):
        self.kind, self.owner = kind, owner
        self.read, self.assign, self.dx, self.y = read, assign, dx, y


def watch(kind, *, owner=None, read=None, assign=None, dx=None, y=None):
    """Turn a watch on; returns it, for :func:`unwatch`. ``kind``: one of WATCH_ORDER;
    ``owner``: the object behind it (``tracer`` is the "trace" watch's owner); ``read(t)``,
    ``assign(var, value)``, ``dx(node, i, input, dx, dy) -> dx`` and ``y(y)``: what it
    observes (any may be None).

    >>> seen = []
    >>> w = watch("explain", read=seen.append)
    >>> import flowgrad as tf
    >>> tf.scalar(3).item(), len(seen)
    (3.0, 1)
    >>> unwatch(w)
    """
    if kind not in WATCH_ORDER:
        raise ValueError(f"unknown watch {kind!r}: one of {WATCH_ORDER}")
    w = Watch(kind, owner, read, assign, dx, y)
    with _lock:
        _watches.append(w)
        _watches.sort(key=lambda v: WATCH_ORDER.index(v.kind))     # (stable: oldest first)
        try:
            _compose_watches()
        except BaseException:       # (interrupted half way: composing again is harmless)
            unwatch(w)
            raise
    return w


def unwatch(w):
    """Turn the watch ``w`` off (again: harmless)."""
    with _lock:
        if w in _watches:
            _watches.remove(w)
        try:
            _compose_watches()
        except BaseException:
            _compose_watches()
            raise


def _chain(fns):
    if not fns:
        return None
    if len(fns) == 1:
        return fns[0]

    def each(*args):
        for f in fns:
            f(*args)
    return each


def _compose_watches():
    global reader, assigner, dx_hook, y_hook, tracer
    ws = list(_watches)
    dxs = [w.dx for w in ws if w.dx is not None]
    if not dxs:
        dx = None
    elif len(dxs) == 1:
        dx = dxs[0]
    else:
        def dx(n, i, t, g, dy):
            for f in dxs:
                g = f(n, i, t, g, dy)
            return g
    traces = [w.owner for w in ws if w.kind == "trace"]
    # (assigned last, each in one store: a reader sees either the old or the new function)
    reader = _chain([w.read for w in ws if w.read is not None])
    assigner = _chain([w.assign for w in ws if w.assign is not None])
    y_hook = _chain([w.y for w in ws if w.y is not None])
    dx_hook = dx
    tracer = traces[0] if traces else None
    _jit_flags()


# ---------------------------------------------------------------- what a tf.jit replay skips

# A replay runs no Python per kernel or gradient: it reads no value out, calls no dx watch
# (check_numerics' backward check, explain_gradient, graph) and no gradient hook. So while a
# reader or a dx watch is on, jitted functions run fn eagerly (``eager_only``), and while
# some tensor has a gradient hook (tf.debug.on_gradient, register_hook on an input) they
# look whether it is one of theirs (``jit_guard``: one read on a replay's fast path).
eager_only = False
jit_guard = False
_hooked = False     # some tensor has a source gradient hook (flowgrad/debug/hooks.py)
# fn(label, seconds, inputs, outputs, kernels) after each replay while a profile runs (its
# kernels run with no entry to time): None otherwise
replay_hook = None


def set_replay_hook(fn):
    """Report every tf.jit replay to ``fn`` (None: stop)."""
    global replay_hook
    with _lock:
        replay_hook = fn
        _jit_flags()


def set_hooked(present):
    """Whether any tensor has a source gradient hook now (told by flowgrad/debug/hooks.py
    after each change; True too early or too late is safe, False too early is not)."""
    global _hooked
    with _lock:
        _hooked = bool(present)
        _jit_flags()


def _jit_flags():
    global eager_only, jit_guard
    eager = reader is not None or dx_hook is not None
    guard = eager or _hooked or replay_hook is not None
    if guard:               # (raised before eager_only falls, lowered after: never a gap)
        jit_guard = True
    eager_only = eager
    jit_guard = guard
