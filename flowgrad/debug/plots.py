"""Plots of a ``GradientMonitor``'s history (matplotlib: ``pip install 'flowgrad[viz]'``).

Each function returns a ``matplotlib.figure.Figure`` built without pyplot (no window, no
global state: safe on servers and in threads; Jupyter displays it), and saves it when given
``path=`` as PNG, SVG or PDF by the suffix. The same plots are methods of the monitor
(``m.plot_loss()``, ``m.plot_grad_norms()``, ``m.plot_grad_flow()``, ``m.plot_histograms()``,
``m.plot_example_norms()``, ``m.plot_cockpit()``); every one takes ``path`` first.
matplotlib is imported only when a plot is made; its math text is off (a variable named
``$x$`` is drawn as typed), and a missing output folder is created.
"""
import functools
import math
import re
from pathlib import Path

import numpy as np

from ..arg_checks import as_int, check_count, describe, flag
from ..distributed.runtime import is_root
from ..errors import ArgumentError
from .extras import output_path, require

FORMATS = (".png", ".svg", ".pdf")


def _plain_text(plot):
    """Draw with matplotlib's math text off: user names are text, never TeX."""
    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        matplotlib = require("matplotlib", "viz", "plots")
        with matplotlib.rc_context({"text.parse_math": False}):
            return plot(*args, **kwargs)
    return wrapper


