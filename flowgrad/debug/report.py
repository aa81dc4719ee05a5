"""``tf.debug.report``: one self-contained HTML page about a training run's gradients.

The page holds the monitor's flags (vanishing, exploding, non-finite, with the step each
started) and the criteria behind them, its summary table, the per-example gradient norms it
recorded (a histogram and the worst indices), the plots as inline SVG (loss, gradient
norms, gradient flow, the last step's histograms), the cockpit of its instruments (a table
and the cockpit figure), ``check_grads`` reports and a ``tf.debug.diagnose`` result (its
findings and measurements). It loads nothing from anywhere: no scripts, no fonts, no
external URLs; it can be mailed or attached to a CI run. Without matplotlib (``pip install
'flowgrad[viz]'``) the page is written without its plots and says so.
"""
import io
import re
from pathlib import Path

import numpy as np

from ..distributed.runtime import is_root
from ..errors import ArgumentError, MissingDependencyError
from .diagnose import Diagnosis
from .extras import check_path, output_path
from .extras import count as _count
from .extras import e as _e
from .extras import is_nan as _nan
from .extras import num as _num
from .gradcheck import GradCheckError, GradCheckReport
from .monitor import GradientMonitor

COCKPIT_ROWS = 20      # measured steps in the cockpit table

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.25em;margin-top:1.6em;
border-bottom:1px solid #ddd;padding-bottom:.2em}
.meta{color:#666} table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left;font-family:monospace}
td.flags,th:last-child{text-align:left} tr.flagged td{background:#fff4f0}
ul.flags li{margin:.2em 0} .vanishing{color:#8a5a00} .exploding,.nonfinite{color:#b00020}
.ok{color:#176f2c} .bad{color:#b00020} .badge{display:inline-block;padding:0 .5em;
border-radius:.3em;font-weight:600;color:#fff} .badge.ok{background:#1e8e3e}
.badge.bad{background:#c5221f} pre{background:#f7f7f7;padding:.7em;overflow-x:auto;
font-size:.85em} .plots{display:grid;gap:1em;
grid-template-columns:repeat(auto-fit,minmax(460px,1fr))} figure{margin:0}
figure svg{max-width:100%;height:auto} figcaption{color:#666;font-size:.85em}
.note{color:#666;font-style:italic}
"""


def report(monitor=None, path="report.html", checks=None, title="flowgrad gradient report",
           diagnosis=None):
    """Write the HTML report of ``monitor`` (a GradientMonitor, or None), ``checks``
    (``check_grads`` results: a GradCheckReport or GradCheckError, a list of them, or a dict
    name -> report) and ``diagnosis`` (a ``tf.debug.diagnose`` result: its findings with
    their evidence and advice, and every measurement) to ``path``. A monitor with
    instruments gets a cockpit section (the last measured values, a table of the measured
    steps and the cockpit figure). Returns the path (a ``pathlib.Path``). Under
    ``tf.distributed`` only rank 0 writes; other ranks return the path and write nothing.

    >>> import flowgrad as tf, tempfile, os
    >>> m = tf.debug.GradientMonitor().record({"w": tf.tensor([3.0, 4.0])}, loss=2.0)
    >>> check = tf.debug.check_grads(lambda x: x.square(), tf.tensor([1.0]))
    >>> p = tf.debug.report(m, os.path.join(tempfile.mkdtemp(), "r.html"), checks=check)
    >>> text = p.read_text()
    >>> "<table" in text and "<svg" in text and "passed" in text and "http" not in text
    True
    """
    if monitor is not None and not isinstance(monitor, GradientMonitor):
        raise ArgumentError(f"report(monitor, path): monitor must be a "
                            f"tf.debug.GradientMonitor or None, got {type(monitor).__name__}")
    path = check_path(path, "path", "report(monitor, path)")
    if not isinstance(title, str):
        raise ArgumentError(f"report(title=...): title must be a string, got "
                            f"{type(title).__name__}")
    named = _checks(checks)
    if diagnosis is not None and not isinstance(diagnosis, Diagnosis):
        raise ArgumentError(f"report(diagnosis=...): diagnosis must be what "
                            f"tf.debug.diagnose(...) returns (a Diagnosis), got "
                            f"{type(diagnosis).__name__}")
    if monitor is None and not named and diagnosis is None:
        raise ArgumentError("report(): give a GradientMonitor, check_grads reports (checks=), "
                            "a Diagnosis (diagnosis=), or several")
    parts = [f"<h1>{_e(title)}</h1>"]
    if diagnosis is not None:
        parts += diagnosis_parts(diagnosis)
    if monitor is not None:
        parts += _monitor_parts(monitor)
    if named:
        parts.append("<h2>Gradient checks</h2>")
        for name, rep in named:
            ok = rep.passed
            badge = (f'<span class="badge {"ok" if ok else "bad"}">'
                     f'{"passed" if ok else "FAILED"}</span>')
            parts.append(f'<h3>{_e(name)} {badge}</h3><pre class="check">{_e(str(rep))}'
                         f'</pre>')
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
    path = Path(path)
    if is_root():
        output_path(path).write_text(page, encoding="utf-8")
    return path


def _monitor_parts(m):
    parts = []
    h = m.history
    n = len(h.steps)
    meta = f"{n} step{'s' if n != 1 else ''}, {len(h.names)} variables"
    finite = h.loss[np.isfinite(h.loss)]
    if finite.size:
        meta += f"; loss {_num(finite[0])} &rarr; {_num(finite[-1])}"
    from .display import loss_not_finite       # (the display module: loaded on demand)
    news = loss_not_finite(m)
    if news:
        meta += f"; <strong>{_e(news)}</strong>"
    parts.append(f'<p class="meta">{meta}.</p>')
    parts.append('<ul class="criteria meta">' + "".join(
        f"<li>{_e(c)}</li>" for c in m.criteria.describe()) + "</ul>")
    parts.append("<h2>Flags</h2>")
    flags = m.flags
    if flags:
        parts.append('<ul class="flags">' + "".join(_flag_html(f) for f in flags) + "</ul>")
    else:
        parts.append('<p class="ok">No vanishing, exploding or non-finite gradient.</p>')
    parts.append("<h2>Summary</h2>")
    parts.append(_table(m.summary_rows()))
    parts.append(f"<details><summary>Console summary</summary><pre>{_e(m.summary())}</pre>"
                 f"</details>")
    if m.per_example:
        parts += _examples_parts(m)
    if m.history.instruments:
        parts += cockpit_parts(m)
    parts.append("<h2>Plots</h2>")
    parts.append('<div class="plots">' + "".join(_plots(m)) + "</div>")
    return parts


def _examples_parts(m):
    """Per-example gradient norms: the worst indices per recorded step, and the latest
    step's histogram."""
    parts = ["<h2>Per-example gradient norms</h2>",
             ('<table class="examples"><thead><tr><th>step</th><th>examples</th>'
              '<th>median norm</th><th>max norm</th><th>non-finite</th>'
              '<th>worst examples (norm)</th></tr></thead><tbody>')]
    for step in sorted(m.per_example):
        r = m.per_example[step]
        finite = r.norms[np.isfinite(r.norms)]
        worst = ", ".join(f"{i} ({_num(r.norms[i])})" for i in r.worst)
        parts.append(f"<tr><td>{step}</td><td>{r.norms.size}</td>"
                     f"<td>{_num(np.median(finite)) if finite.size else '-'}</td>"
                     f"<td>{_num(finite.max()) if finite.size else '-'}</td>"
                     f"<td>{int((~np.isfinite(r.norms)).sum())}</td>"
                     f'<td class="flags">{_e(worst)}</td></tr>')
    parts.append("</tbody></table>")
    parts += _svg_figures([(f"Per-example gradient norms (step {max(m.per_example)})",
                            lambda: m.plot_example_norms())], "e")
    return parts


def cockpit_parts(m):
    """The cockpit section: the last measured value of each instrument, a table of the
    measured steps (the last ``COCKPIT_ROWS``) and the cockpit figure."""
    h = m.history
    ins = h.instruments
    names = list(ins)
    idx = np.flatnonzero(np.isin(h.steps, h.instrument_steps))
    parts = ["<h2>Cockpit</h2>",
             (f'<p class="meta">Instruments {_e(", ".join(m.instruments))}; measured at '
              f'{idx.size} of {len(h.steps)} steps. alpha: -1 no progress, 0 the step lands '
              f'at the fitted minimum, 1 on the mirror point, above 1 overshoot. The gradient '
              f'tests above 1: the batch is too noisy for the step.</p>')]
    if not idx.size:
        return parts + ['<p class="note">No step measured yet.</p>']
    parts.append('<table class="cockpit"><thead><tr><th>step</th>' + "".join(
        f"<th>{_e(n)}</th>" for n in names) + "</tr></thead><tbody>")
    for i in idx[-COCKPIT_ROWS:]:
        parts.append(f"<tr><td>{int(h.steps[i])}</td>" + "".join(
            f"<td>{_num(ins[n][i])}</td>" for n in names) + "</tr>")
    parts.append("</tbody></table>")
    if idx.size > COCKPIT_ROWS:
        parts.append(f'<p class="note">The last {COCKPIT_ROWS} measured steps of {idx.size} '
                     f'(m.history.instruments has them all).</p>')
    parts += _svg_figures([("Cockpit", lambda: m.plot_cockpit())], "c")
    return parts


def diagnosis_parts(d):
    """The diagnosis section: each finding (cause, where, evidence, advice), then every
    scalar measurement."""
    parts = ["<h2>Diagnosis</h2>", d._repr_html_()]
    rows = []
    for k, v in d.measurements.items():
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            rows.append(f"<tr><td>{_e(k)}</td><td>{_num(v)}</td></tr>")
        elif isinstance(v, str):
            rows.append(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>")
        elif isinstance(v, dict):
            rows.append(f"<tr><td>{_e(k)}</td><td>" + _e(", ".join(
                f"{n} {_num(x)}" for n, x in v.items())) + "</td></tr>")
        else:
            a = np.asarray(v, dtype=np.float64).reshape(-1)
            rows.append(f"<tr><td>{_e(k)}</td><td>{a.size} values, " + (
                f"min {_num(np.nanmin(a))}, max {_num(np.nanmax(a))}" if
                np.isfinite(a).any() else "none finite") + "</td></tr>")
    parts.append('<details><summary>Measurements</summary><table class="measurements">'
                 '<thead><tr><th>measurement</th><th>value</th></tr></thead><tbody>'
                 + "".join(rows) + "</tbody></table></details>")
    return parts


def _flag_html(f):
    why = _e(f.reason) if f.kind == "nonfinite" else f"norm {_num(f.value)}; {_e(f.reason)}"
    until = "ongoing" if f.ongoing else f"last at step {f.end}"
    return (f'<li class="{f.kind}"><b>{_e(f.variable)}</b>: {f.kind} from step '
            f'<b>{f.start}</b> ({why}), {f.count} step{"s" if f.count != 1 else ""}, '
            f'{until}</li>')


def _table(rows):
    head = ("variable", "shape", "steps", "grad norm (last)", "norm min", "norm max",
            "max |g|", "zeros", "NaN", "Inf", "update / weight", "flags")
    out = ['<table class="summary"><thead><tr>' + "".join(f"<th>{_e(c)}</th>" for c in head)
           + "</tr></thead><tbody>"]
    for r in rows:
        cells = [_e(r["variable"]), _e(str(r["shape"])), str(r["steps"]),
                 _num(r["grad_norm"]), _num(r["norm_min"]), _num(r["norm_max"]),
                 _num(r["max_abs"]),
                 "-" if _nan(r["zero_fraction"]) else f"{100 * r['zero_fraction']:.3g}%",
                 _count(r["nan_count"]), _count(r["inf_count"]), _num(r["update_ratio"])]
        cls = ' class="flagged"' if r["flags"] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells)
                   + f'<td class="flags">{_e(r["flags"]) or "-"}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _plots(m):
    if not m.steps:
        return ['<p class="note">No step recorded: nothing to plot.</p>']
    figs = [("Loss", lambda: m.plot_loss()), ("Gradient norms", lambda: m.plot_grad_norms()),
            ("Gradient flow", lambda: m.plot_grad_flow())]
    if m.bins:
        figs.append(("Gradient histograms (last step)", lambda: m.plot_histograms(step=-1)))
    return _svg_figures(figs, "f")


def _svg_figures(figs, tag):
    try:
        import matplotlib
    except ImportError:
        return ['<p class="note">Plots need matplotlib: pip install \'flowgrad[viz]\'</p>']
    out = []
    for k, (caption, make) in enumerate(figs):
        try:
            fig = make()
        except (ArgumentError, MissingDependencyError) as e:
            out.append(f'<p class="note">{_e(caption)}: {_e(str(e))}</p>')
            continue
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"fg{tag}{k}",
                                    "text.parse_math": False}):
            fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None,
                                                     "Format": None, "Type": None})
        out.append(f'<figure id="plot-{tag}{k}">{_inline_svg(buf.getvalue(), f"{tag}{k}-")}'
                   f"<figcaption>{_e(caption)}</figcaption></figure>")
    return out


def _inline_svg(svg, prefix):
    """matplotlib's SVG file as an element to put inside HTML: no XML prolog or doctype, no
    namespace URLs (the HTML parser knows <svg>), ids made unique to this figure."""
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2)
    svg = re.sub(r'(<svg[^>]*?)\s+height="[^"]*"', r"\1", svg, count=1)
    svg = re.sub(r'\bid="([^"]+)"', lambda mt: f'id="{prefix}{mt.group(1)}"', svg)
    svg = re.sub(r'href="#([^"]+)"', lambda mt: f'href="#{prefix}{mt.group(1)}"', svg)
    return re.sub(r"url\(#([^)]+)\)", lambda mt: f"url(#{prefix}{mt.group(1)})", svg)


def _checks(checks):
    if checks is None:
        return []
    if isinstance(checks, dict):
        items = list(checks.items())
    elif isinstance(checks, (list, tuple)):
        items = [(f"check {i + 1}", c) for i, c in enumerate(checks)]
    else:
        items = [("check_grads", checks)]
    out = []
    for name, c in items:
        if isinstance(c, GradCheckError):
            c = c.report
        if not isinstance(c, GradCheckReport):
            raise ArgumentError(f"report(checks=...): expected check_grads results "
                                f"(GradCheckReport or GradCheckError), got "
                                f"{type(c).__name__} for '{name}'")
        out.append((str(name), c))
    return out
