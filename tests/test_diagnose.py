"""tf.debug.diagnose: each cause planted in a small float64 model and found, a healthy run
that raises none, and the user's variables and optimizer left exactly as they were."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.debug.diagnose import CAUSES, Diagnosis


class Model:
    """An MLP in float64 whose variables are disposed by ``close``."""

    def __init__(self, sizes, act="tanh", scale=1.0, bias=0.0, seed=0, name="m"):
        r = np.random.default_rng(seed)
        self.act = act
        self.vars = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            w = r.standard_normal((a, b)) * scale / np.sqrt(a)
            self.vars.append(tf.variable(tf.tensor(w, dtype="float64"), name=f"{name}_w{i}"))
            self.vars.append(tf.variable(tf.tensor(np.full(b, bias if i < len(sizes) - 2
                                                            else 0.0), dtype="float64"),
                                         name=f"{name}_b{i}"))

    def __call__(self, x):
        h = x.reshape([1, -1])
        n = len(self.vars) // 2
        for i in range(n):
            h = h.mat_mul(self.vars[2 * i]).add(self.vars[2 * i + 1])
            if i < n - 1:
                h = getattr(tf, self.act)(h)
        return h.reshape([-1])

    def loss(self, x, y):
        return (self(x) - y).square().sum()

    def close(self):
        for v in self.vars:
            v.dispose()


def _data(n=32, d=4, seed=1, noise=0.05):
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, d))
    y = np.tanh(x @ r.standard_normal((d, 1)) * 0.5) + noise * r.standard_normal((n, 1))
    return x, y


def _run(model, x, y, opt, **kw):
    return tf.debug.diagnose(model.loss, (tf.tensor(x, dtype="float64"),
                                          tf.tensor(y, dtype="float64")), opt, **kw)


@pytest.fixture
def model():
    made = []

    def make(*a, **k):
        m = Model(*a, **k)
        made.append(m)
        return m
    yield make
    for m in made:
        m.close()


def test_a_healthy_run_raises_no_alarm(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(0.05))
    assert d.healthy, str(d)
    assert d.causes == [] and "no problem found" in str(d)
    assert 0 < d.measurements["lr_sharpness"] < d.measurements["limit"]
    d = _run(m, x, y, tf.train.adam(0.01))
    assert d.healthy, str(d)


def test_the_learning_rate_past_the_stability_limit(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(0.05))
    lam = d.measurements["sharpness"]
    # lambda_max against the full Hessian of the batch loss, by hand (tf.hessian)
    flat = [v.numpy() for v in m.vars]
    xs, ys = tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64")

    def batch_loss(*ws):
        h = xs
        for i in range(2):
            h = h.mat_mul(ws[2 * i]).add(ws[2 * i + 1])
            if i == 0:
                h = tf.tanh(h)
        return (h - ys).square().sum(1).mean()
    sizes = [a.size for a in flat]
    hess = np.zeros((sum(sizes), sum(sizes)))
    blocks = tf.hessian(batch_loss, argnums=tuple(range(4)))(
        *[tf.tensor(a, dtype="float64") for a in flat])
    offs = np.cumsum([0] + sizes)
    for i in range(4):
        for j in range(4):
            hess[offs[i]:offs[i + 1], offs[j]:offs[j + 1]] = \
                blocks[i][j].numpy().reshape(sizes[i], sizes[j])
    want = np.abs(np.linalg.eigvalsh(hess)).max()
    assert lam == pytest.approx(want, rel=1e-2)
    d = _run(m, x, y, tf.train.sgd(3.0 / want))        # lr x lambda = 3 > 2
    assert d.causes[0] == "learning_rate_too_high", str(d)
    f = d.findings[0]
    assert f.evidence["lr x lambda_max"] == pytest.approx(3.0, rel=2e-2)
    assert f.evidence["limit"] == 2.0
    # momentum raises the limit to 2 (1 + beta): the same lr is stable with beta = 0.9
    d = _run(m, x, y, tf.train.momentum(1.5 / want, 0.9))
    assert "learning_rate_too_high" not in d.causes, str(d)
    assert d.measurements["limit"] == pytest.approx(3.8)


def test_adam_is_judged_by_its_preconditioned_sharpness(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.adam(5.0))
    assert "learning_rate_too_high" in d.causes, str(d)
    assert d.measurements["limit"] == pytest.approx(38.0)


def test_a_learning_rate_far_too_low(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(1e-6))
    assert d.causes == ["learning_rate_too_low"], str(d)
    assert "raise the learning rate" in d.findings[0].advice


def test_one_example_that_dominates_is_named(model):
    x, y = _data()
    y = y.copy()
    y[7] = 300.0                                       # a wrong label
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(1e-4))
    f = next(f for f in d.findings if f.cause == "dominant_example")
    assert f.where == 7
    assert f.evidence["norm"] > 10 * f.evidence["median"]


def test_dead_units_are_counted_per_layer(model):
    x, y = _data()
    m = model([4, 8, 1], act="relu")
    b = m.vars[1].numpy()
    b[:4] = -50.0                                      # half the hidden units never fire
    m.vars[1].assign(tf.tensor(b, dtype="float64"))
    d = _run(m, x, y, tf.train.sgd(0.05))
    f = next(f for f in d.findings if f.cause == "dead_units")
    assert f.where == "m_w0" and f.evidence["dead"] == 4 and f.evidence["units"] == 8


def test_inputs_on_the_wrong_scale(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x * 1000.0, y, tf.train.sgd(1e-9))
    f = next(f for f in d.findings if f.cause == "bad_input_scale")
    assert f.where == "inputs[0]" and f.evidence["largest_rms"] > 500


def test_a_batch_whose_gradient_is_mostly_noise(model):
    # a linear model a little off its optimum, targets with unit noise: the mean gradient
    # is small next to the examples' own
    r = np.random.default_rng(3)
    x = r.standard_normal((16, 2))
    y = x @ np.array([[1.0], [-1.0]]) + r.standard_normal((16, 1))
    best = np.linalg.lstsq(x, y, rcond=None)[0]
    m = model([2, 1])
    m.vars[0].assign(tf.tensor(best + 0.05, dtype="float64"))
    d = _run(m, x, y, tf.train.sgd(0.1))
    assert "noisy_batch" in d.causes, str(d)
    f = next(f for f in d.findings if f.cause == "noisy_batch")
    assert f.evidence["b_simple"] > 16


def test_a_converged_run(model):
    r = np.random.default_rng(4)
    x = r.standard_normal((16, 2))
    y = x @ np.array([[1.0], [-1.0]]) + 0.3 * r.standard_normal((16, 1))
    m = model([2, 1])
    m.vars[0].assign(tf.tensor(np.linalg.lstsq(np.c_[x, np.ones(16)], y, rcond=None)[0][:2],
                               dtype="float64"))
    m.vars[1].assign(tf.tensor(np.linalg.lstsq(np.c_[x, np.ones(16)], y, rcond=None)[0][2],
                               dtype="float64"))
    d = _run(m, x, y, tf.train.sgd(0.1))
    assert d.causes == ["converged"], str(d)


def test_vanishing_gradients_through_a_deep_sigmoid_stack(model):
    x, y = _data()
    m = model([4] + [6] * 8 + [1], act="sigmoid", scale=0.3)
    d = _run(m, x, y, tf.train.sgd(0.05))
    f = next(f for f in d.findings if f.cause == "vanishing_gradient")
    assert f.where in ("m_w0", "m_w1")                 # the two nearest the input: ~1e-10
    assert f.evidence["grad_rms"] * 1e4 < f.evidence["largest"]


def test_exploding_gradients_through_a_deep_tanh_stack(model):
    # weights of scale 8 put a deep tanh net in its chaotic phase: the gradient grows from
    # layer to layer toward the input while the activations stay bounded
    x, y = _data()
    m = model([4] + [32] * 20 + [1], act="tanh", scale=8.0)
    d = _run(m, x, y, tf.train.sgd(1e-4), steps=5)
    f = next(f for f in d.findings if f.cause == "exploding_gradient")
    rms = d.measurements["layer_grad_rms"]
    assert f.where == max(rms, key=rms.get)
    assert rms["m_w0"] > 1e4 * rms["m_w20"]


def test_a_gradient_that_grows_without_bound_over_the_probe():
    # a loss unbounded below (a sign slip: -(x.w)^4): each step makes the gradient larger,
    # though the curvature at the start allows the learning rate
    w = tf.variable(tf.tensor([0.1, 0.1], dtype="float64"), name="w_unbounded")
    try:
        x = tf.tensor(np.random.default_rng(5).standard_normal((8, 2)), dtype="float64")
        d = tf.debug.diagnose(lambda xi: -(xi * w).sum().pow(4), (x,), tf.train.sgd(2.0))
        assert d.measurements["lr_sharpness"] < d.measurements["limit"]
        f = next(f for f in d.findings if f.cause == "exploding_gradient")
        assert f.evidence["growth"] > 1e3
    finally:
        w.dispose()


def test_non_finite_values_stop_the_diagnosis_and_name_the_example(model):
    x, y = _data()
    x = x.copy()
    x[5, 2] = np.nan
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(0.05))
    assert d.causes == ["non_finite"]
    assert d.findings[0].where == [5]


def test_nothing_of_the_users_changes_bitwise(model):
    x, y = _data()
    m = model([4, 8, 1])
    opt = tf.train.adam(0.5)
    xs, ys = tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64")
    opt.minimize(lambda: tf.vmap(m.loss)(xs, ys).mean())        # the optimizer has state
    before = [v.numpy().copy() for v in m.vars]
    weights = [(w.name, w.tensor.numpy().copy()) for w in opt.get_weights()]
    d = _run(m, x, y, opt, steps=5)
    assert isinstance(d, Diagnosis)
    for v, a in zip(m.vars, before):
        assert v.numpy().tobytes() == a.tobytes()
    after = [(w.name, w.tensor.numpy()) for w in opt.get_weights()]
    assert [n for n, _ in after] == [n for n, _ in weights]
    for (_, a), (_, b) in zip(weights, after):
        assert a.tobytes() == b.tobytes()


def test_the_diagnosis_reads_well_and_every_cause_is_listed(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.sgd(100.0))
    text = str(d)
    assert "learning_rate_too_high" in text and "evidence:" in text and "advice:" in text
    assert "<table>" in d._repr_html_()
    assert set(d.causes) <= set(CAUSES)
    assert len(CAUSES) == 10


def test_bad_arguments_are_named():
    x = tf.tensor(np.zeros((4, 2)))
    with pytest.raises(tf.errors.ArgumentError, match="optimizer must be"):
        tf.debug.diagnose(lambda xi: xi.sum(), (x,), "sgd")
    with pytest.raises(tf.errors.ArgumentError, match="same axis 0"):
        tf.debug.diagnose(lambda a, b: a.sum(), (x, tf.tensor(np.zeros(3))),
                          tf.train.sgd(0.1))
    with pytest.raises(tf.errors.ArgumentError, match="the probe takes 2 to 1000"):
        tf.debug.diagnose(lambda xi: xi.sum(), (x,), tf.train.sgd(0.1), steps=1)


def test_an_interrupt_in_the_probe_leaves_the_variables_as_they_were(model):
    # Ctrl-C while the copy of the optimizer has moved the weights: they are put back
    x, y = _data()
    m = model([4, 8, 1])
    before = [v.numpy().copy() for v in m.vars]
    calls = [0]

    def loss(xi, yi):
        calls[0] += 1
        if calls[0] == 12:             # a few probe steps in (each step traces loss once)
            raise KeyboardInterrupt
        return m.loss(xi, yi)
    with pytest.raises(KeyboardInterrupt):
        tf.debug.diagnose(loss, (tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64")),
                          tf.train.sgd(0.05))
    assert calls[0] == 12
    for v, a in zip(m.vars, before):
        assert v.numpy().tobytes() == a.tobytes()


@pytest.mark.parametrize("make", [lambda: tf.train.adagrad(0.1), lambda: tf.train.adadelta(0.1),
                                  lambda: tf.train.rmsprop(0.01), lambda: tf.train.adamax(0.01),
                                  lambda: tf.train.adamw(0.01)],
                         ids=["adagrad", "adadelta", "rmsprop", "adamax", "adamw"])
def test_every_optimizer_on_a_healthy_model(model, make):
    # Adadelta's lr multiplies a ratio of running averages, not the gradient: no lr x lambda
    # limit applies (it is judged by its probe); Adagrad divides by the root of its sums
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, make())
    assert d.healthy, str(d)


def test_adadelta_is_judged_by_its_probe_and_adagrad_by_its_preconditioned_sharpness(model):
    x, y = _data()
    m = model([4, 8, 1])
    d = _run(m, x, y, tf.train.adadelta(1.0))           # diverges here: its probe shows it
    assert d.measurements["limit"] is None and d.causes == ["learning_rate_too_high"]
    assert d.findings[0].evidence["loss_after"] > 1e6 * d.findings[0].evidence["loss_before"]
    d = _run(m, x, y, tf.train.adagrad(50.0))
    assert "learning_rate_too_high" in d.causes, str(d)
    assert d.findings[0].evidence["lr x lambda_max (preconditioned)"] > 2
