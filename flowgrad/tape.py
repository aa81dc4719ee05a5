"""Backprop over the recorded graph: x -> y path filtering, the gradient sweep, and the one
place where gradients are un-broadcast to their input's shape and dtype.

Nodes hang off the tensors they produced (``t._node``). Backprop walks from y to the inputs,
keeping only nodes of the current session that depend on some x (TF.js's tape filtering),
then runs their rules in reverse topological order. Rules are written with flowgrad ops, so
when an outer gradient function is recording, this sweep is itself recorded: higher order.
Saved outputs are handed to rules as fresh tensors attached to the same node, so they stay
connected to the inputs (TF.js hands out disconnected clones and loses exp'', tanh'' ...).
"""
import threading
import weakref

from . import dtypes
from . import engine as E
from . import recording
from . import interceptors
from .interceptors import ENGINE_MAKE as _MAKE_TENSOR, ENGINE_RUN as _RUN_KERNEL
from .errors import GradientError, ShapeError
from .thread_state import next_id

Node = E.Node

# flowgrad ops used by the sweep; bound by flowgrad.ops once the op table exists
_ops = None

# Debugging seams (flowgrad.debug). Empty or None unless a debug feature is on, so the sweep
# pays one truthiness test per node for them.
node_hooks = weakref.WeakKeyDictionary()   # node -> {output index: [fn]}: tensor.register_hook
# True once a node hook was ever registered; then each pass reads the table itself (a weak
# dict's len() is a Python call: one a pass, never one a node).
# NOTE: only ever set, never reset: a pass in another thread that reset it on seeing the
# table empty could do so between a register_hook's write to the table and its write of
# the flag, and the registering thread's next pass skipped its hook (1% of passes with a
# second thread running backward passes; tests/test_engine_state.py)
any_node_hooks = False
source_hooks = {}                          # id(x) -> (weakref to x, [fn]): tf.debug.on_gradient
# (the debug tools that watch every gradient of a sweep: interceptors.watch, read once a pass)


# Seeds of ones (grad's default dy) while their backward pass runs, and the ones rules
# made of them (sum's gradient spreads a seed of ones into ones): id -> tensor. A rule may
# use 1·b = b (exact in IEEE) to skip a kernel (mul's does); the pass then hands back a
# clone of any gradient that is an older tensor (an alias of x, a constant, a variable).
units = {}
_made_units = threading.local()     # per thread: ids a rule marked, dropped with the pass


def is_unit(t):
    """True if ``t`` is a seed of ones whose backward pass is running (or ones a rule made
    of one)."""
    return units.get(id(t)) is t


def mark_unit(t):
    """A rule's result that is all ones because its dy was (``is_unit``): a unit too, until
    the pass ends."""
    lst = getattr(_made_units, "ids", None)
    if lst is None:
        lst = _made_units.ids = []
    units[id(t)] = t
    lst.append(id(t))


def bind_ops(ns):
    """Give the sweep the ops it needs (add, cast, sum, reshape, zeros)."""
    global _ops
    _ops = ns


def _shape_str(shape):
    return str(tuple(shape))


def input_name(prim, i):
    names = prim.arg_names
    if prim.strict or i >= len(names) or names[0] in ("tensors", "args"):
        return f"input {i}" if prim.strict else str(i)
    return names[i]


def unbroadcast(dx, shape, prim=None, i=0, nlead=0):
    """Sum ``dx`` over the axes along which an input of ``shape`` was broadcast (keeping the
    first ``nlead`` batch axes of a vectorised backward pass)."""
    dshape = dx.shape
    lead = len(dshape) - len(shape) - nlead
    ok = lead >= 0
    axes = list(range(nlead, nlead + lead)) if ok else []
    if ok:
        for k, s in enumerate(shape):
            d = dshape[k + lead + nlead]
            if s == d:
                continue
            if s == 1:
                axes.append(k + lead + nlead)
            else:
                ok = False
                break
    if not ok:
        op = prim.name if prim is not None else "?"
        raise GradientError(
            f"Error in gradient for op {op}. The gradient of input "
            f"'{input_name(prim, i) if prim is not None else i}' has shape "
            f"{_shape_str(dshape[nlead:])}, which does not match the shape of the input "
            f"{_shape_str(shape)}")
    if axes:
        dx = _ops.sum(dx, tuple(axes))
    target = tuple(dshape[:nlead]) + tuple(shape)
    if dx.shape != target:
        dx = _ops.reshape(dx, target)
    return dx


