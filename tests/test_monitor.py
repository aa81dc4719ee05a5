"""tf.debug.GradientMonitor and tf.train.progress: the numbers against NumPy computed by hand,
vanishing / exploding flags on deep chains with their starting step, and the progress bar."""
import io
import math

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.debug.monitor import METRICS
from flowgrad.errors import ArgumentError
from flowgrad.tensor import registered_variables


@pytest.fixture(autouse=True)
def _clean_variables():
    """Dispose the variables a test created (their names are free again)."""
    before = {id(v) for v in registered_variables().values()}
    yield
    for v in registered_variables().values():
        if id(v) not in before:
            v.dispose()


def _norm(a):
    return float(np.sqrt(np.sum(np.asarray(a, dtype=np.float64) ** 2)))


# ---------------------------------------------------------------- numbers

def test_numbers_match_numpy_through_sgd():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 3))
    X[:, 1] = 0.0                           # so row 1 of W's gradient is exactly zero
    Y = rng.normal(size=(5, 2))
    W0, b0 = rng.normal(size=(3, 2)), rng.normal(size=(2,))
    W = tf.variable(tf.tensor(W0, dtype="float64"), name="W")
    b = tf.variable(tf.tensor(b0, dtype="float64"), name="b")
    x, y = tf.tensor(X, dtype="float64"), tf.tensor(Y, dtype="float64")
    lr = 0.05
    opt = tf.train.sgd(lr)
    m = tf.debug.monitor(opt)
    assert opt.monitor is m and m.optimizer is opt
    for _ in range(4):
        opt.minimize(lambda: (x.mat_mul(W) + b - y).square().mean())

    # the same four steps, by hand
    Wn, bn = W0.copy(), b0.copy()
    want = {"W": {k: [] for k in METRICS}, "b": {k: [] for k in METRICS}}
    losses = []
    for _ in range(4):
        r = X @ Wn + bn - Y
        losses.append(np.mean(r ** 2))
        dW, db = 2 * X.T @ r / r.size, 2 * r.sum(0) / r.size
        for name, w, g in (("W", Wn, dW), ("b", bn, db)):
            d = want[name]
            d["grad_norm"].append(_norm(g))
            d["max_abs"].append(np.abs(g).max())
            d["zero_fraction"].append(np.mean(g == 0))
            d["nan_count"].append(0)
            d["inf_count"].append(0)
            d["weight_norm"].append(_norm(w))
            d["update_ratio"].append(_norm(lr * g) / _norm(w))
        Wn, bn = Wn - lr * dW, bn - lr * db

    h = m.history
    assert h.names == ["W", "b"]
    np.testing.assert_array_equal(h.steps, [0, 1, 2, 3])
    np.testing.assert_allclose(h.loss, losses, rtol=1e-12)
    for name in ("W", "b"):
        for metric, values in want[name].items():
            np.testing.assert_allclose(h[name][metric], values, rtol=1e-9, atol=1e-15,
                                       err_msg=f"{name} {metric}")
    np.testing.assert_allclose(h["W"]["zero_fraction"], 2 / 6)
    np.testing.assert_allclose(h.global_norm, np.hypot(want["W"]["grad_norm"],
                                                       want["b"]["grad_norm"]), rtol=1e-12)
    np.testing.assert_allclose(h.matrix("grad_norm")[1], want["b"]["grad_norm"], rtol=1e-9)
    assert m.last_loss == pytest.approx(losses[-1]) and m.steps == 4
    assert m.flags == []
    m.detach()
    assert opt.monitor is None and m.optimizer is None
    opt.minimize(lambda: (x.mat_mul(W) + b - y).square().mean())
    assert m.steps == 4                     # detached: nothing recorded


def test_nan_inf_zero_counts_and_nonfinite_flag():
    m = tf.debug.GradientMonitor()
    m.record({"a": tf.tensor([1.0, 2.0]), "c": tf.tensor([1.0])})
    m.record({"a": tf.tensor([0.0, math.nan, math.inf, -3.0])}, loss=2.5)
    a = m.history["a"]
    assert a["nan_count"].tolist() == [0, 1] and a["inf_count"].tolist() == [0, 1]
    assert a["zero_fraction"].tolist() == [0.0, 0.25]
    assert a["max_abs"].tolist() == [2.0, math.inf]      # NaN skipped, Inf kept
    assert math.isnan(a["grad_norm"][1])
    c = m.history["c"]["grad_norm"]                       # no gradient at step 1: NaN
    assert c[0] == 1.0 and math.isnan(c[1])
    assert np.isnan(m.history.loss[0]) and m.history.loss[1] == 2.5
    (flag,) = m.flags
    assert (flag.variable, flag.kind, flag.start) == ("a", "nonfinite", 1)
    assert "1 NaN, 1 Inf" in flag.reason