@_plain_text
def plot_loss(monitor, path=None, log=None):
    """The loss over steps. ``log`` (default: when the positive loss spans over two
    decades) puts the y axis on a log scale.

    >>> import flowgrad as tf
    >>> m = tf.debug.GradientMonitor()
    >>> for i in range(3):
    ...     _ = m.record({"w": tf.tensor([1.0])}, loss=4.0 / (i + 1))
    >>> fig = tf.debug.plot_loss(m)
    >>> fig.axes[0].get_lines()[0].get_ydata().round(2).tolist()
    [4.0, 2.0, 1.33]
    """
    h = _history(monitor, "plot_loss", path)
    if log is not None:
        log = flag(log, "log", "plot_loss()")
    fig, ax = figure((7, 3.6))
    loss = h.loss
    ok = ~np.isnan(loss)
    line, = ax.plot(h.steps[ok], loss[ok], color="C0", lw=1.5, label="loss")
    line.set_gid("loss")
    pos = loss[ok & (loss > 0)]
    if log is None:
        log = bool(ok.any() and pos.size == ok.sum() and pos.max() > 100 * pos.min())
    if log:
        ax.set_yscale("log")
    if not ok.any():
        _empty(ax, "no loss recorded (feed record(..., loss=...) or use minimize)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("Loss")
    ax.grid(True, alpha=0.3)
    return save_figure(fig, path)


@_plain_text
def plot_grad_norms(monitor, path=None, variables=None, global_norm=True):
    """The L2 norm of each variable's gradient over steps, on a log scale, with the
    global norm (dashed, black), the vanishing / exploding thresholds (dotted) and a cross
    where a flag started. ``variables`` picks names (default: all).

    >>> import flowgrad as tf
    >>> m = tf.debug.GradientMonitor()
    >>> for i in range(3):
    ...     _ = m.record({"a": tf.tensor([10.0 ** -i]), "b": tf.tensor([2.0])})
    >>> fig = tf.debug.plot_grad_norms(m)
    >>> {l.get_label(): l.get_ydata().round(4).tolist() for l in fig.axes[0].get_lines()[:2]}
    {'a': [1.0, 0.1, 0.01], 'b': [2.0, 2.0, 2.0]}
    """
    h = _history(monitor, "plot_grad_norms", path)
    names = _names(h, variables, "plot_grad_norms")
    global_norm = flag(global_norm, "global_norm", "plot_grad_norms()")
    fig, ax = figure((7.5, 4.2))
    plotted = False
    for i, (n, label) in enumerate(zip(names, short_labels(names))):
        y = h[n]["grad_norm"]
        ok = np.isfinite(y) & (y > 0)
        line, = ax.plot(h.steps[ok], y[ok], color=f"C{i % 10}", lw=1.3, label=label)
        line.set_gid(_gid("grad-norm", n))
        plotted |= bool(ok.any())
    if global_norm and len(names) > 1:
        g = h.global_norm
        ok = np.isfinite(g) & (g > 0)
        line, = ax.plot(h.steps[ok], g[ok], "k--", lw=1.2, label="global")
        line.set_gid("grad-norm-global")
    c = monitor.criteria
    for thr, label in ((c.vanish_threshold, "vanish threshold"),
                       (c.explode_threshold, "explode threshold")):
        if thr is not None and plotted:
            ax.axhline(thr, color="0.5", ls=":", lw=1, label=label)
    for f in monitor.flags:
        if f.variable in names and f.kind != "nonfinite" and f.value > 0 and \
                math.isfinite(f.value):
            ax.plot([f.start], [f.value], "x", ms=9, mew=2,
                    color=f"C{names.index(f.variable) % 10}")
    if plotted:
        ax.set_yscale("log")
    else:
        _empty(ax, "no positive finite gradient norm recorded")
    ax.set_xlabel("step")
    ax.set_ylabel("gradient L2 norm")
    ax.set_title("Gradient norm per variable")
    ax.grid(True, which="both", alpha=0.25)
    if names:
        ax.legend(fontsize=8, ncol=max(1, math.ceil(len(names) / 12)), loc="best")
    return save_figure(fig, path)


@_plain_text
def plot_grad_flow(monitor, path=None):
    """The gradient flow: a heatmap of log10 gradient norms, one row per variable (in the
    order first seen), one column per step. Zero and missing norms are grey.

    >>> import flowgrad as tf
    >>> m = tf.debug.GradientMonitor().record({"a": tf.tensor([100.0]), "b": tf.tensor([0.1])})
    >>> tf.debug.plot_grad_flow(m).axes[0].images[0].get_array().round(4).tolist()
    [[2.0], [-1.0]]
    """
    h = _history(monitor, "plot_grad_flow", path)
    names = h.names
    mat = h.matrix("grad_norm")
    with np.errstate(all="ignore"):
        logs = np.where(np.isfinite(mat) & (mat > 0), np.log10(np.where(mat > 0, mat, 1)),
                        np.nan)
    fig, ax = figure((8, 1.6 + 0.32 * max(len(names), 1)))
    matplotlib = require("matplotlib", "viz", "plots")
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.8")
    steps = h.steps
    x0, x1 = (steps[0] - 0.5, steps[-1] + 0.5) if steps.size else (-0.5, 0.5)
    img = ax.imshow(np.ma.masked_invalid(logs), aspect="auto", interpolation="nearest",
                    cmap=cmap, extent=(x0, x1, max(len(names), 1) - 0.5, -0.5))
    img.set_gid("grad-flow")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(short_labels(names), fontsize=8)
    ax.set_xlabel("step")
    ax.set_title("Gradient flow (log10 of the gradient norm)")
    fig.colorbar(img, ax=ax, label="log10 norm")
    return save_figure(fig, path)


@_plain_text
def plot_histograms(monitor, path=None, step=-1, variables=None):
    """Histograms of one step's gradients, one panel per variable. ``step`` indexes the
    recorded steps (-1: the last); the monitor keeps a ``bins``-bin histogram per step.
    (``path`` comes first, as in every plot function.)

    >>> import flowgrad as tf
    >>> m = tf.debug.GradientMonitor(bins=2).record({"w": tf.tensor([0.0, 1.0, 1.0])})
    >>> counts, edges = tf.debug.plot_histograms(m).axes[0].patches[0].get_data()[:2]
    >>> counts.tolist(), edges.tolist()
    ([1.0, 2.0], [0.0, 0.5, 1.0])
    """
    if isinstance(path, int) and not isinstance(path, bool):
        raise ArgumentError(f"plot_histograms(monitor, path=None, step=-1): path comes first, "
                            f"as in every plot function; got {path!r}: pass step={path}")
    h = _history(monitor, "plot_histograms", path)
    hists = monitor.histogram(step)
    names = [n for n in _names(h, variables, "plot_histograms") if n in hists]
    if not names:
        raise ArgumentError("plot_histograms(): no variable has a finite gradient at that step")
    step_no = int(h.steps[step])
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = figure((3.4 * cols, 2.5 * rows + 0.4), axes=False)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, n, label in zip(axes, names, short_labels(names)):
        edges, counts = hists[n]
        patch = ax.stairs(counts.astype(float), edges, fill=True, color="C0", alpha=0.8)
        patch.set_gid(_gid("hist", n))
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 3))
    for ax in axes[len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"Gradient histograms at step {step_no}")
    return save_figure(fig, path)


