"""Cockpit's instruments inside a ``GradientMonitor`` (Schneider et al., "Cockpit: A
Practical Debugging Tool for the Training of Deep Neural Networks", NeurIPS 2021).

``tf.debug.monitor(opt, instruments="economy", loss_fn=..., inputs=..., every=...)``
measures, at the steps the schedule picks, what the loss curve alone does not show:

=============== ======================================================= ========== ========== ====
instrument      what                                                    economy    business   full
=============== ======================================================= ========== ========== ====
loss            the batch's loss (the mean of ``loss_fn`` over inputs)  x          x          x
grad_norm       ‖ḡ‖, the norm of the batch's gradient                   x          x          x
alpha           step quality α (below)                                  x          x          x
distance        ‖θ_t − θ_0‖ per variable and overall                    x          x          x
update_size     ‖θ_t+1 − θ_t‖ per variable and overall                  x          x          x
norm_test       the norm test (Byrd et al. 2012)                        x          x          x
inner_test      the inner-product test (Bollapragada et al. 2018)       x          x          x
ortho_test      the orthogonality test (Bollapragada et al. 2018)       x          x          x
grad_hist       histogram of every example's gradient entries           x          x          x
trace           tr H (per variable too)                                            x          x
gsnr            the mean gradient signal-to-noise ratio                            x          x
b_simple        the simple gradient noise scale (McCandlish et al.)                x          x
lambda_max      the largest eigenvalue of H                                                   x
early_stopping  the evidence-based criterion (Mahsereci et al. 2017)                          x
=============== ======================================================= ========== ========== ====

Costs at a picked step (B the batch): economy runs one per-example gradient pass (tf.vmap)
at the start of the step and one after it (for α's end point); business adds up to
``HESSIAN_PRODUCTS`` Hessian-vector products for the trace; full as many again for λ_max.
``python -m bench cockpit`` measures them. Steps the schedule skips cost one call.

Step quality α: along the step s = θ_t+1 − θ_t (length τ), the loss of the batch and its
slope are taken at both ends (f_0, f'_0, f_1, f'_1), each with its noise (the sample
variances of the examples' losses and slopes); a parabola is fitted to the four by
least squares weighted by one over those variances (a variance of 0 counts as 1e-10), and
α = 2τ / ᾱ − 1 with ᾱ the fitted parabola's mirror point of the start (twice its minimum):
-1 the step made no progress, 0 it landed at the fitted minimum, 1 on the mirror point (as
high as it started), above 1 it overshot; below -1 the fitted minimum lies behind the
start (the step went uphill). A concave or flat fit, or a zero step, gives -1 (as
Cockpit). Unlike Cockpit, the end point is evaluated on the SAME batch as the start
(called once per picked step when ``inputs`` is a function), after the optimizer's update:
α then judges the step on the loss it was taken for, without the next batch's noise.

Schedule (``every``): an int n picks the steps 0, n, 2n...; a function step -> bool picks
the steps it says; None (default, ``default_schedule``) picks every step below 10, then
every 2nd below 100, every 20th below 1000, every 200th below 10000...: 45 steps per decade,
dense early when things change fast (10 % of the first 1000 steps, 1.5 % of 10000).

The trace is exact (one product per parameter) for at most ``HESSIAN_PRODUCTS``
parameters, else Hutchinson's estimate from that many Rademacher probes; λ_max is the
largest Ritz value after that many Lanczos steps (exact when they reach the parameter
count). Nothing here assigns a variable or touches the optimizer.
"""
from __future__ import annotations

import math
from itertools import pairwise

import numpy as np

from .. import scopes
from ..arg_checks import describe
from ..errors import ArgumentError, FlowgradError, GradientError
from ..tensor import Tensor, Variable

ECONOMY = ("loss", "grad_norm", "alpha", "distance", "update_size", "norm_test", "inner_test",
           "ortho_test", "grad_hist")
