"""Gradient clipping: by norm, by global norm (``clip_by_value`` is an op in flowgrad.ops).

Written with flowgrad ops, so clipping inside a loss stays differentiable; a zero tensor is
handled without a 0/0 in the value or the gradient.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..arg_checks import as_number, norm_axes
from ..errors import ArgumentError, ShapeError
from ..ops import OPS
from ..tensor import Tensor, convert

if TYPE_CHECKING:
    from ..tensor import TensorLike

_where = OPS["where"]


def _safe_norm(t, axes=None, keep_dims=False):
    # NOTE: sqrt'(0) is infinite; norm zero tensors through a where so neither the value nor
    # the gradient becomes NaN (the classic where trap, avoided by masking the input first)
    sq = t.square().sum(axes, keep_dims)
    positive = sq > 0
    return _where(positive, _where(positive, sq, 1).sqrt(), sq)


def clip_by_norm(t: TensorLike, clip_norm: float,
                 axes: int | Sequence[int] | None = None) -> Tensor:
    """t scaled down so that its L2 norm (over ``axes``, all by default) is at most
    ``clip_norm``: ``t * clip_norm / max(norm(t), clip_norm)``.

    >>> import flowgrad as tf
    >>> tf.clip_by_norm(tf.tensor([3, 4]), 1).print()
    Tensor
        [0.6, 0.8]
    """
    x = convert(t, "t", "clip_by_norm")
    c = as_number(clip_norm, "clip_norm", "clip_by_norm()", positive=True)
    norm = _safe_norm(x, norm_axes(axes, x.rank, "clip_by_norm", "axes"), True)
    return x * c / norm.maximum(c)


def global_norm(tensors: TensorLike | Sequence[TensorLike | None]) -> Tensor:
    """sqrt of the sum of squares of every entry of every tensor (None entries skipped).

    >>> import flowgrad as tf
    >>> tf.global_norm([tf.tensor([3.0]), tf.tensor([4.0])]).item()
    5.0
    """
    return _global_norm(tensors, "global_norm")


def _global_norm(tensors, fn):
    ts = _tensors(tensors, fn)
    if not ts:
        raise ArgumentError(f"{fn}() needs at least one tensor")
    total = None
    for t in ts:
        s = t.square().sum()
        total = s if total is None else total + s
    positive = total > 0
    return _where(positive, _where(positive, total, 1).sqrt(), total)


def clip_by_global_norm(tensors: Sequence[TensorLike | None], clip_norm: float,
                        use_norm: TensorLike | None = None
                        ) -> tuple[list[Tensor | None], Tensor]:
    """Scale a list of tensors together so that their global norm is at most clip_norm.
    Returns ``(clipped, global_norm)``; None entries stay None.

    >>> import flowgrad as tf
    >>> clipped, norm = tf.clip_by_global_norm([tf.tensor([3.0]), tf.tensor([4.0])], 1.0)
    >>> [round(t.item(), 3) for t in clipped], norm.item()
    ([0.6, 0.8], 5.0)
    """
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise ArgumentError("clip_by_global_norm() takes a list of tensors")
    c = as_number(clip_norm, "clip_norm", "clip_by_global_norm()", positive=True)
    if use_norm is None:
        norm = _global_norm(tensors, "clip_by_global_norm")
    else:
        norm = convert(use_norm, "use_norm", "clip_by_global_norm")
        if norm.size != 1:
            raise ShapeError(f"clip_by_global_norm(): use_norm must be one number (a global "
                             f"norm), got a tensor of shape {list(norm.shape)}")
    # c * min(1/norm, 1/c): 1 when the norm is small, c/norm otherwise (NaN if norm is)
    scale = (norm.reciprocal().minimum(1.0 / c)) * c
    out = [None if t is None else
           _scaled(convert(t, f"tensors[{i}]", "clip_by_global_norm"), scale)
           for i, t in enumerate(tensors)]
    return out, norm


def _scaled(t, scale):
    # each tensor keeps its dtype (as TF's clip_by_global_norm casts the scale): the norm of
    # float32 and float64 tensors together is float64, and a float32 gradient times it
    # became float64, which its variable refused
    return t * (scale if scale.dtype == t.dtype else scale.cast(t.dtype))


def _tensors(tensors, fn):
    if isinstance(tensors, Tensor):
        return [tensors]
    if not isinstance(tensors, (list, tuple)):
        raise ArgumentError(f"{fn}() takes a list of tensors, got {type(tensors).__name__}")
    return [convert(t, f"tensors[{i}]", fn) for i, t in enumerate(tensors) if t is not None]


Tensor.clip_by_norm = clip_by_norm  # type: ignore[method-assign,assignment]  # x.clip_by_norm
