"""tf.debug.graph: nodes, labels, gradient norms, NaN/Inf highlights, DOT and Mermaid text,
rendering through Graphviz (or the error saying how to get it)."""
import gc
import re
import shutil
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import interceptors
from flowgrad.debug import GraphvizError
from flowgrad.errors import ArgumentError

RED = 'fillcolor="#f4cccc"'


def dot_line(g, node):
    """The DOT statement of one node."""
    for line in g.to_dot().splitlines():
        if line.strip().startswith(f"{node.id} ["):
            return line
    raise AssertionError(node.id)


def test_nodes_labels_and_gradient_norms_of_a_small_function():
    def loss(pred, target):
        return (pred - target).square().mean()

    p, t = tf.tensor([1.0, 2.0, 4.0]), tf.tensor([0.0, 2.0, 2.0])
    g = tf.debug.graph(loss, p, t)
    assert g.name == "loss"
    assert [(n.kind, n.label) for n in g.nodes] == [
        ("input", "pred"), ("input", "target"), ("op", "sub"), ("op", "square"),
        ("op", "mean")]
    d = np.array([1.0, 0.0, 2.0])                       # pred - target
    assert g.node("pred").grad_norm == pytest.approx(np.linalg.norm(2 * d / 3))
    assert g.node("target").grad_norm == pytest.approx(np.linalg.norm(2 * d / 3))
    assert g.node("square").grad_norm == pytest.approx(np.linalg.norm(np.full(3, 1 / 3)))
    assert g.node("mean").grad_norm == 1.0 and g.node("mean").output
    assert g.node("sub").shape == (3,) and g.node("sub").dtype == "float32"
    assert g.node("mean").shape == () and g.node("square").kernel == "Square"
    assert g.node("sub").site.filename == __file__
    ids = {n.label: n.id for n in g.nodes}
    assert (ids["pred"], ids["sub"], "a") in g.edges and (ids["target"], ids["sub"], "b") in \
        g.edges and (ids["sub"], ids["square"], "") in g.edges

    dot = g.to_dot()
    assert dot.startswith('digraph "loss" {') and dot.rstrip().endswith("}")
    assert f'{ids["pred"]} -> {ids["sub"]} [label="a"];' in dot
    assert f'{ids["square"]} -> {ids["mean"]};' in dot
    assert 'label="pred\\nfloat32 [3]\\n‖grad‖ 1.491"' in dot
    assert 'label="mean (output)\\nfloat32 []\\n‖grad‖ 1"' in dot
    assert "cluster_legend" in dot and "cluster_legend" not in g.to_dot(legend=False)
    assert RED not in g.to_dot(legend=False)

    mm = g.to_mermaid()
    assert mm.startswith("flowchart TD\n")
    assert f'{ids["pred"]}(["pred<br/>float32 [3]<br/>‖grad‖ 1.491"])' in mm
    assert f'{ids["pred"]} -->|a| {ids["sub"]}' in mm
    assert f'{ids["square"]} --> {ids["mean"]}' in mm
    assert f'class {ids["mean"]} output' in mm
    assert "pred" in str(g) and "square" in str(g)


def test_variables_are_named_and_constants_are_small_leaves():
    w = tf.variable(tf.tensor([[1.0, -2.0]]), name="weights_g")
    b = tf.variable(tf.scalar(0.5), name="bias_g")
    try:
        x = tf.tensor([[3.0], [4.0]])
        g = tf.debug.graph(lambda: (x.mat_mul(w) + b).mul(2).sum())
        kinds = {n.label: n.kind for n in g.nodes}
        assert kinds["weights_g"] == "variable" and kinds["bias_g"] == "variable"
        assert kinds["tensor"] == "tensor"            # x: made before f ran
        const = [n for n in g.nodes if n.kind == "constant"]
        assert [c.value for c in const] == ["2"]
        # d/dw sum(2 (x w + b)) = 2 * x^T 1 = [[14, 14]]
        assert g.node("weights_g").grad_norm == pytest.approx(np.hypot(14, 14))
        assert g.node("bias_g").grad_norm == pytest.approx(8.0)
        dot = g.to_dot()
        line = dot_line(g, const[0])
        assert 'shape="ellipse"' in line and 'fontsize="9"' in line and 'label="2"' in line
        assert 'label="weights_g\\nfloat32 [1, 2]\\n‖grad‖ 19.8"' in dot
        assert f'{g.node("weights_g").id}[("weights_g<br/>' in g.to_mermaid()
        assert f"{g.node('mat_mul').id}" in dot
    finally:
        w.dispose()
        b.dispose()


def test_a_variable_passed_as_an_argument_keeps_both_names():
    v = tf.variable(tf.scalar(2.0), name="v_arg_g")
    try:
        g = tf.debug.graph(lambda x: x * x, v)
        assert g.nodes[0].label == "x (variable v_arg_g)" and g.nodes[0].grad_norm == 4.0
    finally:
        v.dispose()


def test_nan_in_a_value_is_highlighted_red():
    g = tf.debug.graph(lambda x: x.sqrt().sum(), tf.tensor([-1.0, 4.0]))
    sq = g.node("sqrt")
    assert sq.bad == ["NaN"] and g.node("sum").bad == ["NaN"]
    assert RED in dot_line(g, sq) and 'color="#cc0000"' in dot_line(g, sq)
    assert "NaN" in dot_line(g, sq)
    assert re.search(rf"class [n0-9,]*\b{sq.id}\b[n0-9,]* bad", g.to_mermaid())
    assert g.nodes[0].bad == ["NaN in gradient"]      # d sqrt(x)/dx at -1 is NaN too