BUSINESS = ECONOMY + ("trace", "gsnr", "b_simple")
FULL = BUSINESS + ("lambda_max", "early_stopping")
CONFIGURATIONS = {"economy": ECONOMY, "business": BUSINESS, "full": FULL}
INSTRUMENTS = FULL
# the scalars over steps (History.instruments) and the per-variable ones (h[name][...])
SCALARS = tuple(n for n in FULL if n != "grad_hist")
PER_VARIABLE = ("distance", "update_size", "trace")
HESSIAN_PRODUCTS = 20
HIST_BINS = 40
_NOISE = ("norm_test", "inner_test", "ortho_test", "gsnr", "b_simple", "early_stopping")
_PER_EXAMPLE = _NOISE + ("alpha", "grad_hist")
_BATCH = _PER_EXAMPLE + ("loss", "grad_norm", "trace", "lambda_max")
_TINY_VARIANCE = 1e-10


def default_schedule(step: int) -> bool:
    """The default instrument schedule: every step below 10, then 45 per decade (every
    2nd below 100, every 20th below 1000, ...).

    >>> [s for s in range(40) if default_schedule(s)][8:16]
    [8, 9, 10, 12, 14, 16, 18, 20]
    >>> [s for s in range(100, 400) if default_schedule(s)]
    [100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300, 320, 340, 360, 380]
    """
    if step < 10:
        return step >= 0
    return step % max(1, 10 ** int(math.log10(step)) // 5) == 0


def fit_alpha(tau: float, f: tuple, df: tuple, var_f: tuple, var_df: tuple) -> float:
    """α of a step of length ``tau`` from the losses ``f`` = (f_0, f_1), slopes ``df`` and
    their variances at its two ends (see the module doc).

    >>> round(fit_alpha(1.0, (1.0, 0.0), (-2.0, 0.0), (0.0, 0.0), (0.0, 0.0)), 6)  # (1-t)²
    0.0
    >>> round(fit_alpha(2.0, (1.0, 1.0), (-2.0, 2.0), (0.0, 0.0), (0.0, 0.0)), 6)  # mirror
    1.0
    """
    if not tau > 0:
        return -1.0
    phi = np.array([[1.0, 0.0, 0.0], [1.0, tau, tau * tau], [0.0, 1.0, 0.0],
                    [0.0, 1.0, 2.0 * tau]])
    y = np.array([f[0], f[1], df[0], df[1]], dtype=np.float64)
    var = np.array(list(var_f) + list(var_df), dtype=np.float64)
    var = np.where(np.isfinite(var) & (var > _TINY_VARIANCE), var, _TINY_VARIANCE)
    if not np.all(np.isfinite(y)):
        return math.nan
    w = 1.0 / np.sqrt(var)
    mu = np.linalg.lstsq(phi * w[:, None], y * w, rcond=None)[0]
    if mu[2] <= 0:
        return -1.0
    return float(2.0 * tau * mu[2] / -mu[1] - 1.0) if mu[1] != 0 else -1.0


def resolve(instruments, api: str) -> tuple:
    """The instrument names of ``instruments`` (a configuration's name or a list)."""
    if isinstance(instruments, str):
        if instruments not in CONFIGURATIONS:
            raise ArgumentError(f"{api}: instruments={instruments!r} is not a configuration; "
                                f"use 'economy', 'business', 'full' or a list of names from "
                                f"{', '.join(INSTRUMENTS)}")
        return CONFIGURATIONS[instruments]
    if not isinstance(instruments, (list, tuple)) or not instruments:
        raise ArgumentError(f"{api}: instruments must be 'economy', 'business', 'full' or a "
                            f"non-empty list of instrument names, got {describe(instruments)}")
    bad = [n for n in instruments if not isinstance(n, str) or n not in INSTRUMENTS]
    if bad:
        raise ArgumentError(f"{api}: unknown instrument{'s' * (len(bad) > 1)} "
                            f"{', '.join(map(repr, bad))}; the instruments are "
                            f"{', '.join(INSTRUMENTS)}")
    return tuple(dict.fromkeys(instruments))


class Instruments:
    """The instruments of one monitor: what to measure, on which batch, when; and what was
    measured (by recorded-step index)."""

    def __init__(self, instruments, loss_fn, inputs, every, var_list, api):
        self.names = resolve(instruments, api)
        self.api = api
        needs_batch = [n for n in self.names if n in _BATCH]
        if needs_batch and (loss_fn is None or inputs is None):
            raise ArgumentError(f"{api}: the instruments {', '.join(needs_batch)} "
                                f"need the batch: pass loss_fn= (one example's loss, "
                                f"loss_fn(*example)) and inputs= (a tuple of batched tensors, "
                                f"or a function returning the current step's)")
        if loss_fn is not None and not callable(loss_fn):
            raise ArgumentError(f"{api}: loss_fn must be a function of one example "
                                f"(loss_fn(*example) returns its loss), got {describe(loss_fn)}")
        if inputs is not None and not callable(inputs):
            inputs = check_batch(inputs, api)
        if every is None:
            every = default_schedule
        elif not callable(every):
            if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
                raise ArgumentError(f"{api}: every must be an integer >= 1 (every n-th step), "
                                    f"a function step -> bool, or None (the default "
                                    f"schedule), got {describe(every)}")
            n = int(every)
            every = lambda step: step % n == 0
        if var_list is not None:
            from ..gradients import check_var_list
            check_var_list(var_list, api)
            var_list = list(var_list)
        self.loss_fn, self.inputs, self.every, self.var_list = loss_fn, inputs, every, var_list
        self.origin = None          # {name: weights} at the first step seen
        self.pending = None         # (index, step, vars, weights, batch, start info)
        self.values = {}            # index -> {instrument: value}
        self.per_variable = {}      # index -> {variable: {instrument: value}}
        self.histograms = {}        # step -> (edges, counts)

    # ------------------------------------------------------------- the two ends of a step
    def start(self, index, step, variables):
        """Before step ``step``'s update (recorded at ``index``), ``variables`` the ones it
        updates."""
        vs = self.var_list if self.var_list is not None else [
            v for v in variables if v is not None and not v.is_disposed]
        if self.origin is None:
            self.origin = {v.name: _host(v) for v in vs}
        picked = self.every(step)
        if not isinstance(picked, (bool, np.bool_)):
            raise ArgumentError(f"{self.api}: the schedule every(step) must return True or "
                                f"False, got {describe(picked)} for step {step}")
        if not picked or not vs:
            return
        weights = {v.name: _host(v) for v in vs}
        vals, per = self.values.setdefault(index, {}), self.per_variable.setdefault(index, {})
        if "distance" in self.names:
            total = 0.0
            for v in vs:
                o = self.origin.get(v.name)
                d = math.nan if o is None or o.shape != weights[v.name].shape else _norm(
                    weights[v.name] - o)
                per.setdefault(v.name, {})["distance"] = d
                total += d * d
            vals["distance"] = math.sqrt(total)
        batch = info = None
        if any(n in _BATCH for n in self.names):
            batch = self.inputs() if callable(self.inputs) else self.inputs
            if callable(self.inputs):
                batch = check_batch(batch, f"{self.api}: inputs()")
            info = self._measure_start(batch, vs, vals, per, step)
        self.pending = (index, step, vs, weights, batch, info)

    def end(self):
        """After the update of the step ``start`` saw (or at the next record)."""
        if self.pending is None:
            return
        index, _, vs, before, batch, info = self.pending
        self.pending = None
        if any(v.is_disposed for v in vs):
            return
        after = {v.name: _host(v) for v in vs}
        vals, per = self.values[index], self.per_variable[index]
        if "update_size" in self.names:
            total = 0.0
            for v in vs:
                d = _norm(after[v.name] - before[v.name])
                per.setdefault(v.name, {})["update_size"] = d
                total += d * d
            vals["update_size"] = math.sqrt(total)
        if "alpha" in self.names:
            s = np.concatenate([(after[v.name] - before[v.name]).reshape(-1) for v in vs])
            tau = _norm(s)
            if tau == 0 or not math.isfinite(tau):
                vals["alpha"] = -1.0 if tau == 0 else math.nan
                return
            u = s / tau
            losses, grads = info
            p0 = grads @ u
            losses1, p1 = self._end_pass(batch, vs, u)
            vals["alpha"] = fit_alpha(tau, (losses.mean(), losses1.mean()), (p0.mean(), p1.mean()),
                                      (_var(losses), _var(losses1)), (_var(p0), _var(p1)))

    # ------------------------------------------------------------- measuring
    def _measure_start(self, batch, vs, vals, per, step):
        names = self.names
        b = _batch_size(batch)
        info = None
        if any(n in _PER_EXAMPLE for n in names):
            losses, grads = per_example(self.loss_fn, batch, vs)
            mean = grads.mean(axis=0)
            vals["loss"] = float(losses.mean())
            vals["grad_norm"] = _norm(mean)
            if any(n in _NOISE for n in names):
                from .per_example import noise_stats
                st = noise_stats(grads) if b > 1 else None
                for n in _NOISE:
                    if n in names:
                        vals[n] = math.nan if st is None else getattr(st, n)
            if "grad_hist" in names:
                self.histograms[step] = _histogram(grads)
            if "alpha" in names:
                info = (losses, grads)
        elif "loss" in names or "grad_norm" in names:
            vals["loss"], vals["grad_norm"] = self._batch_gradient(batch, vs)
        for n in ("loss", "grad_norm"):
            if n not in names:
                vals.pop(n, None)
        if "trace" in names or "lambda_max" in names:
            self._curvature(batch, vs, vals, per, step)
        return info

    def _mean_loss(self, batch):
        from ..vmap import vmap
        loss_fn = self.loss_fn
        return lambda: vmap(loss_fn)(*batch).mean()

    def _batch_gradient(self, batch, vs):
        from ..gradients import variable_grads

        def run():
            r = variable_grads(self._mean_loss(batch), vs)
            g = [np.asarray(r.grads[v.name].numpy(), np.float64) for v in vs
                 if v.name in r.grads]
            return float(r.value.numpy()), math.sqrt(sum(float(np.sum(a * a)) for a in g))
        return scopes.tidy(run)

    def _end_pass(self, batch, vs, u):
        """Each example's loss and slope along ``u`` (unit, flat) after the update."""
        from ..gradients import variable_grads
        from ..ops import OPS
        from ..vmap import vmap
        dirs, at = {}, 0
        for v in vs:
            n = int(np.prod(v.shape, dtype=np.int64))
            dirs[v.name] = u[at:at + n].reshape(v.shape)
            at += n

        def run():
            ds = {k: OPS["tensor"](a, None, "float64") for k, a in dirs.items()}

            def one(*example):
                r = variable_grads(lambda: self.loss_fn(*example), vs)
                terms = [(g.cast("float64") * ds[k]).sum() for k, g in r.grads.items()]
                slope = terms[0] if len(terms) == 1 else OPS["add_n"](terms)
                return r.value.cast("float64"), slope
            losses, slopes = vmap(one)(*batch)
            return (np.asarray(losses.numpy(), np.float64).reshape(-1),
                    np.asarray(slopes.numpy(), np.float64).reshape(-1))
        return scopes.tidy(run)

    def _curvature(self, batch, vs, vals, per, step):
        from .curvature import HessianOperator, lanczos
        rng = np.random.default_rng(step)

        def run():
            op = HessianOperator(self._mean_loss(batch), vs, self.api)
            try:
                n = op.size
                if "trace" in self.names:
                    diag = np.zeros(n)
                    if n <= HESSIAN_PRODUCTS:       # exact: the diagonal, one column each
                        for j in range(n):
                            e = np.zeros(n)
                            e[j] = 1.0
                            diag[j] = op.matvec(e)[j]
                    else:                           # Hutchinson: E[z ⊙ Hz] = diag H
                        for _ in range(HESSIAN_PRODUCTS):
                            z = rng.integers(0, 2, n) * 2.0 - 1.0
                            diag += z * op.matvec(z)
                        diag /= HESSIAN_PRODUCTS
                    bounds = np.cumsum([0] + op.sizes)
                    for name, (a, b) in zip(op.names, pairwise(bounds)):
                        per.setdefault(name, {})["trace"] = float(diag[a:b].sum())
                    vals["trace"] = float(diag.sum())
                if "lambda_max" in self.names:
                    a, b, _ = lanczos(op.matvec, rng.standard_normal(n),
                                      min(n, HESSIAN_PRODUCTS), rng)
                    t = np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1)
                    vals["lambda_max"] = float(np.linalg.eigvalsh(t).max())
            finally:
                op.close()
        scopes.tidy(run)

    # ------------------------------------------------------------- reading
    def columns(self, n):
        """{instrument: array over the n recorded steps} (NaN where not measured), for the
        scalar instruments of this monitor."""
        out = {k: np.full(n, np.nan) for k in SCALARS if k in self.names}
        for i, vals in self.values.items():
            if i < n:
                for k, v in vals.items():
                    if k in out:
                        out[k][i] = v
        return out

    def variable_columns(self, names, n):
        """{variable: {instrument: array over the n recorded steps}}."""
        kinds = [k for k in PER_VARIABLE if k in self.names]
        out = {name: {k: np.full(n, np.nan) for k in kinds} for name in names}
        for i, per in self.per_variable.items():
            for name, vals in per.items():
                if i < n and name in out:
                    for k, v in vals.items():
                        out[name][k][i] = v
        return out

    def measured(self, n):
        """The recorded-step indices where the instruments ran."""
        return sorted(i for i in self.values if i < n)


