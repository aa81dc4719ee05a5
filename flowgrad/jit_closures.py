"""The tensors a ``tf.jit`` function reads by name — from its closure, its module's globals,
and those of the functions it reaches — watched between calls.

A trace keeps the tensors a function reads from outside its arguments as constants, and
the variables it reads as the variables themselves. When the name they were read through
later holds something else (``xb, yb = batches[i]`` between two calls of a jitted training
step), a replay would silently keep using what was traced; eager code would not. So before
a trace, ``find(fn)`` walks what ``fn`` can reach by name and notes each *place* (a closure
cell, a module global, an item of a dict/list/tuple held there, an attribute of an object
held there) with its value; after the trace, ``Captures.watch`` keeps the places that lead
to a tensor or variable the trace used, and compiles a check of their identities that a
replay runs first (a few attribute loads per place: no code is walked on a call).

Reached: ``fn``'s closure cells and default arguments, and the globals its code (nested
lambdas and functions included) names; the same, breadth first, for the Python functions
found there (a global ``model`` function, the ``loss`` a lambda closes over, the function
``tf.grad`` wraps, a ``functools.partial``'s function and arguments) and for the methods
of a found object that the code names (``self.w``); items of dicts, lists and tuples two
levels down; attributes one level down (of an object, class or module found there) that
the code reading them names. Library code (flowgrad, NumPy, the standard library) is only
looked through for the functions it closes over. A place holding an object is watched too
(by identity) when the trace used a tensor or variable the object holds (four levels
down: a model's weights, an optimizer's slots, made while tracing) or when it is a
flowgrad object whose methods the code calls (an optimizer: its learning rate is in the
trace).

Not reached (still constants of the trace, as documented): tensors read through longer
attribute chains (``a.b.c``), containers nested deeper, objects with ``__slots__``, values
the code does not name (``getattr(obj, name)``), more than ``MAX_FUNCTIONS`` functions or
``MAX_ITEMS`` items of a container; tensors the function makes from Python data
(``tf.tensor(array)``); Python numbers. Python side effects (appending to a list, setting
a global) still happen only while tracing.
"""
from __future__ import annotations

import collections
import functools
import itertools
import os
import sysconfig
import types
from typing import Any

import numpy as np

from .errors import DisposedError, JitError
from .tensor import Tensor, Variable

MAX_FUNCTIONS = 200      # functions walked per trace
MAX_PLACES = 4000        # places noted per trace
MAX_ITEMS = 64           # items looked at per container
CONTAINER_DEPTH = 2      # dict/list/tuple levels below a place
MAX_SCAN = 2000          # values looked at in an object, for what the trace used in it
_MISSING = object()
_SCALARS = (int, float, complex, str, bytes, type(None))
_LEAVES = (Tensor,) + _SCALARS
_OPAQUE = _SCALARS + (type, types.ModuleType, types.FunctionType, types.MethodType,
                      functools.partial)


class _Place:
    """Where a value was found: a closure cell, or an item of a holder (a dict, a list, a
    tuple, an object's ``__dict__``)."""
    __slots__ = ("holder", "key", "name", "where", "parent", "value", "flowgrad")

    def __init__(self, holder, key, name, where, parent, value):
        self.holder, self.key, self.name, self.where = holder, key, name, where
        self.parent, self.value = parent, value
        self.flowgrad = False       # holds a flowgrad object whose methods the code calls

    def read(self):
        try:
            if isinstance(self.holder, types.CellType):
                return self.holder.cell_contents
            return self.holder[self.key]
        except (ValueError, KeyError, IndexError, TypeError):
            return _MISSING

    def describe(self):
        return f"`{self.name}` ({self.where})"


