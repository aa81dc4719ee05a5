"""Flags that mean something (issue 19): healthy runs trained to convergence raise none,
sick runs are flagged on the right variables from the right step; the report shows the
criteria and the per-example norms, and survives hostile names and missing folders."""
import re
import warnings

import numpy as np
import pytest

import flowgrad as tf
import health_runs as H


@pytest.mark.parametrize("name", list(H.HEALTHY))
def test_healthy_runs_to_convergence_raise_no_flag(name):
    m = H.HEALTHY[name]()
    loss = m.history.loss
    assert loss[-1] < 0.1 * loss[0]                 # it did converge
    assert m.flags == []


def _flagged(m, kind):
    return {f.variable.split("/", 1)[1]: f.start for f in m.flags if f.kind == kind}


def test_a_deep_sigmoid_chain_vanishes_in_its_first_layers():
    m = H.sigmoid_chain()
    vanishing = _flagged(m, "vanishing")
    assert {"l1/w", "l1/b", "l2/w", "l3/w"} <= set(vanishing)
    assert set(vanishing.values()) == {0}           # from the first step
    assert not {"l11/w", "l11/b", "l12/w", "l12/b"} & set(vanishing)     # the last: fine
    assert _flagged(m, "exploding") == {}


def test_a_large_init_chain_explodes_from_the_first_step():
    m = H.large_init_chain()
    exploding = _flagged(m, "exploding")
    assert {f"l{i}/w" for i in range(1, 9)} <= set(exploding)
    assert set(exploding.values()) == {0}
    assert _flagged(m, "vanishing") == {}


def test_a_dead_relu_layer_is_flagged_and_the_live_bias_is_not():
    m = H.dead_relu_layer()
    vanishing = _flagged(m, "vanishing")
    assert vanishing.get("l1/w") == 0 and vanishing.get("l1/b") == 0
    assert "l3/b" not in vanishing                  # its gradient flows (the only one)
    dead = [f for f in m.flags if f.variable == "dead/l1/w"][0]
    assert "exactly 0" in dead.reason


def test_a_learning_rate_far_too_high_explodes_then_goes_non_finite():
    m = H.lr_too_high()
    exploding, nonfinite = _flagged(m, "exploding"), _flagged(m, "nonfinite")
    assert min(exploding.values()) == 0 and len(exploding) == 6
    assert nonfinite and min(nonfinite.values()) > min(exploding.values())
    assert _flagged(m, "vanishing") == {}


def test_criteria_are_shown_in_words_in_the_summary_and_the_report(tmp_path):
    m = tf.debug.GradientMonitor(patience=3)
    m.record({"a": tf.tensor([1.0]), "b": tf.tensor([1e-9])}, loss=1.0)
    text = "\n".join(m.criteria.describe())
    assert "1e-4" in text.replace("0.0001", "1e-4") and "for 3 steps" in text
    path = tf.debug.report(m, tmp_path / "deep" / "missing" / "r.html")     # folders made
    html = path.read_text()
    assert "gradient RMS &lt; 0.0001 x the largest" in html


# ---------------------------------------------------------------- per-example in the monitor

def test_the_monitor_records_per_example_norms_at_chosen_steps_and_on_flags(tmp_path):
    r = np.random.default_rng(0)
    xs = r.normal(size=(32, 3)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [2.0], [-1.0]], np.float32)).astype(np.float32)
    ys[9] = 1e3                                     # the poisoned label
    x, y = tf.tensor(xs), tf.tensor(ys)
    w = tf.variable(tf.zeros([3, 1]), name="pe_mon_w")

    def one(xi, yi):
        return xi.reshape([1, 3]).mat_mul(w).sub(yi).square().mean()

    def train(lr, **watch):
        opt = tf.train.sgd(lr)
        m = tf.debug.monitor(opt).watch_examples(one, lambda: (x, y), top_k=3, **watch)
        w.assign(tf.zeros([3, 1]))
        for _ in range(6):
            opt.minimize(lambda: x.mat_mul(w).sub(y).square().mean())
        opt.dispose()
        return m
    try:
        # every second step, whatever happens
        m = train(0.01, every=2, on_flag=False)
        assert sorted(m.per_example) == [1, 3, 5] and not m.flags
        assert all(m.per_example[s].worst[0] == 9 for s in m.per_example)
        html = tf.debug.report(m, tmp_path / "r.html").read_text()
        assert "Per-example gradient norms" in html and "9 (" in html
        # only when a flag fires: a learning rate far too high explodes at once
        m = train(1.5, every=None, on_flag=True)
        start = min(f.start for f in m.flags if f.kind == "exploding")
        first = min(m.per_example)          # recorded when the flag fired: once its run of
        assert start < first <= start + 2   # explode_patience=2 steps was seen, not before
        norms = m.per_example[first].norms  # (diverging, every example's gradient is huge)
        assert np.isfinite(norms).all() and np.median(norms) > 100
    finally:
        w.dispose()


