"""The engine: the one way into a kernel, and making, counting and disposing tensors.

Every op ends in :func:`run_kernel`. It reads the input arrays, calls the backend kernel,
wraps the result in a Tensor and, only while a gradient function is running its forward
pass, records a :class:`Node` on the output (TF.js's rule: ops outside a gradient function
are never recorded, so plain forward code pays nothing for autodiff).

Memory follows TF.js: ``tidy`` scopes (flowgrad/scopes.py) dispose what was created inside
them, ``keep`` exempts a tensor, ``memory()`` counts tensors that are neither disposed nor
garbage-collected.
A tensor that a live gradient session recorded, disposed while that session is alive, keeps
its array until the session ends (its rules may still read it, as TF.js keeps its saved
clones), but is counted as disposed at once and raises ``Tensor is disposed.`` if user code
touches it again. Tensors no session recorded are freed at once.

Threads: scopes, the recording gate (flowgrad/recording.py) and gradient sessions belong to
the thread that opened them; their State, and the counters ``memory()`` sums, are owned by
flowgrad/thread_state.py, which this module reads directly on its hot path. Every scope and
session is restored in ``finally``, Ctrl-C included: callers note the level before they
change it and unwind to it (``unwind_scopes``, ``unwind_recording``).

Debug tools, tf.jit's tracer and tf.vmap wrap :func:`run_kernel` while they are on
(composed in one place, flowgrad/interceptors.py), so they cost nothing when off.
"""
import numpy as np

from . import dtypes
from . import backends
from . import buffer_pool as _pool
from . import finalizer_interrupts
from .errors import (BackendError, DisposedError, DtypeError, FlowgradError,
                     KernelError, ShapeError)
from .strings import OPS_HINT as STRINGS_HINT, STRING_DTYPE

B = backends.active()      # the active backend namespace, passed to every kernel
_T = None                  # the Tensor class (set_tensor_class: tensor.py sits above us)
# the active backend's dtype -> flowgrad's dtype (a DType object), and a dtype's bytes per
# element (a StringArray's size is its UTF-8 bytes: TF.js counts those). Keyed by the DType
# objects themselves, found on identity (see _use_backend)
DTYPE_NAME = {}
ITEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1, "string": 1}
_check_types = None        # the active backend's array types, once a second one was used
# elementwise kernels with an output this big write into a recycled buffer, and tensors this
# big hand their array to the pool when they let go of it (flowgrad/buffer_pool.py;
# "infinite" on other backends; the memory policy turns the pool itself on and off)
_OFF = 1 << 62
POOL_MIN = _pool.MIN_ELEMENTS if B.name == "numpy" else _OFF

# NumPy's floating-point error state, switched around each kernel: flowgrad/float_errors.py
from .float_errors import QUIET, fpe_put, fpe_saved  # noqa: E402
# each thread's State, the tensor ids and the parking of disposed tensors: their one owner
from .thread_state import LOCAL, next_id, park  # noqa: E402


def set_tensor_class(cls):
    """The class of the tensors the engine makes (tensor.py, which sits above the engine,
    hands in its Tensor once, at import)."""
    global _T
    _T = cls


def tensor_class():
    """The Tensor class (for code below tensor.py that tells tensors from other values)."""
    return _T


def dtype_name(dtype):
    """flowgrad's dtype for an array dtype of the active backend, or None when it is none
    of flowgrad's (int64, complex...)."""
    return DTYPE_NAME.get(dtype)


