"""Batched tensors and batching rules: what ``tf.vmap`` runs on (flowgrad/vmap.py).

A ``BatchedTensor`` is one tensor per example, stored as one array: its ``_data`` has a
leading axis per active vmap level it carries (``_levels``, ascending: outer vmaps first),
then the per-example (logical) shape, which is what ``shape`` says. Code inside ``vmap``
(the user's, and the gradient rules, which are written with flowgrad ops) sees only logical
shapes; each kernel is run once on the whole batch by the primitive's batching rule:
elementwise kernels broadcast over the batch axes, reductions and shape ops get their axes
shifted past them, and a primitive declared to loop (``loop``) runs once per example (a
Python loop, with a one-time warning naming it). Every kernel call goes through
``run_batched`` while a vmap is active or a backward pass walks batched nodes, which the
engine's kernel seam routes here (``E.run_kernel`` is wrapped, as tf.jit and the debug
seams do: flowgrad/interceptors.py): nothing is paid otherwise.

Each primitive declares its rule in its family file, beside its gradient (``vmap=`` or
``@prim.def_vmap``; ``unary``/``binary`` give elementwise ops theirs): this module holds the
generic rules they pick from and knows no op by name, so it sits below the op table.
"""
import itertools
import threading

import numpy as np

from .after_fork import renew_after_fork
from . import engine as E
from . import float_errors
from . import interceptors
from . import user_frames
from .errors import FlowgradError
from .recording import current_session
from .tensor import Tensor


class VmapError(FlowgradError):
    """A tf.vmap misuse: mismatched batch sizes, a bad in_axes/out_axes, or reading the
    values of a batched tensor inside the vmapped function."""


class BatchedTensor(Tensor):
    """Inside ``tf.vmap``: one tensor per example (see the module docstring)."""
    __slots__ = ("_levels",)

    def _array(self):
        site = user_frames.capture(2)
        if site is None or user_frames.is_op_name(site.op):
            # an op checking its inputs' values (index bounds, non-negative counts): every
            # example's values at once are what it must check
            return self._data
        raise VmapError(
            f"tf.vmap: the function reads the values of a batched tensor (item(), numpy(), "
            f"print, bool(), a NumPy function...), which differ per example. Compute with "
            f"flowgrad ops, or return the tensor from the vmapped function and read it "
            f"afterwards. (A {self.dtype} tensor of per-example shape {self.shape}, batched "
            f"over {len(self._levels)} vmap level(s).)")

    def _rewrap(self):
        return make_batched(self._data, self._levels)

    def __repr__(self):
        return (f"<BatchedTensor shape={list(self.shape)} dtype={self.dtype} "
                f"batch={list(self._data.shape[:len(self._levels)])}>")


class BatchedNode(E.Node):
    """A recorded kernel run on batched tensors (its saved outputs are batched again)."""
    __slots__ = ("levels",)

    def saved_outputs(self):
        outs = self.out if self.prim.multi else (self.out,)
        ys = []
        for i, o in enumerate(outs):
            y = make_batched(o, self.levels)
            y._node = self
            if self.prim.multi:
                y._idx = i
            ys.append(y)
        return tuple(ys)


def make_batched(a, levels):
    """A BatchedTensor over the physical array ``a`` (len(levels) leading batch axes); a
    plain tensor when ``levels`` is empty."""
    if not levels:
        return E.make_tensor(a)
    t = E.make_tensor_of(BatchedTensor, a, a.shape[len(levels):])
    t._levels = levels
    return t


def levels_of(t):
    return t._levels if type(t) is BatchedTensor else ()


# ---------------------------------------------------------------- physical arrays

def physical(t, levels, rank=None):
    """``t``'s array with a leading axis per level of ``levels`` (size 1 where ``t`` is
    not batched over it), then ``rank - t.rank`` axes of size 1, then its logical shape:
    ready to broadcast against the other inputs."""
    a = t._data
    mine = levels_of(t)
    extra = 0 if rank is None else rank - len(t.shape)
    if mine == levels and not extra:
        return a
    batch = iter(a.shape[:len(mine)])
    shape = tuple(next(batch) if lv in mine else 1 for lv in levels) + (1,) * extra + \
        tuple(t.shape)
    return a.reshape(shape)


