"""Notebook displays: each _repr_*_ is well-formed HTML/SVG with user strings escaped, the
profile's table says what the profile holds, the progress bar is tqdm.auto's."""
import os
import re
import shutil
import subprocess
import sys
import types
import xml.etree.ElementTree as ET

import pytest

import flowgrad as tf
from flowgrad.debug import GraphvizError

HOSTILE = ["<script>alert(1)</script>", "$x$", "a&b \"q\" 'r'"]


def parse(markup):
    """The markup as XML (our HTML is well-formed XML too): a parse error fails the test."""
    return ET.fromstring(markup)


def text_of(root):
    return "".join(root.itertext())


def assert_escaped(markup, names):
    root = parse(markup)
    assert "<script" not in markup
    assert not any(el.tag == "script" for el in root.iter())
    for name in names:
        assert name in text_of(root)                   # shown as typed


def assert_mathjax_ignored(markup):
    assert {"tex2jax_ignore", "mathjax_ignore"} <= set(parse(markup).get("class").split())


# ---------------------------------------------------------------- GradientMonitor

def test_monitor_html_summarises_steps_and_flags_with_names_escaped():
    m = tf.debug.GradientMonitor(explode_threshold=10.0)
    for step in range(7):
        m.record({HOSTILE[0]: tf.tensor([3.0, 4.0]) * (step + 1), HOSTILE[1]: tf.tensor([1.0]),
                  HOSTILE[2]: tf.tensor([0.5])}, loss=1.0 / (step + 1))  # norm 5 (step + 1)
    out = m._repr_html_()
    assert_escaped(out, HOSTILE)
    assert_mathjax_ignored(out)
    root = parse(out)
    tables = root.findall(".//table")
    assert len(tables) == 2
    summary = [[td.text for td in tr] for tr in tables[0].iter("tr")][1:]
    assert [r[0] for r in summary] == HOSTILE
    assert float(summary[0][3]) == pytest.approx(35.0)             # last grad norm: 5 * 7
    steps = [[td.text for td in tr] for tr in tables[1].iter("tr")][1:]
    assert [int(r[0]) for r in steps] == [2, 3, 4, 5, 6]             # the last 5 steps
    assert float(steps[-1][1]) == pytest.approx(1 / 7, rel=1e-3)
    assert float(steps[-1][2]) == pytest.approx(m.last_global_norm, rel=1e-3)
    flags = [li.text for li in root.iter("li")]
    assert len(flags) == 1 and "exploding from step 2" in flags[0] and HOSTILE[0] in flags[0]


def test_empty_monitor_html():
    out = tf.debug.GradientMonitor()._repr_html_()
    assert "no step recorded" in text_of(parse(out))


# ---------------------------------------------------------------- profile

def _profile():
    x = tf.tensor([1.0, 2.0, 3.0])
    return tf.profile(lambda: x.square().sum().add(tf.scalar(1.0)).square())


def test_profile_prints_a_table_of_its_kernels():
    info = _profile()
    text = str(info)
    assert repr(info) == text and "ProfileInfo(" not in text
    lines = text.splitlines()
    assert lines[0].startswith(f"tf.profile: {len(info.kernels)} kernel runs")
    assert f"new_tensors {info.new_tensors}" in lines[0]
    # (peak_bytes counts every live tensor of the thread: its size, hence its unit,
    # depends on what ran before)
    from flowgrad.debug.display import nbytes
    assert f"new_bytes {info.new_bytes} B" in lines[0]
    assert f"peak_bytes {nbytes(info.peak_bytes)}" in lines[0]
    assert nbytes(4265) == "4.2 KiB" and nbytes(812) == "812 B"      # by hand
    head = lines[1].split()
    assert head[:3] == ["kernel", "calls", "time"]
    rows = {ln.split()[0]: ln for ln in lines[2:]}
    assert list(rows)[:-1] == info.kernel_names == ["Square", "Sum", "Add"]
    for name in info.kernel_names:
        runs = [k for k in info.kernels if k.name == name]
        cells = rows[name].split()
        assert int(cells[1]) == len(runs)
        assert float(cells[2]) == pytest.approx(sum(k.kernel_time_ms for k in runs), abs=6e-4)
        assert int(cells[4]) == sum(k.bytes_added for k in runs) and cells[5] == "B"
    total = rows["total"].split()
    assert int(total[1]) == len(info.kernels)
    assert float(total[3]) == pytest.approx(100.0)
    # the columns line up: every row as long as the header's span of numeric columns
    assert len({ln.index(" B ") for ln in lines[2:]}) == 1
    # TF.js's attributes are still there
    assert info.newBytes == info.new_bytes == 4 and info.peakBytes >= 4
    assert info.kernelNames == ["Square", "Sum", "Add"] and len(info.kernels) == 4
    assert info["new_tensors"] == 1 and info.result.item() == pytest.approx(225.0)


