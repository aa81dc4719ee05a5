"""The monitor's plots (PNG/SVG files, their series read back), TensorBoard event files read
back, and the HTML report rendered by headless Chromium without console errors."""
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError
from flowgrad.tensor import registered_variables

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and
                 os.path.exists(p)), None)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _clean_variables():
    """Dispose the variables a test created (their names are free again)."""
    before = {id(v) for v in registered_variables().values()}
    yield
    for v in registered_variables().values():
        if id(v) not in before:
            v.dispose()


def _trained_monitor(steps=6):
    """A small chain: one layer whose gradient vanishes (1e-9 of the others', from step 0:
    flagged after patience=2 steps), one that explodes (above explode_threshold=1e3 from
    step 4)."""
    m = tf.debug.GradientMonitor(bins=8, patience=2, explode_threshold=1e3)
    rng = np.random.default_rng(1)
    for t in range(steps):
        m.record({"dense/kernel": tf.tensor(rng.normal(size=(4, 3)) * 0.5 ** t),
                  "deep/w": tf.tensor(rng.normal(size=(5,)) * 1e-9),
                  "head/b": tf.tensor([0.5 * 10.0 ** t, -1.0])},
                 loss=10.0 / (t + 1))
    return m


# ---------------------------------------------------------------- plots

def test_plot_series_read_back_from_the_figures():
    pytest.importorskip("matplotlib", reason="plots need matplotlib (flowgrad[viz])")
    m = _trained_monitor()
    h = m.history
    # (dense/kernel decays while head/b explodes: from step 4 its gradient is below 1e-4 of
    # head/b's, the depth criterion)
    assert m.vanishing == {"deep/w": 0, "dense/kernel": 4} and m.exploding == {"head/b": 4}

    ax = m.plot_loss().axes[0]
    (line,) = ax.get_lines()
    np.testing.assert_allclose(line.get_xdata(), range(6))
    np.testing.assert_allclose(line.get_ydata(), h.loss, rtol=1e-6)

    ax = m.plot_grad_norms().axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert ax.get_yscale() == "log"
    for name in h.names:
        np.testing.assert_allclose(lines[name].get_ydata(), h[name]["grad_norm"], rtol=1e-6)
    np.testing.assert_allclose(lines["global"].get_ydata(), h.global_norm, rtol=1e-6)
    assert lines["explode threshold"].get_ydata()[0] == 1e3       # (the one set: absolute)
    assert "vanish threshold" not in lines
    crosses = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    assert sorted(int(c.get_xdata()[0]) for c in crosses) == [0, 4, 4]  # where flags start

    ax = m.plot_grad_flow().axes[0]
    img = ax.images[0].get_array()
    np.testing.assert_allclose(img, np.log10(h.matrix("grad_norm")), rtol=1e-6)
    assert [t.get_text() for t in ax.get_yticklabels()] == h.names

    fig = m.plot_histograms(step=2)
    assert fig.get_suptitle() == "Gradient histograms at step 2"
    panels = {a.get_title(): a for a in fig.axes if a.get_visible()}
    assert set(panels) == set(h.names)
    counts, edges = panels["head/b"].patches[0].get_data()[:2]
    want_edges, want_counts = m.histogram(2, "head/b")
    np.testing.assert_allclose(edges, want_edges)
    assert counts.tolist() == want_counts.tolist() and counts.sum() == 2
    assert m.plot_histograms(variables=["head/b"]).axes[0].get_title() == "head/b"


