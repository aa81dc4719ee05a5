"""Scopes and the public memory API: ``tidy``, ``keep``, ``dispose``, ``memory``.

A scope is the list of tensors created while it is the innermost open one (the engine's
``run_kernel`` appends to it); closing it disposes them, except kept ones and those the
scope's function returns. Scopes belong to the thread that opened them (its engine State).
Closing is interrupt-proof: each step can be redone, and ``unwind_scopes`` brings a thread
back to a noted level whatever an interrupt skipped.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable, Iterator, TypeVar, overload

from . import engine as E
from .camel_case import Result, camel_to_snake
from .engine import ITEM_BYTES
from .errors import ArgumentError
from .buffer_pool import offer
from .thread_state import LOCAL, memory_counts, park

_R = TypeVar("_R")


# ---------------------------------------------------------------- scopes (tidy)

def scope_level():
    """This thread's number of open scopes: pass it to unwind_scopes in a ``finally``."""
    return len(LOCAL.s.stack)


def begin_scope(name=None):
    """Open a scope: tensors created until the matching end_scope belong to it."""
    st = LOCAL.s
    sc = []
    st.stack.append((name, sc))
    st.scope = sc


def end_scope(result=None, st=None):
    """Close the innermost scope: dispose its tensors except kept ones and those in
    ``result``, which move to the enclosing scope."""
    if st is None:
        st = LOCAL.s
    stack = st.stack
    if not stack:
        return
    tensors = stack[-1][1]
    parent = stack[-2][1] if len(stack) > 1 else None
    del stack[-1]
    st.scope = parent
    if not tensors:
        return
    # (a set: membership by identity, never Tensor.__eq__)
    keep = () if result is None else {result} if isinstance(result, E.tensor_class()) else \
        tensor_set(result)
    try:
        _dispose_scope(st, tensors, keep, parent)
    except BaseException:
        # an interrupt must not leave half a scope alive: finish (every step can be redone),
        # then let it propagate
        _dispose_scope(st, tensors, keep, parent)
        raise


def _dispose_scope(st, tensors, keep, parent):
    # dispose_tensor, inlined: this loop sees every tensor of a tidy; no call separates a
    # tensor's flag from its counts
    session = st.session
    for t in tensors:
        if t._disposed or t.kept:
            continue
        if t in keep:
            if parent is not None:
                parent.append(t)      # (twice after a redo: harmless, the second is skipped)
            continue
        t._disposed = True
        st.nt -= 1
        st.nb -= t._data.size * ITEM_BYTES[t.dtype]
        b = t._buf
        if b is None:
            st.nbuf -= 1
        else:
            b[0] -= 1
            if b[0] == 0:
                st.nbuf -= 1
        n = t._node
        if (t._pin is None and session is None and (n is None or not n.sess.alive)
                or not park(t, st)):
            a = t._data
            t._data = None
            if a.size >= E.POOL_MIN:
                offer(a)


def unwind_scopes(level, result=None):
    """Close this thread's scopes down to ``level`` (noted before opening one), keeping
    ``result`` through each. Idempotent: safe after any interrupt."""
    st = LOCAL.s
    while len(st.stack) > level:
        end_scope(result, st)


def scope_name():
    """The name of the innermost open scope (None outside any scope)."""
    st = LOCAL.s
    return st.stack[-1][0] if st.stack else None


def untrack(t):
    """Remove a tensor from scope tracking (variables are never disposed by tidy)."""
    for _, tensors in reversed(LOCAL.s.stack):
        for i in range(len(tensors) - 1, -1, -1):
            if tensors[i] is t:
                del tensors[i]
                return


def walk_tensors(obj, _seen=None, objects=False):
    """Yield every Tensor inside nested lists, tuples, dicts and flowgrad result objects;
    with ``objects`` (what tidy keeps and dispose frees, as TF.js walks any object's keys)
    also sets, dict keys, dataclasses and other objects' attributes."""
    T = E.tensor_class()
    if isinstance(obj, T):
        yield obj
        return
    items = _children(obj, objects)
    if items is None:
        return
    if _seen is None:
        _seen = set()
    if id(obj) in _seen:
        return
    _seen.add(id(obj))
    for item in items:
        if isinstance(item, T):
            yield item
        elif not isinstance(item, _LEAVES):
            yield from walk_tensors(item, _seen, objects)