def test_profile_html_matches_the_profile():
    info = _profile()
    root = parse(info._repr_html_())
    rows = [[td.text or "" for td in tr] for tr in root.iter("tr")]
    assert rows[0][:2] == ["kernel", "calls"]
    assert [r[0] for r in rows[1:]] == ["Square", "Sum", "Add", "total"]
    assert [int(r[1]) for r in rows[1:]] == [2, 1, 1, 4]
    assert rows[1][4] == f"{4 * 3 + 4} B"                          # [3] and [] float32
    empty = tf.profile(lambda: None)
    assert "no kernel ran" in str(empty) and "no kernel ran" in text_of(
        parse(empty._repr_html_()))


def test_time_keeps_its_short_repr():
    t = tf.time(lambda: tf.ones([4]).square())
    assert re.fullmatch(r"TimingInfo\(kernel_ms=[\d.]+, wall_ms=[\d.]+\)", repr(t))
    assert t._repr_html_ is None


# ---------------------------------------------------------------- check reports

def test_check_report_html_passed_and_failed():
    ok = tf.debug.check_grads(lambda x: x.square(), tf.tensor([1.0, 2.0]))
    root = parse(ok._repr_html_())
    assert "check_grads: passed" in text_of(root)
    cells = [td.text for td in root.find(".//tbody/tr")]
    assert cells[:5] == ["1", "rev", "0", "[2]", "ok"]

    def wrong(x, save=None):
        return {"value": x.square(), "grad_func": lambda dy: dy * 3.0}
    bad = tf.debug.check_grads(tf.custom_grad(wrong), tf.tensor([1.0]), raise_on_fail=False)
    out = bad._repr_html_()
    root = parse(out)
    assert "check_grads: FAILED" in text_of(root)
    assert root.find(".//tbody/tr").get("class") == "flagged"
    cells = [td.text for td in root.find(".//tbody/tr")]
    assert cells[4].startswith("FAILED")
    assert float(cells[8]) == pytest.approx(3.0) and float(cells[9]) == pytest.approx(2.0)


# ---------------------------------------------------------------- graphs

