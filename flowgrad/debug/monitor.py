"""Gradient health over training: ``tf.debug.GradientMonitor``.

Attach a monitor to an optimizer (``opt.monitor = m`` or ``m = tf.debug.monitor(opt)``), or
feed it ``variable_grads`` results with ``m.record(...)``. Per step and per variable it keeps
the gradient's L2 norm, max |g|, fraction of zeros, NaN and Inf counts, a small histogram,
the update-to-weight ratio ||Δw|| / ||w||, and the loss; it flags vanishing, exploding and
non-finite gradients with the step they started. ``m.summary()`` is a console table,
``m.history`` the numbers as NumPy arrays, ``m.plot_*()`` matplotlib figures,
``m.to_tensorboard(logdir)`` TensorBoard event files, and ``tf.debug.report(m)`` one HTML
page with all of it. An optimizer without a monitor pays only an ``is None`` check.
"""
import math
import numbers

import numpy as np

from .. import engine as E
from .. import interceptors
from ..arg_checks import as_int, describe, flag
from ..camel_case import Result, camel_to_snake
from ..errors import ArgumentError, JitError
from ..tensor import Tensor, Variable, registered_variables
from .extras import hist_edges as _edges
from .extras import require  # noqa: F401 (older imports)
from .health import KINDS, Criteria, Flag, Judge  # noqa: F401 (Flag: tf.debug.Flag)
from .history import METRICS, History
from .hooks import callback


