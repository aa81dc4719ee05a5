"""The engine: the one way into a kernel, scopes, memory accounting and the recording gate.

Every op ends in :func:`run_kernel`. It reads the input arrays, calls the backend kernel,
wraps the result in a Tensor and, only while a gradient function is running its forward
pass, records a :class:`Node` on the output (TF.js's rule: ops outside a gradient function
are never recorded, so plain forward code pays nothing for autodiff).

Memory follows TF.js: ``tidy`` scopes dispose what was created inside them, ``keep`` exempts
a tensor, ``memory()`` counts tensors that are neither disposed nor garbage-collected.
A tensor disposed while a gradient session is alive keeps its array until the session ends
(the recorded graph may still need it, as TF.js keeps its saved clones), but is counted as
disposed at once and raises ``Tensor is disposed.`` if user code touches it again.

State lives in module globals: the hot path reads them without attribute lookups, and
debug tools swap :func:`run_kernel` for an instrumented one, so they cost nothing when off.
"""
import itertools

import numpy as np

from . import dtypes
from . import backends
from .errors import (ArgumentError, BackendError, DisposedError, FlowgradError, KernelError,
                     ShapeError)

B = backends.active()      # the active backend namespace, passed to every kernel
_T = None                  # the Tensor class, set by tensor.py (which sits above us)
_NAME = dict(dtypes.NAME)  # backend dtype -> flowgrad name, for every backend made
_ITEM = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}     # bytes per element
_check_types = None        # the active backend's array types, once a second one was used
_ids = itertools.count()

# live-tensor accounting (memory())
num_tensors = 0
num_bytes = 0
num_buffers = 0

# scopes: the innermost open scope is a list of the tensors created in it
_scope = None
_scope_stack = []          # (name, list) of the open scopes, innermost last

# recording: an op is recorded iff a gradient function's forward pass is running
_recording = False
_depth = 0
_session = None            # the Session that receives recorded nodes
_in_backward = 0           # > 0 while gradient rules run (they may read disposed saved tensors)
_live_sessions = 0
_zombies = []              # disposed tensors whose arrays a live session may still read
_tracer = None             # flowgrad.jit's tracer while a function is being traced


class Primitive:
    """One entry of the op table: a forward kernel and the rule for its gradient.

    ``fwd(B, *arrays, **attrs)`` runs on backend arrays. ``vjp(dy, *inputs, [*outputs],
    **attrs)`` is written with flowgrad ops and returns one gradient per input (a bare tensor
    for one input, None for "no contribution"); ``vjp is None`` marks a non-differentiable op
    (its inputs get zero gradient). Declared with the helpers in ``flowgrad.ops._core``.
    """
    __slots__ = ("name", "fwd", "vjp", "multi", "save_y", "view", "cut", "vjp_needs",
                 "strict", "batch", "ufunc", "arg_names", "__weakref__")

    def __init__(self, name, fwd, *, multi=False, save_y=False, view=False, cut=False,
                 strict=False, batch=False, ufunc=None):
        self.name = name          # kernel name, as in TF.js ("Exp", "BatchMatMul")
        self.fwd = fwd
        self.vjp = None
        self.multi = multi        # forward returns a tuple of arrays
        self.save_y = save_y      # the rule reads the outputs (given to it still connected)
        self.view = view          # the output shares the input's buffer (reshape, clone)
        self.cut = cut            # stop_gradient: nothing flows through
        self.vjp_needs = False    # the rule takes ``needs=`` (which inputs want a gradient)
        self.strict = strict      # custom gradients: shapes must match exactly
        # the rule accepts dy with extra leading (batch) axes: vectorised jacobians
        self.batch = batch
        # the kernel is this backend ufunc (by name) on float inputs: tf.jit may give it
        # an out= buffer
        self.ufunc = ufunc
        code = getattr(fwd, "__code__", None)
        # input names for messages: the kernel's positional parameters after the backend
        self.arg_names = code.co_varnames[1:code.co_argcount] if code is not None else ()

    def def_vjp(self, rule):
        """Decorator: set the gradient rule of this primitive."""
        code = getattr(rule, "__code__", None)
        self.vjp = rule
        self.vjp_needs = code is not None and "needs" in code.co_varnames[:code.co_argcount
                                                                         + code.co_kwonlyargcount]
        return rule

    def __repr__(self):
        return f"<primitive {self.name}>"


