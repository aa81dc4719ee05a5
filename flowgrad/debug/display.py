"""Rich displays for notebooks: the HTML of monitors, profiles and gradient checks, and the
SVG of graphs (Jupyter calls ``_repr_html_`` / ``_repr_svg_``; nothing here runs otherwise).

Every user-controlled string (variable names, op sites, messages) is escaped. The HTML is
also well-formed XML (numeric entities only, every tag closed) and sits in a container
with MathJax's ignore classes, so a name such as ``$x$`` is shown as typed, not as math.
"""
import math

import numpy as np

from .extras import count, e, is_nan, num  # noqa: F401 (shared with report.py)

_CSS = (".fg-display{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;"
        "font-size:12px}.fg-display table{border-collapse:collapse;margin:.3em 0}"
        ".fg-display th,.fg-display td{border:1px solid #ccc;padding:.15em .5em;"
        "text-align:right}.fg-display th{background:#f3f3f3}"
        ".fg-display td:first-child,.fg-display th:first-child{text-align:left;"
        "font-family:monospace}.fg-display .bad{color:#b00020;font-weight:600}"
        ".fg-display .ok{color:#176f2c;font-weight:600}.fg-display .meta{color:#555}"
        ".fg-display tr.flagged td{background:#fff4f0}.fg-display ul{margin:.2em 0}")


def box(*parts):
    """The parts in one styled container that MathJax leaves alone."""
    return (f'<div class="fg-display tex2jax_ignore mathjax_ignore"><style>{_CSS}</style>'
            + "".join(parts) + "</div>")