@_plain_text
def plot_example_norms(monitor, path=None, step=None, bins=30):
    """The histogram of one recorded step's per-example gradient norms (log-spaced bins),
    the worst examples marked by index. ``step``: a step of ``monitor.per_example``
    (default: the latest).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0]), name="w_pen_doc")
    >>> m = tf.debug.GradientMonitor()
    >>> _ = m.record_examples(lambda x: (x * w).sum().square(),
    ...                       (tf.tensor([[1.0], [2.0], [40.0]]),), step=0, top_k=1)
    >>> [t.get_text() for t in tf.debug.plot_example_norms(m).axes[0].texts]
    ['#2']
    >>> w.dispose()
    """
    _history(monitor, "plot_example_norms", path)
    bins = as_int(bins, "bins", "plot_example_norms()", 1)
    check_count(bins + 1, "float64", "plot_example_norms()", "the bin edges")
    if not getattr(monitor, "per_example", None):
        raise ArgumentError("plot_example_norms(): no per-example norms recorded: call "
                            "monitor.record_examples(...) or watch_examples(...)")
    step = max(monitor.per_example) if step is None else as_int(step, "step",
                                                                 "plot_example_norms()")
    if step not in monitor.per_example:
        raise ArgumentError(f"plot_example_norms(): no per-example norms at step {step} "
                            f"(recorded: {sorted(monitor.per_example)})")
    rec = monitor.per_example[step]
    norms = rec.norms[np.isfinite(rec.norms) & (rec.norms > 0)]
    fig, ax = figure((7, 3.4))
    if norms.size:
        lo, hi = norms.min(), norms.max()
        edges = np.geomspace(lo, hi * (1 + 1e-9), bins + 1) if hi > lo else \
            np.array([lo * 0.9, hi * 1.1])
        counts, edges = np.histogram(norms, bins=edges)
        patch = ax.stairs(counts.astype(float), edges, fill=True, color="C0", alpha=0.8)
        patch.set_gid("example-norms")
        ax.set_xscale("log")
        for i in rec.worst:
            v = rec.norms[i]
            if np.isfinite(v) and v > 0:
                ax.axvline(v, color="C3", lw=1, ls=":")
                ax.text(v, ax.get_ylim()[1] * 0.9, f"#{i}", color="C3", fontsize=8,
                        ha="right", rotation=90)
    else:
        _empty(ax, "no positive finite per-example norm")
    bad = int((~np.isfinite(rec.norms)).sum())
    ax.set_xlabel("per-example gradient norm" + (f" ({bad} non-finite not shown)" if bad
                                                 else ""))
    ax.set_ylabel("examples")
    ax.set_title(f"Per-example gradient norms at step {step}")
    return save_figure(fig, path)


@_plain_text
def plot_cockpit(monitor, path=None):
    """The cockpit of a monitor with instruments (``tf.debug.monitor(opt,
    instruments=...)``): one panel each for the loss, the step quality α (with its -1, 0
    and 1 lines), the three gradient tests (1 is the threshold), the curvature (λ_max and
    the trace), the distance from the start and the update size, the noise (GSNR and
    B_simple), and the last measured histogram of the examples' gradient entries. A panel
    whose instruments were not measured says so.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([2.0]), name="w_cockpit_plot_doc")
    >>> x = tf.tensor([[1.0], [2.0]])
    >>> opt = tf.train.sgd(0.1)
    >>> m = tf.debug.monitor(opt, instruments=["alpha", "distance"],
    ...                      loss_fn=lambda xi: (xi * w).sum().square(), inputs=(x,))
    >>> for _ in range(3):
    ...     opt.minimize(lambda: (x * w).sum(1).square().mean())
    >>> fig = tf.debug.plot_cockpit(m)
    >>> [ax.get_title() for ax in fig.axes][:3]
    ['Loss', 'Step quality alpha', 'Gradient tests']
    >>> w.dispose(); opt.dispose()
    """
    h = _history(monitor, "plot_cockpit", path)
    if not h.instruments:
        raise ArgumentError("plot_cockpit(): this monitor has no instruments: create it with "
                            "tf.debug.monitor(opt, instruments='economy', loss_fn=..., "
                            "inputs=...)")
    ins, steps = h.instruments, h.steps
    fig = figure((12, 10), axes=False)
    axes = fig.subplots(4, 2).ravel()

    def panel(ax, title, series, ylabel, log=False, lines=()):
        drawn = False
        for i, (label, y) in enumerate(series):
            if y is None:
                continue
            ok = np.isfinite(y) & ((y > 0) if log else True)
            if ok.any():
                line, = ax.plot(steps[ok], y[ok], ".-", color=f"C{i}", lw=1, ms=4,
                                label=label)
                line.set_gid(_gid("cockpit", label))
                drawn = True
        for y0 in lines:
            ax.axhline(y0, color="0.5", ls=":", lw=1)
        if drawn:
            if log:
                ax.set_yscale("log")
            ax.legend(fontsize=8, loc="best")
        else:
            _empty(ax, "not measured")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)

    loss = ins.get("loss")
    panel(axes[0], "Loss", [("batch loss", loss if loss is not None else h.loss)], "loss")
    panel(axes[1], "Step quality alpha", [("alpha", ins.get("alpha"))], "alpha",
          lines=(-1, 0, 1))
    panel(axes[2], "Gradient tests", [(k, ins.get(k)) for k in
                                      ("norm_test", "inner_test", "ortho_test")],
          "smallest passing theta / nu", log=True, lines=(1,))
    panel(axes[3], "Curvature", [("lambda_max", ins.get("lambda_max")),
                                 ("trace", ins.get("trace"))], "Hessian", log=True)
    panel(axes[4], "Distance from the start", [("distance", ins.get("distance"))], "L2")
    panel(axes[5], "Update size", [("update_size", ins.get("update_size"))], "L2", log=True)
    panel(axes[6], "Gradient noise", [("gsnr", ins.get("gsnr")),
                                      ("b_simple", ins.get("b_simple"))], "", log=True)
    ax = axes[7]
    if h.histograms:
        last = max(h.histograms)
        edges, counts = h.histograms[last]
        patch = ax.stairs(counts.astype(float), edges, fill=True, color="C0", alpha=0.8)
        patch.set_gid("cockpit-grad-hist")
        pos = counts[counts > 0]
        if pos.size and counts.max() > 100 * pos.min():
            ax.set_yscale("log")
        ax.set_title(f"Examples' gradient entries (step {last})")
        ax.set_xlabel("gradient entry")
    else:
        _empty(ax, "not measured")
        ax.set_title("Examples' gradient entries")
    fig.suptitle("Cockpit")
    return save_figure(fig, path)


