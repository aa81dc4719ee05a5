"""The monitor's Cockpit instruments (issue 30), each against a brute-force computation on a
small float64 model: α against a parabola fitted by hand to losses and slopes computed by a
loop, distance and update size against the weights, the gradient tests and the noise
against ``noise_stats`` of loop gradients, λ_max and the trace against ``tf.hessian``; the
schedule; the history, TensorBoard, plot and report; the variables and the optimizer's
slots bit for bit as without a monitor; bad arguments."""
import math

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.debug.instruments import (
    CONFIGURATIONS,
    HESSIAN_PRODUCTS,
    HIST_BINS,
    default_schedule,
)
from flowgrad.debug.per_example import noise_stats
from flowgrad.errors import ArgumentError
from flowgrad.tensor import registered_variables
from test_report import read_events


@pytest.fixture(autouse=True)
def _clean_variables():
    before = {id(v) for v in registered_variables().values()}
    yield
    for v in registered_variables().values():
        if id(v) not in before:
            v.dispose()


# a 2-3-1 tanh net: W1 [2, 3], b1 [3], w2 [3] (12 parameters), squared error per example
SHAPES = {"W1": (2, 3), "b1": (3,), "w2": (3,)}


def _net(p, xi, yi):
    h = xi.reshape([1, 2]).mat_mul(p["W1"]).add(p["b1"]).tanh()
    return ((h * p["w2"]).sum() - yi.sum()).square()


def _setup(seed=0, dtype="float64", batch=6, prefix=""):
    r = np.random.default_rng(seed)
    init = {k: r.normal(size=s) * 0.8 for k, s in SHAPES.items()}
    vs = {k: tf.variable(tf.tensor(a, dtype=dtype), name=prefix + k) for k, a in init.items()}
    x = tf.tensor(r.normal(size=(batch, 2)), dtype=dtype)
    y = tf.tensor(r.normal(size=(batch,)), dtype=dtype)

    def loss(xi, yi):
        return _net(vs, xi, yi)

    def batch_loss():
        return tf.vmap(loss)(x, y).mean()
    return vs, x, y, loss, batch_loss


def _flat(arrays):
    return np.concatenate([np.asarray(arrays[k], np.float64).reshape(-1) for k in SHAPES])


def _unflat(theta):
    out, at = {}, 0
    for k, s in SHAPES.items():
        n = int(np.prod(s))
        out[k] = theta[at:at + n].reshape(s)
        at += n
    return out


def _loop(theta, x, y):
    """Each example's loss and flat gradient at the flat weights theta, by a Python loop of
    tf.grads (no vmap, no variables)."""
    losses, grads = [], []
    for i in range(x.shape[0]):
        def f(*ps, i=i):
            return _net(dict(zip(SHAPES, ps)), x[i], y[i])
        ps = [tf.tensor(a, dtype="float64") for a in _unflat(theta).values()]
        losses.append(float(f(*ps).item()))
        grads.append(np.concatenate([g.numpy().reshape(-1) for g in tf.grads(f)(ps)]))
    return np.array(losses), np.array(grads)


def _weights(vs):
    return _flat({k: v.numpy() for k, v in vs.items()})


# ---------------------------------------------------------------- α

@pytest.mark.parametrize("lr", [0.125, 0.25, 0.5, 0.75])
def test_alpha_on_a_noise_free_quadratic(lr):
    # every example has the loss (w - 3)²: curvature 2, so SGD moves w by 2·lr·(3 - w):
    # α = 2·lr - 1 (-0.75 a short step, 0 onto the minimum, 0.5 past it)
    w = tf.variable(tf.tensor([0.0], dtype="float64"), name="w")
    x = tf.tensor(np.ones((4, 1)), dtype="float64")
    opt = tf.train.sgd(lr)
    m = tf.debug.monitor(opt, instruments=["alpha"], loss_fn=lambda xi: ((xi * w).sum() - 3.0)
                         .square(), inputs=(x,), every=1)
    for _ in range(2):
        opt.minimize(lambda: ((x * w).sum(1) - 3.0).square().mean())
    # (after a step onto the minimum the next one is zero: no progress, α = -1)
    want = [2 * lr - 1, 2 * lr - 1 if lr != 0.5 else -1]
    np.testing.assert_allclose(m.history.instruments["alpha"], want, atol=1e-9)


