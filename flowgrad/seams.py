"""The layers over the kernel entry: tf.vmap's batching, tf.jit's tracer and the debug
instrumentation each wrap ``engine.run_kernel`` (the tracer ``engine.make_tensor`` too)
while they are on. They come and go in any order and from any thread, so no layer saves
"what was there" to put back: this module composes the layers that are on, in one fixed
order (batching outermost, then the tracer, then the debug seam, then the leak tracker's
tensor seam, then the engine's own entries), under a lock, and tells each layer what lies
below it whenever that changes.

NOTE: when each layer saved and restored the entry itself, a trace ending in one thread
put back the entry it had found, dropping the tf.vmap batching another thread had switched
on meanwhile: that thread's batched function then ran unbatched and returned wrong values,
silently (tests/test_engine_state.py).

>>> from flowgrad import engine as E, seams
>>> E.run_kernel is seams.ENGINE_RUN        # no layer is on
True
"""
import threading

from .forks import renew_after_fork
from . import engine as E

ORDER = ("batch", "trace", "debug", "leaks")    # outermost first
ENGINE_RUN, ENGINE_MAKE = E.run_kernel, E.make_tensor    # the engine's own entries
ENGINE_ACCOUNT = E.account_new

_on = {}                    # kind -> (run, make or None, link or None)
_lock = threading.RLock()
renew_after_fork(globals(), "_lock", threading.RLock)     # (flowgrad/forks.py)


def set_layer(kind, run, make=None, link=None):
    """Turn the layer ``kind`` (one of ORDER) on, or off when ``run`` and ``make`` are both
    None.

    ``run`` (or None) wraps run_kernel, ``make`` (or None) wraps make_tensor, and
    ``link(run_below, make_below)`` is called, under the lock, with the entries the layer
    must call, now and whenever the layers below it change.
    """
    if kind not in ORDER:
        raise ValueError(f"unknown layer {kind!r}: one of {ORDER}")
    with _lock:
        if run is None and make is None:
            _on.pop(kind, None)
        else:
            _on[kind] = (run, make, link)
        try:
            _compose()
        except BaseException:       # (interrupted half way: composing again is harmless)
            _compose()
            raise


def _compose():
    run, make = ENGINE_RUN, ENGINE_MAKE
    for kind in reversed(ORDER):
        layer = _on.get(kind)
        if layer is None:
            continue
        r, m, link = layer
        if link is not None:
            link(run, make)
        if r is not None:
            run = r
        if m is not None:
            make = m
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
