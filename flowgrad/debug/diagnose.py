"""Why is my training not working? ``tf.debug.diagnose`` names the cause.

Every gradient can be right and training still fail: a learning rate past the stability
limit, a batch too noisy, dead units, one example that dominates, inputs on the wrong
scale, a run that has converged. ``diagnose`` measures the current weights (loss, per-layer
and per-example gradients, curvature, gradient noise, the inputs) and takes a few probe
steps with a copy of the optimizer; the user's variables are put back bit for bit and the
user's optimizer is never touched. Each finding has a ``cause`` from ``CAUSES``, a
``where``, the ``evidence`` (the numbers it rests on) and ``advice``.

The criteria, each relative so that a healthy run raises none:

- ``non_finite``: the loss, a gradient or an example's gradient holds a NaN or an Inf.
- ``learning_rate_too_high``: lr x lambda_max above the stability limit of the optimizer
  (2 for SGD; 2(1 + beta) with momentum beta; for Adam, RMSProp and Adagrad the sharpness
  of the preconditioned Hessian P^-1 H, P = sqrt(v) + eps with v the second moments of the
  probe's gradients, against (2 + 2 beta1) / (1 - beta1) for Adam, Cohen et al. 2022, and
  2(1 + momentum) for the others; Adadelta, whose step scales itself, by its probe alone),
  or the probe steps make the loss grow or overflow.
- ``exploding_gradient``: one step would move a variable by more than ``UPDATE_LIMIT`` (2) x
  its own size (lr x |g| against |w|, as the gradient monitor judges it), the gradient grows
  ``GROWTH_LIMIT`` (1e3) x over the probe steps, or the weight gradients' RMS grows more than
  ``DEPTH_RATIO`` (1e4) toward the input (variables in creation order, input first).
- ``vanishing_gradient``: the weight gradients' RMS shrinks more than ``DEPTH_RATIO`` toward
  the input.
- ``dead_units``: at least ``DEAD_SHARE`` (25 %) of a layer's units (the columns of a
  weight matrix) get exactly no gradient from any example.
- ``dominant_example``: one example's gradient norm is ``DOMINANT`` (10) x the batch's
  median or more.
- ``bad_input_scale``: an input's features have an RMS above ``INPUT_HIGH`` (10) or all
  below ``INPUT_LOW`` (0.01), or their RMS spans more than ``INPUT_SPREAD`` (100).
- ``noisy_batch``: the gradient noise scale B_simple exceeds the batch (the norm test above
  1: the batch's gradient is mostly noise), while the run is not converged.
- ``converged``: the gradient is within its own noise (the early-stopping criterion of
  Mahsereci et al. is positive) or zero, and the probe steps barely move the loss.
- ``learning_rate_too_low``: lr x lambda_max below 1 % of the stability limit and the probe
  steps barely move the loss, while the run is not converged.
"""
from __future__ import annotations

import html
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..arg_checks import as_int, describe
from ..errors import ArgumentError
from ..tensor import Tensor, Variable

CAUSES = ("non_finite", "learning_rate_too_high", "exploding_gradient", "vanishing_gradient",
          "dead_units", "dominant_example", "bad_input_scale", "noisy_batch",
          "learning_rate_too_low", "converged")

DEPTH_RATIO = 1e4
UPDATE_LIMIT, GROWTH_LIMIT = 2.0, 1e3
DEAD_SHARE = 0.25
DOMINANT = 10.0
INPUT_HIGH, INPUT_LOW, INPUT_SPREAD = 10.0, 0.01, 100.0
SLOW = 0.01             # lr x lambda_max below this share of the limit: too low
MAX_STEPS = 1000        # probe steps (each a full gradient of the batch)
STILL = 1e-3            # a relative loss change below this over the probe: the loss is still


class TrainingFinding:
    """One cause found: ``cause`` (one of ``CAUSES``), ``where`` (a variable's name, an
    example's index, an input's position, or None for the whole model), ``evidence`` (a
    dict of the numbers it rests on) and ``advice``.

    >>> f = TrainingFinding("dominant_example", 3, {"norm": 120.0, "median": 1.5}, "look at it")
    >>> str(f)
    'dominant_example at 3: norm 120, median 1.5 -> look at it'
    """

    def __init__(self, cause: str, where: Any, evidence: dict, advice: str):
        self.cause, self.where, self.evidence, self.advice = cause, where, evidence, advice

    def __str__(self):
        at = "" if self.where is None else f" at {self.where}"
        nums = ", ".join(f"{k} {_fmt(v)}" for k, v in self.evidence.items())
        return f"{self.cause}{at}: {nums} -> {self.advice}"

    def __repr__(self):
        return f"TrainingFinding({self.cause!r}, where={self.where!r})"