def test_alpha_against_a_hand_fitted_parabola():
    vs, x, y, loss, batch_loss = _setup(seed=1)
    opt = tf.train.momentum(0.3, 0.5)              # any optimizer: α reads the step taken
    m = tf.debug.monitor(opt, instruments="economy", loss_fn=loss, inputs=(x, y), every=1)
    thetas = [_weights(vs)]
    for _ in range(3):
        opt.minimize(batch_loss)
        thetas.append(_weights(vs))
    alphas = m.history.instruments["alpha"]
    for t in range(3):
        s = thetas[t + 1] - thetas[t]
        tau = np.linalg.norm(s)
        u = s / tau
        l0, g0 = _loop(thetas[t], x, y)
        l1, g1 = _loop(thetas[t + 1], x, y)
        obs = np.array([l0.mean(), l1.mean(), (g0 @ u).mean(), (g1 @ u).mean()])
        var = np.array([l0.var(ddof=1), l1.var(ddof=1), (g0 @ u).var(ddof=1),
                        (g1 @ u).var(ddof=1)])
        # the weighted least-squares parabola c + b·τ + a·τ² through the four observations,
        # by its normal equations
        rows = np.array([[1, 0, 0], [1, tau, tau ** 2], [0, 1, 0], [0, 1, 2 * tau]])
        wts = np.diag(1 / var)
        _, b, a = np.linalg.solve(rows.T @ wts @ rows, rows.T @ wts @ obs)
        assert a > 0
        minimum = -b / (2 * a)                   # α: the minimum at 0, the start at -1
        assert alphas[t] == pytest.approx(tau / minimum - 1, rel=1e-7, abs=1e-9)


# ---------------------------------------------------------------- distance, update size, noise

def test_distance_update_size_tests_and_noise_against_loops():
    vs, x, y, loss, batch_loss = _setup(seed=2, batch=7)
    opt = tf.train.adam(0.05)
    m = tf.debug.monitor(opt, instruments="full", loss_fn=loss, inputs=(x, y), every=1)
    thetas = [{k: v.numpy().astype(np.float64) for k, v in vs.items()}]
    for _ in range(3):
        opt.minimize(batch_loss)
        thetas.append({k: v.numpy().astype(np.float64) for k, v in vs.items()})
    h = m.history
    ins = h.instruments
    for t in range(3):
        for k in SHAPES:
            assert h[k]["distance"][t] == pytest.approx(
                np.linalg.norm(thetas[t][k] - thetas[0][k]), rel=1e-12, abs=1e-15)
            assert h[k]["update_size"][t] == pytest.approx(
                np.linalg.norm(thetas[t + 1][k] - thetas[t][k]), rel=1e-12)
        assert ins["distance"][t] == pytest.approx(
            np.linalg.norm(_flat(thetas[t]) - _flat(thetas[0])), rel=1e-12, abs=1e-15)
        assert ins["update_size"][t] == pytest.approx(
            np.linalg.norm(_flat(thetas[t + 1]) - _flat(thetas[t])), rel=1e-12)
        losses, grads = _loop(_flat(thetas[t]), x, y)
        want = noise_stats(grads)
        for k in ("norm_test", "inner_test", "ortho_test", "gsnr", "b_simple",
                  "early_stopping"):
            assert ins[k][t] == pytest.approx(getattr(want, k), rel=1e-9), k
        assert ins["loss"][t] == pytest.approx(losses.mean(), rel=1e-12)
        assert ins["grad_norm"][t] == pytest.approx(np.linalg.norm(grads.mean(0)), rel=1e-10)
        edges, counts = h.histograms[t]
        assert counts.sum() == grads.size and len(counts) == HIST_BINS
        np.testing.assert_array_equal(counts, np.histogram(grads, bins=edges)[0])
    assert ins["distance"][0] == 0