class Node:
    """A recorded op application: what backprop needs to run the rule of ``prim``."""
    __slots__ = ("prim", "inputs", "attrs", "out", "sess", "nout", "metas", "pos", "site",
                 "__weakref__")     # site: where the user called the op (debug modes only)

    def __repr__(self):
        return f"<node {self.prim.name} of {len(self.inputs)} inputs>"


class Session:
    """The nodes recorded between the outermost gradient call's start and its end."""
    __slots__ = ("nodes", "alive", "__weakref__")

    def __init__(self):
        global _live_sessions
        self.nodes = []
        self.alive = True
        _live_sessions += 1

    def release(self):
        """Drop the recorded graph: nodes forget their inputs, so memory is freed."""
        global _live_sessions
        if not self.alive:
            return
        self.alive = False
        for n in self.nodes:
            n.inputs = ()
            n.out = None
        self.nodes = []
        _live_sessions -= 1
        if _live_sessions == 0 and _zombies:
            for t in _zombies:
                t._data = None
            _zombies.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


# ---------------------------------------------------------------- tensors and accounting

def make_tensor(a):
    """Wrap a backend array (one of flowgrad's dtypes) as a new Tensor in the current scope."""
    global num_tensors, num_bytes, num_buffers
    t = _T.__new__(_T)
    t._data = a
    t.shape = a.shape
    t.dtype = _NAME[a.dtype]
    t.id = next(_ids)
    t._node = None
    t.kept = False
    t._disposed = False
    t._buf = None
    num_tensors += 1
    num_bytes += a.size * _ITEM[t.dtype]
    num_buffers += 1
    if _scope is not None:
        _scope.append(t)
    return t


CONSTANT = 2    # ``kept`` value of internal constants: not counted, never disposed


def constant_tensor(a):
    """An internal constant (a literal of an op): immutable, shared, outside accounting."""
    t = _T.__new__(_T)
    t._data = a
    t.shape = a.shape
    t.dtype = _NAME[a.dtype]
    t.id = next(_ids)
    t._node = None
    t.kept = CONSTANT
    t._disposed = False
    t._buf = None
    return t


def nbytes(t):
    """Bytes of a tensor's array (any backend: the standard has no ``nbytes``)."""
    return t._data.size * _ITEM[t.dtype]


def _use_backend(ns):
    """The active backend changed: kernels get its namespace, and from now on each kernel
    checks that its inputs live on it."""
    global B, _check_types
    B = ns
    # NOTE: only the active backend's dtypes: other libraries' dtypes may hash alike and
    # warn when compared (array-api-strict's do)
    _NAME.clear()
    _NAME.update((v, k) for k, v in ns.dtypes.items())
    if ns.name != "numpy" or _check_types is not None:
        _check_types = ns.array_types


backends.on_change(_use_backend)


def from_host(arr):
    """A NumPy array as an array of the active backend (the same array on NumPy)."""
    return arr if B.name == "numpy" else B.from_numpy(arr)


_HOST = (np.ndarray, np.generic)


def to_host(a):
    """A backend array as a NumPy array (the same array when it is one already)."""
    if isinstance(a, _HOST):
        return a
    ns = backends.backend_of(a)
    if ns is None:
        raise BackendError(f"an array of type {type(a).__name__} belongs to no backend")
    return ns.to_numpy(a)


def _check_inputs(prim, inputs):
    for i, t in enumerate(inputs):
        a = t._data
        if a is None or type(a) in _check_types:
            continue              # (a disposed input: run_kernel says so in its own words)
        other = backends.backend_of(a)
        name = other.name if other else type(a).__name__
        raise BackendError(
            f"{prim.name}: input {i} is a tensor of backend '{name}', but the active backend "
            f"is '{B.name}': tensors of two backends cannot meet in one op. Bring it over "
            f"with tf.from_dlpack(x) (no copy where the devices allow) or "
            f"tf.tensor(x.numpy()), or set_backend('{name}').")


def account_new(t):
    """Count a tensor built outside make_tensor (variables)."""
    global num_tensors, num_bytes, num_buffers
    num_tensors += 1
    num_bytes += nbytes(t)
    num_buffers += 1


