"""The gradient API: grad, grads, value_and_grad(s), variable_grads, GradientTape.

All of them run f while the engine records (TF.js's rule: only ops inside a gradient
function are recorded), then backprop from f's result. Nested calls record the inner
backward pass, which is how grad(grad(f)) works, to any order.

custom_grad lives in custom.py and calls f the way these do (positional_arity, call_fitted);
nothing here imports it back, so the two modules do not form a circle.
"""
from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Literal, Sequence

from . import dtypes
from . import engine as E
from . import recording
from . import scopes
from .arg_checks import check_arity, describe, flag
from .errors import (ArgumentError, DisposedError, DtypeError, GradientError,
                     UnconnectedGradientError)
from .camel_case import Result
from .ops import OPS, PRIMITIVES
from .ops._core import scalar_of
from .tape import backprop, check_dy_shape
from .tensor import Tensor, Variable, all_variables, convert

if TYPE_CHECKING:
    from .tensor import TensorLike

    # what the gradient functions return: tuples that also have the fields as attributes
    class ValueAndGrad(tuple[Tensor, Tensor]):
        value: Tensor
        grad: Tensor

    class ValueAndGrads(tuple[Tensor, list[Tensor]]):
        value: Tensor
        grads: list[Tensor]

    class VariableGrads(tuple[Tensor, "GradMap"]):
        value: Tensor
        grads: GradMap

_fill = OPS["fill"]
_cast = OPS["cast"]


# ---------------------------------------------------------------- helpers

_FUNCTION = types.FunctionType
_VARARGS = inspect.CO_VARARGS


def positional_arity(f):
    """How many positional arguments f takes (None: any number).

    Public because every API that calls a user's function the way grad does (custom_grad,
    debug.graph) must pass it the same arguments; computed once per wrapped f, then handed to
    call_fitted on each call."""
    if type(f) is _FUNCTION and not f.__dict__:
        # a plain function (no __wrapped__ or __signature__): its code says it, without
        # inspect.signature's ~10 us (tf.grad(lambda ...) inside a training step)
        code = f.__code__
        return None if code.co_flags & _VARARGS else code.co_argcount
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return None
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def call_fitted(f, arity, args, api="grad(f)"):
    """f(*args), given only the first ``arity`` arguments (``positional_arity(f)``) when f
    takes fewer: seed 001 differentiates a zero-argument closure over the tensors, and a JS
    function ignores extra arguments. A call that still does not fit is explained, naming
    ``api``."""
    if arity is not None and arity < len(args):
        args = args[:arity]
    return _fit(f, args, api)


def _fit(f, args, api):
    """f(*args), with a call that does not fit f's parameters explained (never a bare
    TypeError); checked only after a TypeError, so a good call pays nothing."""
    try:
        return f(*args)
    except TypeError:
        check_arity(f, len(args), api, fewer_ok=True)
        raise


_FILL = PRIMITIVES["Fill"]


def _ones(y, gdt):
    """The default seed: ones of y's shape (the kernel itself: fill's checks of the shape and
    size are for user input, and y exists already). A scalar y, a loss, gets the shared
    constant 1 (no kernel per gradient call; backprop hands out a copy if it is the
    gradient itself)."""
    if not y.shape:
        return scalar_of(1.0, gdt)
    return E.run_kernel(_FILL, (), {"shape": y.shape, "value": 1.0, "dtype": gdt})


def _seed(y, dy, api, shape_prefix):
    gdt = dtypes.grad_dtype(y.dtype)
    if dy is None:
        return _ones(y, gdt)
    dy = convert(dy, "dy", api)
    if dy.dtype not in dtypes.FLOATS:
        raise DtypeError(f"dy must have a float dtype ('float32' or 'float64'), but has "
                         f"'{dy.dtype}'")
    check_dy_shape(dy.shape, y.shape, shape_prefix)
    return dy if dy.dtype == gdt else _cast(dy, gdt)


def _describe(t):
    return f"a {t.dtype} tensor of shape {t.shape}"