def test_norm_test_by_its_formula():
    # the norm test from its definition: sqrt(Σ‖g_i − ḡ‖² / ((B − 1)·B·‖ḡ‖²))
    vs, x, y, loss, batch_loss = _setup(seed=3, batch=5)
    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, instruments=["norm_test", "b_simple"], loss_fn=loss,
                         inputs=(x, y), every=1)
    theta = _weights(vs)
    opt.minimize(batch_loss)
    _, g = _loop(theta, x, y)
    gbar = g.mean(0)
    ss = np.sum((g - gbar) ** 2)
    assert m.history.instruments["norm_test"][0] == pytest.approx(
        np.sqrt(ss / (4 * 5 * gbar @ gbar)), rel=1e-9)
    assert m.history.instruments["b_simple"][0] == pytest.approx(ss / 4 / (gbar @ gbar),
                                                                 rel=1e-9)


# ---------------------------------------------------------------- curvature

def _hessian(theta, x, y):
    def f(th):
        p = {}
        at = 0
        for k, s in SHAPES.items():
            n = int(np.prod(s))
            p[k] = th.slice([at], [n]).reshape(list(s))
            at += n
        return tf.vmap(lambda xi, yi: _net(p, xi, yi))(x, y).mean()
    return tf.hessian(f)(tf.tensor(theta, dtype="float64")).numpy()


def test_lambda_max_and_trace_against_tf_hessian():
    vs, x, y, loss, batch_loss = _setup(seed=4)
    opt = tf.train.sgd(0.2)
    m = tf.debug.monitor(opt, instruments=["trace", "lambda_max"], loss_fn=loss,
                         inputs=(x, y), every=1)
    thetas = [_weights(vs)]
    for _ in range(2):
        opt.minimize(batch_loss)
        thetas.append(_weights(vs))
    h = m.history
    assert sum(int(np.prod(s)) for s in SHAPES.values()) <= HESSIAN_PRODUCTS   # exact here
    for t in range(2):
        H = _hessian(thetas[t], x, y)
        assert h.instruments["lambda_max"][t] == pytest.approx(np.linalg.eigvalsh(H).max(),
                                                               rel=1e-9)
        assert h.instruments["trace"][t] == pytest.approx(np.trace(H), rel=1e-9)
        d, at = np.diag(H), 0
        for k, s in SHAPES.items():
            n = int(np.prod(s))
            assert h[k]["trace"][t] == pytest.approx(d[at:at + n].sum(), rel=1e-9, abs=1e-12)
            at += n


def test_hutchinson_trace_and_lanczos_on_a_larger_model():
    # 5 examples of a 4-5-1 net (31 parameters > HESSIAN_PRODUCTS): the trace is
    # Hutchinson's, within 5 standard deviations of its 20-probe mean (Var zᵀHz =
    # 2(‖H‖_F² − Σ H_ii²) for Rademacher z), λ_max Lanczos' top Ritz value
    r = np.random.default_rng(5)
    W = tf.variable(tf.tensor(r.normal(size=(4, 5)), dtype="float64"), name="W")
    b = tf.variable(tf.tensor(r.normal(size=(5,)), dtype="float64"), name="b")
    v = tf.variable(tf.tensor(r.normal(size=(5,)), dtype="float64"), name="v")
    c = tf.variable(tf.tensor([0.1], dtype="float64"), name="c")
    x = tf.tensor(r.normal(size=(5, 4)), dtype="float64")
    y = tf.tensor(r.normal(size=(5,)), dtype="float64")

    def net(W, b, v, c, xi, yi):
        return ((xi.reshape([1, 4]).mat_mul(W).add(b).tanh() * v).sum() + c.sum() - yi
                ).square()
    opt = tf.train.sgd(0.01)
    m = tf.debug.monitor(opt, instruments=["trace", "lambda_max"],
                         loss_fn=lambda xi, yi: net(W, b, v, c, xi, yi), inputs=(x, y), every=1)
    theta = np.concatenate([a.numpy().reshape(-1) for a in (W, b, v, c)])
    opt.minimize(lambda: tf.vmap(lambda xi, yi: net(W, b, v, c, xi, yi))(x, y).mean())

    def f(th):
        parts = [th.slice([0], [20]).reshape([4, 5]), th.slice([20], [5]),
                 th.slice([25], [5]), th.slice([30], [1])]
        return tf.vmap(lambda xi, yi: net(*parts, xi, yi))(x, y).mean()
    H = tf.hessian(f)(tf.tensor(theta, dtype="float64")).numpy()
    sd = math.sqrt(2 * (np.sum(H * H) - np.sum(np.diag(H) ** 2)) / HESSIAN_PRODUCTS)
    assert abs(m.history.instruments["trace"][0] - np.trace(H)) <= 5 * sd
    assert m.history.instruments["lambda_max"][0] == pytest.approx(
        np.linalg.eigvalsh(H).max(), rel=1e-6)