def test_inf_only_in_the_gradient_is_highlighted_too():
    g = tf.debug.graph(lambda x: x.sqrt(), tf.scalar(0.0))
    assert g.node("sqrt").bad == []                    # sqrt(0) = 0 is finite
    x = g.node("x")
    assert x.bad == ["Inf in gradient"] and x.grad_norm == np.inf
    assert RED in dot_line(g, x) and "‖grad‖ inf" in dot_line(g, x)


def test_ops_off_the_gradient_path_are_dashed_and_unused_arguments_shown():
    def f(x, unused):
        x.exp()                                        # computed, never used
        return tf.stop_gradient(x.square()) + x
    g = tf.debug.graph(f, tf.scalar(1.0), tf.scalar(5.0))
    assert g.node("unused").grad_norm is None and "no gradient" in g.node("unused").lines()
    assert g.node("exp").grad_norm is None and g.node("square").grad_norm is None
    assert "dashed" in dot_line(g, g.node("exp"))
    assert "dashed" not in dot_line(g, g.node("add"))
    assert g.node("x").grad_norm == 1.0


def test_non_scalar_output_is_summed_and_multi_output_edges_are_indexed():
    g = tf.debug.graph(lambda x: tf.split(x, 2)[1] * 3, tf.tensor([1.0, 2.0, 3.0, 4.0]))
    split = g.node("split")
    assert split.shapes == [(2,), (2,)] and split.grad_norm == pytest.approx(np.sqrt(18))
    assert g.node("mul").output and g.node("mul").grad_norm == pytest.approx(np.sqrt(2))
    assert any(a == split.id and label.startswith("[1]") for a, _, label in g.edges)


def test_graph_frees_what_it_records_and_removes_its_watch():
    x = tf.tensor([1.0, 2.0])
    gc.collect()        # (garbage of earlier tests, collected mid-test, would skew the count)
    before = tf.memory().num_tensors
    tf.debug.graph(lambda x: (x * 2).exp().sum(), x)
    tf.debug.graph(lambda a, b: a + b, 1.0, 2.0)      # numbers become tensors, then freed
    assert tf.memory().num_tensors == before
    assert interceptors.dx_hook is None


def test_graph_inside_a_gradient_call_draws_only_its_own_ops():
    drawn = []

    def outer(x):
        a = x.exp()
        drawn.append(tf.debug.graph(lambda z: (z * a).sum(), x))
        return a.sum()
    assert tf.grad(outer)(tf.tensor([0.0])).item() == 1.0
    g = drawn[0]
    assert [(n.kind, n.label) for n in g.nodes] == [("input", "z"), ("tensor", "tensor"),
                                                    ("op", "mul"), ("op", "sum")]


def test_graph_and_numerics_watch_the_same_sweep():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", tf.debug.NumericsWarning)
        with tf.debug.check_numerics(mode="warn") as chk:
            hook = interceptors.dx_hook
            g = tf.debug.graph(lambda x: x.sqrt(), tf.scalar(0.0))
            assert interceptors.dx_hook is hook
    assert any(w.category is tf.debug.NumericsWarning for w in seen)
    assert g.node("x").bad == ["Inf in gradient"]
    assert any(f.pass_ == "backward" for f in chk.findings)


def test_graph_errors_name_the_fix():
    with pytest.raises(ArgumentError, match="f must be a function"):
        tf.debug.graph(3)
    with pytest.raises(ArgumentError, match="f must return a tensor, got list"):
        tf.debug.graph(lambda x: [x], tf.scalar(1.0))
    g = tf.debug.graph(lambda x: x, tf.scalar(1.0))     # f returns its input: one node
    assert len(g.nodes) == 1 and g.nodes[0].output and g.edges == []
    with pytest.raises(ArgumentError, match=r"must end in \.svg, \.png or \.pdf"):
        g.render("graph.txt")


def test_render_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    g = tf.debug.graph(lambda x: x.square(), tf.scalar(2.0))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizError) as e:
        g.render(tmp_path / "g.svg")
    assert "Install Graphviz" in str(e.value) and "to_dot()" in str(e.value) and \
        "to_mermaid()" in str(e.value)
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's `dot` is not installed (apt-get install graphviz)")
def test_render_writes_a_valid_svg_and_png(tmp_path):
    g = tf.debug.graph(lambda x: x.log().sum(), tf.tensor([0.0, 1.0]))
    path = g.render(tmp_path / "g.svg")
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "log" in texts and "sum (output)" in texts and "x" in texts
    fills = {p.get("fill") for p in root.iter("{http://www.w3.org/2000/svg}path")}
    assert "#f4cccc" in fills                           # log(0) = -Inf: painted red
    png = g.render(tmp_path / "g.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_custom_gradient_node_shows_its_shape_and_dtype():
    def fwd(x, save):
        save([x])
        return {"value": x.square(), "grad_func": lambda dy, s: dy * s[0] * 2}
    sq = tf.custom_grad(fwd)
    g = tf.debug.graph(lambda x: sq(x).sum(), tf.tensor(np.array([1.0, 2.0]), dtype="float64"))
    (node,) = [n for n in g.nodes if n.kind == "op" and n.label == "fwd"]
    assert node.shapes == [(2,)] and node.dtypes == ["float64"]       # were [None], ["?"]
