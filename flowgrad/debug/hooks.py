"""Gradient hooks: observe or replace the gradient reaching a tensor or a variable.

``t.register_hook(fn)`` (t computed inside a gradient function, or one of its inputs) and
``tf.debug.on_gradient(variable, fn)`` call ``fn(grad)`` with the whole gradient of that
tensor during the backward pass; a returned tensor replaces it. Both return a handle with
``remove()``. ``tf.debug.callback(fn, *tensors)`` hands values to Python code, inside
tf.jit's replays too.
"""
import threading
import weakref
from typing import Any, Callable

from ..after_fork import renew_after_fork
from .. import engine as E
from .. import interceptors
from .. import tape
from ..arg_checks import check_arity, describe
from ..errors import ArgumentError, DisposedError
from ..tensor import Tensor
from .. import user_frames


# registering and removing hooks (not running them) may happen in several threads at once:
# two registrations on one variable each made a fresh entry, and one hook was lost
_lock = threading.Lock()
renew_after_fork(globals(), "_lock", threading.Lock)     # (flowgrad/after_fork.py)


class _Hook:
    """A hook and the user's line that registered it (named when it misbehaves)."""
    __slots__ = ("fn", "site")

    def __init__(self, fn):
        self.fn, self.site = fn, user_frames.capture(2)

    def __call__(self, g):
        return self.fn(g)


class HookHandle:
    """Returned by register_hook / on_gradient: ``handle.remove()`` detaches the hook."""

    def __init__(self, table, key, index, fn):
        self._table, self._key, self._index, self._fn = table, key, index, fn

    def remove(self):
        with _lock:
            entry = self._table.get(self._key)
            if entry is None:
                return
            fns = entry.get(self._index, []) if isinstance(entry, dict) else entry[1]
            if self._fn in fns:
                fns.remove(self._fn)
            if not fns:
                if isinstance(entry, dict):
                    entry.pop(self._index, None)
                    if not entry:
                        self._table.pop(self._key, None)
                else:
                    self._table.pop(self._key, None)
            interceptors.set_hooked(bool(tape.source_hooks))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _check_fn(fn):
    if not callable(fn):
        raise ArgumentError(f"a gradient hook must be callable, got {type(fn).__name__}")


def register_hook(self, fn):
    """Call ``fn(grad)`` with this tensor's gradient in every backward pass through it; a
    returned tensor replaces the gradient. For a tensor computed inside a gradient function
    (recorded), or a tensor differentiated against (an input, a variable).

    >>> import flowgrad as tf
    >>> seen = []
    >>> def f(x):
    ...     y = x * 3
    ...     y.register_hook(lambda g: seen.append(g.item()))
    ...     return y * y
    >>> tf.grad(f)(tf.scalar(1.0)).item(), seen
    (18.0, [6.0])
    """
    _check_fn(fn)
    fn = _Hook(fn)
    n = self._node
    if n is not None and n.sess is not None and n.sess.alive and n.inputs:
        with _lock:
            hooks = tape.node_hooks.setdefault(n, {})
            idx = getattr(self, "_idx", 0) if n.nout > 1 else 0
            hooks.setdefault(idx, []).append(fn)
            tape.any_node_hooks = True      # (after the table: see tape.any_node_hooks)
        return HookHandle(tape.node_hooks, n, idx, fn)
    return _source_hook(self, fn)


def _source_hook(t, fn):
    with _lock:
        entry = tape.source_hooks.get(id(t))
        if entry is None or entry[0]() is not t:
            key = id(t)

            def forget(_, key=key):
                tape.source_hooks.pop(key, None)
                interceptors.set_hooked(bool(tape.source_hooks))
            entry = tape.source_hooks[id(t)] = (weakref.ref(t, forget), [])
        entry[1].append(fn)
        interceptors.set_hooked(True)       # (after the entry: tf.jit then finds it)
    return HookHandle(tape.source_hooks, id(t), None, fn)


def on_gradient(variable, fn):
    """Call ``fn(grad)`` whenever a gradient with respect to ``variable`` is computed
    (``variable_grads``, ``minimize``, ``grad``...); a returned tensor replaces it.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(2.0), name="w_hook_doc")
    >>> handle = tf.debug.on_gradient(w, lambda g: g * 0)        # freeze w
    >>> tf.variable_grads(lambda: w.square()).grads[w].item()
    0.0
    >>> handle.remove(); w.dispose()
    """
    if not isinstance(variable, Tensor):
        raise ArgumentError(f"on_gradient() takes a Variable (or a tensor), got "
                            f"{type(variable).__name__}")
    if variable.is_disposed:
        raise DisposedError("on_gradient(variable, fn): Tensor is disposed (the variable "
                            "was disposed: its gradient is never computed again)")
    _check_fn(fn)
    return _source_hook(variable, _Hook(fn))


Tensor.register_hook = register_hook


# ---------------------------------------------------------------- values out of a jitted step

def callback(fn: Callable[..., Any], *tensors: Tensor) -> None:
    """Call ``fn(*arrays)`` with the values of ``tensors`` (read-only NumPy arrays): now,
    and, inside a function ``tf.jit`` traced, at every replay too, at the same point of the
    step (a replay runs no Python between its kernels, so a plain ``print(x.numpy())`` there
    cannot work: tf.jit refuses the read). What it is for: printing, logging or recording
    values from a jitted training step; ``tf.debug.monitor`` records jitted steps with it.

    fn's result is ignored. Copy what fn keeps: at a replay the arrays are the replay's own
    buffers, reused by the next call. fn may run flowgrad ops (eagerly: they are not part of
    the trace).

    >>> import flowgrad as tf
    >>> seen = []
    >>> def f(x):
    ...     y = x * 2
    ...     tf.debug.callback(lambda a: seen.append(float(a)), y)
    ...     return y + 1
    >>> jf = tf.jit(f)
    >>> [jf(tf.scalar(v)).item() for v in (1.0, 5.0, 7.0)]     # traced, then replayed
    [3.0, 11.0, 15.0]
    >>> seen
    [2.0, 10.0, 14.0]
    """
    if not callable(fn):
        raise ArgumentError(f"tf.debug.callback(fn, *tensors): fn must be a function, got "
                            f"{describe(fn)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise ArgumentError(f"tf.debug.callback(fn, *tensors): tensors[{i}] must be a "
                                f"Tensor, got {describe(t)}")
        t.throw_if_disposed()
    tracer = interceptors.tracer
    try:
        if tracer is not None and tracer.traces_this_thread():
            tracer.on_callback(fn, tensors)       # (it calls fn now too, outside the trace)
        else:
            fn(*[E.host_view(t._data) for t in tensors])
    except TypeError as e:
        # (checked only after a TypeError: a good call pays nothing)
        check_arity(fn, len(tensors), _API)
        what = ", ".join(f"{t.dtype} {list(t.shape)}" for t in tensors) or "none"
        raise ArgumentError(f"{_API}: fn ({getattr(fn, '__name__', type(fn).__name__)}) "
                            f"cannot take the tensors' values (read-only NumPy arrays: "
                            f"{what}): {type(e).__name__}: {e}") from e


_API = "tf.debug.callback(fn, *tensors)"