def _unconnected(xs, connected, recorded, api, names):
    missing = [i for i, c in enumerate(connected) if not c]
    head = ("Cannot compute gradient of y=f(x) with respect to x. Make sure that the f you "
            "passed encloses all operations that lead from x to y.")
    if len(missing) < len(xs):
        head = ("Cannot compute gradient of y=f(x) with respect to x. Make sure that\n"
                "    the f you passed encloses all operations that lead from x to y.")
    which = "; ".join(f"{names(i)} ({_describe(xs[i])})" for i in missing)
    if not recorded:
        why = ("f's result was not computed by any op inside f: f returned a constant, or a "
               "tensor computed before f was called")
    else:
        why = "f's result does not depend on it"
    msg = (f"{head}\n  {api}: {which} {'is' if len(missing) == 1 else 'are'} not connected to "
           f"f's output ({why}). f must compute its result from its inputs inside f: a tensor "
           f"computed from x before calling {api.split('(')[0]} is a constant, and "
           f"stop_gradient() cuts the path. tf.debug.explain_gradient(f, x) shows where the "
           f"path breaks; pass allow_unconnected=True to get zeros instead.")
    return UnconnectedGradientError(msg)


def _gradients(run_f, xs, dy, api, shape_prefix, allow_unconnected, names):
    """Record run_f(), backprop to xs. Returns (y, grads); unconnected inputs raise or get
    zeros."""
    if not xs:
        raise ArgumentError("gradients() received an empty list of xs.")
    for i, x in enumerate(xs):
        if x.dtype is not dtypes.float32 and x.dtype == "string":
            raise DtypeError(f"{api}: {names(i)} is a string tensor; gradients are defined "
                             f"for number tensors only")
    level = recording.recording_level()
    try:
        sess, owner = recording.begin_recording()
        sess.watch(xs)
        try:
            y = run_f()
        finally:
            recording.end_recording()
        if not isinstance(y, Tensor):
            raise GradientError(f"The result y returned by f() must be a tensor (got "
                                f"{type(y).__name__}). {api}: make f return the tensor to "
                                f"differentiate.")
        seed = _seed(y, dy, api, shape_prefix)
        grads, connected = backprop(y, seed, xs, sess, unit=dy is None)
        recorded = y._node is not None and y._node.sess is sess
    finally:
        try:
            recording.unwind_recording(level)
        except BaseException:       # (interrupted on the way out: see engine.tidy)
            recording.unwind_recording(level)
            raise
    if not all(connected) and not allow_unconnected:
        raise _unconnected(xs, connected, recorded, api, names)
    out = []
    for x, g, c in zip(xs, grads, connected):
        if g is None:
            g = _fill(x.shape, 0, dtypes.grad_dtype(x.dtype))
        out.append(g)
    return y, out


def _check_f(f, api):
    if not callable(f):
        raise ArgumentError(f"The f passed in {api}(f) must be a function")


def _as_args(args, api):
    if isinstance(args, Tensor):
        return [args]
    if isinstance(args, (list, tuple)):
        return [convert(a, f"args[{i}]", api) for i, a in enumerate(args)]
    raise ArgumentError(f"The args passed in {api}(f)(args) must be an array of `Tensor`s or "
                        f"`TensorLike`s (got {type(args).__name__})")


# ---------------------------------------------------------------- grad / grads

def grad(f: Callable[..., Tensor], allow_unconnected: bool = False
         ) -> Callable[..., Tensor]:
    """The gradient function of f: ``grad(f)(x, dy=None)`` is d(sum(dy·f(x)))/dx.

    f need not return a scalar (dy defaults to ones). Nest for higher order.

    >>> import flowgrad as tf
    >>> tf.grad(lambda x: x.square().add(x))(tf.scalar(3.0)).item()
    7.0
    >>> tf.grad(tf.grad(lambda x: x ** 3))(tf.scalar(2.0)).item()
    12.0
    """
    _check_f(f, "grad")
    arity = positional_arity(f)

    def grad_f(x: TensorLike, dy: TensorLike | None = None) -> Tensor:
        def body():
            xt = convert(x, "x", "tf.grad")
            _, gs = _gradients(lambda: call_fitted(f, arity, [xt], "grad(f)(x)"), [xt], dy,
                               "grad(f)(x)",
                               "The shape of dy passed in grad(f)(x, dy) must match the "
                               "shape returned by f(x)", allow_unconnected, lambda i: "x")
            return gs[0]
        return scopes.tidy(body)

    grad_f.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    return grad_f