def test_update_ratio_zero_weight_skipped_update_and_record_path():
    w = tf.variable(tf.tensor([0.0, 0.0]), name="w0")
    v = tf.variable(tf.tensor([1.0, 1.0]), name="v0")
    opt = tf.train.sgd(0.5)
    m = tf.debug.monitor(opt)
    opt.minimize(lambda: (w - 1).square().sum() + v.sum())
    with pytest.warns(tf.train.NonFiniteGradientWarning):
        opt.minimize(lambda: (w - 1).square().sum() + v.sum() * math.inf,
                     skip_nonfinite=True)
    opt.minimize(lambda: (w - 1).square().sum() + v.sum())
    h = m.history
    assert h["w0"]["update_ratio"][0] == math.inf          # moved away from exactly zero
    assert h["w0"]["update_ratio"][1] == 0.0               # the skipped update moved nothing
    # v = [1, 1], its gradient [1, 1]: 0.5 [1, 1] / [1, 1], then nothing, then [.5, .5] / [.5, .5]
    np.testing.assert_allclose(h["v0"]["update_ratio"], [0.5, 0.0, 1.0])
    # the Inf gradient of step 1 is non-finite (not "exploding": no update moved v by more
    # than 10x its norm, and no norm grew 1000x its early level)
    assert [(f.variable, f.kind, f.start) for f in m.flags] == [("v0", "nonfinite", 1)]

    # record(): the ratio of step t is measured at the next record
    u = tf.variable(tf.tensor([3.0, 4.0]), name="u0")
    r = tf.debug.GradientMonitor()
    for _ in range(3):
        res = tf.variable_grads(lambda: u.square().sum(), [u])
        r.record(res)
        u.assign(u - res.grads[u] * 0.25)                  # u halves each step
        res.grads[u].dispose()
        res.value.dispose()
    ratio = r.history["u0"]["update_ratio"]
    np.testing.assert_allclose(ratio[:2], [0.5, 0.5], rtol=1e-6)
    assert math.isnan(ratio[2])                            # not measured yet
    np.testing.assert_allclose(r.history["u0"]["weight_norm"], [5, 2.5, 1.25], rtol=1e-6)
    np.testing.assert_allclose(r.history.loss, [25, 6.25, 1.5625], rtol=1e-6)


def test_record_accepts_pairs_and_variable_keys():
    w = tf.variable(tf.tensor([1.0, 2.0]), name="wk")
    m = tf.debug.GradientMonitor(track_updates=False)
    m.record({w: tf.tensor([3.0, 4.0])})
    m.record([(tf.tensor([0.0, 5.0]), w)], step=10)
    assert m.history.steps.tolist() == [0, 10]
    assert m.history["wk"]["grad_norm"].tolist() == [5.0, 5.0]
    assert m.history["wk"]["weight_norm"][0] == pytest.approx(math.sqrt(5))


# ---------------------------------------------------------------- flags on deep chains

def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_thirty_sigmoids_vanish_from_the_first_step():
    depth, x0 = 30, 0.5
    ws = [tf.variable(tf.scalar(1.0, "float64"), name=f"sig{i}") for i in range(depth)]
    xin = tf.scalar(x0, "float64")

    def f():
        x = xin
        for w in ws:
            x = (w * x).sigmoid()
        return (x - 1).square()

    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, patience=3)
    for _ in range(3):
        opt.minimize(f)

    # step 0 by hand: forward, then the chain rule backward
    xs = [x0]
    for _ in range(depth):
        xs.append(_sigmoid(xs[-1]))
    dx = 2 * (xs[-1] - 1)
    grads = [0.0] * depth
    for i in reversed(range(depth)):
        dz = dx * xs[i + 1] * (1 - xs[i + 1])
        grads[i] = dz * xs[i]
        dx = dz * 1.0                        # w_i = 1
    norms = np.abs(grads)
    np.testing.assert_allclose(m.history.matrix("grad_norm")[:, 0], norms, rtol=1e-9)
    # the criterion (depth): below 1e-4 x the largest variable's gradient (scalars: RMS =
    # norm) at each of the 3 steps, with the loss still high
    mat = m.history.matrix("grad_norm")
    expected = {f"sig{i}" for i in range(depth)
                if all(mat[i, t] < 1e-4 * mat[:, t].max() for t in range(3))}
    assert norms[0] < 1e-4 * norms.max() and norms[-1] == norms.max()
    assert 10 <= len(expected) < depth       # the early layers vanish, the last ones do not
    assert set(m.vanishing) == expected and set(m.vanishing.values()) == {0}
    assert set(m.vanishing.values()) == {0}
    assert m.exploding == {}
    first = m.flags[0]
    assert (first.variable, first.kind, first.start, first.count, first.ongoing) == \
        ("sig0", "vanishing", 0, 3, True)
    assert first.value == pytest.approx(norms[0], rel=1e-9)
    text = m.summary()
    assert f"{len(expected)} variables vanishing from step 0" in text
    assert "vanishing@0" in text and "sig29" in text


