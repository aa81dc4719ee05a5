"""A picture of the graph: ``tf.debug.graph(f, *args)`` records one forward and one backward
pass of f and draws it, as Graphviz DOT, as Mermaid, or as an SVG/PNG file (through the
``dot`` executable of Graphviz, when installed).

Each op is a box with its public name (``square``, ``mul``, ``mat_mul``), output shape and
dtype, and the norm of the gradient that reached its output in the backward pass; f's
arguments carry their parameter names, variables their names, constants are small leaves.
A NaN or Inf, in a value or in a gradient, paints the node red; ops whose output gets no
gradient (off the path to the result, or behind a stop_gradient) are dashed.
"""
import inspect
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from .. import engine as E
from .. import recording
from .. import scopes
from .. import interceptors
from .. import tape
from ..arg_checks import flag
from ..errors import ArgumentError, GraphvizError
from ..gradients import call_fitted, positional_arity
from ..ops import OPS
from ..tensor import Tensor, Variable, convert
from . import sites


@dataclass
class GraphNode:
    """One node of the picture. ``kind``: 'op', 'input' (an argument of f), 'variable',
    'constant' (an op's literal), 'tensor' (made by a creation op inside f, or before f ran).
    ``grad_norm`` is None when no gradient reached the node's output; ``bad`` names the
    non-finite values found ('NaN', 'Inf', 'NaN in gradient', ...), empty when all finite."""
    id: str
    kind: str
    label: str
    shapes: list
    dtypes: list
    grad_norm: float = None
    bad: list = field(default_factory=list)
    site: object = None
    kernel: str = ""
    output: bool = False
    value: str = ""

    @property
    def shape(self):
        return self.shapes[0] if len(self.shapes) == 1 else tuple(self.shapes)

    @property
    def dtype(self):
        return self.dtypes[0] if len(self.dtypes) == 1 else tuple(self.dtypes)

    def lines(self):
        """The text lines shown in the node."""
        out = [self.label + (" (output)" if self.output else "")]
        if self.kind == "constant" and self.value:
            return [self.value]
        for s, d in zip(self.shapes, self.dtypes):
            out.append(f"{d} {list(s) if s is not None else '?'}")
        if self.grad_norm is not None:
            out.append(f"‖grad‖ {_fmt(self.grad_norm)}")
        elif self.kind in ("op", "input", "variable"):
            out.append("no gradient")
        if self.bad:
            out.append(", ".join(self.bad))
        return out


def _fmt(v):
    return f"{v:.4g}" if np.isfinite(v) else str(v).lower()


def _nonfinite(a):
    a = np.asarray(E.to_host(a))
    if a.dtype.kind != "f" or a.size == 0:
        return []
    found = []
    if np.isnan(a).any():
        found.append("NaN")
    if np.isinf(a).any():
        found.append("Inf")
    return found


_STYLE = {   # kind -> DOT attributes
    "op": {"shape": "box", "style": "rounded,filled", "fillcolor": "#fff2cc",
           "color": "#b7a57a"},
    "input": {"shape": "box", "style": "rounded,filled,bold", "fillcolor": "#d9ead3",
              "color": "#38761d"},
    "variable": {"shape": "box", "style": "filled,bold", "fillcolor": "#cfe2f3",
                 "color": "#1c4587"},
    "constant": {"shape": "ellipse", "style": "filled", "fillcolor": "#eeeeee",
                 "color": "#999999", "fontsize": "9", "width": "0.3", "height": "0.2",
                 "margin": "0.02"},
    "tensor": {"shape": "box", "style": "rounded,filled", "fillcolor": "#eeeeee",
               "color": "#999999", "fontsize": "10"},
}
_BAD = {"fillcolor": "#f4cccc", "color": "#cc0000", "fontcolor": "#990000", "penwidth": "2"}
_NOGRAD = {"style": "rounded,filled,dashed"}
_MERMAID_SHAPE = {"op": ('["', '"]'), "input": ('(["', '"])'), "variable": ('[("', '")]'),
                  "constant": ('(("', '"))'), "tensor": ('["', '"]')}