def share_buffer(src, dst):
    """Record that ``dst`` uses ``src``'s buffer (clone, reshape, variables, assign)."""
    global num_buffers
    b = src._buf
    if b is None:
        b = src._buf = [1]
    b[0] += 1
    if dst._buf is None:
        num_buffers -= 1
    else:
        release_buffer(dst)
    dst._buf = b


def release_buffer(t):
    global num_buffers
    b = t._buf
    if b is None:
        num_buffers -= 1
    else:
        b[0] -= 1
        if b[0] == 0:
            num_buffers -= 1


def release(t):
    """Un-count a tensor that is being disposed or garbage-collected."""
    global num_tensors, num_bytes
    num_tensors -= 1
    num_bytes -= t._data.size * _ITEM[t.dtype]
    release_buffer(t)


def tensor_del(t):
    """Tensor.__del__: un-count a tensor the garbage collector frees (release, inlined)."""
    global num_tensors, num_bytes, num_buffers
    try:
        if t._disposed or t.kept == CONSTANT:
            return
        num_tensors -= 1
        num_bytes -= t._data.size * _ITEM[t.dtype]
        b = t._buf
        if b is None:
            num_buffers -= 1
        else:
            b[0] -= 1
            if b[0] == 0:
                num_buffers -= 1
    except Exception:  # a partially built tensor, or interpreter shutdown
        pass


def dispose_tensor(t):
    """Dispose one tensor: count it as gone and free its array (or park it, see module doc)."""
    if t._disposed or t.kept == CONSTANT:
        return
    release(t)
    t._disposed = True
    if _live_sessions:
        _zombies.append(t)
    else:
        t._data = None


def memory_counts():
    return num_tensors, num_buffers, num_bytes


def kernel_error(prim, inputs, e):
    """A backend failure, as a flowgrad error naming the op and its inputs (never a bare
    NumPy traceback)."""
    described = ", ".join(f"{t.dtype} {tuple(t.shape)}" for t in inputs)
    msg = str(e)
    if "broadcast" in msg:
        shapes = " and ".join(str(tuple(t.shape)) for t in inputs)
        return ShapeError(f"Operands could not be broadcast together with shapes {shapes} "
                          f"(op {prim.name}): each axis must match or be 1, counting from "
                          f"the last.")
    return KernelError(f"{prim.name} failed on inputs ({described}): {type(e).__name__}: "
                       f"{msg}")


def disposed_input(t, prim):
    """The array of a disposed input: allowed only for gradient rules reading saved tensors."""
    if _in_backward and t._data is not None:
        return t._data
    raise DisposedError(
        f"Tensor is disposed. The input of '{prim.name}' (a {t.dtype} tensor of shape "
        f"{tuple(t.shape)}, id {t.id}) was disposed by dispose() or by the tidy() that "
        f"created it; return it from the tidy or call keep() on it to use it later.")


# ---------------------------------------------------------------- the single kernel entry

def run_kernel(prim, inputs, attrs=None):
    """Run ``prim`` on ``inputs`` (a tuple of Tensors): THE way into a backend kernel.

    Returns the output Tensor (a tuple of them for multi-output primitives), recorded for
    backprop when a gradient function's forward pass is running.
    """
    global num_tensors, num_bytes, num_buffers
    if _check_types is not None:
        _check_inputs(prim, inputs)
    try:
        if len(inputs) == 1:
            t = inputs[0]
            a = t._data if not t._disposed else disposed_input(t, prim)
            out = prim.fwd(B, a) if attrs is None else prim.fwd(B, a, **attrs)
        elif len(inputs) == 2:
            t, u = inputs
            a = t._data if not t._disposed else disposed_input(t, prim)
            b = u._data if not u._disposed else disposed_input(u, prim)
            out = prim.fwd(B, a, b) if attrs is None else prim.fwd(B, a, b, **attrs)
        else:
            arrays = [x._data if not x._disposed else disposed_input(x, prim) for x in inputs]
            out = prim.fwd(B, *arrays) if attrs is None else prim.fwd(B, *arrays, **attrs)
    except FlowgradError:
        raise
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise kernel_error(prim, inputs, e) from e
    if not prim.multi:
        # make_tensor, inlined: this is the hottest path of the library
        y = _T.__new__(_T)
        y._data = out
        y.shape = out.shape
        y.dtype = _NAME[out.dtype]
        y.id = next(_ids)
        y._node = None
        y.kept = False
        y._disposed = False
        y._buf = None
        num_tensors += 1
        num_bytes += out.size * _ITEM[y.dtype]
        num_buffers += 1
        if _scope is not None:
            _scope.append(y)
        if prim.view and B.may_share_memory(out, inputs[0]._data):
            share_buffer(inputs[0], y)
        if _recording and inputs:
            n = Node()
            n.prim = prim
            n.inputs = inputs
            n.attrs = attrs
            n.out = out if prim.save_y else None
            n.nout = 1
            n.sess = _session
            nodes = _session.nodes
            n.pos = len(nodes)
            nodes.append(n)
            y._node = n
        return y
    ys = tuple(make_tensor(o) for o in out)
    if _recording and inputs:
        n = Node()
        n.prim = prim
        n.inputs = inputs
        n.attrs = attrs
        n.out = tuple(out) if prim.save_y else None
        n.nout = len(ys)
        n.metas = tuple((o.shape, y.dtype) for o, y in zip(out, ys))
        n.sess = _session
        n.pos = len(_session.nodes)
        _session.nodes.append(n)
        for i, y in enumerate(ys):
            y._node = n
            y._idx = i
    return ys