# ---------------------------------------------------------------- helpers

def _history(monitor, where, path):
    """The monitor's history, after checking the monitor and the path (before drawing)."""
    if not (hasattr(monitor, "history") and hasattr(monitor, "criteria")):    # a monitor
        raise ArgumentError(f"{where}() takes a tf.debug.GradientMonitor, got "
                            f"{type(monitor).__name__}")
    check_path(path, f"{where}(monitor, path)")
    require("matplotlib", "viz", "plots")
    return monitor.history


def _names(h, variables, where):
    if variables is None:
        return h.names
    if isinstance(variables, str):
        variables = [variables]
    if not isinstance(variables, (list, tuple)):
        raise ArgumentError(f"{where}(variables=...): variables must be a list of variables "
                            f"or names, got {describe(variables)}")
    names = [v.name if hasattr(v, "name") else str(v) for v in variables]
    missing = [n for n in names if n not in h]
    if missing:
        raise ArgumentError(f"{where}(variables=...): no gradient of "
                            f"{', '.join(map(repr, missing))} was recorded (recorded: "
                            f"{', '.join(h.names) or 'none'})")
    return names


def check_path(path, api):
    """``path`` is None or a file name whose suffix is one of FORMATS (checked before any
    drawing, so a typo costs nothing)."""
    if path is None:
        return
    try:
        suffix = Path(path).suffix.lower()
    except TypeError:
        raise ArgumentError(f"{api}: path must be a file name (a string or a pathlib.Path) "
                            f"or None, got {describe(path)}") from None
    if suffix not in FORMATS:
        raise ArgumentError(f"{api}: cannot save a plot as '{path}': the suffix picks the "
                            f"format, one of {', '.join(FORMATS)}")


def figure(size, path=None, api="plot", axes=True):
    """A matplotlib Figure (and its axes) made without pyplot (no window, no global state),
    after ``check_path``; matplotlib is the 'viz' extra."""
    check_path(path, api)
    require("matplotlib", "viz", "plots")
    from matplotlib.figure import Figure
    fig = Figure(figsize=size, layout="constrained")
    return (fig, fig.add_subplot()) if axes else fig


def _empty(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


LABEL_MAX = 40      # characters of a variable's name in a legend, tick label or title


def short_labels(names, limit=LABEL_MAX):
    """The names as plots label them: a name longer than ``limit`` keeps its start and end
    around an ellipsis (scoped names differ at both: "encoder/layer_3/…/attention/kernel");
    names that would then read the same get " #k" after them, k counting from 2. A
    200-character name used to squeeze the axes to nothing.

    >>> from flowgrad.debug.plots import short_labels
    >>> short_labels(["w", "a" * 30 + "/kernel", "a" * 30 + "/bias"], limit=16)
    ['w', 'aaaaaaa…a/kernel', 'aaaaaaa…aaa/bias']
    """
    head = (limit - 1) // 2
    tail = limit - 1 - head
    out, seen = [], {}
    for n in names:
        s = n if len(n) <= limit else f"{n[:head]}…{n[len(n) - tail:]}"
        k = seen[s] = seen.get(s, 0) + 1
        out.append(s if k == 1 else f"{s} #{k}")
    return out


def _gid(prefix, name):
    return f"{prefix}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"


def save_figure(fig, path):
    """Save ``fig`` at ``path`` (its folder created) unless None; under tf.distributed every
    rank draws and rank 0 saves. Returns the figure."""
    if path is None:
        return fig
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ArgumentError(f"cannot save a plot as '{path}': the suffix picks the format, "
                            f"one of {', '.join(FORMATS)}")
    if is_root():              # under tf.distributed every rank draws, rank 0 saves
        fig.savefig(output_path(path), format=suffix[1:], dpi=110)
    return fig