# ---------------------------------------------------------------- schedule

def test_default_schedule_dense_early_sparse_later():
    picked = [s for s in range(10000) if default_schedule(s)]
    assert picked[:12] == list(range(10)) + [10, 12]
    assert sum(1 for s in picked if s < 100) == 10 + 45
    assert sum(1 for s in picked if 100 <= s < 1000) == 45
    assert sum(1 for s in picked if 1000 <= s < 10000) == 45


@pytest.mark.parametrize("every, want", [(3, [0, 3, 6]), (lambda s: s in (1, 2), [1, 2]),
                                         (None, list(range(8)))])
def test_schedule_picks_the_steps(every, want):
    _, x, y, loss, batch_loss = _setup()
    opt = tf.train.sgd(0.05)
    m = tf.debug.monitor(opt, instruments="economy", loss_fn=loss, inputs=(x, y), every=every)
    for _ in range(8):
        opt.minimize(batch_loss)
    h = m.history
    assert h.instrument_steps.tolist() == want
    skipped = ~np.isin(h.steps, want)
    assert np.all(np.isnan(h.instruments["alpha"][skipped]))
    assert np.all(np.isfinite(h.instruments["alpha"][~skipped]))
    assert sorted(h.histograms) == want


def test_a_batch_function_is_called_once_per_measured_step():
    _, x, y, loss, batch_loss = _setup()
    calls = []

    def batch():
        calls.append(1)
        return (x, y)
    opt = tf.train.sgd(0.05)
    m = tf.debug.monitor(opt, instruments="economy", loss_fn=loss, inputs=batch, every=2)
    for _ in range(4):
        opt.minimize(batch_loss)
    assert len(calls) == 2 and m.history.instrument_steps.tolist() == [0, 2]


def test_record_mode_measures_the_step_at_the_next_record():
    vs, x, y, loss, batch_loss = _setup()
    m = tf.debug.GradientMonitor(instruments=["update_size", "alpha"], loss_fn=loss,
                                 inputs=(x, y), every=1)
    opt = tf.train.sgd(0.1)
    before = _weights(vs)
    r = tf.variable_grads(batch_loss)
    m.record(r)
    opt.apply_gradients(r.grads)
    after = _weights(vs)
    assert np.isnan(m.history.instruments["update_size"][0])     # not yet: the next record
    m.record(tf.variable_grads(batch_loss))
    assert m.history.instruments["update_size"][0] == pytest.approx(
        np.linalg.norm(after - before), rel=1e-12)
    assert np.isfinite(m.history.instruments["alpha"][0])


