"""Which examples blow up my gradient? Per-example gradient norms, and what they say about
the batch.

A batch's gradient is one sum: a single poisoned example (a NaN feature, a wrong label, an
outlier) hides in it. ``per_example_grad_norms`` returns every example's own gradient norm,
so the culprits can be found by index. Two ways to get them:

- ``"vmap"``: every example's gradient at once (vmap of variable_grads: each kernel runs on
  the whole batch), then its norm. Any model; it materialises one gradient per example.
- ``"ghost"`` (Goodfellow 2015; Li et al. 2021): for a weight used as ``h @ W`` the
  example's gradient is ``h_iᵀ δ_i`` (δ_i the gradient of the loss at the layer's output),
  whose norm is ``‖h_i‖·‖δ_i‖`` for one row, and ``Σ_{t,s} (h_t·h_s)(δ_t·δ_s)`` squared for
  a layer input with a time axis: no ``[B, D, H]`` tensor is ever made. One batched forward
  and one backward that stops at the layer outputs (no weight gradients at all).

``gradient_noise`` turns the per-example gradients into the statistics of the batch:
McCandlish et al.'s noise scale and the adaptive-batch-size tests Cockpit (Schneider et al.,
NeurIPS 2021) plots.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import interceptors
from ..arg_checks import as_int, as_number, check_arity, choice, describe
from ..errors import ArgumentError, GradientError
from ..tensor import Tensor, Variable
from . import sites


def check_inputs(loss_fn, inputs, api):
    """``inputs`` as a tuple of batches for ``loss_fn(*example)`` (one per argument), or an
    ArgumentError naming ``api`` (per_example_grad_norms, gradient_noise, diagnose)."""
    if not callable(loss_fn):
        raise ArgumentError(f"{api}: loss_fn must be a function of one example, got "
                            f"{type(loss_fn).__name__}")
    if isinstance(inputs, (Tensor, np.ndarray)):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ArgumentError(f"{api}: inputs must be a tuple of batched tensors (one per "
                            f"argument of loss_fn)")
    for i, x in enumerate(inputs):
        try:
            rank = x.rank if isinstance(x, Tensor) else np.ndim(x) if isinstance(
                x, (np.ndarray, list, tuple)) else 0
        except ValueError:          # a ragged list
            rank = 0
        if rank == 0:
            raise ArgumentError(f"{api}: inputs[{i}] must be a batch (a tensor whose axis 0 "
                                f"runs over the examples), got {describe(x)}")
    check_arity(loss_fn, len(inputs), api)
    return tuple(inputs)


def per_example_grad_norms(loss_fn: Callable[..., Tensor], inputs,
                           var_list: Sequence[Variable] | None = None,
                           method: str = "auto") -> Tensor:
    """The global gradient norm of each example: ``loss_fn(*example)`` is the loss of one
    example (each of ``inputs``, a tuple of batched tensors, sliced along axis 0), the
    gradient is taken with respect to ``var_list`` (default: the trainable variables the
    loss uses). Returns a ``[batch]`` tensor (NaN or Inf for an example whose gradient
    is not finite).

    ``method``: ``"vmap"`` materialises each example's gradient (any model);
    ``"ghost"`` computes the norms of dense layers without them (every variable must be
    the weight of a ``mat_mul`` or a bias added to a layer's output: see the module doc);
    ``"auto"`` (default) uses ghost when the model allows it, else vmap.

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
    api = "per_example_grad_norms(loss_fn, inputs)"
    inputs = check_inputs(loss_fn, inputs, api)
    choice(method, "method", api, ("auto", "ghost", "vmap"),
           f"{api}: method must be 'auto', 'ghost' or 'vmap', got {describe(method)}")
    if var_list is not None:
        from ..gradients import check_var_list
        check_var_list(var_list, api)
    if method != "vmap":
        try:
            return ghost_norms(loss_fn, inputs, var_list)
        except GhostUnsupported as e:
            if method == "ghost":
                raise ArgumentError(f"{api} with method='ghost': {e}; use method='vmap' (or "
                                    f"'auto', which does so by itself)") from None
    return _vmap_norms(loss_fn, inputs, var_list)


def _vmap_norms(loss_fn, inputs, var_list):
    from .. import ops
    from ..gradients import variable_grads
    from ..vmap import vmap

    def norm(*example):
        grads = variable_grads(lambda: loss_fn(*example), var_list).grads
        squares = [g.square().sum() for g in grads.values()]
        if len({s.dtype for s in squares}) > 1:
            squares = [s.cast("float64") for s in squares]
        return ops.OPS["add_n"](squares).sqrt() if len(squares) > 1 else squares[0].sqrt()
    return vmap(norm)(*inputs)


def per_example_grads(loss_fn: Callable[..., Tensor], inputs,
                      var_list: Sequence[Variable] | None = None
                      ) -> dict[str, np.ndarray]:
    """Every example's gradient, by variable name: ``{name: array [batch, *shape]}``
    (float64 NumPy arrays, through vmap of variable_grads). What ``gradient_noise`` reads.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 2.0]), name="w_peg_doc")
    >>> from flowgrad.debug.per_example import per_example_grads
    >>> g = per_example_grads(lambda x: (x * w).sum(), (tf.tensor([[1.0, 0.0], [3.0, 4.0]]),))
    >>> g["w_peg_doc"].tolist()
    [[1.0, 0.0], [3.0, 4.0]]
    >>> w.dispose()
    """
    api = "per_example_grads(loss_fn, inputs)"
    inputs = check_inputs(loss_fn, inputs, api)
    if var_list is not None:
        from ..gradients import check_var_list
        check_var_list(var_list, api)
    from .. import scopes
    from ..gradients import variable_grads
    from ..vmap import vmap

    def one(*example):
        return dict(variable_grads(lambda: loss_fn(*example), var_list).grads)

    def run():
        return {k: np.asarray(g.numpy(), dtype=np.float64) for k, g in
                vmap(one)(*inputs).items()}
    return scopes.tidy(run)


# ---------------------------------------------------------------- ghost norms

class GhostUnsupported(Exception):
    """The model has a variable ghost norms cannot handle (the message says which)."""


@dataclass
class _Site:
    """One use of a tracked variable in the forward pass: ``kind`` "matmul" (the variable
    is operand ``pos`` of a mat_mul) or "bias" (it is added to a layer's output)."""
    kind: str
    prim: str
    var: Variable
    pos: int
    inputs: tuple
    attrs: dict
    out: Tensor
    dy: Tensor | None = None
    done: bool = False


def _swap(t):
    """``t`` with its last two axes exchanged."""
    from ..ops import OPS
    r = t.rank
    return OPS["transpose"](t, list(range(r - 2)) + [r - 1, r - 2])


def _rows(site):
    """``(u, v)``, each ``[rows, n]``: the example's gradient of the site's weight is
    ``Σ_t u_t v_tᵀ`` in the weight's own axes (so sites that share a weight stack rows)."""
    a, b = site.inputs
    ta, tb = site.attrs.get("transpose_a", False), site.attrs.get("transpose_b", False)
    d = site.dy
    if site.pos == 1:                   # z = op(a) @ op(W): d op(W) = op(a)ᵀ δ
        h = _swap(a) if ta else a
        u, v = (d, h) if tb else (h, d)
    else:                               # z = op(W) @ op(b): d op(W) = δ op(b)ᵀ
        h = b if tb else _swap(b)       # op(b)ᵀ: its columns become rows
        d = _swap(d)
        u, v = (h, d) if ta else (d, h)
    return (u.reshape([-1, u.shape[-1]]), v.reshape([-1, v.shape[-1]]))


def _ghost_square(us, vs):
    """‖Σ_t u_t v_tᵀ‖² from the stacked rows, without the matrix when that is cheaper."""
    from ..ops import OPS
    u = us[0] if len(us) == 1 else OPS["concat"](us, 0)
    v = vs[0] if len(vs) == 1 else OPS["concat"](vs, 0)
    t, m, n = u.shape[0], u.shape[1], v.shape[1]
    if t == 1:
        return u.square().sum() * v.square().sum()
    if t * t <= m * n:
        # NOTE: Σ_{t,s}(u_t·u_s)(v_t·v_s) sums terms of both signs: in float32 a gradient
        # much smaller than its rows' products loses digits to cancellation
        return (OPS["mat_mul"](u, u, False, True) * OPS["mat_mul"](v, v, False, True)).sum()
    return OPS["mat_mul"](u, v, True, False).square().sum()


def ghost_norms(loss_fn: Callable[..., Tensor], inputs,
                var_list: Sequence[Variable] | None = None) -> Tensor:
    """``per_example_grad_norms(..., method="ghost")`` (arguments as there, already checked):
    raises GhostUnsupported, naming the variable and the op, for a model it cannot handle."""
    from .. import scopes
    from ..vmap import vmap
    tracked = None if var_list is None else {id(v) for v in var_list if v.trainable}
    me = threading.get_ident()

    def one(*example):
        from ..gradients import GradientTape
        found, bad = [], []
        collecting = [True]

        def seen(prim, ins, attrs, out):
            if not collecting[0] or threading.get_ident() != me:
                return
            vs = [i for i, t in enumerate(ins) if isinstance(t, Variable) and (
                t.trainable if tracked is None else id(t) in tracked)]
            if vs:
                _classify(prim, ins, attrs, out, vs, found, bad)

        sites.add_checker(seen)
        tape = GradientTape(persistent=True)
        try:
            with tape:
                if var_list is not None:
                    tape.watch(list(var_list))
                loss = loss_fn(*example)
        finally:
            collecting[0] = False
            sites.remove_checker(seen)
        try:
            return _ghost_from_sites(tape, loss, found, bad, me)
        finally:
            tape.reset()

    return scopes.tidy(lambda: vmap(one)(*inputs))


def _classify(prim, ins, attrs, out, vs, found, bad):
    var = ins[vs[0]]
    if len(vs) == 1 and prim.name == "BatchMatMul" and var.rank == 2:
        found.append(_Site("matmul", prim.name, var, vs[0], tuple(ins), dict(attrs or {}), out))
    elif (len(vs) == 1 and prim.name == "Add" and len(ins) == 2
          and tuple(ins[1 - vs[0]].shape) == tuple(out.shape)):
        found.append(_Site("bias", prim.name, var, vs[0], tuple(ins), dict(attrs or {}), out))
    else:
        bad.append(f"the variable '{var.name}' is used by {prim.name}")


def _ghost_from_sites(tape, loss, found, bad, me):
    from ..ops import OPS
    from ..tape import unbroadcast
    if not isinstance(loss, Tensor) or loss.size != 1:
        raise GradientError(f"per_example_grad_norms: loss_fn must return the scalar loss of "
                            f"one example, got {getattr(loss, 'shape', type(loss).__name__)}")
    kinds = {}
    for s in found:
        if kinds.setdefault(id(s.var), s.kind) != s.kind:
            bad.append(f"the variable '{s.var.name}' is both a mat_mul weight and a bias")
    if bad:
        raise GhostUnsupported(", ".join(dict.fromkeys(bad)) + " (ghost norms handle mat_mul "
                               "weights and biases added to a layer's output)")
    if not found:
        raise GhostUnsupported("the loss uses no trainable variable through mat_mul or add")
    # a node is known by its kernel and its inputs; two sites alike are told apart only as
    # sources of their own passes
    keys = {}
    for s in found:
        keys.setdefault((s.prim, tuple(map(id, s.inputs))), []).append(s)
    by_key = {k: v[0] for k, v in keys.items() if len(v) == 1}

    def hook(n, i, t, dx, dy):
        if threading.get_ident() == me:
            s = by_key.get((n.prim.name, tuple(map(id, n.inputs))))
            if s is not None and not s.done:
                s.dy, s.done = dy, True
        return dx

    # Backward passes from the loss to the earliest site not yet reached: every later site
    # its output feeds is swept on the way and hands the hook its output's gradient (the
    # whole of it: everything between that site and the loss depends on the source). A
    # chain of layers takes one pass, independent towers one each.
    for s in found:
        if s.done:
            continue
        w = interceptors.watch("graph", dx=hook)
        try:
            (g,) = tape.gradient(loss, [s.out])
        finally:
            interceptors.unwatch(w)
        s.dy, s.done = g, True
    squares = []
    per_var = {}
    for s in found:
        if s.dy is not None:
            per_var.setdefault(id(s.var), []).append(s)
    for group in per_var.values():
        if group[0].kind == "matmul":
            rows = [_rows(s) for s in group]
            squares.append(_ghost_square([r[0] for r in rows], [r[1] for r in rows]))
        else:
            gb = [unbroadcast(s.dy, s.var.shape) for s in group]
            squares.append((gb[0] if len(gb) == 1 else OPS["add_n"](gb)).square().sum())
    if not squares:
        return OPS["fill"]((), 0, loss.dtype)
    if len({q.dtype for q in squares}) > 1:
        squares = [q.cast("float64") for q in squares]
    total = squares[0] if len(squares) == 1 else OPS["add_n"](squares)
    return total.sqrt()


# ---------------------------------------------------------------- gradient noise

@dataclass
class NoiseStats:
    """The batch statistics of per-example gradients g_i (ḡ their mean, B the batch, D the
    number of parameters); see :func:`gradient_noise`."""
    b_simple: float
    norm_test: float
    inner_test: float
    ortho_test: float
    gsnr: float
    early_stopping: float
    grad_norm: float            # ‖ḡ‖
    trace_cov: float            # tr Σ̂ = Σ‖g_i − ḡ‖² / (B − 1)
    size: int                   # D


@dataclass
class GradientNoise(NoiseStats):
    """``gradient_noise``'s answer: the statistics over every variable, ``batch_size``, and
    ``per_variable`` (name -> NoiseStats of that variable's gradients alone)."""
    batch_size: int = 0
    per_variable: dict = field(default_factory=dict)

    def __str__(self):
        return (f"GradientNoise(B={self.batch_size}: B_simple {self.b_simple:.4g}, norm test "
                f"{self.norm_test:.4g}, inner test {self.inner_test:.4g}, orthogonality test "
                f"{self.ortho_test:.4g}, GSNR {self.gsnr:.4g}, early stopping "
                f"{self.early_stopping:.4g})")


def noise_stats(g: np.ndarray, epsilon: float = 1e-5) -> NoiseStats:
    """The statistics of per-example gradients ``g`` (``[B, D]``, float64); NaN where a
    ratio has a zero denominator (a zero mean gradient, a single example).

    >>> s = noise_stats(np.array([[1.0, 0.0], [3.0, 2.0]]))
    >>> round(s.b_simple, 3), round(s.norm_test, 3)         # tr Σ̂ = 4, ‖ḡ‖² = 5
    (0.8, 0.632)
    """
    g = np.asarray(g, dtype=np.float64)
    b, d = g.shape
    mean = g.mean(axis=0)
    m2 = float(mean @ mean)
    dev = g - mean
    ss = float(np.sum(dev * dev))                       # Σ‖g_i − ḡ‖²
    proj = g @ mean                                     # g_iᵀḡ
    with np.errstate(divide="ignore", invalid="ignore"):
        b1 = np.float64(b - 1)
        trace_cov = ss / b1 if b > 1 else np.nan
        b_simple = np.float64(trace_cov) / m2
        norm_test = np.sqrt(np.float64(ss) / (b1 * b * m2))
        # Bollapragada et al. (2018), as Cockpit: the sample variances of each g_i's
        # projection on ḡ and of its part orthogonal to ḡ
        var_inner = np.sum((proj - m2) ** 2) / b1
        inner_test = np.sqrt(var_inner / (b * m2 * m2))
        ortho = np.sum((g - np.outer(proj / m2, mean)) ** 2) / b1
        ortho_test = np.sqrt(ortho / (b * m2))
        # per parameter: GSNR (Liu et al. 2020) over the population variance, the EB
        # criterion (Mahsereci et al. 2017) over the unbiased one, each + ε as Cockpit
        second = np.mean(g * g, axis=0)
        gsnr = np.mean(mean * mean / (second - mean * mean + epsilon))
        var_u = np.sum(dev * dev, axis=0) / b1
        early = 1.0 - b * np.mean(mean * mean / (var_u + epsilon))
    return NoiseStats(*(float(v) for v in (b_simple, norm_test, inner_test, ortho_test, gsnr,
                                           early, np.sqrt(m2), trace_cov)), size=int(d))


def gradient_noise(loss_fn: Callable[..., Tensor], inputs,
                   var_list: Sequence[Variable] | None = None, *,
                   epsilon: float = 1e-5) -> GradientNoise:
    """How noisy is this batch's gradient? From the per-example gradients g_i of
    ``loss_fn(*example)`` (``inputs`` and ``var_list`` as in per_example_grad_norms; ḡ
    their mean, B the batch size):

    - ``b_simple``: McCandlish et al.'s simple noise scale tr Σ̂ / ‖ḡ‖², Σ̂ the unbiased
      covariance (tr Σ̂ = Σ‖g_i − ḡ‖² / (B − 1)): the batch size past which a larger one
      stops paying. Far above B: the batch is too noisy for its step.
    - ``norm_test``, ``inner_test``, ``ortho_test``: the smallest θ, θ, ν for which the norm,
      inner-product and orthogonality tests of adaptive batch sizes pass (Byrd et al. 2012,
      Bollapragada et al. 2018, as Cockpit reports them); above 1 the noise dominates.
    - ``gsnr``: the mean over parameters of ḡ_j² / Var_j (Liu et al. 2020), Var_j the
      population variance of the j-th component, + ``epsilon``.
    - ``early_stopping``: 1 − B·mean_j ḡ_j² / (σ̂_j² + ``epsilon``) (Mahsereci et al.'s
      evidence-based criterion, σ̂_j² unbiased): above 0, the gradient is noise.
    - ``grad_norm`` (‖ḡ‖), ``trace_cov`` (tr Σ̂), ``per_variable`` (the same per variable).

    Materialises every example's gradient (B times the parameters, in float64).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([0.0, 0.0]), name="w_gn_doc")
    >>> xs = tf.tensor([[1.0, 0.0], [3.0, 2.0]])
    >>> n = tf.debug.gradient_noise(lambda x: (x * (x - w)).sum() / 2, (xs,))
    >>> round(n.b_simple, 3), round(n.norm_test, 3)    # g_i = -x_i / 2: tr Σ̂ 1, ‖ḡ‖² 1.25
    (0.8, 0.632)
    >>> w.dispose()
    """
    api = "gradient_noise(loss_fn, inputs)"
    epsilon = as_number(epsilon, "epsilon", api, minimum=0)
    inputs = check_inputs(loss_fn, inputs, api)
    b = inputs[0].shape[0] if isinstance(inputs[0], Tensor) else len(inputs[0])
    if b < 2:
        raise ArgumentError(f"{api}: the batch has {b} example{'s' if b != 1 else ''}; the "
                            f"statistics need at least 2")
    per = per_example_grads(loss_fn, inputs, var_list)
    if not per:
        raise GradientError("gradient_noise: the loss reaches no trainable variable")
    flat = {k: v.reshape(b, -1) for k, v in per.items()}
    total = noise_stats(np.concatenate(list(flat.values()), axis=1), epsilon)
    out = GradientNoise(**vars(total), batch_size=b)
    out.per_variable = {k: noise_stats(v, epsilon) for k, v in flat.items()}
    return out


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
