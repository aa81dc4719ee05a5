"""When is a gradient sick? The criteria behind GradientMonitor's flags, kept apart from
the bookkeeping (monitor.py) and the presentation (report.py, plots.py).

A flag must mean something: a healthy run trained to convergence has every gradient shrink,
and that is not "vanishing". So each criterion is relative — to the other variables of the
same step, to the variable's own early steps, to the weights it moves — and must hold for a
sustained run of steps, and vanishing is only judged while the loss is still high:

- **vanishing** (through depth): the variable's gradient RMS is below ``depth_ratio`` x the
  largest gradient RMS among the variables of the same step, or it is exactly 0 everywhere
  (dead units), for ``patience`` steps in a row, while the loss is above ``loss_fraction`` x
  its starting level. A variable whose gradient has fallen below ``1e-3`` x its own early
  level, smoothly, has converged on its own and is not flagged.
- **exploding**: an update larger than ``update_limit`` x the weights it changes (zero
  weights excepted), or a gradient norm above ``growth_limit`` x the variable's own early
  level, for ``explode_patience`` steps in a row (a step whose gradient turns non-finite
  continues the run: that is where explosions end).
- **nonfinite**: a NaN or an Inf in the gradient (at once).

Absolute thresholds (``vanish_threshold``, ``explode_threshold``) and ratios to the
variable's own baseline (``vanish_ratio``, ``explode_ratio``) remain available, off by
default: an absolute norm depends on the loss's scale and cries wolf at convergence.
"""
import math

import numpy as np

KINDS = ("vanishing", "exploding", "nonfinite")

_CONVERGED_OWN = 1e-3       # below this x its own early level, smoothly: converged


class Flag:
    """A variable whose gradient is vanishing, exploding or non-finite.

    ``variable`` (name), ``kind`` ("vanishing", "exploding", "nonfinite"), ``start`` (the
    first step of the run of steps in which the criterion held), ``end`` (the last flagged
    step), ``count`` (flagged steps from ``start`` on), ``value`` (the gradient norm at
    ``start``), ``reason`` (the criterion that held) and ``ongoing`` (flagged at the
    variable's last recorded step).

    >>> f = Flag("w", "vanishing", 3, 2.5e-9, "norm < 1e-07")
    >>> str(f)
    "'w': vanishing from step 3 (norm 2.5e-09; norm < 1e-07), 1 step, ongoing"
    """

    def __init__(self, variable, kind, start, value, reason):
        self.variable, self.kind, self.start = variable, kind, start
        self.value, self.reason = value, reason
        self.end, self.count, self.ongoing = start, 1, True

    def __str__(self):
        steps = f"{self.count} step{'s' if self.count != 1 else ''}"
        until = ", ongoing" if self.ongoing else f", last at step {self.end}"
        why = self.reason if self.kind == "nonfinite" else \
            f"norm {self.value:.3g}; {self.reason}"
        return f"'{self.variable}': {self.kind} from step {self.start} ({why}), {steps}{until}"

    __repr__ = __str__


class Criteria:
    """The thresholds of the flags (see the module docstring); ``describe()`` says them in
    words, as the report shows them.

    >>> print(Criteria().describe()[0])
    vanishing: gradient RMS < 0.0001 x the largest variable's (or exactly 0) for 10 steps while the loss is above 0.1 x its start
    """

    def __init__(self, depth_ratio=1e-4, loss_fraction=0.1, patience=10, update_limit=2.0,
                 growth_limit=1e3, explode_patience=2, vanish_threshold=None,
                 explode_threshold=None, vanish_ratio=None, explode_ratio=None,
                 baseline_steps=5):
        self.depth_ratio, self.loss_fraction, self.patience = depth_ratio, loss_fraction, \
            patience
        self.update_limit, self.growth_limit = update_limit, growth_limit
        self.explode_patience = explode_patience
        self.vanish_threshold, self.explode_threshold = vanish_threshold, explode_threshold
        self.vanish_ratio, self.explode_ratio = vanish_ratio, explode_ratio
        self.baseline_steps = baseline_steps

    def describe(self):
        v = [f"gradient RMS < {self.depth_ratio:g} x the largest variable's (or exactly 0)"]
        if self.vanish_threshold is not None:
            v.append(f"norm < {self.vanish_threshold:g}")
        if self.vanish_ratio is not None:
            v.append(f"norm < {self.vanish_ratio:g} x its first {self.baseline_steps} steps'")
        e = []
        if self.update_limit is not None:
            e.append(f"update > {self.update_limit:g} x the weights")
        if self.growth_limit is not None:
            e.append(f"norm > {self.growth_limit:g} x its first {self.baseline_steps} steps'")
        if self.explode_threshold is not None:
            e.append(f"norm > {self.explode_threshold:g}")
        if self.explode_ratio is not None:
            e.append(f"norm > {self.explode_ratio:g} x its first {self.baseline_steps} "
                     f"steps'")
        loss = f" while the loss is above {self.loss_fraction:g} x its start" \
            if self.loss_fraction is not None else ""
        return [f"vanishing: {' or '.join(v)} for {self.patience} steps{loss}",
                f"exploding: {' or '.join(e) or 'never'} for {self.explode_patience} "
                f"step{'s' if self.explode_patience != 1 else ''}",
                "nonfinite: a NaN or an Inf in the gradient"]