class Primitive:
    """One entry of the op table, declared whole in its family file: a forward kernel, the
    rule for its gradient, its tf.vmap rule, whether it is impure, and its fusion forms.

    ``fwd(B, *arrays, **attrs)`` runs on backend arrays. ``vjp(dy, *inputs, [*outputs],
    **attrs)`` is written with flowgrad ops and returns one gradient per input (a bare tensor
    for one input, None for "no contribution"); ``vjp is None`` marks a non-differentiable op
    (its inputs get zero gradient). ``vmap_rule(prim, inputs, attrs, levels)`` runs the
    kernel on batched tensors (flowgrad/batching.py holds the generic rules, and ``loop``:
    once per example, declared where no rule batches the kernel). Declared with the helpers
    in ``flowgrad.ops._core``.
    """
    __slots__ = ("name", "fwd", "vjp", "multi", "save_y", "view", "cut", "vjp_needs",
                 "strict", "batched_vjp", "ufunc", "expr", "native", "expand", "impure",
                 "vmap_rule", "vmap_boundary", "arg_names", "zero_grad", "__weakref__")

    def __init__(self, name, fwd, *, multi=False, save_y=False, view=False, cut=False,
                 strict=False, batched_vjp=False, ufunc=None, expr=None, native=None,
                 expand=None, impure=False, vmap=None, vmap_boundary=False, zero_grad=False):
        self.name = name          # kernel name, as in TF.js ("Exp", "BatchMatMul")
        self.fwd = fwd
        self.vjp = None
        self.multi = multi        # forward returns a tuple of arrays
        self.save_y = save_y      # the rule reads the outputs (given to it still connected)
        self.view = view          # the output shares the input's buffer (reshape, clone)
        self.cut = cut            # stop_gradient: nothing flows through
        self.vjp_needs = False    # the rule takes ``needs=`` (which inputs want a gradient)
        self.strict = strict      # custom gradients: shapes must match exactly
        # the vjp accepts dy with extra leading (batch) axes: vectorised jacobians
        # (flowgrad/jacobians.py; not tf.vmap, whose rule is vmap_rule)
        self.batched_vjp = batched_vjp
        # fusion forms: the kernel is this backend ufunc (by name) on float inputs, so tf.jit
        # may give it an out= buffer and fuse it; ``expr`` ("{0} + {1}"): it is this Python
        # expression on float operands, which a replay writes inline
        self.ufunc = ufunc
        self.expr = expr
        # its native form (tf.jit(backend="native"), flowgrad/jit_native.py): the kernel on
        # one float element, as a numba expression ("math.exp({0})"; T(c) is the constant c
        # in the operands' dtype), or a function (operands, constants) -> such an expression.
        # Number attributes are named in it ("{0} * {alpha}"), each becoming the literal
        # T(value) (NaN and inf included); a function is called with their values as
        # keywords, (operands, constants, alpha=0.2), and may name them so too. A step with
        # an attribute that is not a number (an int or float, NumPy's too) stays NumPy
        self.native = native
        # a composite kernel's form there instead: ``expand(attrs, n_inputs)`` -> (numbers,
        # steps, results) or None, the kernel as elementwise kernels of the table (an
        # optimizer's fused update: flowgrad/train/fused.py says what the parts are)
        self.expand = expand
        # random or stateful: tf.jit never folds it nor removes it when its result is unused
        self.impure = impure
        # tf.vmap: the batching rule (None: undeclared; it then loops per example, warning),
        # and whether it runs even when no input is batched (tf.vmap's entry and exit)
        self.vmap_rule = vmap
        self.vmap_boundary = vmap_boundary
        # non-differentiable, and TF.js registers a zero gradient for it (tf.get_gradient
        # answers with zeros): Floor, Sign, ArgMax, OnesLike...
        self.zero_grad = zero_grad
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

    def def_vmap(self, rule):
        """Decorator: set the tf.vmap rule of this primitive, ``rule(prim, inputs, attrs,
        levels)`` (see flowgrad/batching.py)."""
        self.vmap_rule = rule
        return rule

    def __repr__(self):
        return f"<primitive {self.name}>"


class Node:
    """A recorded op application: what backprop needs to run the rule of ``prim``."""
    __slots__ = ("prim", "inputs", "attrs", "out", "sess", "nout", "metas", "pos", "site",
                 "__weakref__")     # site: where the user called the op (debug modes only)

    def __repr__(self):
        return f"<node {self.prim.name} of {len(self.inputs)} inputs>"


# ---------------------------------------------------------------- tensors and accounting

def make_tensor(a):
    """Wrap a backend array (one of flowgrad's dtypes) as a new Tensor in the current scope."""
    # NOTE: a KeyboardInterrupt may land at any call or loop back-edge; the counters and the
    # flags that tensor_del reads are set with no call in between, so they always agree
    i = next_id()
    t = _T.__new__(_T)
    t._data = a
    t.shape = a.shape
    t.dtype = dt = DTYPE_NAME[a.dtype]
    t.id = i
    t._node = None
    t._pin = None
    t._buf = None
    st = LOCAL.s
    if st.lite:
        t.kept = LITE
        t._disposed = False
        return t
    st.nt += 1
    st.nb += a.size * ITEM_BYTES[dt]
    st.nbuf += 1
    t.kept = False
    t._disposed = False
    sc = st.scope
    if sc is not None:
        sc.append(t)
    return t


