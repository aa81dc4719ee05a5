"""``tf.vmap``: a function of one example, run on a batch at once (JAX semantics).

Inside the vmapped function each batched argument is a ``BatchedTensor`` whose shape is one
example's; every kernel runs once on the whole batch through its batching rule
(flowgrad/batching.py). Entering and leaving are two primitives (``VmapIn``/``VmapOut``)
whose gradient rules are each other, so vmap composes with grad, jacobian, custom_grad and
itself in any order, to any order of derivatives.
"""
from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Callable

import numpy as np

from . import batching as BT
from . import engine as E
from . import interceptors
from . import tape
from .arg_checks import check_arity
from .batching import BatchedTensor, Phys, VmapError, levels_of
from .camel_case import Result
from .tensor import Tensor, convert

_levels = itertools.count(1)        # vmap levels: a later (inner) vmap has a larger one


# ---------------------------------------------------------------- the boundary

def _in_fwd(B, x, level, axis, size):
    raise AssertionError("VmapIn runs through its batching rule")


# (their rules run even on unbatched inputs: they make and unmake batched tensors)
_IN = E.Primitive("VmapIn", _in_fwd, vmap_boundary=True)
_OUT = E.Primitive("VmapOut", _in_fwd, vmap_boundary=True)


@_IN.def_vmap
def _in_rule(prim, inputs, attrs, levels):
    """Logical axis ``axis`` of x becomes the batch axis of ``level``."""
    x = inputs[0]
    mine = levels_of(x)
    lv = attrs["level"]
    new = tuple(sorted(mine + (lv,)))
    a = np.moveaxis(x._data, len(mine) + attrs["axis"], new.index(lv))
    return Phys(a, new)


@_OUT.def_vmap
def _out_rule(prim, inputs, attrs, levels):
    """The batch axis of ``level`` becomes logical axis ``axis`` (repeated ``size`` times
    when the tensor does not depend on the batch)."""
    t = inputs[0]
    mine = levels_of(t)
    lv, axis = attrs["level"], attrs["axis"]
    if lv in mine:
        rest = tuple(v for v in mine if v != lv)
        return Phys(np.moveaxis(t._data, mine.index(lv), len(rest) + axis), rest)
    k = len(mine) + axis
    return Phys(np.repeat(np.expand_dims(t._data, k), attrs["size"], axis=k), mine)


def _enter(x, level, axis, size):
    return BT.run_batched(_IN, (x,), {"level": level, "axis": axis, "size": size})


def _leave(t, level, axis, size):
    return BT.run_batched(_OUT, (t,), {"level": level, "axis": axis, "size": size})


@_IN.def_vjp
def _(dy, x, level, axis, size):
    return _leave(dy, level, axis, size)


@_OUT.def_vjp
def _(dy, t, level, axis, size):
    return _enter(dy, level, axis, size)


def _settler(y, dy):
    """The backward pass's ``settle(dx, t)`` (tape.bind_batching): dx summed over the vmap
    levels it carries and neither t, nor y, nor its seed dy does."""
    keep = levels_of(y) + levels_of(dy)

    def settle(dx, t):
        have = levels_of(dx)
        if not have:
            return dx
        own = levels_of(t)
        for lv in [lv for lv in have if lv not in own and lv not in keep]:
            size = dx._data.shape[levels_of(dx).index(lv)]
            # (leaving makes the level logical axis 0; its sum is an op, so this is
            # differentiable like the rest of the pass)
            dx = _leave(dx, lv, 0, size).sum(0)
        return dx
    return settle


# tape.backprop over a session with batched nodes batches the rules' kernels too
tape.bind_batching(BT.activate, BT.deactivate, _settler)


# ---------------------------------------------------------------- pytrees and axes

def _leaves(obj, spec, out, path):
    """(leaf, axis, path) of ``obj`` under the axis ``spec`` (an int/None for a whole
    subtree, or a structure matching it), in order."""
    if isinstance(obj, (Tensor, np.ndarray)) or not isinstance(obj, (list, tuple, dict,
                                                                     Result)):
        if isinstance(spec, (list, tuple, dict)):
            raise VmapError(f"tf.vmap: in_axes gives a structure at {path or 'the argument'}"
                            f", where the argument is a single {type(obj).__name__}")
        out.append((obj, spec, path))
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            sub = spec[k] if isinstance(spec, dict) else spec
            _leaves(v, sub, out, f"{path}[{k!r}]")
        return
    items = list(obj)
    if isinstance(spec, (list, tuple)):
        if len(spec) != len(items):
            raise VmapError(f"tf.vmap: in_axes has {len(spec)} entries at "
                            f"{path or 'the top'} for {len(items)} values")
        for i, (v, s) in enumerate(zip(items, spec)):
            _leaves(v, s, out, f"{path}[{i}]")
    else:
        for i, v in enumerate(items):
            _leaves(v, spec, out, f"{path}[{i}]")