def _fix_grad(dx, t, n, i, lead=(), settle=None):
    """Bring a rule's gradient to the input's shape and gradient dtype (or explain why not).
    ``lead``: the batch axes of a vectorised pass, kept in front. ``settle``: in a pass over
    tf.vmap nodes, sums out the vmap levels that dx carries and t does not (see backprop)."""
    prim = n.prim
    if settle is not None:
        dx = settle(dx, t)
    if not isinstance(dx, E.tensor_class()):
        if prim.strict:
            raise GradientError(
                "The function f passed in custom_grad(f) must return an object where "
                "`obj.grad_func` is a function that returns a list of only tensors "
                f"(got {type(dx).__name__} for input {i}).")
        dx = _ops.tensor(dx, dtype=dtypes.grad_dtype(t.dtype))
    if dx.shape != lead + t.shape:
        if prim.strict:
            raise GradientError(
                f"Error in gradient for op {_op_label(n)}. The gradient of input '{i}' has "
                f"shape {_shape_str(dx.shape)}, which does not match the shape of the input "
                f"{_shape_str(t.shape)}. A custom gradient must return one gradient per "
                f"input, each with its input's shape (sum over broadcast axes yourself).")
        dx = unbroadcast(dx, t.shape, prim, i, len(lead))
    want = dtypes.grad_dtype(t.dtype)
    if dx.dtype is not want and dx.dtype != want:
        if prim.strict and not dtypes.is_float(dx.dtype):
            raise GradientError(
                f"Error in gradient for op {_op_label(n)}. The gradient of input {i} must "
                f"have a float dtype ('{want}'), but has '{dx.dtype}'")
        dx = _ops.cast(dx, want)
    return dx


def _op_label(n):
    return (n.attrs or {}).get("name") or n.prim.name


def _saved_outputs(n):
    """Outputs of ``n`` for its rule: fresh tensors attached to ``n`` (so still connected)."""
    if type(n) is not E.Node:
        return n.saved_outputs()            # (a batched node: batched tensors)
    if not n.prim.multi:
        y = E.make_tensor(n.out)
        y._node = n
        return (y,)
    ys = []
    for i, o in enumerate(n.out):
        y = E.make_tensor(o)
        y._node = n
        y._idx = i
        ys.append(y)
    return tuple(ys)


def walk(y, src, sess):
    """Nodes between the sources and y, in topological order, and the sources y reaches.

    ``src`` maps id(x) -> x. A node is kept when some input is a source or comes from a kept
    node; ``needs[node]`` tells which of its inputs want a gradient. Non-differentiable nodes
    connect (their inputs get zero gradient) but are not kept; stop_gradient nodes cut.

    Nodes sit in the session in recording order, which is topological: one sweep down from
    y collects its ancestors, one sweep up marks what depends on the sources (TF.js's tape
    filtering, restricted to y's ancestors).
    """
    seen = set()
    order = []
    needs = {}
    if id(y) in src:
        seen.add(id(y))
        return order, seen, needs
    yn = y._node
    if yn is None or yn.sess is not sess:
        return order, seen, needs
    nodes = sess.nodes
    live = {yn}
    ancestors = []
    for i in range(yn.pos, -1, -1):
        n = nodes[i]
        if n not in live:
            continue
        ancestors.append(n)
        if n.prim.cut:
            continue
        for t in n.inputs:
            if id(t) not in src:
                m = t._node
                if m is not None and m.sess is sess:
                    live.add(m)
    dep = set()
    for n in reversed(ancestors):
        if n.prim.cut:
            continue
        want = []
        for t in n.inputs:
            k = id(t)
            if k in src:
                seen.add(k)
                want.append(True)
            else:
                want.append(t._node in dep)
        if n.prim.vjp is not None and True in want:
            dep.add(n)
            order.append(n)
            needs[n] = tuple(want)
    return order, seen, needs


class NotBatchable(Exception):
    """A node's rule cannot take batched cotangents (the caller loops instead)."""


_batching = None    # (activate, deactivate, settler) for sessions with vmap nodes: bind_batching


def bind_batching(activate, deactivate, settler):
    """Give the sweep tf.vmap's batching (flowgrad/vmap.py and batching.py, which sit above):
    a session that recorded batched nodes runs its rules with the batched kernel entry on.

    ``settler(y, dy)`` returns the pass's ``settle(dx, t)``. A tensor that a vmapped function
    uses without batching it (a closed-over weight) is broadcast over the examples; when the
    gradient is taken outside that vmap, its gradient arrives batched over a vmap level that
    has ended and must be summed over the examples (JAX: the transpose of a broadcast). The
    levels of y and of its seed dy stay: a gradient taken inside vmap is per example."""
    global _batching
    _batching = (activate, deactivate, settler)