class Diagnosis:
    """What ``diagnose`` found: ``findings`` (most severe first), ``causes`` (their causes),
    ``healthy`` (no finding), and ``measurements`` (every number measured, by name)."""

    def __init__(self, findings: list[TrainingFinding], measurements: dict):
        order = {c: i for i, c in enumerate(CAUSES)}
        self.findings = sorted(findings, key=lambda f: order[f.cause])
        self.measurements = measurements

    @property
    def causes(self) -> list[str]:
        return [f.cause for f in self.findings]

    @property
    def healthy(self) -> bool:
        return not self.findings

    def __str__(self):
        m = self.measurements
        head = (f"Diagnosis ({m['optimizer']}, lr {_fmt(m['learning_rate'])}, batch "
                f"{m['batch']}, {m['probe_steps']} probe steps): ")
        if self.healthy:
            return head + "no problem found."
        lines = [head + f"{len(self.findings)} finding{'s' * (len(self.findings) > 1)}"]
        for f in self.findings:
            at = "" if f.where is None else f" (at {f.where})"
            lines.append(f"  {f.cause}{at}")
            lines.append("    evidence: " + ", ".join(f"{k} {_fmt(v)}"
                                                      for k, v in f.evidence.items()))
            lines.append(f"    advice:   {f.advice}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self):
        """Jupyter's display: one table row per finding."""
        m = self.measurements
        e = html.escape
        head = (f"<b>Diagnosis</b> ({e(m['optimizer'])}, lr {_fmt(m['learning_rate'])}, batch "
                f"{m['batch']}, {m['probe_steps']} probe steps)")
        if self.healthy:
            return f"<div>{head}: no problem found.</div>"
        rows = "".join(
            f"<tr><td><b>{e(f.cause)}</b></td><td>{e(str(f.where))}</td><td>"
            + e(", ".join(f"{k} {_fmt(v)}" for k, v in f.evidence.items()))
            + f"</td><td>{e(f.advice)}</td></tr>" for f in self.findings)
        return (f"<div>{head}<table><tr><th>cause</th><th>where</th><th>evidence</th>"
                f"<th>advice</th></tr>{rows}</table></div>")


def _causes(findings):
    return [f.cause for f in findings]


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


# ---------------------------------------------------------------- measuring

def _check(loss_fn, inputs, optimizer, steps):
    from ..ops import OPS
    from ..train.optimizers import Optimizer
    from .per_example import check_inputs
    api = "diagnose(loss_fn, inputs, optimizer)"
    inputs = check_inputs(loss_fn, inputs, api)
    inputs = tuple(x if isinstance(x, Tensor) else OPS["tensor"](x) for x in inputs)
    sizes = {x.shape[0] for x in inputs}
    if len(sizes) != 1:
        raise ArgumentError(f"{api}: every input must be a batch with the same axis 0, got "
                            f"shapes {[list(x.shape) for x in inputs]}")
    if not isinstance(optimizer, Optimizer):
        raise ArgumentError(f"diagnose(loss_fn, inputs, optimizer): optimizer must be a "
                            f"tf.train optimizer, got {describe(optimizer)}")
    steps = as_int(steps, "steps", "diagnose(loss_fn, inputs, optimizer, steps=)")
    if not 2 <= steps <= MAX_STEPS:
        raise ArgumentError(f"diagnose(..., steps={steps}): the probe takes 2 to {MAX_STEPS} "
                            f"steps (2 is the least that shows where the loss goes)")
    return inputs, sizes.pop(), steps


def _limit(optimizer):
    """The optimizer's stability limit for lr x (preconditioned) sharpness, and the
    preconditioner's kind ("adam", "rmsprop", "adagrad" or None). Adadelta's step scales
    itself (lr multiplies a ratio of running averages, not the gradient): no limit (None),
    it is judged by its probe steps alone."""
    from ..train import optimizers as O
    cfg = optimizer.get_config()
    if isinstance(optimizer, O.AdadeltaOptimizer):
        return None, None
    if isinstance(optimizer, O.AdagradOptimizer):
        return 2.0, "adagrad"
    if isinstance(optimizer, (O.AdamOptimizer, O.AdamaxOptimizer)):
        b1 = float(cfg["beta1"])
        return (2 + 2 * b1) / (1 - b1), "adam"
    if isinstance(optimizer, O.RMSPropOptimizer):
        mom = float(cfg["momentum"] or 0.0)
        return 2 * (1 + mom), "rmsprop"
    if isinstance(optimizer, O.MomentumOptimizer):
        return 2 * (1 + float(cfg["momentum"])), None
    return 2.0, None


def _flat_norm(arrays):
    with np.errstate(over="ignore", invalid="ignore"):       # (an exploding probe: inf)
        return math.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays))