def make_tensor_of(cls, a, shape):
    """A new tensor of class ``cls`` (a Tensor subclass: tf.vmap's BatchedTensor) over the
    array ``a``, with the logical ``shape``: counted and in the current scope, as
    make_tensor's are. The caller sets the subclass's own slots."""
    t = cls.__new__(cls)
    t._data = a
    t.shape = shape
    t.dtype = DTYPE_NAME[a.dtype]
    t.id = next_id()
    t._node = None
    t._pin = None
    account_new(t)
    sc = LOCAL.s.scope
    if sc is not None:
        sc.append(t)
    return t


CONSTANT = 2    # ``kept`` value of internal constants: not counted, never disposed
# ``kept`` value of the tensors a first-order backward pass makes (its rules' results and
# temporaries): not counted and in no scope, so each is freed by reference counting the
# moment the pass lets go of it; the gradients the pass returns are counted then
# (``promote``). Only where nothing outside flowgrad's own rules can see them: see
# tape._backprop for when a pass runs LITE. ``kept >= CONSTANT``: not counted.
LITE = 3


def promote(t):
    """Count a LITE tensor and put it in the current scope, as if made there."""
    if t.kept != LITE:
        return
    st = LOCAL.s
    # (counted and flagged with no call in between: interrupts, see make_tensor)
    st.nt += 1
    st.nb += t._data.size * ITEM_BYTES[t.dtype]
    b = t._buf
    if b is None:
        st.nbuf += 1
    else:                       # (views of it, counted already, share its buffer)
        if b[0] == 0:
            st.nbuf += 1
        b[0] += 1
    t.kept = False
    sc = st.scope
    if sc is not None:
        sc.append(t)


def constant_tensor(a):
    """An internal constant (a literal of an op): immutable, shared, outside accounting."""
    t = _T.__new__(_T)
    t._data = a
    t.shape = a.shape
    t.dtype = DTYPE_NAME[a.dtype]
    t.id = next_id()
    t._node = None
    t._pin = None
    t._buf = None
    t._disposed = False
    t.kept = CONSTANT
    return t


def nbytes(t):
    """Bytes of a tensor's array (any backend: the standard has no ``nbytes``)."""
    return t._data.size * ITEM_BYTES[t.dtype]


def _use_backend(ns, first=False):
    """The active backend changed: kernels get its namespace, and from now on each kernel
    checks that its inputs live on it."""
    global B, _check_types, POOL_MIN
    B = ns
    POOL_MIN = _pool.MIN_ELEMENTS if ns.name == "numpy" else _OFF
    # NOTE: the tables are keyed by flowgrad's DType objects, not their "float32" strings:
    # a DType finds a string key only through DType.__eq__ (a Python call per lookup,
    # several per op), the DType itself on identity. The backend's own table too.
    by_name = {str(d): d for d in dtypes.DTYPES}
    for table in (ITEM_BYTES, ns.dtypes):
        for k in [k for k in table if k in by_name and k is not by_name[k]]:
            table[by_name[k]] = table.pop(k)       # (pop first: an equal key would stay)
    # NOTE: only the active backend's dtypes: other libraries' dtypes may hash alike and
    # warn when compared (array-api-strict's do)
    DTYPE_NAME.clear()
    DTYPE_NAME.update((v, by_name.get(str(k), k)) for k, v in ns.dtypes.items())
    DTYPE_NAME[STRING_DTYPE] = "string"      # string tensors are host data, on every backend
    if not first and (ns.name != "numpy" or _check_types is not None):
        _check_types = ns.array_types


_use_backend(B, first=True)
backends.on_change(_use_backend)


def from_host(arr):
    """A NumPy array as an array of the active backend (the same array on NumPy, a 0-d one
    as its NumPy scalar).

    NOTE: on NumPy a tensor of rank 0 holds a NumPy scalar, as the 0-d kernels' results
    already do: an operator between two scalars costs ~0.07 µs, between a scalar and a 0-d
    array ~1 µs (W5's tiny step: 8% of it), with the same IEEE operation and rounding."""
    if B.name == "numpy":
        return arr[()] if arr.ndim == 0 and type(arr) is np.ndarray else arr
    return B.from_numpy(arr)


_HOST = (np.ndarray, np.generic)


def to_host(a):
    """A backend array as a NumPy array (the same array when it is one already)."""
    if isinstance(a, _HOST):
        return a
    ns = backends.backend_of(a)
    if ns is None:
        raise BackendError(f"an array of type {type(a).__name__} belongs to no backend")
    return ns.to_numpy(a)