class GradientMonitor:
    """Watches gradients over training (see the module docstring for how to feed it).

    Metrics per step and variable (``METRICS``; ``history[name][metric]``): ``grad_norm``
    (L2, in float64), ``max_abs`` (max |g| over the non-NaN values), ``zero_fraction``,
    ``nan_count``, ``inf_count``, ``update_ratio`` and ``weight_norm`` (before the update).
    Steps are numbered from 0 in the order the monitor sees them (or by ``record(step=)``).

    Flags (one per variable and kind; ``start`` is the first step of the run of steps in
    which the criterion held; ``criteria.describe()`` says them in words, as the report
    does). Each criterion is relative, so a healthy run that converges is not flagged (see
    ``flowgrad/debug/health.py``):

    - vanishing: the gradient's RMS is below ``depth_ratio`` (1e-4) × the largest among the
      variables of the same step, or exactly 0, for ``patience`` (10) steps in a row while
      the loss is above ``loss_fraction`` (0.1) × its start; a variable whose gradient
      shrank 1000x below its own early level, smoothly, has converged and is not flagged.
    - exploding: an update larger than ``update_limit`` (2) × the weights it changes, or a
      norm above ``growth_limit`` (1e3) × the variable's first ``baseline_steps`` steps, for
      ``explode_patience`` (2) steps in a row (a step whose gradient turns non-finite
      continues the run).
    - nonfinite: the gradient holds a NaN or an Inf.

    Absolute and baseline criteria are there too, off by default: ``vanish_threshold`` /
    ``explode_threshold`` (a norm below / above), ``vanish_ratio`` / ``explode_ratio``
    (× the median of the first ``baseline_steps`` steps).

    ``update_ratio`` at step t is ||w after − w before|| / ||w before|| of the update made
    with step t's gradients (``track_updates=True``): measured around the optimizer's update
    when attached; with ``record()``, from the weights at this record and the next one (so
    the last step's ratio is NaN until then). A zero weight gives Inf (0 if it did not move).
    ``bins`` (0 for none) is the size of the gradient histograms; they are kept for every
    ``hist_every``-th step and the last one (set it above 1, or bins=0, for long runs).

    Instruments (Cockpit's; the table, α and the default schedule are in
    ``flowgrad/debug/instruments.py``): ``instruments`` is ``"economy"``, ``"business"``,
    ``"full"`` or a list of names; ``loss_fn(*example)`` is one example's loss and ``inputs``
    the batch (a tuple of batched tensors, or a function returning the current step's, as
    ``watch_examples``' ``batch``); ``every`` picks the steps (an int n: every n-th; a
    function step -> bool; None: dense early, sparser later); ``var_list`` defaults to the
    variables each step updates. The numbers go to ``history.instruments`` (and per variable
    ``history[name]["distance"]`` ...), ``to_tensorboard``, ``plot_cockpit`` and
    ``tf.debug.report``. They never change a variable or the optimizer's state.

    A training step under ``tf.jit`` is recorded as an eager one: the statistics are taken
    from each replay's gradients and weights through ``tf.debug.callback``. Instruments
    run extra passes of the loss beside the step, which a replay cannot repeat: a monitor
    with instruments over a jitted step raises JitError (run those steps eagerly).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([3.0, -4.0]), name="w_mon_doc")
    >>> opt = tf.train.sgd(0.1)
    >>> m = tf.debug.monitor(opt)
    >>> for _ in range(3):
    ...     opt.minimize(lambda: w.square().sum())
    >>> m.history["w_mon_doc"]["grad_norm"].round(5)     # |2 w|: 10, then 8, then 6.4
    array([10. ,  8. ,  6.4])
    >>> m.history["w_mon_doc"]["update_ratio"].round(5)  # sgd with lr 0.1 moves w by 20 %
    array([0.2, 0.2, 0.2])
    >>> m.flags
    []
    >>> w.dispose(); opt.dispose()
    """

    def __init__(self, vanish_threshold=None, explode_threshold=None, vanish_ratio=None,
                 explode_ratio=None, baseline_steps=5, patience=10, track_updates=True,
                 bins=30, hist_every=1, depth_ratio=1e-4, loss_fraction=0.1,
                 update_limit=2.0, growth_limit=1e3, explode_patience=2, *,
                 instruments=None, loss_fn=None, inputs=None, every=None, var_list=None):
        for name, v in (("vanish_threshold", vanish_threshold),
                        ("explode_threshold", explode_threshold),
                        ("vanish_ratio", vanish_ratio), ("explode_ratio", explode_ratio),
                        ("depth_ratio", depth_ratio), ("loss_fraction", loss_fraction),
                        ("update_limit", update_limit), ("growth_limit", growth_limit)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not _positive(v)):
                raise ArgumentError(f"GradientMonitor: {name} must be a positive number or "
                                    f"None (no such criterion), got {v!r}")
        for name, v, low in (("baseline_steps", baseline_steps, 1), ("patience", patience, 1),
                             ("bins", bins, 0), ("hist_every", hist_every, 1),
                             ("explode_patience", explode_patience, 1)):
            if not isinstance(v, int) or v < low:
                raise ArgumentError(f"GradientMonitor: {name} must be an integer >= {low}"
                                    f"{' (0 keeps no histograms)' if low == 0 else ''}, got "
                                    f"{v!r}")
        self.criteria = Criteria(depth_ratio, loss_fraction, patience, update_limit,
                                 growth_limit, explode_patience, vanish_threshold,
                                 explode_threshold, vanish_ratio, explode_ratio,
                                 baseline_steps)
        self._judge = Judge(self.criteria)
        self.baseline_steps = baseline_steps
        self.patience = patience
        self.track_updates = flag(track_updates, "track_updates", "GradientMonitor")
        self.bins = bins
        self.hist_every = hist_every
        self.optimizer = None
        self._steps = []          # step numbers
        self._loss = []
        self.loss_given = []      # per step: a loss was recorded (NaN then is the loss's)
        self._rows = []           # per step: {name: [metric values in METRICS order]}
        self._hists = {}          # step index -> {name: (range, counts, min, max, n, sum, sumsq)}
        self._shapes = {}         # name -> shape, in first-seen order
        self.per_example = {}     # step -> PerExample (watch_examples)
        self._examples = None     # (loss_fn, batch_fn, var_list, every, on_flag, top_k)
        self._pending = None      # (row index, {name: (variable, weights before)})
        self._live = []           # open TensorBoard writers (to_tensorboard(live=True))
        self._instruments = None  # Cockpit's instruments (flowgrad/debug/instruments.py)
        if instruments is not None:
            from .instruments import Instruments
            self._instruments = Instruments(instruments, loss_fn, inputs, every, var_list,
                                            "GradientMonitor(instruments=...)")
        elif any(v is not None for v in (loss_fn, inputs, every, var_list)):
            raise ArgumentError("GradientMonitor: loss_fn=, inputs=, every= and var_list= "
                                "configure the instruments: pass instruments='economy' (or "
                                "'business', 'full', a list of names) too")

    # ------------------------------------------------------------- feeding
    def record(self, grads, loss=None, variables=None, step=None):
        """Record one step's gradients: a ``variable_grads`` result (its value is the loss),
        a mapping of variable name or Variable -> gradient, or ``(gradient, variable)``
        pairs. ``variables`` (Variables, or name -> Variable) are the weights whose update
        ratio to measure; by default the registered variables of those names. ``step``
        numbers the step (default: the next integer). Returns the monitor.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.tensor([0.0, 3.0, -4.0]), name="w_rec_doc")
        >>> m = tf.debug.GradientMonitor().record(tf.variable_grads(lambda: (w * w).sum()))
        >>> h = m.history
        >>> h.loss, h["w_rec_doc"]["grad_norm"], h["w_rec_doc"]["zero_fraction"].round(3)
        (array([25.]), array([10.]), array([0.333]))
        >>> w.dispose()
        """
        if isinstance(grads, Result) and "grads" in grads.keys():
            if loss is None and "value" in grads.keys():
                loss = grads.value
            grads = grads.grads
        if isinstance(grads, dict):
            items = list(grads.items())
        elif isinstance(grads, (list, tuple)):
            items = []
            for item in grads:
                if not (isinstance(item, (list, tuple)) and len(item) == 2):
                    raise ArgumentError("GradientMonitor.record(): list entries must be "
                                        "(gradient, variable) pairs")
                g, v = item
                items.append((v, g) if isinstance(v, (Variable, str)) else (g, v))
        else:
            raise ArgumentError(f"GradientMonitor.record() takes variable_grads' result, a "
                                f"mapping of variable (or name) to gradient, or (gradient, "
                                f"variable) pairs; got {type(grads).__name__}")
        if isinstance(variables, dict):
            lookup = {(k.name if isinstance(k, Variable) else k): v for k, v in
                      variables.items()}
        elif variables is not None:
            try:
                vs = None if isinstance(variables, (str, Tensor, np.ndarray)) else list(
                    variables)
            except TypeError:           # not iterable
                vs = None
            if vs is None or not all(isinstance(v, Variable) for v in vs):
                raise ArgumentError(f"GradientMonitor.record(): variables must be a list of "
                                    f"Variables or a mapping of name to Variable, got "
                                    f"{describe(variables)}")
            lookup = {v.name: v for v in vs}
        else:
            lookup = registered_variables()
        pairs = []
        for key, g in items:
            name = key.name if isinstance(key, Variable) else str(key)
            var = key if isinstance(key, Variable) else lookup.get(name)
            pairs.append((name, var, g))
        self._observe(pairs, _loss_arg(loss, "record"), _step_arg(step, "record"))
        return self

    def record_examples(self, loss_fn, inputs, step=None, var_list=None, top_k=5):
        """Record each example's gradient norm at ``step`` (default: the last recorded):
        ``tf.debug.per_example_grad_norms(loss_fn, inputs, var_list)`` (tf.vmap), kept in
        ``per_example[step]`` with the ``top_k`` worst indices. Returns the record.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.tensor([1.0]), name="w_rex_doc")
        >>> m = tf.debug.GradientMonitor()
        >>> r = m.record_examples(lambda x: (x * w).sum().square(),
        ...                       (tf.tensor([[1.0], [5.0], [2.0]]),), step=0, top_k=2)
        >>> r.worst, r.norms.round(3).tolist()
        ([1, 2], [2.0, 50.0, 8.0])
        >>> w.dispose()
        """
        from .per_example import PerExample, per_example_grad_norms, worst_examples
        step = _step_arg(step, "record_examples")
        top_k = as_int(top_k, "top_k", "GradientMonitor.record_examples()", 0)
        if step is None:
            step = self._steps[-1] if self._steps else 0
        norms = np.asarray(per_example_grad_norms(loss_fn, inputs, var_list).numpy(),
                           dtype=np.float64)
        rec = self.per_example[int(step)] = PerExample(int(step), norms,
                                                       worst_examples(norms, top_k))
        return rec

    def watch_examples(self, loss_fn, batch, every=None, on_flag=True, top_k=5,
                       var_list=None):
        """Record per-example gradient norms while training: at every ``every``-th
        recorded step and (``on_flag``) at each step where a new flag fires.
        ``loss_fn(*example)`` is one example's loss; ``batch()`` returns the current
        step's inputs (a tuple of batched tensors). Returns the monitor.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.tensor([1.0]), name="w_wex_doc")
        >>> xs = tf.tensor([[1.0], [3.0]])
        >>> opt = tf.train.sgd(0.01)
        >>> m = tf.debug.monitor(opt).watch_examples(
        ...     lambda x: (x * w).sum().square(), lambda: (xs,), every=2)
        >>> for _ in range(4):
        ...     opt.minimize(lambda: (xs.mul(w)).sum(1).square().sum())
        >>> sorted(m.per_example), m.per_example[1].worst[0]
        ([1, 3], 1)
        >>> w.dispose(); opt.dispose()
        """
        if not callable(loss_fn) or not callable(batch):
            raise ArgumentError("GradientMonitor.watch_examples(loss_fn, batch): both must be "
                                "functions (batch() returns the step's inputs)")
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ArgumentError(f"GradientMonitor.watch_examples: every must be an integer "
                                f">= 1 or None, got {every!r}")
        top_k = as_int(top_k, "top_k", "GradientMonitor.watch_examples()", 0)
        on_flag = flag(on_flag, "on_flag", "GradientMonitor.watch_examples()")
        self._examples = (loss_fn, batch, var_list, every, on_flag, top_k,
                          sum(f.count for f in self._judge.flags.values()))
        return self

    def _maybe_examples(self, step):
        loss_fn, batch, var_list, every, on_flag, top_k, seen = self._examples
        fired = sum(f.count for f in self._judge.flags.values())
        new = on_flag and fired > seen
        self._examples = self._examples[:6] + (fired,)
        if new or (every is not None and (len(self._steps) - 1) % every == every - 1):
            self.record_examples(loss_fn, batch(), step, var_list, top_k)

    def attach(self, optimizer):
        """Watch every update of ``optimizer`` (sets ``optimizer.monitor``); returns self."""
        if not hasattr(optimizer, "monitor"):
            raise ArgumentError(f"GradientMonitor.attach() takes an optimizer "
                                f"(tf.train.sgd(...), ...), got {type(optimizer).__name__}")
        optimizer.monitor = self
        self.optimizer = optimizer
        return self

    def detach(self):
        """Stop watching the optimizer this monitor is attached to; returns self."""
        if self.optimizer is not None and self.optimizer.monitor is self:
            self.optimizer.monitor = None
        self.optimizer = None
        return self

    # the optimizer's observer protocol (Optimizer.apply_pairs)
    def on_apply(self, opt, pairs, loss):
        """Called by the optimizer before an update, with (variable, gradient) pairs."""
        if not isinstance(pairs, (list, tuple)) or not all(
                isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], Variable)
                for p in pairs):
            raise ArgumentError(f"GradientMonitor.on_apply(opt, pairs, loss): pairs must be a "
                                f"list of (variable, gradient) pairs, got {describe(pairs)}")
        triples = [(v.name, v, g) for v, g in pairs]
        loss = _loss_arg(loss, "on_apply")
        if interceptors.tracer is None:
            self._observe(triples, loss, None)
            return
        # tf.jit is tracing: the statistics are taken from the step's values at every
        # replay (a replay runs no Python between its kernels), through tf.debug.callback
        if self._instruments is not None:
            raise JitError(f"tf.jit cannot replay tf.debug.monitor(opt, instruments=...): "
                           f"the instruments ({', '.join(self._instruments.names)}) run "
                           f"extra passes of the loss beside each step, outside the traced "
                           f"function. Jit the step with a monitor without instruments, or "
                           f"run the instrumented steps eagerly.")
        grads = [g for _, _, g in triples if g is not None]
        tensors = grads + ([loss] if isinstance(loss, Tensor) else [])

        def observe(*arrays):
            it = iter(arrays)
            got = [(n, v, None if g is None else next(it)) for n, v, g in triples]
            self._observe(got, next(it) if isinstance(loss, Tensor) else loss, None)
        callback(observe, *tensors)

    def on_applied(self, opt, pairs):
        """Called by the optimizer after the update: measures the update ratios."""
        if interceptors.tracer is None:
            self._finish_update()
        else:
            callback(self._finish_update)      # (at every replay, after its update)

    # ------------------------------------------------------------- reading
    @property
    def steps(self):
        """How many steps were recorded."""
        return len(self._steps)

    @property
    def instruments(self):
        """The names of the instruments this monitor runs (a tuple; empty without)."""
        return () if self._instruments is None else self._instruments.names

    @property
    def last_loss(self):
        """The loss of the last recorded step (NaN when none was given)."""
        return self._loss[-1] if self._loss else math.nan

    @property
    def last_global_norm(self):
        """The L2 norm of all of the last step's gradients together."""
        return self._global_norm(-1) if self._rows else math.nan

    @property
    def history(self):
        """The recorded numbers as a ``History`` of NumPy arrays."""
        names = list(self._shapes)
        per = {n: {k: [] for k in METRICS} for n in names}
        for row in self._rows:
            for n in names:
                vals = row.get(n)
                for i, k in enumerate(METRICS):
                    per[n][k].append(math.nan if vals is None else vals[i])
        gn = [self._global_norm(i) for i in range(len(self._rows))]
        ins = self._instruments
        if ins is None:
            return History(self._steps, self._loss, gn, per)
        n = len(self._steps)
        for name, cols in ins.variable_columns(names, n).items():
            per[name].update(cols)
        return History(self._steps, self._loss, gn, per, instruments=ins.columns(n),
                       histograms=dict(ins.histograms))

    @property
    def flags(self):
        """The vanishing / exploding / nonfinite ``Flag``s, in order of their start step."""
        order = {n: i for i, n in enumerate(self._shapes)}
        return sorted(self._judge.flags.values(), key=lambda f: (f.start, order[f.variable],
                                                           KINDS.index(f.kind)))

    @property
    def vanishing(self):
        """{variable name: step the vanishing started}."""
        return {f.variable: f.start for f in self.flags if f.kind == "vanishing"}

    @property
    def exploding(self):
        """{variable name: step the exploding started}."""
        return {f.variable: f.start for f in self.flags if f.kind == "exploding"}

    def histogram(self, step=-1, name=None):
        """The histogram of one step's gradient of ``name`` as ``(edges, counts)`` (NumPy
        arrays; counts of finite values), or {name: (edges, counts)} when name is None.
        ``step`` indexes the recorded steps (-1: the last).

        >>> import flowgrad as tf
        >>> m = tf.debug.GradientMonitor(bins=2).record({"a": tf.tensor([0.0, 1.0, 1.0])})
        >>> m.histogram(-1, "a")
        (array([0. , 0.5, 1. ]), array([1, 2]))
        """
        if not self._steps or not self.bins:
            raise ArgumentError("GradientMonitor.histogram(): no step recorded yet"
                                if not self._steps else "this monitor keeps no histograms "
                                "(bins=0): create it with bins=30")
        step = as_int(step, "step", "GradientMonitor.histogram()")
        if name is not None and not isinstance(name, str):
            raise ArgumentError(f"GradientMonitor.histogram(): name must be a variable's name "
                                f"(a string) or None for all, got {describe(name)}")
        i = step + len(self._steps) if step < 0 else step
        if not 0 <= i < len(self._steps):
            raise ArgumentError(f"GradientMonitor.histogram(): step index {step} is out of "
                                f"range ({len(self._steps)} steps recorded)")
        if i not in self._hists:
            raise ArgumentError(f"GradientMonitor.histogram(): step index {step} has no "
                                f"histogram: this monitor keeps those of the step indices that "
                                f"are multiples of hist_every={self.hist_every}, and the last "
                                f"(hist_every=1 keeps all)")
        hs = {n: (_edges(h), h[1].astype(np.int64)) for n, h in self._hists[i].items()}
        if name is None:
            return hs
        if name not in hs:
            raise ArgumentError(f"GradientMonitor.histogram(): variable '{name}' has no "
                                f"finite gradient at that step (it has: {', '.join(hs)})")
        return hs[name][0], hs[name][1]

    def summary_rows(self):
        """One dict per variable with the numbers of ``summary()``'s table."""
        h, flags, rows = self.history, self.flags, []
        for n in h.names:
            v = h[n]
            idx = np.flatnonzero(~np.isnan(v["grad_norm"]) | (v["nan_count"] > 0))
            last = idx[-1] if idx.size else None
            norms = v["grad_norm"][np.isfinite(v["grad_norm"])]
            ur = v["update_ratio"][~np.isnan(v["update_ratio"])]
            row = {"variable": n, "shape": list(self._shapes[n]), "steps": int(idx.size)}
            for k in ("grad_norm", "max_abs", "zero_fraction", "nan_count", "inf_count"):
                row[k] = v[k][last] if last is not None else math.nan
            row.update(norm_min=norms.min() if norms.size else math.nan,
                       norm_max=norms.max() if norms.size else math.nan,
                       update_ratio=ur[-1] if ur.size else math.nan,
                       flags=", ".join(f"{f.kind}@{f.start}" for f in flags if f.variable == n))
            rows.append(row)
        return rows

    def summary(self):
        """The console table: per variable the last step's gradient norm, the range of its
        norms, max |g|, fraction of zeros, NaN and Inf counts, the last update ratio and the
        flags; then the flags in words.

        >>> import flowgrad as tf
        >>> m = tf.debug.GradientMonitor().record({"w": tf.tensor([3.0, 4.0])}, loss=1.5)
        >>> print(m.summary())          # doctest: +NORMALIZE_WHITESPACE
        GradientMonitor: 1 step (0..0); loss 1.5; last global gradient norm 5
        variable  shape  grad norm  norm range    max |g|  zeros  NaN  Inf  upd/weight  flags
        w         [2]    5          [5, 5]        4        0%     0    0    -           -
        No vanishing, exploding or non-finite gradient.
        """
        from .display import console_summary
        return console_summary(self)

    def print_summary(self):
        """Print ``summary()``.

        >>> import flowgrad as tf
        >>> tf.debug.GradientMonitor().print_summary()
        GradientMonitor: no step recorded yet.
        """
        print(self.summary())

    def __repr__(self):
        return (f"GradientMonitor({len(self._steps)} steps, {len(self._shapes)} variables, "
                f"{len(self._judge.flags)} flags)")

    def _repr_html_(self, last=5):
        """Jupyter's display: the summary table, the ``last`` steps' loss and global
        gradient norm, and the flags (names escaped)."""
        from .display import monitor_html
        return monitor_html(self, last)

    def __getattr__(self, name):
        snake = camel_to_snake(name)
        if snake != name:
            return getattr(self, snake)
        raise AttributeError(f"'GradientMonitor' object has no attribute '{name}'")

    # ------------------------------------------------------------- plots (flowgrad[viz])
    def plot_loss(self, path=None, log=None):
        """The loss over steps (see ``tf.debug.plot_loss``)."""
        from .plots import plot_loss
        return plot_loss(self, path=path, log=log)

    def plot_grad_norms(self, path=None, variables=None):
        """Gradient norm per variable over steps, log scale (``tf.debug.plot_grad_norms``)."""
        from .plots import plot_grad_norms
        return plot_grad_norms(self, path=path, variables=variables)

    def plot_grad_flow(self, path=None):
        """Heatmap of log10 gradient norms, variables × steps (``tf.debug.plot_grad_flow``)."""
        from .plots import plot_grad_flow
        return plot_grad_flow(self, path=path)

    def plot_histograms(self, path=None, step=-1, variables=None):
        """Histograms of one step's gradients (``tf.debug.plot_histograms``)."""
        from .plots import plot_histograms
        return plot_histograms(self, path=path, step=step, variables=variables)

    def plot_example_norms(self, path=None, step=None):
        """Histogram of per-example gradient norms (``tf.debug.plot_example_norms``)."""
        from .plots import plot_example_norms
        return plot_example_norms(self, path=path, step=step)

    def plot_cockpit(self, path=None):
        """The instruments' panels: loss, α, the gradient tests, curvature, distance and
        update size, noise, the examples' gradient histogram (``tf.debug.plot_cockpit``)."""
        from .plots import plot_cockpit
        return plot_cockpit(self, path=path)

    # ------------------------------------------------------------- TensorBoard
    def to_tensorboard(self, logdir, live=False):
        """Write the history to TensorBoard event files in ``logdir`` (tensorboardX, extra
        ``flowgrad[tensorboard]``): scalars ``loss``, ``grad_norm/global``,
        ``grad_norm/<variable>``, ``update_ratio/<variable>`` and histograms
        ``grads/<variable>``; with instruments, ``cockpit/<instrument>``,
        ``cockpit/<instrument>/<variable>`` and the histogram ``cockpit/grad_hist``. With
        ``live=True`` later steps are written as they come, until ``close()``. Returns the logdir. Under ``tf.distributed`` only rank 0 writes.

        >>> import flowgrad as tf, tempfile
        >>> m = tf.debug.GradientMonitor().record({"w": tf.tensor([3.0, 4.0])}, loss=1.5)
        >>> d = m.to_tensorboard(tempfile.mkdtemp())
        """
        from .tensorboard import write_tensorboard
        return write_tensorboard(self, logdir, live)

    def close(self):
        """Close the TensorBoard writers opened by ``to_tensorboard(live=True)``."""
        for w in self._live:
            w.close()
        self._live = []

    # ------------------------------------------------------------- machinery
    def _observe(self, pairs, loss, step):
        self._finish_update()
        if step is None:
            step = self._steps[-1] + 1 if self._steps else 0
        elif self._steps and step <= self._steps[-1]:
            raise ArgumentError(f"GradientMonitor.record(): steps must increase; step {step} "
                                f"comes after step {self._steps[-1]}")
        row, hists, snaps = {}, {}, {}
        for name, var, g in pairs:
            if g is None:
                continue
            a = np.asarray(E.to_host(g._array()) if isinstance(g, Tensor) else g)
            vals, hist = self._stats(a)
            if name not in self._shapes:
                self._shapes[name] = a.shape
            if var is not None and not var.is_disposed:
                w = np.array(E.to_host(var._array()), dtype=np.float64)
                vals[6] = _norm(w)
                if self.track_updates:
                    snaps[name] = (var, w)
            row[name] = vals
            if hist is not None:
                hists[name] = hist
        self._steps.append(int(step))
        self._loss.append(_loss_value(loss))
        self.loss_given.append(loss is not None)
        self._rows.append(row)
        if self.bins:
            i = len(self._steps) - 1
            self._hists[i] = hists
            if i - 1 in self._hists and (i - 1) % self.hist_every:
                del self._hists[i - 1]          # only every hist_every-th step and the last
        if snaps:
            self._pending = (len(self._steps) - 1, snaps)
        if self._instruments is not None:
            self._instruments.start(len(self._steps) - 1, int(step),
                                    [var for _, var, g in pairs if g is not None])
        self._judge_step(int(step))
        if self._examples is not None:
            self._maybe_examples(int(step))
        if self._live:
            from .tensorboard import write_step
            for w in self._live:
                write_step(self, w, len(self._steps) - 1)

    def _stats(self, a):
        a = a.astype(np.float64, copy=False) if a.dtype.kind in "fiub" else a
        fin = np.isfinite(a)
        n_nan = int(np.isnan(a).sum())
        n_inf = int(np.isinf(a).sum())
        with np.errstate(all="ignore"):
            norm = _norm(a)
            notnan = a[~np.isnan(a)] if n_nan else a
            absmax = float(np.abs(notnan).max()) if notnan.size else (
                math.nan if a.size else 0.0)
        zeros = float((a == 0).sum() / a.size) if a.size else 0.0
        vals = [norm, absmax, zeros, n_nan, n_inf, math.nan, math.nan]
        hist = None
        if self.bins and fin.any():
            f = a[fin] if n_nan or n_inf else a.reshape(-1)
            lo, hi = float(f.min()), float(f.max())
            big = max(abs(lo), abs(hi))
            rng = (lo, hi) if hi - lo > 1e-9 * big else (lo - (0.5 * big or 0.5),
                                                         hi + (0.5 * big or 0.5))
            try:
                counts, _ = np.histogram(f, bins=self.bins, range=rng)
            except ValueError:          # a range too narrow for the bins (subnormals...)
                counts, rng = np.array([f.size]), (lo, hi)
            with np.errstate(over="ignore"):      # an exploding gradient: Inf, as TF.js
                sums = float(f.sum()), float(np.square(f).sum())
            hist = (rng, counts.astype(np.int32), lo, hi, int(f.size)) + sums
        return vals, hist

    def _finish_update(self):
        if self._instruments is not None and self._instruments.pending is not None:
            i = self._instruments.pending[0]
            self._instruments.end()
            if self._live and self._pending is None:
                from .tensorboard import write_step
                for w in self._live:
                    write_step(self, w, i, ratios_only=True)
        if self._pending is None:
            return
        i, snaps = self._pending
        row = self._rows[i]
        self._pending = None
        for name, (var, before) in snaps.items():
            if var.is_disposed:
                continue
            after = np.asarray(E.to_host(var._array()), dtype=np.float64)
            with np.errstate(all="ignore"):
                d, w = _norm(after - before), _norm(before)
                if w == 0:
                    ratio = 0.0 if d == 0 else (math.nan if math.isnan(d) else math.inf)
                else:
                    ratio = d / w
            row[name][5] = float(ratio)
        if self._live:
            from .tensorboard import write_step
            for w in self._live:
                write_step(self, w, i, ratios_only=True)

    def _judge_step(self, step):
        """Apply the criteria to the step just recorded (update ratios: the previous
        step's, measured once its update was done)."""
        row = self._rows[-1]
        prev = self._rows[-2] if len(self._rows) > 1 else {}
        sizes = {n: int(np.prod(self._shapes[n])) for n in row}
        rows = {n: (v[0], v[2], v[3], v[4], prev[n][5] if n in prev else math.nan, v[6])
                for n, v in row.items()}
        self._judge.observe(step, self._loss[-1], rows, sizes,
                            self._steps[-2] if len(self._steps) > 1 else None)

    def _global_norm(self, i):
        sq = [v[0] ** 2 for v in self._rows[i].values()]
        return math.sqrt(sum(sq)) if sq else math.nan