@functools.lru_cache(maxsize=1024)
def _code_names(code):
    """Every name the code (and the code nested in it) loads: globals and attributes."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def _library_dirs():
    """flowgrad's and NumPy's directories, and the standard library's (less its
    site-packages)."""
    packages = tuple(os.path.dirname(os.path.abspath(m)) + os.sep
                     for m in (__file__, np.__file__))
    stdlib = tuple({os.path.dirname(os.path.abspath(os.__file__)) + os.sep,
                    os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep})
    return packages, stdlib


@functools.lru_cache(maxsize=1024)
def _is_library(filename):
    """Whether code from this file is library code: looked through, not into."""
    if filename.startswith("<frozen"):
        return True
    packages, stdlib = _library_dirs()
    path = os.path.abspath(filename)
    return path.startswith(packages) or path.startswith(stdlib) and \
        "site-packages" not in path and "dist-packages" not in path


def _instance_dict(obj):
    try:
        d = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    return d if type(d) in (dict, types.MappingProxyType) else None


def _class_function(cls, name):
    for k in getattr(cls, "__mro__", ()):
        f = vars(k).get(name, _MISSING)
        if f is not _MISSING:
            return f if isinstance(f, types.FunctionType) else None
    return None


class Captures:
    """The places a function reaches by name, with their values before its trace."""

    def __init__(self, fn):
        self.fn_name = _short(fn)
        self.places: list[_Place] = []
        self._seen: set[Any] = set()
        self._placed: dict[tuple[int, Any], int] = {}
        self._queue: collections.deque = collections.deque()
        self.callable(fn, -1, None, "")
        walked = 0
        while self._queue and walked < MAX_FUNCTIONS:     # breadth first: the nearest
            self.function(*self._queue.popleft())         # functions first, no deep stack
            walked += 1

    # the walk (trace time only)
    def add(self, holder, key, name, where, parent, value, names, depth):
        idx = self._placed.get((id(holder), key))
        if idx is None:
            if len(self.places) >= MAX_PLACES:
                return
            idx = self._placed[id(holder), key] = len(self.places)
            self.places.append(_Place(holder, key, name, where, parent, value))
        self.value(value, idx, names, depth)   # (again: this code may name other attributes)

    def value(self, v, idx, names, depth):
        if isinstance(v, _LEAVES):
            return
        if isinstance(v, (types.FunctionType, types.MethodType, functools.partial)):
            self.callable(v, idx, None, "")
            return
        p = self.places[idx]
        if isinstance(v, (dict, list, tuple)):
            if depth < CONTAINER_DEPTH and id(v) not in self._seen:
                self._seen.add(id(v))
                self.items(v, idx, p.name, p.where, names, depth + 1)
            return
        if (id(v), names) not in self._seen:    # (other code may read other attributes)
            self._seen.add((id(v), names))
            self.object(v, idx, p.name, p.where, names)

    def items(self, v, parent, label, where, names, depth):
        items = itertools.islice(v.items(), MAX_ITEMS) if isinstance(v, dict) else \
            enumerate(itertools.islice(v, MAX_ITEMS))
        for k, item in items:
            if not isinstance(item, _SCALARS):
                self.add(v, k, f"{label}[{k!r}]", where, parent, item, names, depth)

    def object(self, obj, idx, label, where, names):
        """An object's attributes that the code reading it names, one level, and the
        methods of its class that the code names (with their own ``self.x`` reads)."""
        d = _instance_dict(obj)
        cls = type(obj)
        ours = idx != -1 and not isinstance(obj, (type, types.ModuleType)) and \
            (getattr(cls, "__module__", None) or "").split(".")[0] == "flowgrad"
        for n in sorted(names):
            if d is not None and n in d:
                item = d[n]
                if isinstance(item, Tensor):
                    self.add(d, n, f"{label}.{n}", where, idx, item, names, CONTAINER_DEPTH)
            f = _class_function(cls, n)
            if f is not None:
                # an optimizer whose minimize() the code calls: its settings (a learning
                # rate) are in the trace, so another one in its place is a change
                self.places[idx].flowgrad |= ours
                self.callable(f, idx, obj, label)
        f = _class_function(cls, "__call__")
        if f is not None:
            self.callable(f, idx, obj, label)

    def callable(self, f, parent, self_obj, self_label):
        """Queue a function (a method: with its object; a partial: its fixed arguments
        noted now) for ``function``."""
        if isinstance(f, types.MethodType):
            self_obj, self_label, f = f.__self__, "self", f.__func__
        elif isinstance(f, functools.partial):
            label = self.places[parent].name if parent != -1 else "partial"
            self.items(f.args, parent, f"{label}.args", "fixed by functools.partial", (),
                       CONTAINER_DEPTH)
            self.items(f.keywords, parent, f"{label}.keywords", "fixed by functools.partial",
                       (), CONTAINER_DEPTH)
            f = f.func
        if not isinstance(f, types.FunctionType):
            if parent == -1 and callable(f) and not isinstance(f, type):
                call = _class_function(type(f), "__call__")     # a callable object
                if call is not None:
                    self.callable(call, -1, f, "self")
            return
        key = (id(f), id(self_obj))
        if key not in self._seen:
            self._seen.add(key)
            self._queue.append((f, parent, self_obj, self_label))

    def function(self, f, parent, self_obj, self_label):
        """A function's closure cells, default arguments, the globals its code names and
        (a method) the attributes of self it names; library code: its closure only."""
        code = f.__code__
        qual = _short(f)
        names = _code_names(code)
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:          # (not bound yet)
                continue
            self.add(cell, None, name, f"closed over by {qual}", parent, v, names, 0)
        if f.__defaults__:          # fixed with the function: a new one is another place
            self.items(f.__defaults__, parent, f"{qual}.__defaults__", "a default argument",
                       (), CONTAINER_DEPTH)
        if _is_library(code.co_filename):
            return
        g = f.__globals__
        mod = g.get("__name__", "?")
        for name in sorted(names):
            if name in g:
                self.add(g, name, name, f"a global of module {mod}", parent, g[name], names, 0)
        if self_obj is not None:
            self.object(self_obj, parent, self_label, f"an attribute read by {qual}", names)

    # after the trace
    def watch(self, consts: dict[int, Any], variables: set[int],
              made: dict[int, Any]) -> Watch | None:
        """The check of the places that lead to a tensor (by its array, among ``consts``)
        or a variable (among ``variables``) the trace used; None when there are none.
        What objects came to hold while tracing (arrays in ``made``: a cache the function
        fills) is not from outside. Raises JitError when the function rebound a place it
        read through while being traced."""
        keep: set[int] = set()
        outside = {k: v for k, v in consts.items() if k not in made}
        memo: dict[int, bool] = {}
        for i, p in enumerate(self.places):
            v = p.value         # (as before the trace: a tensor there then is from outside)
            if p.flowgrad or _holds_used(v, consts if isinstance(v, Tensor) else outside,
                                         variables, 0, memo):
                while i != -1 and i not in keep:
                    keep.add(i)
                    i = self.places[i].parent
        if not keep:
            return None
        places = [self.places[i] for i in sorted(keep)]
        for p in places:
            if p.read() is not p.value:
                raise JitError(
                    f"tf.jit({self.fn_name}): the function rebinds {p.describe()} while "
                    f"being traced, after reading {_what(p.value)} through it. A replay "
                    f"runs the traced kernels only, not Python assignments, so it would "
                    f"keep reading what was traced. Keep such state in a tf.Variable "
                    f"(assign() it), or pass it in as an argument and return the new value.")
        return Watch(self.fn_name, places)


def _holds_used(v, consts, variables, depth, memo):
    """Whether v is, or holds (attributes and items, four levels down, ``MAX_SCAN``
    objects at most per trace: a model's layers' weights, an optimizer's slots made while
    tracing), a tensor or variable the trace used. ``memo``: id -> answer, shared by the
    places of one trace."""
    if isinstance(v, Variable):
        return id(v) in variables
    if isinstance(v, Tensor):
        return v._data is not None and id(v._data) in consts
    if depth >= 4 or isinstance(v, _OPAQUE):
        return False
    known = memo.get(id(v))
    if known is not None or len(memo) >= MAX_SCAN:
        return bool(known)
    memo[id(v)] = False             # (while looking: a cycle back to v adds nothing)
    if isinstance(v, dict):
        items = itertools.islice(v.values(), MAX_ITEMS)
    elif isinstance(v, (list, tuple)):
        items = itertools.islice(v, MAX_ITEMS)
    else:
        d = _instance_dict(v)
        items = itertools.islice(d.values(), MAX_ITEMS) if type(d) is dict else ()
    memo[id(v)] = found = any(_holds_used(x, consts, variables, depth + 1, memo)
                              for x in items)
    return found


def find(fn) -> Captures:
    """The places ``fn`` reaches by name (see the module doc), noted before its trace."""
    return Captures(fn)


def _short(f):
    """A function's qualified name without its ``<locals>.`` parts."""
    name = getattr(f, "__qualname__", None) or type(f).__name__
    return name.replace("<locals>.", "")


