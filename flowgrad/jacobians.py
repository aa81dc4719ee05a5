"""Jacobians, Hessians, vector products and forward mode: the second-order tools seed 002
points to ("optimisation with the Hessian matrix"), which TF.js does not have.

Reverse mode runs ONE backward pass for a whole jacobian: the cotangent is the identity,
carried as an extra leading (batch) axis through the rules (``Primitive.batched_vjp``). Ops
whose rules cannot take a batch fall back to one pass per output element, with the same
result.

Forward mode is the double-vjp construction: ``u -> J^T u`` is linear in u, so the vjp of
that map with cotangent v is ``J v``. It needs no per-op tangent rule (every op, custom
gradients included, works as soon as its gradient rule is differentiable), at the cost of
about two backward passes per jvp (one to record ``J^T u``, one through it). A jacobian in
forward mode batches the tangents (the identity over the input) the same way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import dtypes
from . import recording
from . import scopes
from .arg_checks import argnums as _argnums, check_arity, choice, describe
from .errors import ArgumentError, GradientError, ShapeError
from .ops import OPS
from .tape import NotBatchable, backprop
from .tensor import Tensor, convert

if TYPE_CHECKING:
    from .tensor import TensorLike

_concat = OPS["concat"]
_fill = OPS["fill"]
_eye = OPS["eye"]
_reshape = OPS["reshape"]
_split = OPS["split"]
_stack = OPS["stack"]
_transpose = OPS["transpose"]


def _distinct(xs):
    """The arguments, a tensor passed twice made two (its later places get a clone, made
    before f's recording starts): each argument is its own variable, as in JAX, so the
    derivative with respect to one is its partial derivative. (Keyed by the tensor, one
    object in two places summed both partials into each; tf.grads keeps TF.js's rule.)"""
    seen = set()
    out = []
    for x in xs:
        if id(x) in seen:
            x = OPS["clone"](x)
        seen.add(id(x))
        out.append(x)
    return out


def _check(f, api):
    if not callable(f):
        raise ArgumentError(f"The f passed in {api}(f) must be a function")


def _run(f, xs, api):
    check_arity(f, len(xs), api)
    sess = recording.current_session()
    if sess is not None:
        sess.watch(xs)                      # its sources (is_recorded)
    y = f(*xs)
    if not isinstance(y, Tensor):
        raise GradientError(f"{api}: f must return a tensor, got {type(y).__name__}")
    return y


def _basis(n, shape, dtype):
    """The identity over a tensor of ``shape``, as n = prod(shape) rows of that shape."""
    return _reshape(_eye(n, n, None, dtype), (n,) + tuple(shape))


def _batched(y, seed, xs, sess):
    """Gradients of y for a batch of cotangents (seed's first axis): one vectorised pass
    when every rule allows it, else one pass per row."""
    try:
        gs, _ = backprop(y, seed, xs, sess, batch=True)
    except NotBatchable:
        rows = [backprop(y, seed[k], xs, sess)[0] for k in range(seed.shape[0])]
        gs = []
        for i, x in enumerate(xs):
            col = [r[i] for r in rows]
            gs.append(None if all(g is None for g in col) else _stack(
                [g if g is not None else _fill(x.shape, 0, dtypes.grad_dtype(x.dtype))
                 for g in col]))
    m = seed.shape[0]
    return [g if g is not None else _fill((m,) + x.shape, 0, dtypes.grad_dtype(x.dtype))
            for g, x in zip(gs, xs)]


def _with_session(body):
    """Run body(sess) in a tidy, recording into a session that body ends (it calls
    end_recording once f has run); release the session if this call opened it."""
    def run():
        level = recording.recording_level()
        try:
            sess, _ = recording.begin_recording()
            return body(sess)
        finally:
            try:
                recording.unwind_recording(level)
            except BaseException:   # (interrupted on the way out: see engine.tidy)
                recording.unwind_recording(level)
                raise
    return scopes.tidy(run)


def jacobian(f: Callable[..., Tensor], argnums: int | Sequence[int] = 0, mode: str = "rev"
             ) -> Callable[..., Any]:
    """The jacobian of f: ``jacobian(f)(*args)`` has shape ``f(*args).shape + x.shape`` for
    the argument x selected by ``argnums`` (a tuple of them for a tuple of argnums).

    ``mode="rev"`` runs one vectorised backward pass (best when f has fewer outputs than
    inputs); ``mode="fwd"`` pushes the identity over the input forward (best for few inputs).

    >>> import flowgrad as tf
    >>> tf.jacobian(lambda x: x * x)(tf.tensor([1.0, 2.0])).print()
    Tensor
        [[2, 0],
         [0, 4]]
    """
    _check(f, "jacobian")
    choice(mode, "mode", "jacobian", ("rev", "fwd"),
           f"jacobian: mode must be 'rev' or 'fwd', got {describe(mode)}")

    def jac(*args):
        xs = _distinct([convert(a, f"args[{i}]", "jacobian") for i, a in enumerate(args)])
        single, nums = _argnums(argnums, len(xs), "jacobian")
        targets = [xs[i] for i in nums]

        def body(sess):
            if mode == "rev":
                try:
                    y = _run(f, xs, "jacobian")
                finally:
                    recording.end_recording()
                seed = _basis(y.size, y.shape, dtypes.grad_dtype(y.dtype))
                gs = _batched(y, seed, targets, sess)
                out = [_reshape(g, y.shape + x.shape) for g, x in zip(gs, targets)]
            else:
                try:
                    y = _run(f, xs, "jacobian")
                    u = _fill(y.shape, 0, dtypes.grad_dtype(y.dtype))
                    hs, _ = backprop(y, u, targets, sess)       # J^T u, recorded
                finally:
                    recording.end_recording()
                out = []
                for h, x in zip(hs, targets):
                    gdt = dtypes.grad_dtype(x.dtype)
                    if h is None:
                        out.append(_fill(y.shape + x.shape, 0, gdt))
                        continue
                    (jv,) = _batched(h, _basis(x.size, x.shape, gdt), [u], sess)
                    # row k is J e_k (y's shape): move the input axis behind y's axes
                    jv = _reshape(jv, (x.size, y.size))
                    out.append(_reshape(_transpose(jv), y.shape + x.shape))
            return out[0] if single else tuple(out)
        return _with_session(body)

    return jac


def hessian(f: Callable[..., Tensor], argnums: int | Sequence[int] = 0
            ) -> Callable[..., Any]:
    """The Hessian of a scalar function: ``hessian(f)(x)`` has shape ``x.shape + x.shape``.
    Computed as the (vectorised, reverse-mode) jacobian of the gradient.

    With a tuple of argnums it is the block Hessian, as nested tuples (JAX's and
    torch.func's layout): ``H[i][j]`` is ∂²f/∂x_i∂x_j, of shape ``x_i.shape + x_j.shape``,
    for the i-th and j-th arguments named in argnums.

    >>> import flowgrad as tf
    >>> tf.hessian(lambda x: (x ** 3).sum())(tf.tensor([1.0, 2.0])).print()
    Tensor
        [[6, 0 ],
         [0, 12]]
    >>> H = tf.hessian(lambda x, s: (x * x).sum() * s ** 2, argnums=(0, 1))(
    ...     tf.tensor([1.0, 2.0]), tf.scalar(3.0))
    >>> [[h.shape for h in row] for row in H]
    [[(2, 2), (2,)], [(2,), ()]]
    >>> H[0][1].print()      # d/ds of d/dx = 4 x s
    Tensor
        [12, 24]
    """
    _check(f, "hessian")

    def grad_of_f(*args):
        single, nums = _argnums(argnums, len(args), "hessian")
        check_arity(f, len(args), "hessian")
        y = f(*args)
        if not isinstance(y, Tensor) or y.size != 1:
            shape = y.shape if isinstance(y, Tensor) else type(y).__name__
            raise ShapeError(f"hessian(f): f must return a scalar, got {shape}; for a "
                             f"vector function use jacobian(jacobian(f))")
        seed = _fill(y.shape, 1, dtypes.grad_dtype(y.dtype))
        gs, _ = backprop(y, seed, [args[i] for i in nums], recording.current_session())
        gs = [g if g is not None else _fill(args[i].shape, 0, dtypes.grad_dtype(
            args[i].dtype)) for g, i in zip(gs, nums)]
        # every gradient flattened end to end: one jacobian pass covers all the blocks
        return gs[0] if single else _concat([_reshape(g, (g.size,)) for g in gs])

    jac = jacobian(grad_of_f, argnums)

    def hess(*args):
        _argnums(argnums, len(args), "hessian")
        cols = jac(*args)
        if isinstance(cols, Tensor):
            return cols

        def blocks():
            # cols[j] has shape (sum of the arguments' sizes,) + x_j.shape: row block i of
            # it is d(grad_i)/dx_j
            shapes = [c.shape[1:] for c in cols]
            sizes = [_size(sh) for sh in shapes]
            parts = [_split(c, sizes) for c in cols]
            return tuple(tuple(_reshape(parts[j][i], shapes[i] + shapes[j])
                               for j in range(len(cols))) for i in range(len(cols)))
        return scopes.tidy(blocks)

    return hess


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def hvp(f: Callable[..., Tensor], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The Hessian-vector product without forming the Hessian: ``hvp(f)(x, v)`` is H·v
    (same shape as x), by differentiating <grad f(x), v>.

    >>> import flowgrad as tf
    >>> tf.hvp(lambda x: (x ** 3).sum())(tf.tensor([1.0, 2.0]), tf.tensor([1.0, 1.0])).print()
    Tensor
        [6, 12]
    """
    _check(f, "hvp")

    def hv(*args):
        if len(args) < 2:
            raise ArgumentError("hvp(f)(*args, v): give the arguments of f, then the vector v")
        *primals, v = args
        xs = _distinct([convert(a, f"args[{i}]", "hvp") for i, a in enumerate(primals)])
        single, nums = _argnums(argnums, len(xs), "hvp")
        if not single:
            raise ArgumentError("hvp: argnums must be a single int")
        x = xs[nums[0]]
        v = convert(v, "v", "hvp", dtype=dtypes.grad_dtype(x.dtype))
        if v.shape != x.shape:
            raise ShapeError(f"hvp: v has shape {v.shape}, which does not match the argument's "
                             f"shape {x.shape}")

        def body(sess):
            try:
                y = _run(f, xs, "hvp")
                if y.size != 1:
                    raise ShapeError(f"hvp(f): f must return a scalar, got shape {y.shape}")
                (g,), _ = backprop(y, _fill(y.shape, 1, dtypes.grad_dtype(y.dtype)), [x], sess)
                s = (g * v).sum() if g is not None else None
            finally:
                recording.end_recording()
            if s is None:
                return _fill(x.shape, 0, dtypes.grad_dtype(x.dtype))
            (hv_,), _ = backprop(s, _fill((), 1, s.dtype), [x], sess)
            return hv_ if hv_ is not None else _fill(x.shape, 0, dtypes.grad_dtype(x.dtype))
        return _with_session(body)

    return hv


class VJPFunction:
    """The pullback returned by ``vjp``: call it with a cotangent (y's shape) to get one
    gradient per primal. Keeps f's recording alive until it is garbage-collected."""

    def __init__(self, y, xs, sess, owner):
        self._y, self._xs, self._sess, self._owner = y, xs, sess, owner

    def __call__(self, cotangent: TensorLike) -> tuple[Tensor, ...]:
        y = self._y
        ct = convert(cotangent, "cotangent", "vjp", dtype=dtypes.grad_dtype(y.dtype))
        if ct.shape != y.shape:
            raise ShapeError(f"vjp: the cotangent has shape {ct.shape}, which does not match "
                             f"f's output shape {y.shape}")
        if not self._sess.alive:
            raise GradientError("vjp: this pullback's recording was released")
        gs, _ = backprop(y, ct, self._xs, self._sess)
        return tuple(g if g is not None else _fill(x.shape, 0, dtypes.grad_dtype(x.dtype))
                     for g, x in zip(gs, self._xs))

    def __del__(self):
        try:
            if self._owner:
                self._sess.release()
        except Exception:
            pass


def vjp(f: Callable[..., Tensor], *primals: TensorLike) -> tuple[Tensor, VJPFunction]:
    """``value, pullback = vjp(f, *primals)``; ``pullback(ct)`` returns ⟨ct, ∂f/∂primal⟩ for
    each primal, as many times as needed without re-running f.

    >>> import flowgrad as tf
    >>> y, pullback = tf.vjp(lambda a, b: a * b, tf.scalar(3.0), tf.scalar(4.0))
    >>> [g.item() for g in pullback(tf.scalar(1.0))]
    [4.0, 3.0]
    """
    _check(f, "vjp")
    xs = _distinct([convert(a, f"primals[{i}]", "vjp") for i, a in enumerate(primals)])
    level = recording.recording_level()
    try:
        sess, owner = recording.begin_recording()
        y = _run(f, xs, "vjp")
    except BaseException:
        recording.unwind_recording(level)
        raise
    recording.unwind_recording(level, keep=sess)     # the pullback keeps the recording (pinned)
    if owner:
        sess.detach()
    return y, VJPFunction(y, xs, sess, owner)


def jvp(f: Callable[..., Tensor], primals: TensorLike | Sequence[TensorLike],
        tangents: TensorLike | Sequence[TensorLike]) -> tuple[Tensor, Tensor]:
    """Forward mode: ``value, tangent_out = jvp(f, primals, tangents)`` where tangent_out is
    J·v (f's output shape), by the double-vjp construction (see the module doc).

    >>> import flowgrad as tf
    >>> y, t = tf.jvp(lambda x: x * x, [tf.tensor([1.0, 2.0])], [tf.tensor([1.0, 0.0])])
    >>> t.print()
    Tensor
        [2, 0]
    """
    _check(f, "jvp")
    if not isinstance(primals, (list, tuple)) or not isinstance(tangents, (list, tuple)):
        raise ArgumentError("jvp(f, primals, tangents): primals and tangents are lists (or "
                            "tuples), one tangent per primal")
    if len(primals) != len(tangents):
        raise ArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    xs = _distinct([convert(a, f"primals[{i}]", "jvp") for i, a in enumerate(primals)])
    vs = []
    for i, (x, t) in enumerate(zip(xs, tangents)):
        t = convert(t, f"tangents[{i}]", "jvp", dtype=dtypes.grad_dtype(x.dtype))
        if t.shape != x.shape:
            raise ShapeError(f"jvp: tangents[{i}] has shape {t.shape}, which does not match "
                             f"primals[{i}]'s shape {x.shape}")
        vs.append(t)

    def body(sess):
        try:
            y = _run(f, xs, "jvp")
            u = _fill(y.shape, 0, dtypes.grad_dtype(y.dtype))
            hs, _ = backprop(y, u, xs, sess)              # J^T u, recorded
            s = None
            # summed while recording: a sum made after end_recording has no path to u
            for h, v in zip(hs, vs):
                if h is not None:
                    t = (h * v).sum()
                    s = t if s is None else s + t
        finally:
            recording.end_recording()
        if s is None:
            return y, _fill(y.shape, 0, dtypes.grad_dtype(y.dtype))
        (jv,), _ = backprop(s, _fill((), 1, s.dtype), [u], sess)
        return y, jv if jv is not None else _fill(y.shape, 0, dtypes.grad_dtype(y.dtype))
    return _with_session(body)