def grads(f: Callable[..., Tensor], allow_unconnected: bool = False
          ) -> Callable[..., list[Tensor]]:
    """The gradients of f with respect to each argument: ``grads(f)([x1, x2], dy=None)``.

    f receives the arguments spread (as many as it takes: a closure over variables may take
    none). A bare tensor means ``[x]``.

    >>> import flowgrad as tf
    >>> dx, dy = tf.grads(lambda x, y: x.square() + y.square())([tf.scalar(2.0), tf.scalar(3.0)])
    >>> dx.item(), dy.item()
    (4.0, 6.0)
    """
    _check_f(f, "grads")
    arity = positional_arity(f)

    def grads_f(args: TensorLike | Sequence[TensorLike], dy: TensorLike | None = None
                ) -> list[Tensor]:
        def body():
            xs = _as_args(args, "grads")
            _, gs = _gradients(lambda: call_fitted(f, arity, xs, "grads(f)([x1,...])"), xs, dy,
                               "grads(f)([x1,...])",
                               "The shape of dy passed in grads(f)([x1,...], dy) must match "
                               "the shape returned by f([x1,...])", allow_unconnected,
                               lambda i: f"args[{i}]")
            return gs
        return scopes.tidy(body)

    grads_f.__name__ = f"grads({getattr(f, '__name__', 'f')})"
    return grads_f


def value_and_grad(f: Callable[..., Tensor], allow_unconnected: bool = False
                   ) -> Callable[..., ValueAndGrad]:
    """Like ``grad``, returning both: ``value, g = value_and_grad(f)(x)`` (also ``.value``
    and ``.grad``).

    >>> import flowgrad as tf
    >>> r = tf.value_and_grad(lambda x: x.square())(tf.scalar(3.0))
    >>> r.value.item(), r.grad.item()
    (9.0, 6.0)
    """
    _check_f(f, "value_and_grad")
    arity = positional_arity(f)

    def vg(x: TensorLike, dy: TensorLike | None = None) -> ValueAndGrad:
        def body():
            xt = convert(x, "x", "value_and_grad")
            y, gs = _gradients(lambda: call_fitted(f, arity, [xt], "value_and_grad(f)(x)"), [xt], dy,
                               "value_and_grad(f)(x)",
                               "The shape of dy passed in value_and_grad(f)(x, dy) must match "
                               "the shape returned by f(x)", allow_unconnected,
                               lambda i: "x")
            return Result(value=y, grad=gs[0])
        return scopes.tidy(body)

    return vg


def value_and_grads(f: Callable[..., Tensor], allow_unconnected: bool = False
                    ) -> Callable[..., ValueAndGrads]:
    """Like ``grads``, returning the value too: ``value, grads = value_and_grads(f)(args)``.

    >>> import flowgrad as tf
    >>> value, (g,) = tf.value_and_grads(lambda x: x ** 3 + x)(tf.scalar(2.0))
    >>> value.item(), g.item()
    (10.0, 13.0)
    """
    _check_f(f, "value_and_grads")
    arity = positional_arity(f)

    def vgs(args: TensorLike | Sequence[TensorLike], dy: TensorLike | None = None
            ) -> ValueAndGrads:
        def body():
            xs = _as_args(args, "value_and_grads")
            y, gs = _gradients(lambda: call_fitted(f, arity, xs, "value_and_grads(f)([x1,...])"), xs,
                               dy, "value_and_grads(f)([x1,...])",
                               "The shape of dy passed in value_and_grads(f)([x1,...], dy) "
                               "must match the shape returned by f([x1,...])",
                               allow_unconnected, lambda i: f"args[{i}]")
            return Result(value=y, grads=gs)
        return scopes.tidy(body)

    return vgs


# ---------------------------------------------------------------- variables