def sizes_of(inputs, levels):
    """{level: batch size} from the inputs that carry each level."""
    out = {}
    for t in inputs:
        mine = levels_of(t)
        for k, lv in enumerate(mine):
            out.setdefault(lv, t._data.shape[k])
    return tuple(out[lv] for lv in levels)


def full(t, levels, sizes, rank=None):
    """``physical``, broadcast to the full batch sizes (for kernels that do not broadcast:
    concatenation, stacking...)."""
    a = physical(t, levels, rank)
    want = tuple(sizes) + a.shape[len(levels):]
    return a if a.shape == want else np.broadcast_to(a, want)


def shift(a, nb):
    """A logical axis as a physical one: past the ``nb`` batch axes (a negative axis counts
    from the end, where batch axes change nothing: some kernels rely on that)."""
    a = int(a)
    return a if a < 0 else a + nb


# ---------------------------------------------------------------- the kernel seam

_inner = None               # the run_kernel the batched one wraps (engine's, or a seam's)
# active vmaps and backward passes over batched nodes (tf.jit's call reads it: no call frame)
users = 0
_lock = threading.Lock()
renew_after_fork(globals(), "_lock", threading.Lock)     # (flowgrad/after_fork.py)
_warned = set()


def activate():
    """Route every kernel call through run_batched (nestable; see deactivate)."""
    global users
    with _lock:
        if users == 0:
            interceptors.set_layer("batch", run_batched, link=_link)
        users += 1


def active():
    """True while some vmap or backward pass over batched nodes is routing kernels here."""
    return users != 0


def deactivate():
    global _inner, users
    with _lock:
        users -= 1
        if users == 0:
            interceptors.set_layer("batch", None)
            _inner = None


def _link(run, make):
    global _inner
    _inner = run        # what lies below batching: the tracer, a debug seam or the engine


_ENGINE_RUN = interceptors.ENGINE_RUN      # the engine's own entry (a fallback no swap can loop on)


def inner_run(prim, inputs, attrs=None):
    """The kernel seam under the batched one (what runs unbatched kernels)."""
    f = _inner
    if f is None or f is run_batched:       # (a seam restored out of order: never loop)
        f = _ENGINE_RUN
    return f(prim, inputs, attrs)


def run_batched(prim, inputs, attrs=None):
    """E.run_kernel while batching: unbatched inputs go through unchanged; batched ones
    through the primitive's batching rule, recorded as one node on the batched tensors."""
    levels = ()
    for t in inputs:
        if type(t) is BatchedTensor:
            lv = t._levels
            if lv != levels:
                levels = lv if not levels else tuple(sorted(set(levels) | set(lv)))
    if not levels and not prim.vmap_boundary:
        return inner_run(prim, inputs, attrs)
    rule = prim.vmap_rule
    for t in inputs:
        if t._disposed:
            E.disposed_input(t, prim)
    if rule is None or rule is loop:
        rule = loop
        if prim.name not in _warned:
            _warned.add(prim.name)
            user_frames.warn(f"tf.vmap: the kernel {prim.name} has no batching rule; it runs "
                             f"once per example (a Python loop)", VmapFallbackWarning)
    kw = attrs or {}
    q = float_errors.fpe_saved()
    try:
        float_errors.fpe_quiet()
        out = rule(prim, inputs, kw, levels)
    except FlowgradError:
        raise
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise E.kernel_error(prim, inputs, e) from e
    finally:
        float_errors.fpe_restore(q)
    if isinstance(out, Phys):
        out, levels = out.arrays, out.levels
    outs = out if prim.multi else (out,)
    ys = tuple(make_batched(o, levels) for o in outs)
    sess = current_session()
    if sess is not None and inputs:
        n = BatchedNode()
        n.prim = prim
        n.inputs = tuple(inputs)
        n.attrs = attrs
        n.out = (tuple(outs) if prim.multi else outs[0]) if prim.save_y else None
        n.nout = len(ys)
        n.metas = tuple((y.shape, y.dtype) for y in ys)
        n.sess = sess
        n.pos = len(sess.nodes)
        n.levels = levels
        sess.nodes.append(n)
        sess.batched = True
        if E.on_record is not None:         # (debug sites: where the user called the op)
            E.on_record(n)
        for i, y in enumerate(ys):
            y._node = n
            if prim.multi:
                y._idx = i
    out = ys if prim.multi else ys[0]
    checkers = interceptors.CHECKERS
    if checkers:                            # (check_numerics, leak tracking: as in eager)
        for check in list(checkers):
            check(prim, inputs, attrs, out)
    return out