def monitor(optimizer, **options):
    """Attach a new ``GradientMonitor`` (with ``options``) to ``optimizer`` and return it.

    >>> import flowgrad as tf
    >>> opt = tf.train.sgd(0.1)
    >>> m = tf.debug.monitor(opt, explode_threshold=100)
    >>> opt.monitor is m
    True

    With Cockpit's instruments (``instruments="economy"``, ``"business"``, ``"full"`` or a
    list; see ``GradientMonitor``): a least-squares fit, where one SGD step of 0.5 on the
    curvature 2·mean(x²) = 2 lands on the minimum (α = 0), one of 0.25 half-way (α = -0.5):

    >>> w = tf.variable(tf.tensor([0.0]), name="w_mon_cockpit_doc")
    >>> x, y = tf.tensor([[1.0], [1.0], [1.0]]), tf.tensor([2.0, 2.0, 2.0])
    >>> loss = lambda xi, yi: ((xi * w).sum() - yi).square()
    >>> opt = tf.train.sgd(0.5)
    >>> m = tf.debug.monitor(opt, instruments="economy", loss_fn=loss, inputs=(x, y), every=1)
    >>> opt.minimize(lambda: tf.vmap(loss)(x, y).mean())
    >>> alpha, size = m.history.instruments["alpha"], m.history.instruments["update_size"]
    >>> float(alpha[0].round(6)), float(size[0].round(6))
    (0.0, 2.0)
    >>> w.dispose(); opt.dispose()
    """
    return GradientMonitor(**options).attach(optimizer)