def table(head, rows, row_classes=None):
    """An HTML table; cells are escaped here."""
    out = ["<table><thead><tr>", "".join(f"<th>{e(h)}</th>" for h in head),
           "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes else ""
        out.append(f'<tr class="{e(cls)}">' if cls else "<tr>")
        out.append("".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def nbytes(n):
    """A byte count for people: '812 B', '3.9 KiB', '-1.5 MiB'."""
    sign, n = ("-" if n < 0 else ""), abs(int(n))
    if n < 1024:
        return f"{sign}{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.1f} {unit}"


# ---------------------------------------------------------------- GradientMonitor

def monitor_html(m, last=5):
    """The monitor as a compact summary: per-variable table, the last steps, the flags."""
    if not m.steps:
        return box('<p class="meta">GradientMonitor: no step recorded yet.</p>')
    h = m.history
    loss = [x for x in h.loss if not math.isnan(x)]
    meta = (f"GradientMonitor: {len(h.steps)} step{'s' if len(h.steps) != 1 else ''} "
            f"({h.steps[0]}..{h.steps[-1]}), {len(h.names)} variables")
    if loss:
        meta += f"; loss {num(loss[0])} \u2192 {num(loss[-1])}"
    rows, classes = [], []
    for r in m.summary_rows():
        zeros = r["zero_fraction"]
        rows.append((r["variable"], str(r["shape"]), r["steps"], num(r["grad_norm"]),
                     f"[{num(r['norm_min'])}, {num(r['norm_max'])}]", num(r["max_abs"]),
                     "-" if math.isnan(zeros) else f"{100 * zeros:.3g}%",
                     num(r["nan_count"]), num(r["inf_count"]), num(r["update_ratio"]),
                     r["flags"] or "-"))
        classes.append("flagged" if r["flags"] else "")
    parts = [f'<p class="meta">{e(meta)}</p>',
             table(("variable", "shape", "steps", "grad norm", "norm range", "max |g|",
                    "zeros", "NaN", "Inf", "upd/weight", "flags"), rows, classes)]
    recent = range(max(0, len(h.steps) - last), len(h.steps))
    parts.append(table(("step", "loss", "global grad norm"),
                       [(h.steps[i], num(h.loss[i]), num(h.global_norm[i])) for i in recent]))
    flags = m.flags
    if flags:
        parts.append('<ul class="bad">' + "".join(f"<li>{e(f)}</li>" for f in flags)
                     + "</ul>")
    else:
        parts.append('<p class="ok">No vanishing, exploding or non-finite gradient.</p>')
    return box(*parts)


# ---------------------------------------------------------------- profiles

def kernel_rows(info):
    """tf.profile's kernels by name, in first-run order: (name, calls, ms, bytes added,
    tensors added, output shapes)."""
    by = {}
    for k in info.kernels:
        r = by.setdefault(k.name, [k.name, 0, 0.0, 0, 0, []])
        r[1] += 1
        r[2] += k.kernel_time_ms
        r[3] += k.bytes_added
        r[4] += k.tensors_added
        for s in k.output_shapes:
            if s not in r[5]:
                r[5].append(s)
    return [tuple(r) for r in by.values()]


def _shapes(shapes, most=3):
    text = ", ".join(str(s).replace(" ", "") for s in shapes[:most])
    return text + (f" +{len(shapes) - most} more" if len(shapes) > most else "")


def profile_head(info):
    n = len(info.kernels)
    return (f"tf.profile: {n} kernel run{'s' if n != 1 else ''} "
            f"({len(info.kernel_names)} distinct); new_tensors {info.new_tensors}, "
            f"new_bytes {nbytes(info.new_bytes)}, peak_bytes {nbytes(info.peak_bytes)}")


def profile_table(info):
    """Header, rows and total row of tf.profile's kernel table, as strings."""
    head = ("kernel", "calls", "time ms", "time %", "bytes added", "tensors", "output shapes")
    rows = kernel_rows(info)
    total = sum(r[2] for r in rows)
    out = [(name, str(calls), f"{ms:.3f}", f"{100 * ms / total:.1f}" if total > 0 else "-",
            nbytes(b), str(t), _shapes(s)) for name, calls, ms, b, t, s in rows]
    foot = ("total", str(len(info.kernels)), f"{total:.3f}", "100.0" if total > 0 else "-",
            nbytes(sum(r[3] for r in rows)), str(sum(r[4] for r in rows)), "")
    return head, out, foot


def profile_text(info):
    """tf.profile's answer as an aligned table (its str and repr)."""
    head, rows, foot = profile_table(info)
    if not rows:
        return profile_head(info) + "\nno kernel ran"
    table_ = [head] + rows + [foot]
    widths = [max(len(r[i]) for r in table_) for i in range(len(head))]
    left = (0, 6)         # name and shapes left-aligned, numbers right-aligned

    def line(r):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([profile_head(info), line(head)] + [line(r) for r in rows]
                     + [line(foot)])


def profile_html(info):
    head, rows, foot = profile_table(info)
    return box(f'<p class="meta">{e(profile_head(info))}</p>',
               table(head, rows + [foot]) if rows else "<p>no kernel ran</p>")


# ---------------------------------------------------------------- gradient checks

def check_html(report):
    ok = report.passed
    parts = [f'<p class="{"ok" if ok else "bad"}">check_grads: {"passed" if ok else "FAILED"}'
             f"</p>"]
    rows, classes, broken = [], [], []
    for order, mode, cs in report.checks:
        for c in cs:
            if not hasattr(c, "max_abs"):           # a derivative that could not be computed
                broken.append(f"order {order}, {mode} mode: {c}")
                continue
            rows.append((order, mode, c.index, str(list(c.shape)),
                         "ok" if c.ok else f"FAILED ({c.failures})", f"{c.max_abs:.3g}",
                         f"{c.max_rel:.3g}", str(c.worst), f"{c.analytic:.10g}",
                         f"{c.numeric:.10g}", len(c.kinks)))
            classes.append("" if c.ok else "flagged")
    if rows:
        parts.append(table(("order", "mode", "input", "shape", "status", "max abs err",
                            "max rel err", "worst at", "analytic", "numeric", "kinks"),
                           rows, classes))
    lines = broken + ([f"Which gradient rule is wrong: {c}" for c in report.culprits]
                      + list(report.notes))
    if lines:
        parts.append("<ul>" + "".join(f"<li>{e(s)}</li>" for s in lines) + "</ul>")
    return box(*parts)


# ---------------------------------------------------------------- graphs (no Graphviz)

_FONT, _CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y = 11, 6.6, 14, 8, 24, 44


def graph_svg(g, style, bad_style, nograd_style):
    """The graph drawn in SVG by a simple layered layout: each node one row below its
    deepest input, rows ordered by their inputs' positions."""
    ids = [n.id for n in g.nodes]
    preds = {i: [] for i in ids}
    for a, b, _ in g.edges:
        preds[b].append(a)
    layer = {}

    def depth(i):                  # longest path from a source (iterative: deep chains)
        stack = [i]
        while stack:
            j = stack[-1]
            todo = [p for p in preds[j] if p not in layer]
            if todo:
                stack += todo
                continue
            layer[j] = 1 + max((layer[p] for p in preds[j]), default=-1)
            stack.pop()
        return layer[i]
    rows = {}
    for i in ids:
        rows.setdefault(depth(i), []).append(i)
    size, text = {}, {}
    for n in g.nodes:
        text[n.id] = n.lines()
        w = max(len(s) for s in text[n.id]) * _CHAR_W + 2 * _PAD
        size[n.id] = (max(w, 40), len(text[n.id]) * _LINE_H + _PAD)
    x, y, top = {}, {}, 10
    widths = {k: sum(size[i][0] for i in r) + _GAP_X * (len(r) - 1) for k, r in rows.items()}
    full = max(widths.values()) if widths else 0
    for k in sorted(rows):
        r = rows[k]
        if k:                      # barycenter of the inputs: fewer crossings
            r.sort(key=lambda i: (sum(x[p] for p in preds[i]) / len(preds[i])
                                  if preds[i] else 0))
        left = 10 + (full - widths[k]) / 2
        tall = max(size[i][1] for i in r)
        for i in r:
            x[i], y[i] = left + size[i][0] / 2, top
            left += size[i][0] + _GAP_X
        top += tall + _GAP_Y
    W, H = full + 20, top - _GAP_Y + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W:.0f}" height="{H:.0f}" '
           f'viewBox="0 0 {W:.0f} {H:.0f}" font-family="Helvetica,Arial,sans-serif" '
           f'font-size="{_FONT}"><title>{e("graph of " + g.name)}</title>',
           '<defs><marker id="fg-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#555555"/></marker></defs>']
    for a, b, label in g.edges:
        x1, y1, x2, y2 = x[a], y[a] + size[a][1], x[b], y[b]
        out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                   f'stroke="#555555" marker-end="url(#fg-arrow)"/>')
        if label:
            out.append(f'<text x="{(x1 + x2) / 2 + 3:.1f}" y="{(y1 + y2) / 2:.1f}" '
                       f'font-size="9" fill="#555555">{e(label)}</text>')
    for n in g.nodes:
        st = dict(style[n.kind])
        if n.kind == "op" and n.grad_norm is None:
            st.update(nograd_style)
        if n.bad:
            st.update(bad_style)
        w, h = size[n.id]
        dash = ' stroke-dasharray="4 3"' if "dashed" in st.get("style", "") else ""
        sw = "3" if n.output else st.get("penwidth", "1")
        common = (f'fill="{e(st["fillcolor"])}" stroke="{e(st["color"])}" '
                  f'stroke-width="{e(sw)}"{dash}')
        tip = f"{n.kernel} at {n.site}" if n.site is not None else n.kernel
        out.append(f'<g class="node {e(n.kind)}"><title>{e(tip or n.label)}</title>')
        if n.kind == "constant":
            out.append(f'<ellipse cx="{x[n.id]:.1f}" cy="{y[n.id] + h / 2:.1f}" '
                       f'rx="{w / 2:.1f}" ry="{h / 2:.1f}" {common}/>')
        else:
            out.append(f'<rect x="{x[n.id] - w / 2:.1f}" y="{y[n.id]:.1f}" width="{w:.1f}" '
                       f'height="{h:.1f}" rx="5" {common}/>')
        color = st.get("fontcolor", "#222222")
        out.append(f'<text text-anchor="middle" fill="{e(color)}">')
        for k, s in enumerate(text[n.id]):
            ty = y[n.id] + _PAD / 2 + (k + 0.8) * _LINE_H
            out.append(f'<tspan x="{x[n.id]:.1f}" y="{ty:.1f}">{e(s)}</tspan>')
        out.append("</text></g>")
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------- console text