def test_large_weight_chain_explodes_at_the_right_step():
    depth, lr, threshold = 30, 0.01, 1e3
    ws = [tf.variable(tf.scalar(1.0, "float64"), name=f"lin{i}") for i in range(depth)]

    def f():
        y = tf.scalar(1.0, "float64")
        for w in ws:
            y = y * w
        return -y                            # maximizing the product grows every weight

    # by hand: all weights stay equal to w, each gradient is -w^29, sgd adds lr * w^29
    w, norms = 1.0, []
    while not norms or norms[-1] <= threshold:
        norms.append(w ** (depth - 1))
        w += lr * w ** (depth - 1)
    start = len(norms) - 1
    assert start >= 5

    opt = tf.train.sgd(lr)
    m = tf.debug.monitor(opt, explode_threshold=threshold)
    for _ in range(start + 2):
        opt.minimize(f)
    np.testing.assert_allclose(m.history["lin0"]["grad_norm"][:start + 1], norms, rtol=1e-9)
    assert m.exploding == {f"lin{i}": start for i in range(depth)}
    assert all(f.count == 2 and f.end == start + 1 for f in m.flags)
    # the same chain, flagged relative to its first steps
    m2 = tf.debug.GradientMonitor(explode_threshold=None, explode_ratio=10, baseline_steps=3)
    for step, n in enumerate(norms):
        m2.record({"lin0": tf.tensor([n], dtype="float64")})
    baseline = np.median(norms[:3])
    want = next(i for i, n in enumerate(norms) if i >= 3 and n > 10 * baseline)
    assert m2.exploding == {"lin0": want}
    assert "x baseline" in m2.flags[0].reason


def test_patience_and_recovery():
    # an absolute criterion, and no growth criterion (1e-9 -> 1 would be 1e9x its start)
    m = tf.debug.GradientMonitor(patience=2, vanish_threshold=1e-7, growth_limit=None)
    for n in (1.0, 1e-9, 1.0, 1e-9, 1e-9, 1e-9, 1.0, 1e-9):
        m.record({"a": tf.tensor([n], dtype="float64")})
    (flag,) = m.flags
    assert (flag.kind, flag.start, flag.end, flag.count, flag.ongoing) == \
        ("vanishing", 3, 7, 4, True)
    assert "vanishing from step 3" in str(flag)
    m.record({"a": tf.tensor([1.0])})
    assert not m.flags[0].ongoing and "last at step 7" in str(m.flags[0])


def test_summary_print_and_camel_case(capsys):
    m = tf.debug.GradientMonitor(vanish_threshold=1e-7, patience=1)
    assert m.summary() == "GradientMonitor: no step recorded yet."
    m.record({"w": tf.tensor([3.0, 0.0, 4.0])}, loss=2.0)
    m.record({"w": tf.tensor([1e-9, 0.0, 0.0])}, loss=1.0)
    m.printSummary()
    out = capsys.readouterr().out
    assert "2 steps (0..1); loss 2 -> 1" in out
    assert "vanishing@1" in out and "66.7%" in out
    assert "'w': vanishing from step 1" in out
    assert m.lastLoss == 1.0 and repr(m) == "GradientMonitor(2 steps, 1 variables, 1 flags)"
    assert m.history["w"]["grad_norm"][0] == 5.0


def test_summary_says_when_the_loss_stopped_being_finite():
    # the head said "loss 3 -> 2" (its last finite value) after the loss went NaN
    m = tf.debug.GradientMonitor()
    for loss in (3.0, 2.5, 2.0, float("nan"), float("inf")):
        m.record({"w": tf.tensor([1.0, 2.0])}, loss=loss)
    m.record({"w": tf.tensor([1.0, 2.0])})                     # a step without a loss
    head = m.summary().splitlines()[0]
    assert "loss 3 -> 2 (min 2 at step 2)" in head
    assert "the loss is inf at the last step (not finite since step 3)" in head
    m.record({"w": tf.tensor([1.0])}, loss=1.0)
    assert "not finite" not in m.summary().splitlines()[0]