_LEAVES = (str, bytes, int, float, complex, bool, type(None))
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType)


def _children(obj, objects):
    """What walk_tensors looks into (None: nothing)."""
    if isinstance(obj, dict):
        return list(obj.values()) + list(obj) if objects else obj.values()
    if isinstance(obj, (list, tuple)):
        return obj
    if hasattr(obj, "__flowgrad_tensors__"):
        return obj.__flowgrad_tensors__()
    if not objects or isinstance(obj, _LEAVES) or isinstance(obj, _OPAQUE):
        return None
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if dataclasses.is_dataclass(obj):
        return [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    d = getattr(obj, "__dict__", None)
    return list(d.values()) if isinstance(d, dict) else None


def tensor_set(obj):
    """The set of the tensors walk_tensors yields. Lists and tuples of tensors and Nones
    (what gradient calls return, every step) are read in one loop, without generators."""
    T = E.tensor_class()
    found = set()
    todo = [obj]
    seen = set()
    while todo:
        o = todo.pop()
        if type(o) is not list and type(o) is not tuple or id(o) in seen:
            if id(o) in seen:
                continue
            return set(walk_tensors(obj, objects=True))     # (anything else: the walk)
        seen.add(id(o))
        for item in o:
            if type(item) is T:
                found.add(item)
            elif type(item) is list or type(item) is tuple:
                todo.append(item)
            elif item is not None:
                return set(walk_tensors(obj, objects=True))
    return found


def check_function(f, message):
    if not callable(f):
        raise ArgumentError(message)


# ---------------------------------------------------------------- public memory API

@overload
def tidy(name_or_fn: Callable[[], _R], fn: None = None) -> _R: ...
@overload
def tidy(name_or_fn: str | None, fn: Callable[[], _R]) -> _R: ...


def tidy(name_or_fn: Any, fn: Any = None) -> Any:
    """Run ``fn`` and dispose every tensor it created, except those it returns (anywhere in
    nested lists, tuples and dicts) and kept ones. ``tidy(name, fn)`` names the scope.

    >>> import flowgrad as tf
    >>> before = tf.memory().num_tensors
    >>> y = tf.tidy(lambda: tf.scalar(2).square().add(1))
    >>> tf.memory().num_tensors - before, y.item()
    (1, 5.0)
    """
    if fn is None:
        # (one argument: whether it is a function is checked when calling it fails, below)
        fn = name_or_fn
        name = None
    else:
        name = name_or_fn
        if not isinstance(name, str):
            raise ArgumentError("When calling with two arguments, the first argument to tidy() "
                                "must be a string")
        if not callable(fn):
            raise ArgumentError("When calling with two arguments, the 2nd argument to tidy() "
                                "must be a function")
    st = LOCAL.s
    stack = st.stack
    level = len(stack)
    result = None
    try:
        sc: list[Any] = []              # (begin_scope, inlined)
        stack.append((name, sc))
        st.scope = sc
        try:
            result = fn()
        except TypeError:
            if name is None and isinstance(fn, str):
                raise ArgumentError("When calling with two arguments, the 2nd argument to "
                                    "tidy() must be a function") from None
            if not callable(fn):
                raise ArgumentError("Please provide a function to tidy()") from None
            _check_no_params(fn)
            raise
        if (result is not None and not isinstance(result, E.tensor_class())
                and hasattr(result, "__await__")):
            raise ArgumentError("Cannot return a coroutine (or other awaitable) inside of "
                                "tidy(): await it outside, or return its tensors.")
        return result
    finally:
        # NOTE: a Ctrl-C can land on any call, this one included: if it interrupts the
        # clean-up, the clean-up runs again (it is idempotent) before the interrupt goes on
        try:
            if len(stack) != level + 1:
                unwind_scopes(level, result)
            elif stack[-1][1]:
                end_scope(result, st)
            else:               # (end_scope's path for a scope that made no tensor, inlined)
                st.scope = stack[-2][1] if level else None
                del stack[-1]
        except BaseException:
            unwind_scopes(level, result)
            raise


def _check_no_params(fn):
    """After a TypeError from fn(): if fn cannot be called without arguments, say so."""
    import inspect
    try:
        sig = inspect.signature(fn)
        sig.bind()
    except ValueError:
        return
    except TypeError:
        raise ArgumentError(f"tidy(fn): fn must take no arguments (it is called as fn()), "
                            f"but {getattr(fn, '__name__', 'fn')}{sig} needs some: close over "
                            f"the values instead, e.g. tidy(lambda: f(x)).") from None


def keep(t: _R) -> _R:
    """Exempt ``t`` from every tidy scope (only ``dispose`` frees it); returns t.

    >>> import flowgrad as tf
    >>> kept = []
    >>> tf.tidy(lambda: kept.append(tf.keep(tf.scalar(1)))) 
    >>> kept[0].is_disposed
    False
    """
    if not isinstance(t, E.tensor_class()):
        raise ArgumentError(f"keep() takes a Tensor, got {type(t).__name__}")
    if t.kept == E.CONSTANT:
        return t                    # (internal constants are never disposed anyway)
    E.promote(t)                    # (a LITE tensor: counted first, so it can be freed)
    t.kept = True
    return t


def dispose(container: Any) -> None:
    """Dispose every tensor found in ``container`` (a tensor, variable, list, tuple, dict,
    set, dataclass or other object's attributes: the walk of tidy's result).

    >>> import flowgrad as tf
    >>> a, b = tf.scalar(1), tf.scalar(2)
    >>> tf.dispose([a, {"b": b}])
    >>> a.is_disposed, b.is_disposed
    (True, True)
    """
    for t in list(walk_tensors(container, objects=True)):
        t.dispose()


class MemoryInfo(Result):
    """What ``tf.memory()`` returns: TF.js's object, read as attributes (``m.num_tensors``,
    ``m.numTensors``) or as a read-only mapping of its fields, as ``dict`` is: ``m["key"]``,
    ``keys``, ``values``, ``items``, ``get``, ``in``, ``len``, and iteration over the keys.

    >>> import flowgrad as tf
    >>> m = tf.memory()
    >>> "num_tensors" in m, "numBytes" in m, m.get("num_bytes_in_gpu", 0)
    (True, True, 0)
    >>> dict(m.items())["num_tensors"] == m.num_tensors == m["numTensors"]
    True
    """

    def _field(self, key):
        """The field's own name for ``key`` (snake_case or TF.js's camelCase), or None."""
        if not isinstance(key, str):
            return None
        if key in self._fields:
            return key
        snake = camel_to_snake(key)
        return snake if snake in self._fields else None

    def __getitem__(self, key: str) -> Any:
        name = self._field(key)
        if name is None:
            raise KeyError(f"tf.memory() has no field {key!r} (it has "
                           f"{', '.join(self._fields)})")
        return getattr(self, name)

    def __contains__(self, key: object) -> bool:
        return self._field(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when there is none (as ``dict.get``)."""
        name = self._field(key)
        return default if name is None else getattr(self, name)

    def values(self) -> list[Any]:
        """The fields' values, in the order of ``keys()``."""
        return [getattr(self, k) for k in self._fields]

    def items(self) -> list[tuple[str, Any]]:
        """``(key, value)`` pairs, in the order of ``keys()``."""
        return [(k, getattr(self, k)) for k in self._fields]


def memory() -> MemoryInfo:
    """Live tensors, distinct data buffers and bytes (as TF.js's ``tf.memory()``), read as
    attributes or as a mapping (``keys``, ``values``, ``items``, ``get``, ``in``).

    Counts are exact: a tensor stops counting when it is disposed or garbage-collected.

    >>> import flowgrad as tf
    >>> m = tf.memory()
    >>> sorted(m.keys())
    ['num_bytes', 'num_data_buffers', 'num_tensors', 'reasons', 'unreliable']
    >>> [k for k, v in m.items() if k.startswith("num_")] == [k for k in m if k[:4] == "num_"]
    True

    On a GPU backend (TF.js: webgl) ``num_bytes_in_gpu`` adds the bytes the device's memory
    pool holds for live arrays; disposing a tensor returns its block to the pool at once.
    """
    extra = {}
    device = E.B.device_bytes()
    if device is not None:
        extra["num_bytes_in_gpu"] = device
    nt, nbuf, nb = memory_counts()
    return MemoryInfo(unreliable=False, reasons=[], num_tensors=nt,
                  num_data_buffers=nbuf, num_bytes=nb, **extra)