def test_plots_saved_as_valid_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (flowgrad[viz])")
    m = _trained_monitor()
    for name in ("loss", "grad_norms", "grad_flow", "histograms"):
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        getattr(m, f"plot_{name}")(path=png)
        getattr(tf.debug, f"plot_{name}")(m, path=svg)
        assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 2000
        root = ET.parse(svg).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # the series are in the SVG: one group per plotted line / image, named by its gid
    ids = {e.get("id") for e in ET.parse(tmp_path / "grad_norms.svg").iter()}
    assert {"grad-norm-dense_kernel", "grad-norm-deep_w", "grad-norm-head_b",
            "grad-norm-global"} <= ids
    g = next(e for e in ET.parse(tmp_path / "loss.svg").iter() if e.get("id") == "loss")
    path = next(e for e in g.iter() if e.tag.endswith("path"))
    assert path.get("d").count("L") == 5                   # six points: M then five L
    flow = ET.parse(tmp_path / "grad_flow.svg").getroot()
    assert any(e.tag.endswith("image") for e in flow.iter())
    hist_ids = {e.get("id") for e in ET.parse(tmp_path / "histograms.svg").iter()}
    assert {"hist-dense_kernel", "hist-deep_w", "hist-head_b"} <= hist_ids
    with pytest.raises(ArgumentError, match=r"the suffix picks the format, one of \.png"):
        m.plot_loss(path=tmp_path / "loss.jpg")


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)    # import matplotlib -> ImportError
    m = _trained_monitor(2)
    with pytest.raises(tf.debug.MissingDependencyError,
                       match=r"plots need matplotlib: pip install 'flowgrad\[viz\]'"):
        m.plot_loss()
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(ImportError, match=r"pip install 'flowgrad\[tensorboard\]'"):
        m.to_tensorboard("unused")


# ---------------------------------------------------------------- TensorBoard

def read_events(logdir):
    """Every (tag, step, value) in the event files: TFRecord framing parsed by hand,
    records decoded with tensorboardX's Event proto."""
    from tensorboardX.proto import event_pb2
    out = []
    for fname in sorted(os.listdir(logdir)):
        data = (logdir / fname).read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
            pos += 12 + n + 4
            for v in event.summary.value:
                out.append((v.tag, event.step, v.histo if v.HasField("histo") else
                            v.simple_value))
    return out


def test_tensorboard_events_read_back(tmp_path):
    pytest.importorskip("tensorboardX", reason="TensorBoard logs need flowgrad[tensorboard]")
    w = tf.variable(tf.tensor([3.0, -4.0]), name="tb_w")
    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, bins=5)
    for _ in range(3):
        opt.minimize(lambda: w.square().sum())
    assert m.to_tensorboard(tmp_path / "run") == str(tmp_path / "run")
    events = read_events(tmp_path / "run")
    h = m.history

    def series(tag):
        return [v for t, _, v in sorted((e for e in events if e[0] == tag),
                                        key=lambda e: e[1])]
    np.testing.assert_allclose(series("loss"), h.loss, rtol=1e-6)
    np.testing.assert_allclose(series("grad_norm/tb_w"), [10, 8, 6.4], rtol=1e-6)
    np.testing.assert_allclose(series("grad_norm/global"), h.global_norm, rtol=1e-6)
    np.testing.assert_allclose(series("update_ratio/tb_w"), [0.2] * 3, rtol=1e-5)
    histos = series("grads/tb_w")
    assert len(histos) == 3
    edges, counts = m.histogram(1, "tb_w")
    assert list(histos[1].bucket) == counts.tolist()
    np.testing.assert_allclose(histos[1].bucket_limit, edges[1:])
    assert (histos[1].min, histos[1].max, histos[1].num) == (-6.4, 4.8, 2) or \
        np.allclose([histos[1].min, histos[1].max], [edges[0], edges[-1]])
    assert histos[1].sum_squares == pytest.approx(64, rel=1e-6)
    assert sorted({e[1] for e in events}) == [0, 1, 2]

    # live: later steps go to the same files as they come
    m.to_tensorboard(tmp_path / "live", live=True)
    opt.minimize(lambda: w.square().sum())
    m.close()
    live = read_events(tmp_path / "live")
    assert sorted(s for t, s, _ in live if t == "loss") == [0, 1, 2, 3]
    ratios = sorted((s, v) for t, s, v in live if t == "update_ratio/tb_w")
    assert [s for s, _ in ratios] == [0, 1, 2, 3]           # step 3's once its update ran
    assert ratios[3][1] == pytest.approx(0.2, rel=1e-5)


# ---------------------------------------------------------------- the HTML report