_MERMAID_CLASSES = {
    "op": "fill:#fff2cc,stroke:#b7a57a", "input": "fill:#d9ead3,stroke:#38761d,stroke-width:2px",
    "variable": "fill:#cfe2f3,stroke:#1c4587,stroke-width:2px",
    "constant": "fill:#eeeeee,stroke:#999999,font-size:10px",
    "tensor": "fill:#eeeeee,stroke:#999999",
    "bad": "fill:#f4cccc,stroke:#cc0000,stroke-width:2px,color:#990000",
    "nograd": "stroke-dasharray:4 3", "output": "stroke-width:3px"}


def _dot_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_attrs(*parts):
    attrs = {}
    for p in parts:
        attrs.update(p)
    return ", ".join(f"{k}={_dot_str(v)}" for k, v in attrs.items())


def _mermaid_str(s):
    return (s.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;"))


class Graph:
    """What ``tf.debug.graph`` returns: ``nodes`` (GraphNode, in recording order),
    ``edges`` ((source id, target id, label) forward edges), ``to_dot()``, ``to_mermaid()``
    and ``render(path)``."""

    def __init__(self, nodes, edges, name="f"):
        self.nodes, self.edges, self.name = nodes, edges, name

    def node(self, label):
        """The first node whose label (op name, argument or variable name) is ``label``."""
        if not isinstance(label, str):
            raise ArgumentError(f"Graph.node(label): label must be a node's label (a string: "
                                f"{', '.join(n.label for n in self.nodes)}), got "
                                f"{type(label).__name__}")
        for n in self.nodes:
            if n.label == label:
                return n
        raise KeyError(f"no node labelled {label!r} (labels: "
                       f"{', '.join(n.label for n in self.nodes)})")

    # ------------------------------------------------------------- text forms
    def to_dot(self, legend=True):
        """The graph in Graphviz's DOT language (``dot -Tsvg`` draws it).

        >>> import flowgrad as tf
        >>> g = tf.debug.graph(lambda x: x.square(), tf.scalar(3.0))
        >>> print(g.to_dot(legend=False), end="")                 # doctest: +ELLIPSIS
        digraph "f" {
        ...
          n1 [shape="box", ..., label="square (output)\\nfloat32 []\\n‖grad‖ 1", ...];
          n0 -> n1;
        }
        """
        out = [f"digraph {_dot_str(self.name)} {{", "  rankdir=TB;",
               '  node [fontname="Helvetica", fontsize=11];',
               '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
        for n in self.nodes:
            parts = [_STYLE[n.kind], {"label": "\n".join(n.lines())}]
            if n.kind == "op" and n.grad_norm is None:
                parts.append(_NOGRAD)
            if n.bad:
                parts.append(_BAD)
            if n.output:
                parts.append({"penwidth": "3"})
            tip = f"{n.kernel} at {n.site}" if n.site is not None else n.kernel
            if tip:
                parts.append({"tooltip": tip})
            out.append(f"  {n.id} [{_dot_attrs(*parts)}];")
        for a, b, label in self.edges:
            out.append(f"  {a} -> {b}" + (f" [label={_dot_str(label)}];" if label else ";"))
        if flag(legend, "legend", "Graph.to_dot()"):
            out += ["  subgraph cluster_legend {", '    label="legend"; fontsize=10; '
                    'color="#cccccc"; fontname="Helvetica";']
            keys = [("input", "argument of f"), ("variable", "variable"), ("op", "op"),
                    ("constant", "constant"), ("op", "NaN / Inf"), ("op", "no gradient")]
            for i, (kind, text) in enumerate(keys):
                extra = _BAD if text == "NaN / Inf" else (
                    _NOGRAD if text == "no gradient" else {})
                attrs = _dot_attrs(_STYLE[kind], extra, {"label": text, "fontsize": "9"})
                out.append(f"    legend{i} [{attrs}];")
            out.append("    " + " -> ".join(f"legend{i}" for i in range(len(keys)))
                       + " [style=invis];")
            out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"

    def to_mermaid(self):
        """The graph as a Mermaid flowchart (renders in GitHub Markdown, notebooks, docs).

        >>> import flowgrad as tf
        >>> print(tf.debug.graph(lambda x: x.square(), tf.scalar(3.0)).to_mermaid())
        ... # doctest: +ELLIPSIS
        flowchart TD
          n0(["x<br/>float32 []<br/>‖grad‖ 6"])
          n1["square (output)<br/>float32 []<br/>‖grad‖ 1"]
          n0 --> n1
        ...
        """
        out = ["flowchart TD"]
        classes = {}
        for n in self.nodes:
            lo, hi = _MERMAID_SHAPE[n.kind]
            text = "<br/>".join(_mermaid_str(s) for s in n.lines())
            out.append(f"  {n.id}{lo}{text}{hi}")
            classes.setdefault(n.kind, []).append(n.id)
            if n.bad:
                classes.setdefault("bad", []).append(n.id)
            if n.kind == "op" and n.grad_norm is None:
                classes.setdefault("nograd", []).append(n.id)
            if n.output:
                classes.setdefault("output", []).append(n.id)
        for a, b, label in self.edges:
            out.append(f"  {a} -->|{_mermaid_str(label)}| {b}" if label else f"  {a} --> {b}")
        for cls, style in _MERMAID_CLASSES.items():
            if cls in classes:
                out.append(f"  classDef {cls} {style}")
        for cls in _MERMAID_CLASSES:      # later classes win: bad over kind
            if cls in classes:
                out.append(f"  class {','.join(classes[cls])} {cls}")
        return "\n".join(out) + "\n"

    def __str__(self):
        rows = [f"graph of {self.name}: {len(self.nodes)} nodes, {len(self.edges)} edges"]
        for n in self.nodes:
            where = f"  at {n.site.filename}:{n.site.lineno}" if n.site is not None else ""
            rows.append(f"  {n.id:>4} {n.kind:<8} " + " | ".join(n.lines()) + where)
        return "\n".join(rows)

    __repr__ = __str__

    # ------------------------------------------------------------- pictures
    def to_svg(self, layout="auto", legend=False):
        """The graph as an SVG document: Graphviz's layout (``layout="dot"``; "auto" uses it
        when ``dot`` is installed) or flowgrad's own simple layered one (``"simple"``, no
        dependency). Jupyter shows it for a graph at the end of a cell (``_repr_svg_``).

        >>> import flowgrad as tf
        >>> g = tf.debug.graph(lambda x: x.square(), tf.scalar(3.0))
        >>> svg = g.to_svg(layout="simple")
        >>> svg.startswith("<svg") and "square (output)" in svg
        True
        """
        if layout not in ("auto", "dot", "simple"):
            raise ArgumentError(f"to_svg(layout={layout!r}): layout must be 'auto', 'dot' "
                                f"(Graphviz) or 'simple' (flowgrad's own, no dependency)")
        if layout == "simple" or (layout == "auto" and shutil.which("dot") is None):
            from .display import graph_svg
            return graph_svg(self, _STYLE, _BAD, _NOGRAD)
        return self._dot("svg", legend).decode("utf-8")

    def _repr_svg_(self):
        return self.to_svg()

    def render(self, path, legend=True):
        """Draw the graph into ``path`` (.svg, .png or .pdf, by its suffix) with Graphviz's
        ``dot``. Returns the path. Raises GraphvizError when ``dot`` is not installed.

        >>> import flowgrad as tf, shutil, tempfile, os
        >>> g = tf.debug.graph(lambda x: x.exp(), tf.scalar(0.0))
        >>> path = os.path.join(tempfile.mkdtemp(), "g.svg")
        >>> shutil.which("dot") is None or g.render(path) == path
        True
        """
        path = os.fspath(path)
        fmt = os.path.splitext(path)[1].lower().lstrip(".")
        if fmt not in ("svg", "png", "pdf"):
            raise ArgumentError(f"render({path!r}): the file name must end in .svg, .png or "
                                f".pdf (the picture's format is chosen by the suffix)")
        data = self._dot(fmt, legend, what=f"rendering {path!r}")
        with open(path, "wb") as out:
            out.write(data)
        return path

    def _dot(self, fmt, legend, what="drawing the graph"):
        """The picture in ``fmt`` drawn by Graphviz's ``dot`` (bytes)."""
        dot = shutil.which("dot")
        if dot is None:
            raise GraphvizError(
                "Drawing with Graphviz needs its `dot` program, which is not installed (not "
                "found on PATH). Install Graphviz (apt-get install graphviz, brew install "
                "graphviz, conda install graphviz, or https://graphviz.org/download/), or "
                "use to_svg(layout='simple'), to_dot() or to_mermaid().")
        proc = subprocess.run([dot, f"-T{fmt}"], input=self.to_dot(legend).encode(),
                              capture_output=True, timeout=120)
        if proc.returncode != 0:
            raise GraphvizError(f"dot failed (exit {proc.returncode}) while {what}: "
                                f"{proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout


# ---------------------------------------------------------------- recording

def _arg_labels(f, n):
    """Names for f's first n arguments, from its signature (``args[i]`` past its end)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "args")
    return [named[i] if i < len(named) else f"{star}[{i - len(named)}]" for i in range(n)]


def graph(f, *args):
    """Record one forward and backward pass of ``f(*args)`` (the sum of its output when it is
    not a scalar) and return a Graph to draw: ``.to_dot()``, ``.to_mermaid()``,
    ``.render("graph.svg")``. Nodes show the op, output shape and dtype and the gradient
    norm reaching it; NaN/Inf nodes are red.

    >>> import flowgrad as tf
    >>> g = tf.debug.graph(lambda x, y: (x * y).sum(), tf.tensor([1.0, 2.0]), tf.scalar(3.0))
    >>> [(n.label, n.grad_norm) for n in g.nodes]                # doctest: +ELLIPSIS
    [('x', 4.24...), ('y', 3.0), ('mul', 1.41...), ('sum', 1.0)]
    """
    if not callable(f):
        raise ArgumentError(f"graph(f, *args): f must be a function, got {type(f).__name__}")
    name = getattr(f, "__name__", "f")
    name = "f" if name == "<lambda>" else name
    labels = _arg_labels(f, len(args))
    return scopes.tidy(lambda: _record(f, args, labels, name))


def _record(f, args, labels, name):
    xs = [a if isinstance(a, Tensor) else convert(a, f"args[{i}]", "graph")
          for i, a in enumerate(args)]
    outs = {}          # node -> its output tensors (seen by the kernel checker)

    def seen(prim, inputs, attrs, out):
        if inputs and recording.is_recording():
            ys = out if isinstance(out, tuple) else (out,)
            n = ys[0]._node
            if n is not None:
                outs[n] = ys

    grads = {}         # (node, idx) or id(leaf) -> accumulated float64 gradient
    me = threading.get_ident()

    def collect(n, i, t, dx, g):
        if threading.get_ident() != me:     # (another thread's backward pass is not ours)
            return dx
        m = t._node
        key = (m, getattr(t, "_idx", 0) if m.nout > 1 else 0) if m in ours else id(t)
        a = np.asarray(E.to_host(dx._data), dtype=np.float64)
        old = grads.get(key)
        grads[key] = a if old is None else old + a
        return dx

    sites.want_sites(True)
    sites.add_checker(seen)
    level = recording.recording_level()
    try:
        sess, owner = recording.begin_recording()
        start = len(sess.nodes)      # inside an outer gradient call, its nodes come first
        ours = set()
        try:
            arity = positional_arity(f)
            y = call_fitted(f, arity, xs) if xs else f()
        finally:
            recording.end_recording()
            sites.remove_checker(seen)
            sites.want_sites(False)
        if not isinstance(y, Tensor):
            raise ArgumentError(f"graph(f, *args): f must return a tensor, got "
                                f"{type(y).__name__}")
        nodes = sess.nodes[start:]
        ours.update(nodes)
        leaves = _leaves(nodes, y, ours)
        seed = OPS["fill"](y.shape, 1, dtypes.grad_dtype(y.dtype))
        yn = y._node if y._node in ours else None
        grads[(yn, getattr(y, "_idx", 0)) if yn is not None else id(y)] = np.ones(
            y.shape, np.float64)
        w = interceptors.watch("graph", dx=collect)
        try:
            tape.backprop(y, seed, list(leaves.values()), sess)
        finally:
            interceptors.unwatch(w)
        return _build(nodes, ours, leaves, outs, grads, xs, labels, y, yn, name)
    finally:
        recording.unwind_recording(level)


def _leaves(nodes, y, ours):
    """Tensors the recorded ops read that none of them made (id -> tensor)."""
    leaves = {}
    for n in nodes:
        for t in n.inputs:
            m = t._node
            if m not in ours and id(t) not in leaves:
                leaves[id(t)] = t
    if y._node not in ours:
        leaves[id(y)] = y
    return leaves


def _norm(a):
    return None if a is None else float(np.sqrt(np.sum(a * a)))


def _leaf_node(t, nid, xs, labels, grads):
    arg = next((i for i, x in enumerate(xs) if x is t), None)
    g = grads.get(id(t))
    if arg is not None:
        label = labels[arg]
        if isinstance(t, Variable):
            label += f" (variable {t.name})"
        kind = "input"
    elif isinstance(t, Variable):
        kind, label = "variable", t.name
    elif t.kept == E.CONSTANT:
        kind, label = "constant", "constant"
    else:
        kind, label = "tensor", "tensor"
    value = ""
    if kind == "constant" and t._data is not None and np.asarray(E.to_host(t._data)).size == 1:
        value = f"{np.asarray(E.to_host(t._data)).reshape(()).item():.6g}"
    elif kind == "constant":
        value = f"{t.dtype} {list(t.shape)}"
    data = t._data
    bad = _nonfinite(data) if data is not None else []
    bad += [f"{k} in gradient" for k in _nonfinite(g)] if g is not None else []
    return GraphNode(nid, kind, label, [t.shape], [t.dtype], _norm(g), bad, value=value)


def _build(nodes, ours, leaves, outs, grads, xs, labels, y, yn, name):
    ids = {}
    gnodes = []
    # f's arguments first (in order, used or not), then the other leaves as first used
    ordered = list(xs) + [t for t in leaves.values() if not any(t is x for x in xs)]
    for t in ordered:
        if id(t) in ids:
            continue
        ids[id(t)] = f"n{len(gnodes)}"
        gnodes.append(_leaf_node(t, ids[id(t)], xs, labels, grads))
    if yn is None:
        gnodes[[i for i, t in enumerate(ordered) if t is y][0]].output = True
    edges = []
    for n in nodes:
        nid = f"n{len(gnodes)}"
        ids[n] = nid
        ys = outs.get(n)
        if ys is not None:
            shapes, dts = [o.shape for o in ys], [o.dtype for o in ys]
        elif getattr(n, "metas", None):     # (several outputs, or a custom gradient's)
            shapes, dts = [s for s, _ in n.metas], [d for _, d in n.metas]
        else:
            shapes, dts = [None], ["?"]
        gs = [grads.get((n, i)) for i in range(n.nout)]
        got = [g for g in gs if g is not None]
        norm = float(np.sqrt(sum(np.sum(g * g) for g in got))) if got else None
        bad = []
        for o in ys or ():
            if o._data is not None:
                bad += [k for k in _nonfinite(o._data) if k not in bad]
        for g in got:
            bad += [f"{k} in gradient" for k in _nonfinite(g) if f"{k} in gradient" not in bad]
        site = sites.node_site(n)
        gnodes.append(GraphNode(nid, "op", sites.op_name(n), shapes, dts, norm, bad, site,
                                n.prim.name, output=n is yn))
        multi_in = len(n.inputs) > 1
        for i, t in enumerate(n.inputs):
            m = t._node
            src = ids.get(m) if m in ours else ids.get(id(t))
            if src is None:
                continue
            label = tape.input_name(n.prim, i) if multi_in else ""
            if m in ours and m.nout > 1:
                label = f"[{getattr(t, '_idx', 0)}]" + (" " + label if label else "")
            edges.append((src, nid, label))
    return Graph(gnodes, edges, name)