# ---------------------------------------------------------------- helpers

def check_batch(inputs, api):
    """``inputs`` as a tuple of batched tensors with one batch size."""
    if isinstance(inputs, (Tensor, np.ndarray)):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ArgumentError(f"{api}: inputs must be a tuple of batched tensors (one per "
                            f"argument of loss_fn) or a function returning the current "
                            f"step's, got {describe(inputs)}")
    from ..ops import OPS
    out = []
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            try:
                x = OPS["tensor"](x)
            except (TypeError, ValueError, FlowgradError):
                raise ArgumentError(f"{api}: inputs[{i}] must be a batched tensor, got "
                                    f"{describe(x)}") from None
        if x.rank == 0:
            raise ArgumentError(f"{api}: inputs[{i}] must be a batch (a tensor whose axis 0 "
                                f"runs over the examples), got {describe(x)}")
        out.append(x)
    sizes = {x.shape[0] for x in out}
    if len(sizes) != 1:
        raise ArgumentError(f"{api}: every input must have the same batch size (axis 0), got "
                            f"shapes {[list(x.shape) for x in out]}")
    return tuple(out)


def per_example(loss_fn, batch, vs):
    """Each example's loss ``[B]`` and gradient ``[B, D]`` (``vs`` end to end), float64."""
    from ..gradients import variable_grads
    from ..vmap import vmap
    b = _batch_size(batch)

    def one(*example):
        r = variable_grads(lambda: loss_fn(*example), vs)
        if not isinstance(r.value, Tensor) or r.value.size != 1:
            raise GradientError(f"GradientMonitor instruments: loss_fn must return the "
                                f"scalar loss of one example, got "
                                f"{getattr(r.value, 'shape', describe(r.value))}")
        return r.value, dict(r.grads)

    def run():
        losses, grads = vmap(one)(*batch)
        cols = [np.asarray(grads[v.name].numpy(), np.float64).reshape(b, -1)
                if v.name in grads else np.zeros((b, int(np.prod(v.shape, dtype=np.int64))))
                for v in vs]
        return np.asarray(losses.numpy(), np.float64).reshape(-1), np.concatenate(cols, 1)
    return scopes.tidy(run)


def _batch_size(batch):
    return int(batch[0].shape[0])


def _host(v: Variable) -> np.ndarray:
    return np.array(v.numpy(), dtype=np.float64)


def _norm(a):
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(np.square(a, dtype=np.float64)))) if a.size else 0.0


def _var(a):
    return float(np.var(a, ddof=1)) if a.size > 1 else math.nan


def _histogram(grads):
    f = grads[np.isfinite(grads)]
    if not f.size:
        return np.array([-1.0, 1.0]), np.array([0])
    m = float(np.abs(f).max()) or 1.0
    counts, edges = np.histogram(f, bins=HIST_BINS, range=(-m, m))
    return edges, counts.astype(np.int64)