class GradMap(dict):
    """Gradients keyed by variable name; the Variable itself works as a key too
    (``grads[w]``, as the seed tutorials write it)."""

    @staticmethod
    def _key(k):
        return k.name if isinstance(k, Variable) else k

    def __getitem__(self, k: str | Variable) -> Tensor:
        return dict.__getitem__(self, self._key(k))

    def __contains__(self, k: object) -> bool:
        return dict.__contains__(self, self._key(k))

    def get(self, k: str | Variable, default: Any = None) -> Any:
        return dict.get(self, self._key(k), default)


def variable_grads(f: Callable[[], Tensor], var_list: Sequence[Variable] | None = None
                   ) -> VariableGrads:
    """The value of f() (a scalar) and its gradients with respect to trainable variables:
    ``value, grads = variable_grads(f)``; ``grads[w]`` or ``grads["w"]``.

    Variables f does not use are absent from grads.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(3.0), name="w_vg_doc")
    >>> value, grads = tf.variable_grads(lambda: w.square())
    >>> value.item(), grads[w].item()
    (9.0, 6.0)
    >>> w.dispose()
    """
    if var_list is not None:
        check_var_list(var_list)
    y, pairs = variable_pairs(f, var_list)
    out = GradMap()
    for v, g in pairs:
        out[v.name] = g
    return Result(value=y, grads=out)  # type: ignore[return-value]  # a VariableGrads


def variable_pairs(f: Callable[[], Tensor], var_list: Sequence[Variable] | None = None,
                   api: str = "variable_grads"
                   ) -> tuple[Tensor, list[tuple[Variable, Tensor | None]]]:
    """What variable_grads computes, as ``(value, [(variable, gradient), ...])``: every
    variable with a gradient, and (with ``var_list``) its non-trainable ones with None, in
    var_list's order (minimize takes these pairs directly). ``var_list`` is checked by the
    caller; ``api`` names the call in the message for an f that is not a function.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(3.0), name="w_vp_doc")
    >>> value, pairs = tf.gradients.variable_pairs(lambda: w.square())
    >>> [(v.name, g.item()) for v, g in pairs]
    [('w_vp_doc', 6.0)]
    >>> w.dispose()
    """
    return _pairs(f, var_list, api, True)


def variable_pairs_here(f: Callable[[], Tensor], var_list: Sequence[Variable] | None = None,
                        api: str = "variable_grads"
                        ) -> tuple[Tensor, list[tuple[Variable, Tensor | None]]]:
    """variable_pairs, with the pass's intermediates left in the caller's scope (minimize
    runs its gradients and its update in one tidy: one scope a step, not two).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(3.0), name="w_vph_doc")
    >>> value, pairs = tf.tidy(lambda: tf.gradients.variable_pairs_here(lambda: w.square()))
    >>> [(v.name, g.item()) for v, g in pairs]
    [('w_vph_doc', 6.0)]
    >>> w.dispose()
    """
    return _pairs(f, var_list, api, False)


def _pairs(f, var_list, api, scoped):
    _check_f(f, api)
    if var_list is None:
        var_list = all_variables()
        explicit = False
    else:
        explicit = True
    n = len(var_list)
    train = [v for v in var_list if v.trainable and not v._disposed]
    if not train and not explicit and n == 0:
        # seed 000 trains a function of plain tensors: say what to create
        raise GradientError(_NO_CONNECTION + " (No tf.variable exists at all.)")
    if not train:
        raise GradientError(f"variable_grads() expects at least one of the input variables to "
                            f"be trainable, but none of the {n} variables is trainable.")

    y, gs = scopes.tidy(lambda: _variable_pass(f, train)) if scoped else \
        _variable_pass(f, train)
    if all(g is None for g in gs):
        raise GradientError(_NO_CONNECTION)
    if y.rank != 0:
        raise GradientError(f"The f passed in variable_grads(f) must return a scalar, but it "
                            f"returned a rank-{y.rank} tensor")
    pairs = [(v, g) for v, g in zip(train, gs) if g is not None]
    if explicit:
        pairs += [(v, None) for v in var_list if not v.trainable]
    return y, pairs


