"""``tf.custom_grad``: an op whose gradient you define (TF.js ``tf.customGrad``), recorded
as one CustomGradient node whose rule calls your gradient function.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import engine as E
from . import recording
from .errors import ArgumentError, GradientError
from .gradients import call_fitted, positional_arity
from .ops import PRIMITIVES
from .tensor import Tensor, convert

if TYPE_CHECKING:
    from .tensor import TensorLike


def _no_save(tensors):
    pass


def _custom_vjp(dy, *inputs, grad_func, saved, name, arity, forward):
    return grad_func(dy, saved) if arity is None or arity >= 2 else grad_func(dy)


_CUSTOM = E.Primitive("CustomGradient", None, strict=True)
_CUSTOM.def_vjp(_custom_vjp)
PRIMITIVES["CustomGradient"] = _CUSTOM


def custom_grad(f: Callable[..., Any]) -> Callable[..., Tensor]:
    """An op whose gradient you define: f(*inputs, save) returns
    ``{"value": y, "grad_func": g}`` (or ``(y, g)``), and ``g(dy, saved)`` returns one
    gradient per input. ``save([tensors])`` keeps tensors for g.

    The gradient function is itself differentiated when an outer gradient is recording, and
    tensors f computed (saved or captured) stay usable and connected.

    >>> import flowgrad as tf
    >>> def square(x, save):
    ...     save([x])
    ...     return {"value": x.square(), "grad_func": lambda dy, saved: dy * saved[0] * 2}
    >>> op = tf.custom_grad(square)
    >>> tf.grad(lambda x: op(x).sum())(tf.tensor([1, 2, 3])).print()
    Tensor
        [2, 4, 6]
    """
    if not callable(f):
        raise ArgumentError("The f passed in custom_grad(f) must be a function.")
    name = getattr(f, "__name__", "custom_grad")
    if name == "<lambda>":
        name = "custom_grad"
    arity = positional_arity(f)

    def op(*inputs: TensorLike) -> Tensor:
        xs = []
        for i, x in enumerate(inputs):
            if not isinstance(x, Tensor):
                try:
                    x = convert(x, str(i), name)
                except ArgumentError:
                    raise ArgumentError(f"The args passed in custom_grad(f)(x1, x2,...) must all "
                                        f"be tensors (argument {i} is "
                                        f"{type(x).__name__})") from None
            xs.append(x)
        saved: list[Tensor] = []

        def save(tensors):
            if isinstance(tensors, Tensor):
                tensors = [tensors]
            if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor)
                                                                  for t in tensors):
                raise ArgumentError("save() takes a list of tensors: save([x, y])")
            saved[:] = list(tensors)

        # (f may leave out ``save``, as a JS function ignores extra arguments)
        out = call_fitted(f, arity, (*xs, save), "custom_grad(f)")
        value, grad_func = _parse_custom(out)
        if not recording.is_recording() or not xs:
            return value
        value.throw_if_disposed()
        y = value._rewrap()
        E.share_buffer(value, y)
        # "forward" lets gradient checks compare grad_func with differences of f
        E.record(_CUSTOM, xs, y, {"grad_func": grad_func, "saved": saved, "name": name,
                                  "arity": positional_arity(grad_func),
                                  "forward": lambda *ts: _parse_custom(
                                      call_fitted(f, arity, (*ts, _no_save), "custom_grad(f)"))[0]})
        return y

    op.__name__ = op.__qualname__ = name
    op.__code__ = op.__code__.replace(co_name=name, co_qualname=name)   # named in debug reports
    op.__doc__ = f.__doc__
    return op


def _parse_custom(out):
    head = "The function f passed in custom_grad(f) must return an object where"
    if isinstance(out, dict):
        value = out.get("value")
        grad_func = out.get("grad_func", out.get("gradFunc"))
    elif isinstance(out, (tuple, list)) and len(out) == 2:
        value, grad_func = out
    else:
        value = getattr(out, "value", None)
        grad_func = getattr(out, "grad_func", getattr(out, "gradFunc", None))
    if not isinstance(value, Tensor):
        raise GradientError(f"{head} `obj.value` is a tensor (f returned "
                            f"{type(out).__name__}; return {{'value': y, 'grad_func': g}} or "
                            f"(y, g))")
    if not callable(grad_func):
        raise GradientError(f"{head} `obj.grad_func` is a function.")
    return value, grad_func