class Judge:
    """Applies Criteria step by step; ``flags`` are the Flags so far (one per variable and
    kind, kept up to date)."""

    def __init__(self, criteria):
        self.c = criteria
        self.flags = {}             # (name, kind) -> Flag
        self._base = {}             # name -> first baseline_steps finite norms
        self._losses = []           # first baseline_steps finite losses
        self._runs = {}             # (name, kind) -> (start, length, value at start, reason)
        self._prev = {}             # name -> the previous step's norm
        self._converged = set()     # names that converged on their own

    def _baseline(self, name, norm):
        base = self._base.setdefault(name, [])
        if len(base) < self.c.baseline_steps:
            if math.isfinite(norm):
                base.append(norm)
            return None
        return float(np.median(base))

    def _loss_high(self, loss):
        if self.c.loss_fraction is None or loss is None or not math.isfinite(loss):
            return True
        if len(self._losses) < self.c.baseline_steps:
            self._losses.append(loss)
        start = float(np.median(self._losses))
        return loss > self.c.loss_fraction * start

    def observe(self, step, loss, rows, sizes, ratio_step=None):
        """One step: ``rows`` {name: (norm, zero_fraction, nan_count, inf_count,
        update_ratio, weight norm)}, ``sizes`` {name: elements}; the update ratios are
        those of the update made at ``ratio_step`` (the previous step: an update is
        measured once it is done)."""
        c = self.c
        high = self._loss_high(loss)
        rms = {n: r[0] / math.sqrt(max(sizes[n], 1)) for n, r in rows.items()
               if math.isfinite(r[0])}
        top = max(rms.values(), default=0.0)
        for name, (norm, zeros, n_nan, n_inf, ratio, _) in rows.items():
            baseline = self._baseline(name, norm)
            hits = dict.fromkeys(KINDS)
            since = {}              # kind -> the step its evidence belongs to, if earlier
            if n_nan or n_inf:
                hits["nonfinite"] = f"{int(n_nan)} NaN, {int(n_inf)} Inf"
            own = None if baseline is None or baseline == 0 else norm / baseline
            prev = self._prev.get(name)
            if norm == 0 and prev is not None and prev > 0 and baseline and \
                    prev < _CONVERGED_OWN * baseline:
                self._converged.add(name)           # decayed smoothly all the way to 0
            elif own is not None and own < _CONVERGED_OWN and norm > 0:
                self._converged.add(name)
            elif own is not None and own >= _CONVERGED_OWN:
                self._converged.discard(name)
            self._prev[name] = norm
            if high and name not in self._converged and math.isfinite(norm):
                if norm == 0 and top > 0:
                    hits["vanishing"] = "exactly 0 (dead units?) while others are not"
                elif top > 0 and rms.get(name, top) < c.depth_ratio * top:
                    hits["vanishing"] = (f"RMS {rms[name]:.3g} < {c.depth_ratio:g} x the "
                                         f"largest {top:.3g}")
                elif c.vanish_threshold is not None and norm < c.vanish_threshold:
                    hits["vanishing"] = f"norm < {c.vanish_threshold:g}"
                elif c.vanish_ratio is not None and own is not None and \
                        own < c.vanish_ratio:
                    hits["vanishing"] = f"norm < {c.vanish_ratio:g} x baseline {baseline:.3g}"
            if c.update_limit is not None and math.isfinite(ratio) and \
                    ratio > c.update_limit:
                hits["exploding"] = f"the update moved it by {ratio:.3g} x its norm"
                if ratio_step is not None and prev is not None:
                    since["exploding"] = (ratio_step, prev)     # the update of that step
            elif c.growth_limit is not None and own is not None and own > c.growth_limit:
                hits["exploding"] = f"norm {own:.3g} x its early level {baseline:.3g}"
            elif c.explode_threshold is not None and norm > c.explode_threshold:
                hits["exploding"] = f"norm > {c.explode_threshold:g}"
            elif c.explode_ratio is not None and own is not None and own > c.explode_ratio:
                hits["exploding"] = f"norm > {c.explode_ratio:g} x baseline {baseline:.3g}"
            if hits["exploding"] is None and hits["nonfinite"] and \
                    (name, "exploding") in self._runs:
                hits["exploding"] = "then non-finite"       # where an explosion ends
            self._update(name, step, norm, hits, since)

    def _update(self, name, step, norm, hits, since):
        need = {"vanishing": self.c.patience, "exploding": self.c.explode_patience,
                "nonfinite": 1}
        for kind, reason in hits.items():
            key = (name, kind)
            flag = self.flags.get(key)
            if reason is None:
                self._runs.pop(key, None)
                if flag is not None:
                    flag.ongoing = False
                continue
            begin, value = since.get(kind, (step, norm))
            start, length, value, why = self._runs.get(key, (begin, 0, value, reason))
            self._runs[key] = (start, length + 1, value, why)
            if flag is not None:            # (once flagged, each new hit counts at once)
                flag.end, flag.count, flag.ongoing = step, flag.count + 1, True
            elif length + 1 >= need[kind]:
                flag = self.flags[key] = Flag(name, kind, start, value, why)
                flag.end, flag.count = step, length + 1