def _positive(v):
    try:
        return float(v) > 0
    except OverflowError:       # an int no float holds (10**400)
        return False


def _step_arg(step, api):
    """A step number given to record() or record_examples(): an int, or None."""
    return None if step is None else as_int(step, "step", f"GradientMonitor.{api}()")


def _loss_arg(loss, api):
    """The loss given to record() or on_apply(): None, a tensor, or a real number."""
    if loss is None or isinstance(loss, Tensor):
        return loss
    if isinstance(loss, (bool, np.bool_)) or not isinstance(loss, numbers.Real) and not (
            isinstance(loss, np.ndarray) and loss.dtype.kind in "fiu"):
        raise ArgumentError(f"GradientMonitor.{api}(): loss must be a number or a tensor (the "
                            f"step's loss), or None, got {describe(loss)}")
    return loss


def _norm(a):
    if not a.size:
        return 0.0
    with np.errstate(over="ignore"):           # a norm past float64's range is Inf
        return float(np.sqrt(np.sum(np.square(a, dtype=np.float64))))


def _loss_value(loss):
    if loss is None:
        return math.nan
    if isinstance(loss, Tensor):
        if loss.is_disposed:
            return math.nan
        loss = np.asarray(E.to_host(loss._array()))
    if isinstance(loss, np.ndarray):
        if not loss.size:
            return math.nan
        return float(loss.reshape(-1)[0]) if loss.size == 1 else float(loss.mean())
    try:
        return float(loss)
    except OverflowError:       # an int no float holds: an infinite loss
        return math.inf