def loss_not_finite(m):
    """'the loss is nan at the last step (not finite since step 4)', or '' while the last
    loss recorded is finite: a loss that went NaN or ±inf is the news, not its last finite
    value."""
    h = m.history
    loss, steps = h.loss, h.steps
    gi = np.flatnonzero(np.asarray(getattr(m, "loss_given", ()), bool))
    if not gi.size or gi[-1] >= loss.size or np.isfinite(loss[gi[-1]]):
        return ""
    k = gi.size - 1
    while k > 0 and not np.isfinite(loss[gi[k - 1]]):
        k -= 1
    return (f"the loss is {loss[gi[-1]]:g} at the last step (not finite since step "
            f"{steps[gi[k]]})")


def console_summary(m):
    """The text of ``GradientMonitor.summary()`` (see there): a console table."""
    if not m.steps:
        return "GradientMonitor: no step recorded yet."
    h = m.history
    steps, loss = h.steps, h.loss
    head = (f"GradientMonitor: {len(steps)} step{'s' if len(steps) > 1 else ''}"
            f" ({steps[0]}..{steps[-1]})")
    ok = np.isfinite(loss)
    finite = loss[ok]
    if finite.size == 1:
        head += f"; loss {num(finite[0])}"
    elif finite.size:
        best = int(np.argmin(np.where(ok, loss, np.inf)))
        head += (f"; loss {num(finite[0])} -> {num(finite[-1])} (min {num(finite.min())} at "
                 f"step {steps[best]})")
    news = loss_not_finite(m)
    if news:
        head += "; " + news
    head += f"; last global gradient norm {num(m.last_global_norm)}"
    table = [("variable", "shape", "grad norm", "norm range", "max |g|", "zeros", "NaN",
              "Inf", "upd/weight", "flags")]
    for r in m.summary_rows():
        table.append((r["variable"], str(r["shape"]).replace(" ", ""), num(r["grad_norm"]),
                      f"[{num(r['norm_min'])}, {num(r['norm_max'])}]", num(r["max_abs"]),
                      "-" if is_nan(r["zero_fraction"]) else
                      f"{100 * r['zero_fraction']:.3g}%", count(r["nan_count"]),
                      count(r["inf_count"]), num(r["update_ratio"]), r["flags"] or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [head] + ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                      for row in table]
    flags = m.flags
    if not flags:
        lines.append("No vanishing, exploding or non-finite gradient.")
        return "\n".join(lines)
    lines.append("Flags:")
    groups = {}
    for f in flags:
        groups.setdefault((f.kind, f.start), []).append(f)
    for (kind, start), fs in groups.items():
        if len(fs) <= 3:
            lines += [f"  {f}" for f in fs]
        else:                   # a deep net: one line for the layers flagged together
            names = [f.variable for f in fs]
            shown = ", ".join(names[:3] + ["..."] + names[-1:]) if len(names) > 5 \
                else ", ".join(names)
            lines.append(f"  {len(fs)} variables {kind} from step {start}: {shown}")
    return "\n".join(lines)