def test_graph_svg_is_well_formed_with_one_group_per_node():
    w = tf.variable(tf.tensor([1.0, 2.0]), name=HOSTILE[0] + HOSTILE[1])
    try:
        g = tf.debug.graph(lambda x: (x * w).log().sum(), tf.tensor([1.0, 0.0]))
        svg = g.to_svg(layout="simple")
    finally:
        w.dispose()
    root = parse(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg"
    groups = [el for el in root.iter(ns + "g") if "node" in el.get("class", "")]
    assert len(groups) == len(g.nodes)
    assert len(root.findall(f".//{ns}line")) == len(g.edges)
    assert_escaped(svg, [HOSTILE[0] + HOSTILE[1], "mul", "log", "sum (output)"])
    red = [grp for grp in groups if grp.find(ns + "rect") is not None
           and grp.find(ns + "rect").get("stroke") == "#cc0000"]
    assert len(red) == sum(1 for n in g.nodes if n.bad) > 0      # log(0): -Inf is red
    for grp in groups:                        # inside the picture
        r = grp.find(ns + "rect")
        if r is not None:
            assert 0 <= float(r.get("x")) and float(r.get("x")) + float(r.get("width")) \
                <= float(root.get("width")) + 1e-6


def test_graph_repr_svg_without_graphviz_uses_the_simple_layout(monkeypatch):
    g = tf.debug.graph(lambda x: x.square(), tf.scalar(3.0))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert g._repr_svg_() == g.to_svg(layout="simple")
    with pytest.raises(GraphvizError, match="to_svg\\(layout='simple'\\)"):
        g.to_svg(layout="dot")
    with pytest.raises(tf.ArgumentError, match="'auto', 'dot'"):
        g.to_svg(layout="neato")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed")
def test_graph_repr_svg_with_graphviz():
    g = tf.debug.graph(lambda x: x.square(), tf.scalar(3.0))
    root = parse(g._repr_svg_().encode())
    assert root.tag.endswith("svg") and "square" in text_of(root)


def test_deep_chain_lays_out_without_recursion_limits():
    def f(x):
        for _ in range(1500):
            x = x + 1.0
        return x
    svg = tf.debug.graph(f, tf.scalar(0.0)).to_svg(layout="simple")
    assert svg.count('class="node') >= 1501


# ---------------------------------------------------------------- progress bar

class _FakeBar:
    made = []

    def __init__(self, **kw):
        self.kw, self.n, self.closed = kw, 0, False
        _FakeBar.made.append(self)

    def update(self, n):
        self.n += n

    def set_postfix(self, post, refresh=False):
        self.post = post

    def close(self):
        self.closed = True


def test_progress_uses_tqdm_auto(monkeypatch):
    import tqdm.auto
    monkeypatch.setattr(tqdm.auto, "tqdm", _FakeBar)
    _FakeBar.made.clear()
    m = tf.debug.GradientMonitor()
    for i in tf.train.progress(range(3), monitor=m, enable=True):
        m.record({"a": tf.tensor([3.0, 4.0])}, loss=1.0)
    bar, = _FakeBar.made
    assert bar.n == 3 and bar.closed and bar.post["grad_norm"] == "5"


def test_progress_is_on_in_a_jupyter_kernel(monkeypatch):
    """A kernel's stderr is no TTY, but tqdm.auto draws a widget there: the bar is on; a
    terminal IPython (no kernel) with a non-TTY stream keeps it off."""
    import io
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.delenv("FLOWGRAD_PROGRESS", raising=False)
    shell = types.SimpleNamespace(kernel=object())
    fake = types.SimpleNamespace(get_ipython=lambda: shell)
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert tf.train.progress(range(2), file=io.StringIO()).enabled
    shell.kernel = None
    assert not tf.train.progress(range(2), file=io.StringIO()).enabled
    monkeypatch.setenv("FLOWGRAD_PROGRESS", "0")
    shell.kernel = object()
    assert not tf.train.progress(range(2), file=io.StringIO()).enabled


FALLBACK = """
import sys, types, warnings
sys.modules["ipywidgets"] = None                  # not installed
shell = types.SimpleNamespace(kernel=object(), config={"IPKernelApp": {}})
sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)
import flowgrad as tf
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    loop = tf.train.progress(range(3), mininterval=0)
    assert loop.enabled
    print(sum(1 for _ in loop), type(loop.bar).__module__)
"""


def test_progress_in_jupyter_without_ipywidgets_falls_back_to_text():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_CURRENT_TEST", "FLOWGRAD_PROGRESS")}
    r = subprocess.run([sys.executable, "-c", FALLBACK], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    n, module = r.stdout.split()
    assert n == "3" and module in ("tqdm.asyncio", "tqdm.std")      # not tqdm.notebook
    assert "3/3" in r.stderr                        # the text bar was drawn


def test_rich_displays_cost_nothing_until_called():
    """The display module is imported only when a notebook asks for a display."""
    code = ("import sys, flowgrad as tf; tf.profile(lambda: tf.ones([2]).sum()); "
            "print('flowgrad.debug.display' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip() == "False", r.stderr