def test_errors_say_what_to_do():
    with pytest.raises(ArgumentError, match="vanish_threshold must be a positive number"):
        tf.debug.GradientMonitor(vanish_threshold=-1)
    with pytest.raises(ArgumentError, match="patience must be an integer >= 1"):
        tf.debug.GradientMonitor(patience=0)
    with pytest.raises(ArgumentError, match="bins must be an integer >= 0"):
        tf.debug.GradientMonitor(bins=-2)
    m = tf.debug.GradientMonitor(bins=0)
    with pytest.raises(ArgumentError, match="takes variable_grads' result"):
        m.record(tf.tensor([1.0]))
    with pytest.raises(ArgumentError, match="no step recorded yet"):
        m.histogram()
    m.record({"a": tf.tensor([1.0])}, step=5)
    with pytest.raises(ArgumentError, match="steps must increase; step 5 comes after step 5"):
        m.record({"a": tf.tensor([1.0])}, step=5)
    with pytest.raises(ArgumentError, match=r"keeps no histograms \(bins=0\)"):
        m.histogram()
    with pytest.raises(KeyError, match="no variable 'zz' in the history"):
        m.history["zz"]
    with pytest.raises(ArgumentError, match="unknown metric 'norm'"):
        m.history.matrix("norm")
    with pytest.raises(ArgumentError, match="takes an optimizer"):
        m.attach(object())


def test_histograms_kept_per_step():
    m = tf.debug.GradientMonitor(bins=4)
    m.record({"a": tf.tensor([0.0, 1.0, 2.0, 3.0, math.nan])})
    m.record({"a": tf.tensor([5.0, 5.0])})
    edges, counts = m.histogram(0, "a")
    np.testing.assert_allclose(edges, [0, 0.75, 1.5, 2.25, 3])
    assert counts.tolist() == [1, 1, 1, 1]                 # the NaN is not counted
    edges, counts = m.histogram(-1, "a")
    assert counts.sum() == 2 and edges[0] < 5 < edges[-1]  # a constant gradient
    assert set(m.histogram(1)) == {"a"}
    sparse = tf.debug.GradientMonitor(bins=3, hist_every=3)
    for i in range(8):
        sparse.record({"a": tf.tensor([float(i), 2.0 * i])})
    assert sorted(sparse._hists) == [0, 3, 6, 7]            # every third step and the last
    assert sparse.histogram(6, "a")[0][-1] == 12
    with pytest.raises(ArgumentError, match=r"multiples of hist_every=3, and the last"):
        sparse.histogram(5)
    with pytest.raises(ArgumentError, match=r"step index 8 is out of range \(8 steps"):
        sparse.histogram(8)


# ---------------------------------------------------------------- progress bar

def test_progress_bar_shows_loss_and_grad_norm():
    w = tf.variable(tf.tensor([3.0, 4.0]), name="wp")
    opt = tf.train.sgd(0.25)
    mon = tf.debug.monitor(opt)
    out = io.StringIO()
    loop = tf.train.progress(range(4), opt, enable=True, file=out, desc="train",
                             mininterval=0)
    assert len(loop) == 4
    for _ in loop:
        assert opt.monitor is not mon                       # the bar's observer in front
        opt.minimize(lambda: w.square().sum())
    assert opt.monitor is mon and mon.steps == 4            # restored; the monitor saw all
    text = out.getvalue()
    last = text.strip().split("\r")[-1]
    # w halves each step: the 4th loss is 25 / 4**3, its gradient norm 10 / 2**3
    assert "train" in last and "4/4" in last
    assert "loss=0.3906" in last and "grad_norm=1.25" in last


def test_progress_is_off_in_tests_and_restores_on_break(monkeypatch):
    w = tf.variable(tf.scalar(1.0), name="wq")
    opt = tf.train.sgd(0.1)
    loop = tf.train.progress(range(3), opt)
    assert not loop.enabled                                  # pytest, and no terminal
    assert list(loop) == [0, 1, 2] and loop.bar is None and opt.monitor is None
    monkeypatch.setenv("FLOWGRAD_PROGRESS", "1")
    out = io.StringIO()
    loop = tf.train.progress(iter(range(10)), opt, file=out)
    assert loop.enabled
    for i in loop:
        opt.minimize(lambda: w.square())
        if i == 1:
            break
    assert opt.monitor is None                               # the observer is gone again
    assert "loss=" in out.getvalue()
    monkeypatch.setenv("FLOWGRAD_PROGRESS", "0")
    assert not tf.train.progress(range(2), opt, file=out).enabled
    with pytest.raises(ArgumentError, match="must be a tf.train optimizer"):
        tf.train.progress(range(2), object())


def test_progress_with_a_recording_monitor():
    m = tf.debug.GradientMonitor()
    out = io.StringIO()
    for i in tf.train.progress(range(2), monitor=m, enable=True, file=out, mininterval=0):
        m.record({"a": tf.tensor([3.0, 4.0])}, loss=0.5 * (i + 1))
    assert "loss=1" in out.getvalue() and "grad_norm=5" in out.getvalue()