def host_view(a):
    """A read-only NumPy view of a backend array (a copy from a GPU): what tf.debug.callback
    hands to Python code, eagerly and from tf.jit's replays."""
    a = to_host(a)
    v = a.view() if isinstance(a, np.ndarray) else np.asarray(a)
    v.flags.writeable = False
    return v


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


def account_new(t, shares=None):
    """Count a tensor built outside make_tensor (variables), using ``shares``'s buffer if
    given, and mark it live: counted and flagged with no call in between (interrupts)."""
    st = LOCAL.s
    if shares is not None:
        b = shares._buf
        if b is None:
            b = shares._buf = [1]
        b[0] += 1
        t._buf = b
    else:
        t._buf = None
        st.nbuf += 1
    st.nt += 1
    st.nb += t._data.size * ITEM_BYTES[t.dtype]
    t.kept = False
    t._disposed = False


def count_buffers(n):
    """Adjust the buffer count by ``n`` (tf.jit hands a variable a fresh buffer)."""
    LOCAL.s.nbuf += n


def share_buffer(src, dst):
    """Record that ``dst`` uses ``src``'s buffer (clone, reshape, variables, assign)."""
    b = src._buf
    if b is None:
        b = src._buf = [1]
    b[0] += 1
    if dst._buf is None:
        LOCAL.s.nbuf -= 1
    else:
        release_buffer(dst)
    dst._buf = b


def release_buffer(t):
    b = t._buf
    if b is None:
        LOCAL.s.nbuf -= 1
    else:
        b[0] -= 1
        if b[0] == 0:
            LOCAL.s.nbuf -= 1


def _uncount(st, t):
    """Take ``t`` out of the counters and mark it disposed, with no call in between (an
    interrupt cannot separate the two)."""
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


def tensor_del(t):
    """Tensor.__del__: un-count a tensor the garbage collector frees (in whatever thread)."""
    try:
        if t._disposed or t.kept >= CONSTANT:
            if t.kept == LITE and t._data.size >= POOL_MIN:
                a = t._data
                t._data = None
                _pool.offer(a)
            return
        st = LOCAL.s
        a = t._data
        n = a.size
        st.nt -= 1
        st.nb -= n * ITEM_BYTES[t.dtype]
        b = t._buf
        if b is None:
            st.nbuf -= 1
        else:
            b[0] -= 1
            if b[0] == 0:
                st.nbuf -= 1
        if n >= POOL_MIN:
            t._data = None
            _pool.offer(a)
    except Exception:  # a partially built tensor, or interpreter shutdown
        pass


# a Ctrl-C landing in tensor_del (CPython swallows it there) is delivered again
finalizer_interrupts.install()


def dispose_tensor(t):
    """Dispose one tensor: count it as gone and free its array (or park it for the live
    sessions that recorded it, see the module doc)."""
    if t._disposed or t.kept >= CONSTANT:
        return
    st = LOCAL.s
    _uncount(st, t)
    n = t._node
    if (t._pin is None and st.session is None and (n is None or not n.sess.alive)
            or not park(t, st)):
        a = t._data
        t._data = None
        if a.size >= POOL_MIN:
            _pool.offer(a)


def kernel_error(prim, inputs, e):
    """A backend failure, as a flowgrad error naming the op and its inputs (never a bare
    NumPy traceback)."""
    for i, t in enumerate(inputs):
        if t.dtype == "string":      # a StringArray refuses numeric work (strings.py)
            name = prim.arg_names[i] if i < len(prim.arg_names) else f"input {i}"
            return DtypeError(f"Argument '{name}' passed to '{prim.name}' must be numeric "
                              f"tensor, but got string tensor ({STRINGS_HINT})")
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
    if LOCAL.s.in_backward and t._data is not None:
        return t._data
    raise DisposedError(
        f"Tensor is disposed. The input of '{prim.name}' (a {t.dtype} tensor of shape "
        f"{tuple(t.shape)}, id {t.id}) was disposed by dispose() or by the tidy() that "
        f"created it; return it from the tidy or call keep() on it to use it later.")


# ---------------------------------------------------------------- the single kernel entry

