"""Which examples blow up my gradient? Per-example gradient norms with ``tf.vmap``.

A batch's gradient is one sum: a single poisoned example (a NaN feature, a wrong label, an
outlier) hides in it. ``per_example_grad_norms`` computes every example's own gradient at
once (vmap of variable_grads: each kernel runs on the whole batch) and returns its global
norm over the trainable variables, so the culprits can be found by index.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..arg_checks import as_int, check_arity, describe
from ..errors import ArgumentError
from ..tensor import Tensor, Variable


def per_example_grad_norms(loss_fn: Callable[..., Tensor], inputs,
                           var_list: Sequence[Variable] | None = None) -> Tensor:
    """The global gradient norm of each example: ``loss_fn(*example)`` is the loss of one
    example (each of ``inputs``, a tuple of batched tensors, sliced along axis 0), the
    gradient is taken with respect to ``var_list`` (default: the trainable variables the
    loss uses). Returns a ``[batch]`` tensor (NaN or Inf for an example whose gradient
    is not finite).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 1.0]), name="w_pe_doc")
    >>> xs = tf.tensor([[1.0, 0.0], [0.0, 3.0], [100.0, 0.0]])
    >>> norms = tf.debug.per_example_grad_norms(lambda x: (x * w).sum().square(), (xs,))
    >>> norms.array_sync()                     # |2 (x.w) x| per row
    [2.0, 18.0, 20000.0]
    >>> int(norms.arg_max().item())            # the example to look at
    2
    >>> w.dispose()
    """
    from .. import ops
    from ..gradients import variable_grads
    from ..vmap import vmap
    if not callable(loss_fn):
        raise ArgumentError(f"per_example_grad_norms(loss_fn, inputs): loss_fn must be a "
                            f"function of one example, got {type(loss_fn).__name__}")
    if isinstance(inputs, (Tensor, np.ndarray)):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ArgumentError("per_example_grad_norms(loss_fn, inputs): inputs must be a tuple "
                            "of batched tensors (one per argument of loss_fn)")
    for i, x in enumerate(inputs):
        try:
            rank = x.rank if isinstance(x, Tensor) else np.ndim(x) if isinstance(
                x, (np.ndarray, list, tuple)) else 0
        except ValueError:          # a ragged list
            rank = 0
        if rank == 0:
            raise ArgumentError(f"per_example_grad_norms(loss_fn, inputs): inputs[{i}] must be "
                                f"a batch (a tensor whose axis 0 runs over the examples), got "
                                f"{describe(x)}")
    check_arity(loss_fn, len(inputs), "per_example_grad_norms(loss_fn, inputs)")

    def norm(*example):
        grads = variable_grads(lambda: loss_fn(*example), var_list).grads
        squares = [g.cast("float64").square().sum() if g.dtype == "float64"
                   else g.square().sum() for g in grads.values()]
        return ops.OPS["add_n"](squares).sqrt() if len(squares) > 1 else squares[0].sqrt()
    return vmap(norm)(*inputs)


def worst_examples(norms, k: int = 5) -> list[int]:
    """Indices of the ``k`` largest per-example norms, non-finite ones first.

    >>> worst_examples(np.array([1.0, float("nan"), 5.0, 2.0]), 2)
    [1, 2]
    """
    k = as_int(k, "k", "worst_examples(norms, k)")
    try:
        a = np.asarray(norms.numpy() if isinstance(norms, Tensor) else norms,
                       dtype=np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"worst_examples(norms, k): norms must be the per-example norms "
                            f"(a tensor, array or list of numbers), got {describe(norms)}"
                            ) from None
    key = np.where(np.isfinite(a), a, np.inf)
    order = np.argsort(-key, kind="stable")
    return [int(i) for i in order[:max(0, k)]]


class PerExample:
    """One step's per-example gradient norms (``GradientMonitor.per_example[step]``):
    ``step``, ``norms`` (a NumPy array, one per example), ``worst`` (indices, largest
    first, non-finite first)."""

    def __init__(self, step, norms, worst):
        self.step, self.norms, self.worst = step, norms, worst

    def __repr__(self):
        finite = self.norms[np.isfinite(self.norms)]
        med = f"{np.median(finite):.3g}" if finite.size else "-"
        return (f"PerExample(step {self.step}: {self.norms.size} examples, median norm {med}, "
                f"worst {self.worst})")
