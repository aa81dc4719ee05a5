"""NumPy's floating-point error state around kernels.

Kernels compute as TF.js does: log(0) = -Inf, 0/0 = NaN, overflow = Inf, silently (the
debug tools find where they come from), and the user's own NumPy code keeps its warnings:
run_kernel switches NumPy's floating-point error state (a context variable, what
np.errstate sets) to "ignore" around each kernel call only. Setting the variable directly
costs ~0.2 us a kernel (np.errstate's context manager: ~1 us); a backward pass (rules
only, a few kernels per op) sets it once (enter_backward), and a jitted replay of small
values runs inside a context of its own where the state is "ignore" (quiet_context).
NOTE: the state is saved and put back by value (not by ContextVar token): putting a value
back twice is harmless, so a Ctrl-C landing between two bytecodes of a restore, and the
restore repeated in a ``finally``, can never leave the user's NumPy silenced.
"""
import contextvars

import numpy as np

# QUIET: the state that ignores every floating-point error; fpe_saved() reads this thread's
# state and fpe_put(state) sets it (the engine's hot path calls both around each kernel)
try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    QUIET = _make_extobj(all="ignore")
    fpe_saved, fpe_put = _extobj_contextvar.get, _extobj_contextvar.set
    _IN_CONTEXT = True
except (ImportError, AttributeError, TypeError):      # another NumPy layout: the public API
    QUIET = {"all": "ignore"}
    _IN_CONTEXT = False

    def fpe_saved():
        return np.geterr()

    def fpe_put(state):
        np.seterr(**state)


def fpe_restore(saved):
    """Put back the floating-point state ``saved`` (from fpe_saved())."""
    fpe_put(saved)


def fpe_quiet():
    """Silence NumPy's floating-point warnings in this thread, for code that runs kernels
    outside run_kernel (jit replays, fused updates); save the state first and put it back
    in a ``finally``:

    >>> saved = fpe_saved()
    >>> try:
    ...     fpe_quiet()
    ...     r = np.log(np.zeros(1))
    ... finally:
    ...     fpe_restore(saved)
    >>> r
    array([-inf])
    """
    fpe_put(QUIET)


def quiet_context():
    """A new, empty ``contextvars.Context`` in which NumPy ignores floating-point errors, or
    None where NumPy's state is not a context variable.

    ``ctx.run(fn, *args)`` calls fn so for the cost of entering the context (~0.1 µs; saving,
    setting and restoring the state costs ~0.4 µs, most of a tiny jitted step's overhead),
    and leaving it is the interpreter's, interrupt or not. Every other context variable has
    its default there: it is for code that reads none (a replay of kernels, never user code).
    One thread at a time may be inside a context: each thread keeps its own (State.quiet),
    and a call already inside (``fpe_saved() is QUIET``) runs fn directly.

    >>> ctx = quiet_context()
    >>> ctx.run(np.log, np.zeros(1))
    array([-inf])
    """
    if not _IN_CONTEXT:
        return None
    ctx = contextvars.Context()
    ctx.run(fpe_put, QUIET)
    return ctx