def _report(tmp_path):
    m = _trained_monitor()
    good = tf.debug.check_grads(lambda x: x.sin() * x, tf.tensor([0.5, 1.5]))

    def bad_square(x, save):
        save([x])
        return {"value": x.square(), "grad_func": lambda dy, saved: dy * saved[0] * 3}
    bad = tf.debug.check_grads(tf.custom_grad(bad_square), tf.tensor([1.0, 2.0]),
                               raise_on_fail=False)
    assert good.passed and not bad.passed
    path = tf.debug.report(m, tmp_path / "report.html",
                           checks={"sin(x)·x": good, "bad square": bad}, title="Run <42>")
    return m, path


def test_report_is_self_contained(tmp_path):
    pytest.importorskip("matplotlib", reason="the report's plots need flowgrad[viz]")
    m, path = _report(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "http:" not in text and "https:" not in text and "<script" not in text
    assert "<title>Run &lt;42&gt;</title>" in text
    assert text.count("<svg") == 4 and '<table class="summary">' in text
    assert "deep/w</b>: vanishing from step <b>0</b>" in text
    assert "head/b</b>: exploding from step <b>4</b>" in text
    assert "bad square" in text and "FAILED" in text and "passed" in text
    ids = [i for i in __import__("re").findall(r'\bid="([^"]+)"', text)]
    assert len(ids) == len(set(ids))                          # unique across the figures
    with pytest.raises(ArgumentError, match="give a GradientMonitor, check_grads reports"):
        tf.debug.report(None, tmp_path / "x.html")
    with pytest.raises(ArgumentError, match="expected check_grads results"):
        tf.debug.report(m, tmp_path / "x.html", checks=[42])


def test_report_without_matplotlib_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = tf.debug.report(_trained_monitor(2), tmp_path / "r.html").read_text()
    assert "Plots need matplotlib: pip install 'flowgrad[viz]'" in text
    assert '<table class="summary">' in text and "<svg" not in text


def _chromium(tmp_path, *args):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'chromium-profile'}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console(stderr):
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: "
                    "apt-get install chromium; .ci/run installs it when it can)")
def test_report_renders_in_headless_chromium(tmp_path):
    pytest.importorskip("matplotlib", reason="the report's plots need flowgrad[viz]")
    # the console scan works: a page with a deliberate error is caught
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>undefined_function()</script></body></html>")
    assert any("Uncaught" in ln for ln in _console(
        _chromium(tmp_path, "--dump-dom", broken.as_uri()).stderr))

    _, path = _report(tmp_path)
    run = _chromium(tmp_path, "--dump-dom", path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert '<table class="summary">' in dom and dom.count("<svg") == 4
    assert dom.count("<tr") == 4                              # header + three variables
    assert "exploding from step <b>4</b>" in dom
    assert _console(run.stderr) == []

    shot = tmp_path / "report.png"
    run = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2200",
                    "--hide-scrollbars", path.as_uri())
    assert shot.read_bytes()[:8] == PNG_SIGNATURE
    assert _console(run.stderr) == []
    keep = os.environ.get("FLOWGRAD_KEEP_SCREENSHOT")        # to look at it by hand
    if keep:
        shutil.copy(shot, keep)


def test_only_rank_0_writes_files_or_shows_a_bar(tmp_path, monkeypatch):
    """Under mpiexec every rank runs the same script: the report, the TensorBoard events, the
    saved plots and the progress bar must come from rank 0 alone, not N copies racing."""
    from flowgrad.distributed import runtime
    m = tf.debug.GradientMonitor().record({"w": tf.tensor([3.0, 4.0])}, loss=1.0)
    monkeypatch.setattr(runtime._state, "initialized", False)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")          # what Open MPI sets in rank 1
    monkeypatch.setenv("FLOWGRAD_PROGRESS", "1")
    assert not tf.distributed.is_root()
    assert tf.debug.report(m, tmp_path / "r.html") == tmp_path / "r.html"
    assert not tf.train.progress(range(2), monitor=m, enable=True).enabled
    if _has("tensorboardX"):
        m.to_tensorboard(tmp_path / "tb")
    if _has("matplotlib"):
        m.plot_loss(tmp_path / "loss.png")
    assert list(tmp_path.iterdir()) == []                    # rank 1 wrote nothing
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    assert tf.debug.report(m, tmp_path / "r.html").exists()
    assert tf.train.progress(range(2), monitor=m, enable=True).enabled


def _has(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None