class VmapFallbackWarning(UserWarning):
    """A kernel without a batching rule ran once per example inside tf.vmap."""


class Phys:
    """A rule's outputs when their batch levels differ from the inputs' union."""
    __slots__ = ("arrays", "levels")

    def __init__(self, arrays, levels):
        self.arrays, self.levels = arrays, levels


# ---------------------------------------------------------------- rules

# The generic rules the family files declare their primitives with (``vmap=``), and
# ``loop``, the declared "once per example". A rule returns the output array(s) with the
# union of the inputs' levels as leading axes (or a Phys when they differ).

def _fwd(prim, arrays, attrs):
    return prim.fwd(E.B, *arrays, **attrs)


def elementwise(prim, inputs, attrs, levels):
    rank = max(len(t.shape) for t in inputs)
    return _fwd(prim, [physical(t, levels, rank) for t in inputs], attrs)


def same_shape(prim, inputs, attrs, levels):
    """Elementwise kernels that want equal shapes (add_n)."""
    sizes = sizes_of(inputs, levels)
    rank = max(len(t.shape) for t in inputs)
    arrays = np.broadcast_arrays(*[full(t, levels, sizes, rank) for t in inputs])
    return _fwd(prim, arrays, attrs)


def leading(prim, inputs, attrs, levels):
    """Kernels that act on trailing axes only and take batch axes as they come."""
    return _fwd(prim, [physical(t, levels) for t in inputs], attrs)