def _sharpness(loss, var_list, scale, seed, steps=20):
    """The largest |eigenvalue| of S H S (S = diag(scale[name]), by variable) by Lanczos on
    Hessian-vector products (its extreme Ritz values converge first: 20 steps suffice for
    the two digits a stability limit needs)."""
    from ..scopes import tidy
    from .curvature import HessianOperator, lanczos
    rng = np.random.default_rng(seed)

    def body():
        op = HessianOperator(loss, var_list, "diagnose(loss_fn, inputs, optimizer)")
        try:
            s = np.concatenate([scale[n].reshape(-1) for n in op.names])
            a, b, _ = lanczos(lambda v: s * op.matvec(s * v), rng.standard_normal(op.size),
                              steps, rng)
            t = np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1)
            return float(np.abs(np.linalg.eigvalsh(t)).max())
        finally:
            op.close()
    return tidy(body)


def _restore(var_list, saved):
    """Put the probe's variables back, whole: a Ctrl-C in the middle restores them all
    again before it propagates (the user's model is never left half-probed)."""
    from ..ops import OPS

    def put():
        for v, a in zip(var_list, saved):
            v.assign(OPS["tensor"](a, dtype=v.dtype))
    try:
        put()
    except BaseException:
        put()
        raise


def _layers(var_list):
    """The weight matrices (rank >= 2), input first (creation order)."""
    return [v for v in sorted(var_list, key=lambda v: v.id) if v.rank >= 2]