# ---------------------------------------------------------------- nothing changes

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_variables_and_slots_bitwise_as_without_a_monitor(dtype):
    runs = []
    for prefix, instruments in (("plain_", None), ("full_", "full")):
        vs, x, y, loss, batch_loss = _setup(seed=6, dtype=dtype, prefix=prefix)
        opt = tf.train.adam(0.05)
        if instruments:
            m = tf.debug.monitor(opt, instruments=instruments, loss_fn=loss, inputs=(x, y),
                                 every=1)
        for _ in range(3):
            opt.minimize(batch_loss)
        runs.append(([v.numpy() for v in vs.values()],
                     [r.tensor.numpy() for r in opt.get_weights()]))
    (w0, s0), (w1, s1) = runs
    for a, b in zip(w0 + s0, w1 + s1):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert w1[0].dtype == np.dtype(dtype)
    assert np.all(np.isfinite(m.history.instruments["alpha"]))


# ---------------------------------------------------------------- outputs

def _trained(instruments="full", steps=4):
    _, x, y, loss, batch_loss = _setup(seed=7)
    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, instruments=instruments, loss_fn=loss, inputs=(x, y), every=1)
    for _ in range(steps):
        opt.minimize(batch_loss)
    return m


def test_history_holds_each_instrument_of_the_configuration():
    for name, names in CONFIGURATIONS.items():
        m = _trained(name, steps=2)
        h = m.history
        assert m.instruments == names
        assert set(h.instruments) == set(names) - {"grad_hist"}
        assert all(np.all(np.isfinite(v)) for v in h.instruments.values())
        assert {k for k in ("distance", "update_size", "trace") if k in h["W1"]} == \
            {"distance", "update_size", "trace"} & set(names)
        assert h.matrix("distance").shape == (3, 2)
        for v in registered_variables().values():
            v.dispose()
    assert tf.debug.GradientMonitor().history.instruments == {}


def test_tensorboard_gets_the_instruments(tmp_path):
    pytest.importorskip("tensorboardX", reason="TensorBoard logs need flowgrad[tensorboard]")
    m = _trained()
    m.to_tensorboard(tmp_path / "run")
    events = read_events(tmp_path / "run")
    h = m.history

    def series(tag):
        return [v for t, _, v in sorted((e for e in events if e[0] == tag), key=lambda e: e[1])]
    for k in ("alpha", "norm_test", "trace", "lambda_max", "update_size", "gsnr"):
        np.testing.assert_allclose(series(f"cockpit/{k}"), h.instruments[k], rtol=1e-6)
    np.testing.assert_allclose(series("cockpit/distance/W1"), h["W1"]["distance"], rtol=1e-6,
                               atol=1e-12)
    hists = series("cockpit/grad_hist")
    assert [list(x.bucket) for x in hists] == [h.histograms[s][1].tolist() for s in range(4)]

    # live: α and the update size once the update ran, even with track_updates=False
    _, x, y, loss, batch_loss = _setup(seed=8, prefix="live_")
    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, track_updates=False, instruments=["alpha", "update_size"],
                         loss_fn=loss, inputs=(x, y), every=1)
    m.to_tensorboard(tmp_path / "live", live=True)
    opt.minimize(batch_loss)
    opt.minimize(batch_loss)
    m.close()
    live = read_events(tmp_path / "live")
    got = sorted((s, v) for t, s, v in live if t == "cockpit/alpha")
    assert [s for s, _ in got] == [0, 1]
    np.testing.assert_allclose([v for _, v in got], m.history.instruments["alpha"], rtol=1e-6)


def test_plot_cockpit(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need flowgrad[viz]")
    m = _trained()
    fig = m.plot_cockpit(tmp_path / "cockpit.png")
    assert (tmp_path / "cockpit.png").stat().st_size > 0
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:7] == ["Loss", "Step quality alpha", "Gradient tests", "Curvature",
                          "Distance from the start", "Update size", "Gradient noise"]
    line = next(ln for ln in fig.axes[1].get_lines() if ln.get_label() == "alpha")
    np.testing.assert_allclose(line.get_ydata(), m.history.instruments["alpha"])
    tests = {ln.get_label(): ln.get_ydata() for ln in fig.axes[2].get_lines()
             if ln.get_label().endswith("_test")}
    np.testing.assert_allclose(tests["ortho_test"], m.history.instruments["ortho_test"])
    with pytest.raises(ArgumentError, match="no instruments"):
        tf.debug.plot_cockpit(tf.debug.GradientMonitor())
    with pytest.raises(ArgumentError, match="suffix"):
        m.plot_cockpit(tmp_path / "cockpit.txt")