def reduce(prim, inputs, attrs, levels):
    x, nb = inputs[0], len(levels)
    axes = attrs.get("axes")
    if axes is None:
        axes = tuple(range(len(x.shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    kw = dict(attrs, axes=tuple(shift(a, nb) for a in axes))
    return _fwd(prim, [physical(x, levels)], kw)


def axis_rule(name="axis", full_batch=False):
    """Kernels with an axis attribute, shifted past the batch axes."""
    def rule(prim, inputs, attrs, levels):
        nb = len(levels)
        kw = dict(attrs)
        a = attrs.get(name, 0)
        if isinstance(a, (tuple, list)):
            kw[name] = tuple(shift(v, nb) for v in a)
        elif a is not None:
            kw[name] = shift(a, nb)
        if full_batch:
            sizes = sizes_of(inputs, levels)
            arrays = [full(t, levels, sizes) for t in inputs]
        else:
            arrays = [physical(t, levels) for t in inputs]
        return _fwd(prim, arrays, kw)
    return rule


def reshape(prim, inputs, attrs, levels):
    x = inputs[0]
    sizes = sizes_of(inputs, levels)
    return _fwd(prim, [full(x, levels, sizes)], dict(attrs, shape=tuple(sizes) +
                                                      tuple(attrs["shape"])))


def transpose(prim, inputs, attrs, levels):
    nb = len(levels)
    perm = attrs.get("perm")
    if perm is None:
        perm = tuple(reversed(range(len(inputs[0].shape))))
    kw = dict(attrs, perm=tuple(range(nb)) + tuple(int(p) + nb for p in perm))
    return _fwd(prim, [physical(inputs[0], levels)], kw)


def tile(prim, inputs, attrs, levels):
    kw = dict(attrs, reps=(1,) * len(levels) + tuple(attrs["reps"]))
    return _fwd(prim, [physical(inputs[0], levels)], kw)


def broadcast_to(prim, inputs, attrs, levels):
    x = inputs[0]
    shape = tuple(attrs["shape"])
    a = physical(x, levels, len(shape))
    return _fwd(prim, [a], dict(attrs, shape=a.shape[:len(levels)] + shape))


def slice_(prim, inputs, attrs, levels):
    x = inputs[0]
    a = physical(x, levels)
    nb = len(levels)
    kw = dict(attrs, begin=(0,) * nb + tuple(attrs["begin"]),
              size=tuple(a.shape[:nb]) + tuple(attrs["size"]))
    return _fwd(prim, [a], kw)


def pad(prim, inputs, attrs, levels):
    kw = dict(attrs, paddings=((0, 0),) * len(levels) + tuple(map(tuple,
                                                                    attrs["paddings"])))
    return _fwd(prim, [physical(inputs[0], levels)], kw)


def gather(prim, inputs, attrs, levels):
    x, idx = inputs
    if levels_of(idx) or attrs.get("batch_dims", 0):
        return loop(prim, inputs, attrs, levels)
    kw = dict(attrs, axis=shift(attrs.get("axis", 0), len(levels)))
    return _fwd(prim, [physical(x, levels), idx._data], kw)


def strided_slice(prim, inputs, attrs, levels):
    nb = len(levels)
    key = (slice(None),) * nb + tuple(attrs["key"])
    return _fwd(prim, [physical(inputs[0], levels)], dict(attrs, key=key))


def strided_slice_grad(prim, inputs, attrs, levels):
    nb = len(levels)
    a = physical(inputs[0], levels)
    return _fwd(prim, [a], dict(attrs, key=(slice(None),) * nb + tuple(attrs["key"]),
                                shape=a.shape[:nb] + tuple(attrs["shape"])))


def mat_mul(prim, inputs, attrs, levels):
    a, b = inputs
    rank = max(len(a.shape), len(b.shape))
    pa, pb = physical(a, levels, rank), physical(b, levels, rank)
    k = a.shape[-2] if attrs.get("transpose_a") else a.shape[-1]
    if k == 1:
        # NOTE: an outer product (per-example weight gradients x^T dy): a broadcast product
        # gives the same numbers (one term per sum) at twice batched matmul's speed
        if attrs.get("transpose_a"):
            pa = np.swapaxes(pa, -1, -2)
        if attrs.get("transpose_b"):
            pb = np.swapaxes(pb, -1, -2)
        return np.multiply(pa, pb)
    return _fwd(prim, [pa, pb], attrs)


def merge_n(*lead):
    """Kernels over a leading logical batch axis N (NHWC convolutions, pooling, resizing):
    the vmap axes fold into N when only the inputs ``lead`` are batched."""
    def rule(prim, inputs, attrs, levels):
        if any(levels_of(t) for i, t in enumerate(inputs) if i not in lead):
            return loop(prim, inputs, attrs, levels)
        sizes = sizes_of(inputs, levels)
        many = int(np.prod(sizes))
        arrays = []
        for i, t in enumerate(inputs):
            if i in lead:
                a = full(t, levels, sizes)
                arrays.append(a.reshape((many * t.shape[0],) + tuple(t.shape[1:])))
            else:
                arrays.append(t._data)
        out = _fwd(prim, arrays, attrs)
        outs = out if prim.multi else (out,)
        back = tuple(o.reshape(tuple(sizes) + (o.shape[0] // many,) + o.shape[1:])
                     for o in outs)
        return back if prim.multi else back[0]
    return rule


def loop(prim, inputs, attrs, levels):
    """Once per example: slice every input, run the kernel, stack the outputs. Declared
    (``vmap=loop``) by the kernels that no rule batches yet, which then warn once, and what
    a rule falls back to where it does not apply."""
    sizes = sizes_of(inputs, levels)
    arrays = [physical(t, levels) for t in inputs]
    results = []
    for index in itertools.product(*map(range, sizes)):
        one = [a[tuple(i if a.shape[k] != 1 else 0 for k, i in enumerate(index))]
               for a in arrays]
        results.append(_fwd(prim, one, attrs))
    if prim.multi:
        return tuple(np.stack([r[j] for r in results]).reshape(sizes + results[0][j].shape)
                     for j in range(len(results[0])))
    first = np.asarray(results[0])
    return np.stack([np.asarray(r) for r in results]).reshape(sizes + first.shape)


def takes_no_tensors(prim, inputs, attrs, levels):
    """The rule of a kernel that takes no tensor inputs (creation, random numbers): nothing
    of it can be batched, so run_batched never calls this (its declaration says so)."""
    raise AssertionError(f"{prim.name} takes no tensors: it is never batched")