def run_kernel(prim, inputs, attrs=None):
    """Run ``prim`` on ``inputs`` (a tuple of Tensors): THE way into a backend kernel.

    Returns the output Tensor (a tuple of them for multi-output primitives), recorded for
    backprop when this thread is running a gradient function's forward pass.
    """
    if _check_types is not None:
        _check_inputs(prim, inputs)
    st = LOCAL.s
    q = None if st.in_backward else fpe_saved()
    try:
        if q is not None:
            fpe_put(QUIET)
        if len(inputs) == 1:
            t = inputs[0]
            a = t._data if not t._disposed else disposed_input(t, prim)
            if a.size >= POOL_MIN and prim.ufunc is not None and attrs is None:
                out = _pool.ufunc_out(getattr(B, prim.ufunc), (a,), a)
                if out is None:
                    out = prim.fwd(B, a)
            else:
                out = prim.fwd(B, a) if attrs is None else prim.fwd(B, a, **attrs)
        elif len(inputs) == 2:
            t, u = inputs
            a = t._data if not t._disposed else disposed_input(t, prim)
            b = u._data if not u._disposed else disposed_input(u, prim)
            if (a.size >= POOL_MIN or b.size >= POOL_MIN) and prim.ufunc is not None and \
                    attrs is None:
                out = _pool.ufunc_out(getattr(B, prim.ufunc), (a, b),
                                      a if a.size >= b.size else b)
                if out is None:
                    out = prim.fwd(B, a, b)
            else:
                out = prim.fwd(B, a, b) if attrs is None else prim.fwd(B, a, b, **attrs)
        else:
            arrays = [x._data if not x._disposed else disposed_input(x, prim) for x in inputs]
            out = prim.fwd(B, *arrays) if attrs is None else prim.fwd(B, *arrays, **attrs)
    except FlowgradError:
        raise
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise kernel_error(prim, inputs, e) from e
    finally:
        if q is not None:
            fpe_put(q)
    if prim.multi:
        return _multi_out(st, prim, inputs, attrs, out)
    shared = prim.view and B.may_share_memory(out, inputs[0]._data)
    # make_tensor, inlined: this is the hottest path of the library (same interrupt care)
    i = next_id()
    y = _T.__new__(_T)
    y._data = out
    y.shape = out.shape
    y.dtype = dt = DTYPE_NAME[out.dtype]
    y.id = i
    y._node = None
    y._pin = None
    if st.lite and not shared:      # (a view keeps buffer accounting: counted as usual)
        y._buf = None
        y.kept = LITE
        y._disposed = False
        return y
    st.nt += 1
    st.nb += out.size * ITEM_BYTES[dt]
    if shared:
        src = inputs[0]
        b = src._buf
        if b is None:
            # the record counts the buffer's counted holders: a LITE tensor or a constant
            # holds its buffer uncounted, and then the view is the buffer's first count
            b = src._buf = [0 if src.kept >= CONSTANT else 1]
        if b[0] == 0:
            st.nbuf += 1
        b[0] += 1
        y._buf = b
    else:
        y._buf = None
        st.nbuf += 1
    y.kept = False
    y._disposed = False
    sc = st.scope
    if sc is not None:
        sc.append(y)
    if st.recording and inputs:
        sess = st.session
        n = Node()
        n.prim = prim
        n.inputs = inputs
        n.attrs = attrs
        n.out = out if prim.save_y else None
        n.nout = 1
        n.sess = sess
        nodes = sess.nodes
        n.pos = len(nodes)
        nodes.append(n)
        y._node = n
    return y


def _multi_out(st, prim, inputs, attrs, out):
    ys = tuple([make_tensor(o) for o in out])
    if st.recording and inputs:
        sess = st.session
        n = Node()
        n.prim = prim
        n.inputs = inputs
        n.attrs = attrs
        n.out = tuple(out) if prim.save_y else None
        n.nout = len(ys)
        n.metas = tuple((o.shape, y.dtype) for o, y in zip(out, ys))
        n.sess = sess
        n.pos = len(sess.nodes)
        sess.nodes.append(n)
        for i, y in enumerate(ys):
            y._node = n
            y._idx = i
    return ys


on_record = None        # debug seam: fn(node) for nodes recorded outside run_kernel


def record(prim, inputs, outputs, attrs=None):
    """Record an already computed application (custom gradients); returns the node or None.
    (Its rule's saved tensors live in ``attrs``: a custom gradient's rule reads only what
    its forward kept, and what it kept is the user's to keep alive.)"""
    st = LOCAL.s
    if not st.recording or not inputs:
        return None
    sess = st.session
    n = Node()
    n.prim = prim
    n.inputs = tuple(inputs)
    n.attrs = attrs
    n.out = None
    n.nout = 1
    n.metas = ((outputs.shape, outputs.dtype),)     # (what the graph shows of it)
    n.sess = sess
    n.pos = len(sess.nodes)
    sess.nodes.append(n)
    outputs._node = n
    if on_record is not None:
        on_record(n)
    return n