def backprop(y, dy, xs, sess, batch=False, unit=False):
    """Gradients of y (seeded with dy) with respect to each tensor of ``xs``.

    Returns ``(grads, connected)``: grads[i] is a Tensor or None (no gradient reached it),
    connected[i] tells whether xs[i] lies on some path to y at all.

    ``batch=True``: dy carries one extra leading axis (a batch of cotangents, e.g. the rows
    of an identity for a jacobian), and every gradient keeps it. Raises NotBatchable, before
    computing anything, if some rule on the path cannot take a batch.

    ``unit=True``: dy is all ones and made for this call (see ``units``).
    """
    if unit and not batch:
        return _unit_backprop(y, dy, xs, sess)
    if sess is not None and sess.batched:   # nodes recorded inside tf.vmap: batch the rules
        h = _batching
        h[0]()
        try:
            return _backprop(y, dy, xs, sess, batch, h[2](y, dy))
        finally:
            h[1]()
    return _backprop(y, dy, xs, sess, batch)


def _unit_backprop(y, dy, xs, sess):
    start = next_id()
    k = id(dy)
    made = getattr(_made_units, "ids", None)
    if made is None:
        made = _made_units.ids = []
    mark = len(made)
    try:
        units[k] = dy
        grads, connected = backprop(y, dy, xs, sess)
    finally:
        units.pop(k, None)
        while len(made) > mark:         # (a nested pass keeps what the outer one marked)
            units.pop(made.pop(), None)
    for i, g in enumerate(grads):
        # an older tensor (or the shared constant seed of a scalar): a new one
        if g is not None and g.id < start and (g is not dy or dy.kept >= E.CONSTANT):
            grads[i] = _ops.clone(g)
    return grads, connected


def _backprop(y, dy, xs, sess, batch, settle=None):
    hooks = any_node_hooks and len(node_hooks) > 0      # (this pass's own reading)
    dx_hook = interceptors.dx_hook             # (one reading a pass: a watch may come meanwhile)
    if interceptors.y_hook is not None:
        interceptors.y_hook(y)
    src = {}
    for x in xs:
        src[id(x)] = x
    order, seen, needs = walk(y, src, sess)
    lead = ()
    if batch:
        for n in order:
            if not n.prim.batched_vjp:
                raise NotBatchable(n.prim.name)
        lead = dy.shape[:1]
    gsrc = {}
    if id(y) in src:
        gsrc[id(y)] = dy
    elif order:
        yn = y._node
        # a multi-output op's rule takes a list of dys even when it made one output
        # (split into one piece): prim.multi decides, never nout
        if not yn.prim.multi:
            grads = {yn: dy}
        else:
            lst = [None] * yn.nout
            lst[y._idx] = dy
            grads = {yn: lst}
        level = recording.backward_level()
        lite = recording.is_lite()
        try:
            recording.enter_backward()
            # LITE (engine.LITE): in a first-order pass whose tensors only flowgrad's rules
            # see (nobody records them, no hook, seam, tracer or batch), each is freed the
            # moment the pass drops it: no accounting, no scope, and the peak memory of a
            # chain's backward is a few gradients, not one per op
            on = (not recording.is_recording() and not lead and not hooks and
                  dx_hook is None and E.run_kernel is _RUN_KERNEL and
                  E.make_tensor is _MAKE_TENSOR)
            recording.set_lite(on)
            _sweep(order, grads, gsrc, src, needs, lead, hooks, dx_hook, on, settle)
        finally:
            try:
                recording.exit_backward(level, lite)
            except BaseException:   # (interrupted on the way out: see engine.tidy)
                recording.exit_backward(level, lite)
                raise
        T = E.tensor_class()
        for g in gsrc.values():         # the gradients handed out are counted tensors
            if type(g) is T and g.kept == E.LITE:
                E.promote(g)
    if source_hooks:
        for k in list(gsrc):
            entry = source_hooks.get(k)
            if entry is not None and entry[0]() is src.get(k):
                gsrc[k] = _run_hooks(entry[1], gsrc[k])
    out = [gsrc.get(id(x)) for x in xs]
    connected = [id(x) in seen for x in xs]
    return out, connected


def _run_hooks(fns, g):
    tr = interceptors.tracer
    if tr is not None and tr.traces_this_thread():
        # a replay would run no hook: this signature of the jitted function stays eager
        return tr.untraced(_call_hooks, fns, g)
    return _call_hooks(fns, g)