def test_report_has_a_cockpit_and_a_diagnosis(tmp_path):
    m = _trained()
    w = tf.variable(tf.tensor([0.5, -0.5]), name="w_diag")
    xs = tf.tensor([[1.0, 2.0], [2.0, 1.0], [1.5, 1.5], [0.5, 2.5]])
    ys = tf.tensor([1.0, -1.0, 0.0, 2.0])
    d = tf.debug.diagnose(lambda xi, yi: ((xi * w).sum() - yi).square(), (xs, ys),
                          tf.train.sgd(1.0))
    assert d.causes == ["learning_rate_too_high"]
    text = tf.debug.report(m, tmp_path / "r.html", diagnosis=d).read_text()
    assert "<h2>Cockpit</h2>" in text and "<h2>Diagnosis</h2>" in text
    assert "learning_rate_too_high" in text and "lr_sharpness" in text
    alpha = m.history.instruments["alpha"]
    assert f"<td>{alpha[-1]:.4g}</td>" in text
    assert "http" not in text.replace("http://www.w3.org", "")
    alone = tf.debug.report(diagnosis=d, path=tmp_path / "d.html").read_text()
    assert "<h2>Diagnosis</h2>" in alone and "<h2>Cockpit</h2>" not in alone
    with pytest.raises(ArgumentError, match="a Diagnosis"):
        tf.debug.report(m, tmp_path / "x.html", diagnosis="healthy")


# ---------------------------------------------------------------- bad arguments

@pytest.mark.parametrize("kwargs, match", [
    ({"instruments": "first"}, "not a configuration"),
    ({"instruments": ["alpha", "speed"]}, "unknown instrument 'speed'"),
    ({"instruments": []}, "non-empty list"),
    ({"instruments": "economy"}, "need the batch: pass loss_fn="),
    ({"instruments": "economy", "loss_fn": 3, "inputs": (np.ones((2, 1)),)},
     "loss_fn must be a function"),
    ({"instruments": "economy", "loss_fn": abs, "inputs": (np.ones((2, 1)), np.ones(3))},
     "same batch size"),
    ({"instruments": "economy", "loss_fn": abs, "inputs": (3.0,)}, "must be a batch"),
    ({"instruments": "economy", "loss_fn": abs, "inputs": (np.ones(2),), "every": 0},
     "every must be an integer >= 1"),
    ({"instruments": "economy", "loss_fn": abs, "inputs": (np.ones(2),), "every": 1.5},
     "every must be an integer"),
    ({"instruments": ["distance"], "var_list": "w"}, "var_list"),
    ({"loss_fn": abs}, "pass instruments='economy'"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        tf.debug.monitor(tf.train.sgd(0.1), **kwargs)


def test_a_schedule_that_returns_no_bool():
    batch_loss = _setup()[-1]
    opt = tf.train.sgd(0.1)
    tf.debug.monitor(opt, instruments=["distance"], every=lambda s: "yes")
    with pytest.raises(ArgumentError, match=r"every\(step\) must return True or False"):
        opt.minimize(batch_loss)


def test_distance_alone_needs_no_batch():
    vs, *_, batch_loss = _setup()
    opt = tf.train.sgd(0.1)
    m = tf.debug.monitor(opt, instruments=["distance", "update_size"], every=1)
    before = _weights(vs)
    opt.minimize(batch_loss)
    after = _weights(vs)
    opt.minimize(batch_loss)
    ins = m.history.instruments
    assert ins["update_size"][0] == pytest.approx(np.linalg.norm(after - before), rel=1e-12)
    assert ins["distance"][1] == pytest.approx(np.linalg.norm(after - before), rel=1e-12)
    assert set(ins) == {"distance", "update_size"}