def diagnose(loss_fn: Callable[..., Tensor], inputs: Any, optimizer: Any,
             var_list: Sequence[Variable] | None = None, steps: int = 20, *,
             seed: int = 0) -> Diagnosis:
    """Probe the current weights and name why training goes wrong (see the module docstring
    for each cause's criterion). ``loss_fn(*example)`` is one example's loss; ``inputs`` a
    tuple of batched tensors (as ``per_example_grad_norms``); the batch's loss is their mean.
    ``optimizer`` is the one training the model: a copy of it takes ``steps`` probe steps
    on the batch, after which the variables are restored bit for bit (the optimizer itself is
    untouched). ``var_list`` defaults to the trainable variables the loss reaches.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([0.5, -0.5]), name="w_diag_doc")
    >>> x = tf.tensor([[1.0, 2.0], [2.0, 1.0], [1.5, 1.5], [0.5, 2.5]])
    >>> y = tf.tensor([1.0, -1.0, 0.0, 2.0])
    >>> d = tf.debug.diagnose(lambda xi, yi: ((xi * w).sum() - yi).square(), (x, y),
    ...                       tf.train.sgd(1.0))
    >>> d.causes
    ['learning_rate_too_high']
    >>> tf.debug.diagnose(lambda xi, yi: ((xi * w).sum() - yi).square(), (x, y),
    ...                   tf.train.sgd(0.05)).healthy
    True
    >>> w.dispose()
    """
    from ..gradients import variable_grads
    from ..scopes import tidy
    from ..vmap import vmap
    from .per_example import noise_stats, per_example_grads
    inputs, batch, steps = _check(loss_fn, inputs, optimizer, steps)
    if var_list is not None:
        from ..gradients import check_var_list
        check_var_list(var_list, "diagnose(loss_fn, inputs, optimizer, var_list)")
    seed = as_int(seed, "seed", "diagnose(..., seed=)", minimum=0)

    def loss():
        return vmap(loss_fn)(*inputs).mean()

    def first():
        r = variable_grads(loss, list(var_list) if var_list is not None else None)
        return float(r.value.numpy()), {k: g.numpy().astype(np.float64)
                                        for k, g in r.grads.items()}
    value, grads = tidy(first)
    if var_list is None:
        from ..tensor import find_variable
        var_list = [find_variable(k) for k in grads]
    var_list = list(var_list)
    if not var_list:
        raise ArgumentError("diagnose(loss_fn, inputs, optimizer): the loss uses no trainable "
                            "variable: nothing to diagnose")
    lr = optimizer.current_learning_rate()
    m = {"optimizer": type(optimizer).__name__, "learning_rate": float(lr), "batch": batch,
         "probe_steps": steps, "loss": value}
    findings: list[TrainingFinding] = []

    # ---- non-finite values end the diagnosis: every other number would be NaN too
    bad = [k for k, g in grads.items() if not np.all(np.isfinite(g))]
    per = per_example_grads(loss_fn, inputs, var_list)
    flat = np.concatenate([g.reshape(batch, -1) for g in per.values()], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.sum(flat * flat, axis=1))
    m["example_norms"] = norms
    bad_examples = [int(i) for i in np.flatnonzero(~np.isfinite(norms))]
    if not math.isfinite(value) or bad or bad_examples:
        where = bad_examples[:5] if bad_examples else (bad or None)
        findings.append(TrainingFinding(
            "non_finite", where, {"loss": value, "variables": len(bad),
                                  "examples": len(bad_examples)},
            "find the op that made it with tf.debug.check_numerics(f) or "
            "tf.debug.enable_debug_mode(); look at the examples named (a NaN feature?)"))
        return Diagnosis(findings, m)

    # ---- the layers' gradients
    layers = _layers(var_list)
    rms = [math.sqrt(float(np.mean(np.square(grads[v.name])))) for v in layers]
    m["layer_grad_rms"] = {v.name: r for v, r in zip(layers, rms)}
    positive = [(i, r) for i, r in enumerate(rms) if r > 0]
    if len(positive) >= 2:
        (i_lo, lo), (i_hi, hi) = min(positive, key=lambda p: p[1]), max(positive,
                                                                         key=lambda p: p[1])
        if hi > DEPTH_RATIO * lo:
            if i_hi < i_lo:
                findings.append(TrainingFinding(
                    "exploding_gradient", layers[i_hi].name,
                    {"grad_rms": hi, "smallest": lo, "at": layers[i_lo].name},
                    "the gradient grows toward the input: clip it (clip_norm), scale the "
                    "initial weights down (Glorot/He), or add normalisation layers"))
            else:
                findings.append(TrainingFinding(
                    "vanishing_gradient", layers[i_lo].name,
                    {"grad_rms": lo, "largest": hi, "at": layers[i_hi].name},
                    "the gradient fades toward the input: use relu-family activations, "
                    "residual connections or normalisation, and He/Glorot initialisation"))
    oversized = None        # (judged after the learning rate: a too-high one explains it)
    for v, r in zip(layers, rms):
        w = math.sqrt(float(np.mean(np.square(v.numpy().astype(np.float64)))))
        if w > 0 and lr * r > UPDATE_LIMIT * w and oversized is None:
            oversized = (TrainingFinding(
                "exploding_gradient", v.name, {"update_rms": lr * r, "weight_rms": w},
                "one step would move these weights by more than their own size: clip the "
                "gradients (clip_norm), scale the initial weights down (Glorot/He), or add "
                "normalisation layers"))
    for v in layers:
        g = grads[v.name].reshape(-1, v.shape[-1])
        dead = int(np.sum(np.all(g == 0, axis=0)))
        if v.shape[-1] >= 2 and dead >= DEAD_SHARE * v.shape[-1]:
            findings.append(TrainingFinding(
                "dead_units", v.name, {"dead": dead, "units": int(v.shape[-1]),
                                       "share": dead / v.shape[-1]},
                "these units get no gradient from any example (dead relus): lower the "
                "learning rate, use leaky_relu or elu, or re-initialise them"))

    # ---- examples and inputs
    med = float(np.median(norms))
    top = int(np.argmax(norms))
    if batch >= 4 and norms[top] >= DOMINANT * med and norms[top] > 0:
        findings.append(TrainingFinding(
            "dominant_example", top, {"norm": float(norms[top]), "median": med},
            f"example {top} outweighs the batch: check its label and features (an outlier? a "
            f"wrong label?), or clip per-example gradients"))
    for i, x in enumerate(inputs):
        if not x.dtype.startswith("float") or x.rank < 2:
            continue
        a = x.numpy().astype(np.float64).reshape(batch, -1)
        feat = np.sqrt(np.mean(np.square(a), axis=0))
        live = feat[feat > 0]
        if not live.size:
            continue
        spread = float(live.max() / live.min())
        if live.max() > INPUT_HIGH or live.max() < INPUT_LOW or spread > INPUT_SPREAD:
            findings.append(TrainingFinding(
                "bad_input_scale", f"inputs[{i}]",
                {"largest_rms": float(live.max()), "smallest_rms": float(live.min())},
                "standardise the inputs: subtract each feature's mean and divide by its "
                "standard deviation (computed on the training set)"))

    # ---- gradient noise
    noise = noise_stats(flat)
    b_simple, early = noise.b_simple, noise.early_stopping
    m.update(b_simple=b_simple, early_stopping=early)
    gnorm = _flat_norm(grads.values())
    m["grad_norm"] = gnorm

    # ---- probe steps on a copy of the optimizer; the variables are put back after
    limit, kind = _limit(optimizer)
    saved = [v.numpy().copy() for v in var_list]
    losses, gnorms = [value], [_flat_norm(grads.values())]
    v_hat = [np.zeros(v.shape) for v in var_list]
    cfg = optimizer.get_config()
    # the preconditioner's second moments, from the probe's gradients: Adam's and RMSProp's
    # running average, Adagrad's sum from its initial accumulator
    beta2 = float(cfg.get("beta2", cfg.get("decay", 0.9))) if kind in ("adam", "rmsprop") \
        else 1.0 if kind == "adagrad" else 0.0
    if kind == "adagrad":
        v_hat = [np.full(v.shape, float(cfg["initial_accumulator_value"])) for v in var_list]
    try:
        clone = type(optimizer).from_config(cfg)
        clone.set_weights(optimizer.get_weights())
        def step(t):
            r = variable_grads(loss, var_list)
            gs = [r.grads[v.name].numpy().astype(np.float64) for v in var_list]
            if t > 1:
                losses.append(float(r.value.numpy()))
                gnorms.append(_flat_norm(gs))
            with np.errstate(over="ignore", invalid="ignore"):
                for j, g in enumerate(gs):
                    v_hat[j] = beta2 * v_hat[j] + ((1 - beta2) if beta2 < 1 else 1) * g * g
            if not math.isfinite(losses[-1]):
                return False
            clone.apply_gradients(r.grads)
            return True
        for t in range(1, steps + 1):
            if not tidy(lambda: step(t)):
                break
        losses.append(tidy(lambda: float(loss().numpy())))
        clone.dispose()
    finally:
        _restore(var_list, saved)
    m["probe_losses"] = losses
    if kind:
        eps = float(cfg.get("epsilon") or 1e-7)
        corr = 1 - beta2 ** max(1, len(losses) - 1) if beta2 < 1 else 1.0
        scale = {v.name: 1 / np.sqrt(np.sqrt(vh / corr) + eps)
                 for v, vh in zip(var_list, v_hat)}
    else:
        scale = {v.name: np.ones(v.shape) for v in var_list}
    lam = _sharpness(loss, var_list, scale, seed)
    m.update(sharpness=lam, lr_sharpness=lr * lam, limit=limit)
    end = losses[-1]
    change = (value - end) / max(abs(value), 1e-30)
    m["probe_change"] = change
    # (a loss falling to -inf is unbounded below, not unstable: its gradient explodes)
    grew = math.isnan(end) or end > value + STILL * abs(value) + 1e-12
    converged = gnorm <= 1e-8 * (1 + abs(value)) or (early > 0 and abs(change) < STILL)
    growth = max(gnorms) / gnorms[0] if gnorms[0] > 0 else 0.0
    m["probe_grad_growth"] = growth
    if growth > GROWTH_LIMIT and oversized is None:
        oversized = (TrainingFinding(
            "exploding_gradient", None, {"growth": growth, "grad_norm": gnorms[0]},
            "the gradient grows without bound over a few steps: clip it (clip_norm) and "
            "lower the learning rate"))
    what = "lr x lambda_max" + (" (preconditioned)" if kind else "")
    if (limit is not None and lr * lam > limit) or grew:
        findings.append(TrainingFinding(
            "learning_rate_too_high", None,
            {what: lr * lam, "limit": limit, "loss_before": value, "loss_after": end},
            f"lower the learning rate below {limit / lam:.3g} (limit / lambda_max), or "
            f"warm it up" if lam > 0 and limit is not None else "lower the learning rate"))
    elif oversized is not None and "exploding_gradient" not in _causes(findings):
        findings.append(oversized)
    elif converged:
        findings.append(TrainingFinding(
            "converged", None, {"grad_norm": gnorm, "early_stopping": early,
                                "loss_change": change},
            "the gradient is within its own noise: stop here, or lower the learning rate "
            "to fine-tune"))
    else:
        if b_simple > batch:
            findings.append(TrainingFinding(
                "noisy_batch", None, {"b_simple": b_simple, "batch": batch},
                f"the batch's gradient is mostly noise: raise the batch size toward "
                f"{b_simple:.3g} (B_simple), or lower the learning rate"))
        if limit is not None and lr * lam < SLOW * limit and abs(change) < STILL * steps:
            findings.append(TrainingFinding(
                "learning_rate_too_low", None,
                {what: lr * lam, "limit": limit, "loss_change": change},
                f"raise the learning rate toward {0.5 * limit / lam:.3g} (half the limit / "
                f"lambda_max)" if lam > 0 else "raise the learning rate"))
    return Diagnosis(findings, m)