def check_var_list(var_list: Any, api: str = "variable_grads(f, var_list)") -> None:
    """``var_list`` of ``variable_grads``, ``minimize`` and ``compute_gradients``: None or a
    list or tuple of Variables; anything else is an ArgumentError naming ``api`` and what
    it got (TF.js's words first)."""
    if var_list is None:
        return
    if isinstance(var_list, (list, tuple)):
        for i, v in enumerate(var_list):
            if not isinstance(v, Variable):
                got = f"var_list[{i}] is {describe(v)}"
                break
        else:
            return
    else:
        got = f"got {describe(var_list)}"
        if isinstance(var_list, Variable):
            got += f" (the Variable '{var_list.name}' itself: put it in a list, [w])"
    raise ArgumentError(f"The var_list passed in {api} must be an array of variables: a list "
                        f"or tuple of tf.variable(...) objects, or None for every trainable "
                        f"variable f uses; {got}")


_NO_CONNECTION = (
    "Cannot find a connection between any variable and the result of the loss function "
    "y=f(x). Please make sure the operations that use variables are inside the function f "
    "passed to minimize(). Only tf.variable(...) objects are trained: create the parameters "
    "with tf.variable(tensor) (plain tensors are constants).")


def _variable_pass(f, train):
    level = recording.recording_level()
    try:
        sess, owner = recording.begin_recording()
        sess.watch(variables=True)
        try:
            y = _fit(f, (), "variable_grads(f)")
        finally:
            recording.end_recording()
        if not isinstance(y, Tensor):
            raise GradientError(f"The result y returned by f() must be a tensor (got "
                                f"{type(y).__name__}). variable_grads(f): make f return the "
                                f"loss.")
        seed = _ones(y, dtypes.grad_dtype(y.dtype))
        grads, connected = backprop(y, seed, train, sess, unit=True)
    finally:
        try:
            recording.unwind_recording(level)
        except BaseException:       # (interrupted on the way out: see engine.tidy)
            recording.unwind_recording(level)
            raise
    out = []
    for v, g, c in zip(train, grads, connected):
        if g is None and c:
            g = _fill(v.shape, 0, dtypes.grad_dtype(v.dtype))
        out.append(g)
    return [y, out]


# ---------------------------------------------------------------- GradientTape