def _call_hooks(fns, g):
    for fn in list(fns):
        r = fn(g)
        if r is not None:
            if not isinstance(r, E.tensor_class()) or r.shape != g.shape:
                site = getattr(fn, "site", None)
                raise GradientError(f"A gradient hook must return None or a tensor of the "
                                    f"gradient's shape {g.shape}, got "
                                    f"{getattr(r, 'shape', type(r).__name__)}"
                                    + (f" (the hook registered at {site})" if site else ""))
            g = r
    return g


def _count_error(prim, ins, r):
    if prim.strict:
        return GradientError(
            "The function f passed in custom_grad(f) must return an object where "
            "`obj.grad_func` is a function that returns the same number of tensors "
            f"as inputs passed to f(...): {len(ins)} inputs, but grad_func returned "
            f"{len(r) if isinstance(r, (list, tuple)) else 1}.")
    return GradientError(f"The gradient rule of {prim.name} returned {type(r).__name__}, "
                         f"expected {len(ins)} gradients.")


def _sweep(order, grads, gsrc, src, needs, lead=(), hooks=False, dx_hook=None, lite=False,
           settle=None):
    # NOTE: no module global is written here: in CPython 3.11+ a STORE_GLOBAL invalidates
    # the module's cached global lookups
    add = _ops.add
    T = E.tensor_class()
    for n in reversed(order):
        g = grads.pop(n, None)
        if g is None:
            continue
        if hooks and n in node_hooks:
            g = _node_hook(n, g)
        prim = n.prim
        if prim.multi:
            g = [gi if gi is not None else _ops.zeros(lead + shape, dt)
                 for gi, (shape, dt) in zip(g, n.metas)]
        ins = n.inputs
        if not prim.save_y:
            args = ins
        elif prim.multi or type(n) is not Node:
            args = ins + _saved_outputs(n)
        else:                   # (_saved_outputs, inlined for the common one-output case)
            y = E.make_tensor(n.out)
            y._node = n
            args = ins + (y,)
        want = needs[n]
        attrs = n.attrs
        if prim.strict and lite:
            r = _user_rule(prim, g, args, attrs)
        elif prim.vjp_needs:
            r = (prim.vjp(g, *args, needs=want, **attrs) if attrs
                 else prim.vjp(g, *args, needs=want))
        else:
            r = prim.vjp(g, *args, **attrs) if attrs else prim.vjp(g, *args)
        if type(r) is not tuple and type(r) is not list:
            if len(ins) != 1:
                raise _count_error(prim, ins, r)
            r = (r,)
        elif len(r) != len(ins):
            raise _count_error(prim, ins, r)
        for i, t in enumerate(ins):
            dx = r[i]
            if dx is None or not want[i]:
                continue
            if type(dx) is not T or (dx.dtype is not t.dtype and dx.dtype != t.dtype) or \
                    dx.shape != (lead + t.shape if lead else t.shape):
                dx = _fix_grad(dx, t, n, i, lead, settle)
            if dx_hook is not None:
                dx = dx_hook(n, i, t, dx, g)
            k = id(t)
            if k in src:
                old = gsrc.get(k)
                gsrc[k] = dx if old is None else add(old, dx)
                continue
            m = t._node
            if not m.prim.multi:
                old = grads.get(m)
                grads[m] = dx if old is None else add(old, dx)
            else:
                lst = grads.get(m)
                if lst is None:
                    lst = grads[m] = [None] * m.nout
                j = t._idx
                lst[j] = dx if lst[j] is None else add(lst[j], dx)


def _user_rule(prim, g, args, attrs):
    """A custom gradient's function (user code, which may keep what it is given) in a LITE
    pass: it gets counted tensors and makes counted ones, as anywhere else."""
    E.promote(g)
    recording.set_lite(False)
    try:
        return prim.vjp(g, *args, **attrs) if attrs else prim.vjp(g, *args)
    finally:
        recording.set_lite(True)


def _node_hook(n, g):
    hooks = node_hooks.get(n) or {}        # (another thread may remove() it meanwhile)
    if not n.prim.multi:
        return _run_hooks(hooks.get(0, ()), g)
    return [gi if gi is None or j not in hooks else _run_hooks(hooks[j], gi)
            for j, gi in enumerate(g)]


def check_dy_shape(dy_shape, y_shape, prefix):
    if tuple(dy_shape) != tuple(y_shape):
        raise ShapeError(f"{prefix} Shapes {_shape_str(dy_shape)} and {_shape_str(y_shape)} "
                         f"must match")