on_record = None        # debug seam: fn(node) for nodes recorded outside run_kernel


def record(prim, inputs, outputs, attrs=None, saved=None):
    """Record an already computed application (custom gradients); returns the node or None."""
    if not _recording or not inputs:
        return None
    n = Node()
    n.prim = prim
    n.inputs = tuple(inputs)
    n.attrs = attrs
    n.out = saved
    n.nout = 1
    n.sess = _session
    n.pos = len(_session.nodes)
    _session.nodes.append(n)
    outputs._node = n
    if on_record is not None:
        on_record(n)
    return n


# ---------------------------------------------------------------- recording gate

def begin_recording():
    """Enter a gradient function's forward pass. Returns the session it records into and
    whether this call opened it (and so must release it)."""
    global _depth, _recording, _session
    owner = _depth == 0
    if owner:
        _session = Session()
    _depth += 1
    _recording = True
    return _session, owner


def end_recording():
    global _depth, _recording
    _depth -= 1
    _recording = _depth > 0


def is_recording():
    """True while a gradient function's forward pass is running (ops are being recorded)."""
    return _recording


def current_session():
    return _session if _depth > 0 else None


def enter_backward():
    global _in_backward
    _in_backward += 1


def exit_backward():
    global _in_backward
    _in_backward -= 1


# ---------------------------------------------------------------- scopes (tidy)

def begin_scope(name=None):
    """Open a scope: tensors created until the matching end_scope belong to it."""
    global _scope
    _scope = []
    _scope_stack.append((name, _scope))


def end_scope(result=None):
    """Close the innermost scope: dispose its tensors except kept ones and those in
    ``result``, which move to the enclosing scope."""
    global _scope, num_tensors, num_bytes, num_buffers
    _, tensors = _scope_stack.pop()
    _scope = _scope_stack[-1][1] if _scope_stack else None
    if not tensors:
        return
    keep_ids = set()
    if result is not None:
        for t in walk_tensors(result):
            keep_ids.add(id(t))
    parent = _scope
    park = _live_sessions > 0
    n_t = n_bytes = n_bufs = 0
    # the accounting of dispose_tensor, inlined: this loop sees every tensor of a tidy
    for t in tensors:
        if t._disposed or t.kept:
            continue
        if id(t) in keep_ids:
            if parent is not None:
                parent.append(t)
            continue
        t._disposed = True
        n_t += 1
        n_bytes += t._data.size * _ITEM[t.dtype]
        b = t._buf
        if b is None:
            n_bufs += 1
        else:
            b[0] -= 1
            if b[0] == 0:
                n_bufs += 1
        if park:
            _zombies.append(t)
        else:
            t._data = None
    num_tensors -= n_t
    num_bytes -= n_bytes
    num_buffers -= n_bufs


def scope_name():
    """The name of the innermost open scope (None outside any scope)."""
    return _scope_stack[-1][0] if _scope_stack else None