class GradientTape:
    """TF-Python style recording: ops run inside ``with tf.GradientTape() as tape:`` are
    recorded, and ``tape.gradient(target, sources)`` differentiates them afterwards.

    Trainable variables are watched automatically; other tensors created outside the tape
    need ``tape.watch(x)``. Unwatched or unconnected sources get None (or zeros with
    ``unconnected_gradients="zero"``).

    >>> import flowgrad as tf
    >>> x = tf.scalar(3.0)
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = x * x
    >>> tape.gradient(y, x).item()
    6.0
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True
                 ) -> None:
        self.persistent = flag(persistent, "persistent", "GradientTape()")
        self.watch_accessed_variables = flag(watch_accessed_variables,
                                             "watch_accessed_variables", "GradientTape()")
        self._watched: dict[int, Tensor] = {}
        self._sess: Any = None
        self._owner = False
        self._active = False
        self._used = False

    def __enter__(self) -> GradientTape:
        if self._active:
            raise GradientError("This GradientTape is already recording (nested "
                                "'with tape:' of the same tape).")
        level = self._level = recording.recording_level()
        try:
            self._sess, self._owner = recording.begin_recording()
            self._sess.watch(self._watched.values(), self.watch_accessed_variables)
        except BaseException:       # (an interrupt): the gate as it was
            recording.unwind_recording(level)
            raise
        self._active = True
        self._used = False
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        # the gate as before the block; the recording lives on in the tape (pinned)
        recording.unwind_recording(self._level, keep=self._sess)
        self._active = False
        if exc_type is not None or (self._used and not self.persistent):
            self._release()
        elif self._owner:
            self._sess.detach()
        return False

    def watch(self, tensor: Tensor | Sequence[Tensor]) -> None:
        """Differentiate with respect to ``tensor`` (or every tensor of a list)."""
        for t in scopes.walk_tensors(tensor):
            self._watched[id(t)] = t
            if self._active:
                self._sess.watch((t,))

    def watched_variables(self) -> list[Variable]:
        """The variables explicitly watched."""
        return [t for t in self._watched.values() if isinstance(t, Variable)]

    def _is_watched(self, t):
        if id(t) in self._watched:
            return True
        if self.watch_accessed_variables and isinstance(t, Variable) and t.trainable:
            return True
        n = t._node
        return n is not None and n.sess is self._sess

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: str = "none") -> Any:
        """d target / d sources, in the structure of ``sources`` (a tensor, list, tuple or
        dict). A list of targets is differentiated as their sum."""
        if self._sess is None:
            raise GradientError("GradientTape.gradient() called before the tape recorded "
                                "anything: use 'with tf.GradientTape() as tape:' first.")
        if self._used and not self.persistent:
            raise GradientError("A non-persistent GradientTape can only be used to compute one "
                                "set of gradients (or jacobians); pass persistent=True to "
                                "call gradient() several times.")
        if type(unconnected_gradients) is not str or unconnected_gradients not in ("none",
                                                                                "zero"):
            raise ArgumentError(f"GradientTape.gradient(): unconnected_gradients must be "
                                f"'none' or 'zero', got {describe(unconnected_gradients)}")
        if not self._sess.alive:
            raise GradientError("This GradientTape's recording was already released.")
        flat = list(scopes.walk_tensors(sources))
        if not flat:
            raise ArgumentError("GradientTape.gradient(): sources must be tensors, or lists, "
                                "tuples or dicts of tensors")
        targets = list(scopes.walk_tensors(target))
        if not targets:
            raise ArgumentError("GradientTape.gradient(): target must be a tensor (or a list "
                                "of tensors)")
        for what, ts in (("target", targets), ("sources", flat)):
            if any(t.is_disposed for t in ts):
                raise DisposedError(f"GradientTape.gradient(target, sources): Tensor is "
                                    f"disposed (in {what}).")
        if output_gradients is not None:
            ogs = list(output_gradients) if isinstance(output_gradients, (list, tuple)) \
                else [output_gradients]
            if len(ogs) != len(targets):
                raise ArgumentError(f"output_gradients must have one entry per target "
                                    f"({len(targets)}), got {len(ogs)}")
        else:
            ogs = [None] * len(targets)
        watched = [self._is_watched(s) for s in flat]
        total = [None] * len(flat)
        for y, og in zip(targets, ogs):
            seed = _seed(y, og, "GradientTape.gradient",
                         "The shape of output_gradients passed to GradientTape.gradient must "
                         "match the shape of target")
            gs, _ = backprop(y, seed, flat, self._sess)
            for i, g in enumerate(gs):
                if g is not None and watched[i]:
                    total[i] = g if total[i] is None else total[i] + g
        self._used = True
        if not self.persistent and not self._active:
            self._release()
        if unconnected_gradients == "zero":
            total = [g if g is not None else _fill(s.shape, 0, dtypes.grad_dtype(s.dtype))
                     for g, s in zip(total, flat)]
        return _restructure(sources, iter(total))

    def stop_recording(self) -> ContextManager[None]:
        """A context in which ops are not recorded by this tape."""
        tape = self

        class _Pause:
            def __enter__(self_inner):
                self_inner.level = recording.pause_recording() if tape._active else None

            def __exit__(self_inner, *exc):
                if self_inner.level is not None:
                    recording.resume_recording(self_inner.level)
                return False
        return _Pause()

    def reset(self) -> None:
        """Forget what was recorded so far (the tape keeps recording if active)."""
        if self._active:
            raise GradientError("reset() inside the 'with' block is not supported: start a "
                                "new tape instead.")
        self._release()
        self._sess = None
        self._watched.clear()

    def _release(self):
        if self._owner and self._sess is not None:
            self._sess.release()

    def __del__(self):
        try:
            if not self._active:
                self._release()
        except Exception:
            pass


def _restructure(template, it):
    if isinstance(template, Tensor):
        return next(it)
    if isinstance(template, dict):
        return {k: _restructure(v, it) for k, v in template.items()}
    if isinstance(template, tuple):
        return tuple(_restructure(v, it) for v in template)
    if isinstance(template, list):
        return [_restructure(v, it) for v in template]
    return template

