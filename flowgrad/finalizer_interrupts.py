"""Ctrl-C that lands in one of flowgrad's finalizers goes on instead of being lost.

A tensor un-counts itself in ``__del__`` (engine.tensor_del), and a training step frees
thousands of tensors. CPython checks for a pending signal on entering any Python function,
that one too, and an exception cannot leave a finalizer: it prints "Exception ignored in:
<function tensor_del ...> KeyboardInterrupt" and carries on. So about one Ctrl-C in forty
sent to a training loop (measured: 1 of 40 on a small MLP's ``minimize`` loop) was
swallowed, the notebook kept training, and the tensor the finalizer was freeing stayed
counted by ``tf.memory()`` forever.

``install()`` (run once, when flowgrad is imported) chains ``sys.unraisablehook``: a
``KeyboardInterrupt`` swallowed in a function of flowgrad's own modules is delivered again
a millisecond later, with ``_thread.interrupt_main()`` (which runs the SIGINT handler in
force: Python's KeyboardInterrupt, or the user's own), so it reaches the user's code; a
finalizer interrupted before its first line runs to its end first, so a tensor's counts
stay right and a recording is released. Everything else goes to the hook that was there
before, unchanged.
"""
import _thread
import sys
import threading
import time

_previous = [None]     # the hook that was in force
_installed = []


def ours(fn) -> bool:
    """True when ``fn`` (an unraisable exception's object: the finalizer) is flowgrad's.

    >>> from flowgrad.engine import tensor_del
    >>> from flowgrad.finalizer_interrupts import ours
    >>> ours(tensor_del), ours(print)
    (True, False)
    """
    fn = getattr(fn, "__func__", fn)
    return (getattr(fn, "__module__", None) or "").startswith("flowgrad.")


def _unstarted(tb, code):
    """The frame of ``code`` in the traceback when it was interrupted on its first line
    (on entry, before any of its work), else None."""
    while tb is not None:
        if tb.tb_frame.f_code is code and tb.tb_lineno == code.co_firstlineno:
            return tb.tb_frame
        tb = tb.tb_next
    return None


def hook(unraisable) -> None:
    """The ``sys.unraisablehook`` that ``install`` sets (see the module doc)."""
    exc = unraisable.exc_type
    # (in another thread a KeyboardInterrupt is no Ctrl-C, which only the main thread gets)
    if exc is not None and issubclass(exc, KeyboardInterrupt) and ours(unraisable.object) \
            and threading.current_thread() is threading.main_thread():
        try:
            fn = getattr(unraisable.object, "__func__", unraisable.object)
            frame = _unstarted(unraisable.exc_traceback, fn.__code__)
            if frame is not None:       # (its arguments, read off its frame: self, t...)
                code = fn.__code__
                fn(*[frame.f_locals[v] for v in code.co_varnames[:code.co_argcount]])
        except Exception:       # noqa: BLE001, S110 - interpreter shutdown: counts moot
            pass
        finally:
            # NOTE: not interrupt_main() here: the interrupt would be raised right after
            # the call, in this hook, and swallowed again. A thread of its own delivers it
            # a millisecond later, when the main thread has left the finalizer (should it
            # land in another, this hook sends it on again)
            try:
                _thread.start_new_thread(_deliver, ())
            except RuntimeError:    # (the interpreter is shutting down: nothing to stop)
                pass
        return
    (_previous[0] or sys.__unraisablehook__)(unraisable)


def _deliver():
    time.sleep(0.001)
    _thread.interrupt_main()


def install() -> None:
    """Chain ``hook`` in front of the ``sys.unraisablehook`` in force, once per process
    (flowgrad's import does; later calls change nothing).

    >>> from flowgrad import finalizer_interrupts
    >>> finalizer_interrupts.install()          # (done already: nothing changes)
    """
    if _installed:
        return
    _installed.append(True)
    _previous[0] = sys.unraisablehook
    sys.unraisablehook = hook