def _what(v):
    if isinstance(v, Variable):
        return f"variable '{v.name}'"
    if isinstance(v, Tensor):
        return f"a {v.dtype} tensor of shape {list(v.shape)}"
    if isinstance(v, types.FunctionType):
        return f"function {_short(v)}"
    return f"a {type(v).__name__}"


class Watch:
    """The identity check of the watched places, written into a replay's code by
    ``lines``: each place must hold what was traced (a tensor over the same array and not
    disposed, the same variable and not disposed, the same object), else the replay
    returns None before running anything, and ``fail()`` raises the error that names the
    places that changed."""

    def __init__(self, fn_name, places):
        self.fn_name = fn_name
        self.places = places
        self.expected = []          # (role, what the place must hold, what it held)
        for p in places:
            v = p.value
            if isinstance(v, Variable):
                self.expected.append(("variable", v, _what(v)))
            elif isinstance(v, Tensor):
                # the array, not the tensor: the trace holds it already (holding the tensor
                # would keep it counted by memory() after the name moved on)
                self.expected.append(("tensor", v._data, _what(v)))
            else:
                self.expected.append(("object", v, _what(v)))
            p.value = None              # (the check holds what it needs)

    def lines(self, ns):
        """The check as lines of a function body (names ``_w*`` added to ``ns``)."""
        out = ["    try:"]
        for i, (p, (role, e, _)) in enumerate(zip(self.places, self.expected)):
            ns[f"_wh{i}"], ns[f"_wk{i}"], ns[f"_we{i}"] = p.holder, p.key, e
            key = repr(p.key) if type(p.key) in (str, int) else f"_wk{i}"
            get = f"_wh{i}.cell_contents" if isinstance(p.holder, types.CellType) else \
                f"_wh{i}[{key}]"
            if role == "variable":
                out += [f"        _w = {get}",
                        f"        if _w is not _we{i} or _w._disposed: return None"]
            elif role == "tensor":
                out += [f"        _w = {get}",
                        f"        if _w._data is not _we{i} or _w._disposed: return None"]
            else:
                out.append(f"        if {get} is not _we{i}: return None")
        return out + ["    except Exception:", "        return None"]

    def fail(self):
        """Raise the error that names what changed since the trace: the tensors whose
        names now hold others (all of them), else the variable or object."""
        changed = []
        for p, (role, e, was) in zip(self.places, self.expected):
            cur = p.read()
            if isinstance(cur, Tensor) and cur._disposed and (role == "tensor" or
                                                              cur is e):
                raise DisposedError(
                    f"Tensor is disposed. tf.jit({self.fn_name}): {p.describe()} holds a "
                    f"disposed {cur.dtype} tensor of shape {list(cur.shape)}; the function "
                    f"was traced with {was}.")
            if cur is e or role == "tensor" and isinstance(cur, Tensor) and cur._data is e:
                continue
            now = "nothing (it is unbound)" if cur is _MISSING else \
                ("another, " if role != "object" and isinstance(cur, Tensor) else "") + \
                _what(cur)
            said = f"{p.describe()} held {was} when the function was traced, and now " \
                   f"holds {now}"
            if role == "tensor":
                changed.append((p, said))
            elif not changed and role == "variable":
                raise JitError(
                    f"tf.jit({self.fn_name}): {said}. A replay reads and assigns the traced "
                    f"variable: assign new values to it ({p.name}.assign(...)) instead of "
                    f"rebinding the name, or make a new tf.jit function.")
            elif not changed:
                raise JitError(
                    f"tf.jit({self.fn_name}): {said}. The trace ran with what it held "
                    f"(tensors, variables, settings), and a replay would keep using those: "
                    f"make a new tf.jit function for the new {type(cur).__name__}, or pass "
                    f"changing tensors as arguments to the jitted function.")
        if not changed:
            raise JitError(f"tf.jit({self.fn_name}): the tensors or variables the function "
                           f"reads by name ({', '.join(p.describe() for p in self.places)}) "
                           f"changed while the replay checked them; pass the tensors as "
                           f"arguments to the jitted function.")
        args = ", ".join(dict.fromkeys(_arg(p) for p, _ in changed))
        them, it = ("them as arguments", "the tensors") if len(changed) > 1 else \
            ("it as an argument", "the tensor")
        raise JitError(
            f"tf.jit({self.fn_name}): {'; '.join(said for _, said in changed)}. Tensors a "
            f"jitted function reads from its closure or globals are constants of its "
            f"trace, so a replay would silently keep using the traced ones: pass {them} "
            f"to the jitted function instead (step = tf.jit(lambda {args}: ...); "
            f"step({args})). Each call then uses {it} it is given; a new shape or dtype "
            f"traces anew.")


def _arg(p):
    name = p.name.split("[")[0].split(".")[-1]
    return name if name.isidentifier() else "x"