def _rebuild(obj, values):
    """``obj``'s structure with its leaves taken in order from the iterator ``values``."""
    if isinstance(obj, (Tensor, np.ndarray)) or not isinstance(obj, (list, tuple, dict,
                                                                     Result)):
        return next(values)
    if isinstance(obj, dict):
        return type(obj)((k, _rebuild(v, values)) for k, v in obj.items())
    if isinstance(obj, Result):
        return Result(**{k: _rebuild(getattr(obj, k), values) for k in obj._fields})
    items = [_rebuild(v, values) for v in obj]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*items)
    return type(obj)(items)


def _check_axis(a, where):
    if a is None:
        return None
    if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
        raise VmapError(f"tf.vmap: {where} must be an int or None, got {a!r}")
    return int(a)


# ---------------------------------------------------------------- vmap

def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """Vectorise ``f`` over a batch axis: ``vmap(f)(xs)`` stacks ``f(x)`` for each ``x`` of
    ``xs`` along axis 0, computed at once (each kernel runs on the whole batch).

    ``in_axes``: the batch axis of every argument (an int), None (the argument is shared
    by every example), or a tuple with one entry per positional argument (each an int, None
    or a structure matching that argument's lists/dicts). ``out_axes``: where the batch
    axis goes in each output (an int, None for an output that does not depend on the
    example, or a structure). Composes with grad, grads, value_and_grad, variable_grads,
    jacobian, hessian, custom_grad, tf.jit and vmap itself, in any order.

    >>> import flowgrad as tf
    >>> xs = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> tf.vmap(lambda x: x.square().sum())(xs).array_sync()       # one sum per row
    [5.0, 25.0]
    >>> w = tf.tensor([1.0, -1.0])
    >>> tf.vmap(tf.grad(lambda x: (x * w).sum().square()))(xs).array_sync()
    [[-2.0, 2.0], [-2.0, 2.0]]
    """
    if not callable(f):
        raise VmapError(f"tf.vmap(f): f must be a function, got {type(f).__name__}")

    @functools.wraps(f)
    def batched(*args):
        check_arity(f, len(args), "tf.vmap(f)(*args)")
        spec = in_axes if isinstance(in_axes, (list, tuple)) else (in_axes,) * len(args)
        if isinstance(in_axes, (list, tuple)) and len(in_axes) != len(args):
            raise VmapError(f"tf.vmap: in_axes has {len(in_axes)} entries for "
                            f"{len(args)} positional arguments")
        found = []
        _leaves(list(args), list(spec), found, "")
        size, leaves = None, []
        for leaf, axis, path in found:
            axis = _check_axis(axis, f"in_axes at args{path}")
            if axis is not None:
                if not isinstance(leaf, Tensor):
                    leaf = convert(leaf, f"args{path}", "vmap")
                rank = len(leaf.shape)
                if not -rank <= axis < rank:
                    raise VmapError(f"tf.vmap: in_axes {axis} at args{path} is out of range "
                                    f"for a tensor of shape {list(leaf.shape)}")
                axis %= rank
                n = leaf.shape[axis]
                if size is not None and n != size:
                    raise VmapError(f"tf.vmap: batch sizes differ: {size} and {n} (args"
                                    f"{path}, axis {axis}); every batched argument needs "
                                    f"the same size")
                size = n
            leaves.append((leaf, axis))
        if size is None:
            raise VmapError("tf.vmap: no argument is batched (in_axes is None for all); "
                            "give at least one batch axis")
        level = next(_levels)
        tr = interceptors.tracer
        if tr is not None and tr.thread == threading.get_ident():
            # inside tf.jit's trace (this thread's: another thread's trace is not ours to
            # spoil): it cannot replay batched kernels, so that function stays eager
            tr.untraceable = True
        BT.activate()
        try:
            inner = [_enter(leaf, level, axis, size) if axis is not None else leaf
                     for leaf, axis in leaves]
            out = f(*_rebuild(list(args), iter(inner)))
            found = []
            _leaves(out, out_axes, found, "")
            results = []
            for leaf, axis, path in found:
                axis = _check_axis(axis, f"out_axes at the output{path}")
                if not isinstance(leaf, Tensor):
                    if axis is None:
                        results.append(leaf)
                        continue
                    leaf = convert(leaf, f"output{path}", "vmap")
                if axis is None:
                    if level in levels_of(leaf):
                        raise VmapError(f"tf.vmap: out_axes is None for output{path}, "
                                        f"but it differs per example")
                    results.append(leaf)
                    continue
                rank = len(leaf.shape) + 1
                if not -rank <= axis < rank:
                    raise VmapError(f"tf.vmap: out_axes {axis} is out of range for "
                                    f"output{path} (per-example shape "
                                    f"{list(leaf.shape)})")
                results.append(_leave(leaf, level, axis % rank, size))
            return _rebuild(out, iter(results))
        finally:
            BT.deactivate()
    # (debug reports name the frame's function: "propagated by vmap")
    batched.__code__ = batched.__code__.replace(co_name="vmap")
    return batched


__all__ = ["vmap", "VmapError", "BatchedTensor"]