# ---------------------------------------------------------------- hostile names, folders

HOSTILE = ["$$", "w$\\frac$", "<script>alert(1)</script>", "ünïcødé/λ", "x" * 200]


def test_report_and_plots_survive_hostile_names_and_missing_folders(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need matplotlib (flowgrad[viz])")
    m = tf.debug.GradientMonitor(bins=4)
    for t in range(3):
        m.record({n: tf.tensor([float(i + t + 1), 1.0]) for i, n in enumerate(HOSTILE)},
                 loss=1.0 / (t + 1))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        path = tf.debug.report(m, tmp_path / "a" / "b" / "report.html")
    # (a 200-character name squeezed the axes to nothing: matplotlib warned, plots empty)
    assert [str(w.message) for w in seen] == []
    html = path.read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert html.count("<svg") >= 4                  # the plots were drawn
    for method in ("plot_loss", "plot_grad_norms", "plot_grad_flow", "plot_histograms"):
        out = tmp_path / "plots" / method / "p.svg"
        getattr(m, method)(out)                     # path first, for every one
        assert out.exists() and out.read_text().startswith("<?xml")
    labels = [t.get_text() for t in m.plot_grad_norms().axes[0].get_legend().get_texts()]
    assert "$$" in labels and "w$\\frac$" in labels  # drawn as typed, not as TeX
    assert "x" * 19 + "…" + "x" * 20 in labels       # the long name, start and end
    assert max(map(len, labels)) <= 40
    with pytest.raises(tf.ArgumentError, match=re.escape("pass step=2")):
        m.plot_histograms(2)


def test_per_example_and_monitor_errors_say_what_to_do():
    xs = tf.tensor([[1.0], [2.0]])
    with pytest.raises(tf.ArgumentError, match="loss_fn must be a function of one example"):
        tf.debug.per_example_grad_norms(3, (xs,))
    with pytest.raises(tf.ArgumentError, match="inputs must be a tuple of batched tensors"):
        tf.debug.per_example_grad_norms(lambda x: x.sum(), ())
    with pytest.raises(tf.GradientError, match="Cannot find a connection between any "
                                               "variable and the result"):
        tf.debug.per_example_grad_norms(lambda x: x.sum(), (xs,))     # (variable_grads')
    m = tf.debug.GradientMonitor()
    with pytest.raises(tf.ArgumentError, match="both must be functions"):
        m.watch_examples(lambda x: x.sum(), (xs,))
    with pytest.raises(tf.ArgumentError, match="every must be an integer >= 1 or None"):
        m.watch_examples(lambda x: x.sum(), lambda: (xs,), every=0)
    with pytest.raises(tf.ArgumentError, match="no per-example norms recorded"):
        tf.debug.plot_example_norms(m)
    w = tf.variable(tf.tensor([1.0]), name="w_err_pe")
    try:
        m.record_examples(lambda x: (x * w).sum(), (xs,), step=3)
        with pytest.raises(tf.ArgumentError, match=r"no per-example norms at step 4 "
                                                   r"\(recorded: \[3\]\)"):
            tf.debug.plot_example_norms(m, step=4)
    finally:
        w.dispose()
    for name in ("depth_ratio", "loss_fraction", "update_limit", "growth_limit"):
        with pytest.raises(tf.ArgumentError, match=f"{name} must be a positive number"):
            tf.debug.GradientMonitor(**{name: 0})
    with pytest.raises(tf.ArgumentError, match="explode_patience must be an integer >= 1"):
        tf.debug.GradientMonitor(explode_patience=0)