def untrack(t):
    """Remove a tensor from scope tracking (variables are never disposed by tidy)."""
    for _, tensors in reversed(_scope_stack):
        for i in range(len(tensors) - 1, -1, -1):
            if tensors[i] is t:
                del tensors[i]
                return


def walk_tensors(obj, _seen=None):
    """Yield every Tensor inside nested lists, tuples, dicts and flowgrad result objects."""
    T = _T
    if isinstance(obj, T):
        yield obj
        return
    if isinstance(obj, (list, tuple, dict)) or hasattr(obj, "__flowgrad_tensors__"):
        if _seen is None:
            _seen = set()
        if id(obj) in _seen:
            return
        _seen.add(id(obj))
        if isinstance(obj, dict):
            items = obj.values()
        elif isinstance(obj, (list, tuple)):
            items = obj
        else:
            items = obj.__flowgrad_tensors__()
        for item in items:
            if isinstance(item, T):
                yield item
            elif isinstance(item, (list, tuple, dict)) or hasattr(item, "__flowgrad_tensors__"):
                yield from walk_tensors(item, _seen)


def check_function(f, message):
    if not callable(f):
        raise ArgumentError(message)


# ---------------------------------------------------------------- public memory API

def tidy(name_or_fn, fn=None):
    """Run ``fn`` and dispose every tensor it created, except those it returns (anywhere in
    nested lists, tuples and dicts) and kept ones. ``tidy(name, fn)`` names the scope.

    >>> import flowgrad as tf
    >>> before = tf.memory().num_tensors
    >>> y = tf.tidy(lambda: tf.scalar(2).square().add(1))
    >>> tf.memory().num_tensors - before, y.item()
    (1, 5.0)
    """
    if fn is None:
        if isinstance(name_or_fn, str):
            raise ArgumentError("When calling with two arguments, the 2nd argument to tidy() "
                                "must be a function")
        name, fn = None, name_or_fn
        if not callable(fn):
            raise ArgumentError("Please provide a function to tidy()")
    else:
        name = name_or_fn
        if not isinstance(name, str):
            raise ArgumentError("When calling with two arguments, the first argument to tidy() "
                                "must be a string")
        if not callable(fn):
            raise ArgumentError("When calling with two arguments, the 2nd argument to tidy() "
                                "must be a function")
    begin_scope(name)
    result = None
    try:
        result = fn()
        if hasattr(result, "__await__"):
            raise ArgumentError("Cannot return a coroutine (or other awaitable) inside of "
                                "tidy(): await it outside, or return its tensors.")
        return result
    finally:
        end_scope(result)


def keep(t):
    """Exempt ``t`` from every tidy scope (only ``dispose`` frees it); returns t.

    >>> import flowgrad as tf
    >>> kept = []
    >>> tf.tidy(lambda: kept.append(tf.keep(tf.scalar(1)))) 
    >>> kept[0].is_disposed
    False
    """
    if not isinstance(t, _T):
        raise ArgumentError(f"keep() takes a Tensor, got {type(t).__name__}")
    t.kept = True
    return t


def dispose(container):
    """Dispose every tensor found in ``container`` (a tensor, variable, list, tuple, dict).

    >>> import flowgrad as tf
    >>> a, b = tf.scalar(1), tf.scalar(2)
    >>> tf.dispose([a, {"b": b}])
    >>> a.is_disposed, b.is_disposed
    (True, True)
    """
    for t in list(walk_tensors(container)):
        t.dispose()


def memory():
    """Live tensors, distinct data buffers and bytes (as TF.js's ``tf.memory()``).

    Counts are exact: a tensor stops counting when it is disposed or garbage-collected.

    >>> import flowgrad as tf
    >>> m = tf.memory()
    >>> sorted(m.keys())
    ['num_bytes', 'num_data_buffers', 'num_tensors', 'reasons', 'unreliable']

    On a GPU backend (TF.js: webgl) ``num_bytes_in_gpu`` adds the bytes the device's memory
    pool holds for live arrays; disposing a tensor returns its block to the pool at once.
    """
    from .names import Result
    extra = {}
    device = B.device_bytes()
    if device is not None:
        extra["num_bytes_in_gpu"] = device
    return Result(unreliable=False, reasons=[], num_tensors=num_tensors,
                  num_data_buffers=num_buffers, num_bytes=num_bytes, **extra)
