"""Optimizers, schedules and clipping. Trajectories are compared with the update rules of
TF.js (reference §8.4) written out here in float64 NumPy, on a quadratic and on a small MLP
whose gradients are also written out by hand."""
import math
import warnings

import numpy as np
import pytest

import flowgrad as tf

EPS = 1e-7


# ---------------------------------------------------------------- the rules, in NumPy

def reference_step(kind, cfg, w, g, s, t):
    """One update of weight array w with gradient g; s holds the slots; t is 1-based."""
    lr = cfg["lr"](t - 1) if callable(cfg["lr"]) else cfg["lr"]
    if kind == "sgd":
        return w - lr * g
    if kind == "momentum":
        m = cfg["momentum"]
        s["a"] = m * s.get("a", 0) + g
        step = g + m * s["a"] if cfg.get("nesterov") else s["a"]
        return w - lr * step
    if kind == "adagrad":
        s["A"] = s.get("A", cfg.get("init", 0.1)) + g * g
        return w - lr * g / np.sqrt(s["A"] + EPS)
    if kind == "adadelta":
        rho, eps = cfg.get("rho", 0.95), cfg.get("eps", EPS)
        eg, ex = s.get("eg", 0), s.get("ex", 0)
        new_eg = rho * eg + (1 - rho) * g * g
        denom = new_eg if cfg.get("updated") else eg
        d = np.sqrt(ex + eps) / np.sqrt(denom + eps) * g
        s["ex"] = rho * ex + (1 - rho) * d * d
        s["eg"] = new_eg
        return w - lr * d
    if kind in ("adam", "adamw"):
        b1, b2, eps = cfg.get("b1", 0.9), cfg.get("b2", 0.999), cfg.get("eps", EPS)
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
        step = (s["m"] / (1 - b1 ** t)) / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)
        if kind == "adamw":
            step = step + cfg["wd"] * w
        return w - lr * step
    if kind == "adamax":
        b1, b2, decay = cfg.get("b1", 0.9), cfg.get("b2", 0.999), cfg.get("decay", 0.0)
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g))
        return w - lr / (1 + decay * (t - 1)) / (1 - b1 ** t) * s["m"] / (s["u"] + EPS)
    if kind == "rmsprop":
        rho, mu = cfg.get("decay", 0.9), cfg.get("momentum", 0.0)
        s["ms"] = rho * s.get("ms", 0) + (1 - rho) * g * g
        if cfg.get("centered"):
            s["mg"] = rho * s.get("mg", 0) + (1 - rho) * g
            denom = np.sqrt(s["ms"] - (s["mg"] ** 2 + EPS))
        else:
            denom = np.sqrt(s["ms"] + EPS)
        s["mom"] = mu * s.get("mom", 0) + lr * g / denom
        return w - s["mom"]
    raise ValueError(kind)


CONFIGS = [
    ("sgd", {"lr": 0.1}, lambda: tf.train.sgd(0.1)),
    ("momentum", {"lr": 0.1, "momentum": 0.9}, lambda: tf.train.momentum(0.1, 0.9)),
    ("momentum", {"lr": 0.05, "momentum": 0.5, "nesterov": True},
     lambda: tf.train.momentum(0.05, 0.5, True)),
    ("adagrad", {"lr": 0.1}, lambda: tf.train.adagrad(0.1)),
    ("adagrad", {"lr": 0.5, "init": 0.3}, lambda: tf.train.adagrad(0.5, 0.3)),
    ("adadelta", {"lr": 1.0}, lambda: tf.train.adadelta(1.0)),
    ("adadelta", {"lr": 0.5, "rho": 0.9, "eps": 1e-6}, lambda: tf.train.adadelta(0.5, 0.9, 1e-6)),
    ("adadelta", {"lr": 1.0, "updated": True},
     lambda: tf.train.adadelta(1.0, use_updated_accumulator=True)),
    ("adam", {"lr": 0.01}, lambda: tf.train.adam(0.01)),
    ("adam", {"lr": 0.05, "b1": 0.8, "b2": 0.99, "eps": 1e-6},
     lambda: tf.train.adam(0.05, 0.8, 0.99, 1e-6)),
    ("adamw", {"lr": 0.01, "wd": 0.1}, lambda: tf.train.adamw(0.01, weight_decay=0.1)),
    ("adamax", {"lr": 0.01}, lambda: tf.train.adamax(0.01)),
    ("adamax", {"lr": 0.02, "decay": 0.1}, lambda: tf.train.adamax(0.02, decay=0.1)),
    ("rmsprop", {"lr": 0.01}, lambda: tf.train.rmsprop(0.01)),
    ("rmsprop", {"lr": 0.01, "momentum": 0.9}, lambda: tf.train.rmsprop(0.01, momentum=0.9)),
    ("rmsprop", {"lr": 0.01, "decay": 0.8, "momentum": 0.5, "centered": True},
     lambda: tf.train.rmsprop(0.01, 0.8, 0.5, centered=True)),
    ("sgd", {"lr": lambda step: 0.1 * 0.5 ** (step / 2)},
     lambda: tf.train.sgd(tf.train.exponential_decay(0.1, 2, 0.5))),
]
IDS = [f"{k}-{i}" for i, (k, _, _) in enumerate(CONFIGS)]


# ---------------------------------------------------------------- problems with hand gradients

C = np.array([1.0, -2.0, 0.5])
S = np.array([1.0, 3.0, 0.5])


def quad_grad(w):
    return [2 * S * (w[0] - C)]            # L = sum(s (w - c)^2)


X = np.array([[0.5, -1.0, 0.3], [1.2, 0.4, -0.7], [-0.3, 0.8, 1.1], [0.9, -0.2, 0.1]])
Y = np.array([[0.5], [-0.4], [0.8], [0.1]])
MLP0 = [np.array([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.6, 0.2, -0.3], [0.1, 0.2, -0.5, 0.4]]),
        np.array([0.05, -0.1, 0.0, 0.2]), np.array([[0.7], [-0.5], [0.3], [0.6]]),
        np.array([0.1])]


def mlp_grad(p):
    W1, b1, W2, b2 = p                     # L = mean((tanh(X W1 + b1) W2 + b2 - Y)^2)
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    d_out = 2 * (out - Y) / out.size
    d_h = d_out @ W2.T * (1 - h * h)
    return [X.T @ d_h, d_h.sum(0), h.T @ d_out, d_out.sum(0)]


def flowgrad_losses(vs):
    if len(vs) == 1:
        return lambda: ((vs[0] - tf.tensor(C)).square() * tf.tensor(S)).sum()
    W1, b1, W2, b2 = vs
    return lambda: (tf.tensor(X).mat_mul(W1).add(b1).tanh().mat_mul(W2).add(b2)
                    .sub(tf.tensor(Y)).square().mean())


@pytest.mark.parametrize("problem", ["quadratic", "mlp"])
@pytest.mark.parametrize("kind, cfg, make", CONFIGS, ids=IDS)
def test_trajectory_matches_the_rules(kind, cfg, make, problem):
    init, grad = ([np.array([0.2, 0.4, -1.0])], quad_grad) if problem == "quadratic" \
        else (MLP0, mlp_grad)
    ref = [w.copy() for w in init]
    slots = [{} for _ in init]
    vs = [tf.variable(tf.tensor(w)) for w in init]
    opt = make()
    try:
        for t in range(1, 9):
            gs = grad(ref)
            ref = [reference_step(kind, cfg, w, g, s, t) for w, g, s in zip(ref, gs, slots)]
            opt.minimize(flowgrad_losses(vs))
            for v, w in zip(vs, ref):
                np.testing.assert_allclose(v.numpy(), w, rtol=2e-4, atol=2e-6,
                                           err_msg=f"{kind} step {t}")
        assert opt.iterations == 8
    finally:
        tf.dispose(vs)
        opt.dispose()


# ---------------------------------------------------------------- API

@pytest.fixture
def owned():
    made = []
    yield made
    for x in made:
        x.dispose()


def test_minimize_returns_cost_before_the_update(owned):
    w = tf.variable(tf.scalar(3.0))
    opt = tf.train.sgd(0.1)
    owned += [w, opt]
    assert opt.minimize(lambda: w.square()) is None
    cost = opt.minimize(lambda: w.square(), return_cost=True)
    assert cost.item() == pytest.approx(2.4 ** 2)
    assert w.item() == pytest.approx(2.4 - 0.1 * 4.8)


def test_minimize_with_var_list_updates_only_those(owned):
    a, b = tf.variable(tf.scalar(1.0)), tf.variable(tf.scalar(1.0))
    opt = tf.train.sgd(0.5)
    owned += [a, b, opt]
    opt.minimize(lambda: a * b, var_list=[a])
    assert (a.item(), b.item()) == (0.5, 1.0)


def test_apply_gradients_forms_and_null_gradients(owned):
    w = tf.variable(tf.tensor([1.0, 2.0]), name="w_apply")
    u = tf.variable(tf.scalar(5.0), name="u_apply")
    opt = tf.train.momentum(1.0, 0.5)
    owned += [w, u, opt]
    opt.apply_gradients({"w_apply": tf.tensor([1.0, 1.0]), "u_apply": None})
    opt.apply_gradients({w: tf.tensor([1.0, 1.0])})
    opt.apply_gradients([(tf.scalar(1.0), w)])                 # scalar gradients broadcast
    opt.apply_gradients([{"name": "w_apply", "tensor": tf.tensor([0.0, 0.0])}])
    # accumulations 1, 1.5, 1.75, 0.875: w moves by 5.125
    assert w.numpy().tolist() == pytest.approx([1 - 5.125, 2 - 5.125])
    assert u.item() == 5.0 and opt.iterations == 4
    names = [r.name for r in opt.get_weights()]
    assert names == ["iter", "w_apply/momentum", "u_apply/momentum"]


def test_slots_follow_variables_not_positions(owned):
    # TF.js indexes slots by position: changing the list mixes them up. flowgrad does not.
    a = tf.variable(tf.scalar(0.0), name="a_slot")
    b = tf.variable(tf.scalar(0.0), name="b_slot")
    opt = tf.train.momentum(1.0, 1.0)
    owned += [a, b, opt]
    opt.apply_gradients({"a_slot": tf.scalar(1.0), "b_slot": tf.scalar(10.0)})
    opt.apply_gradients({"b_slot": tf.scalar(0.0)})
    assert b.item() == -20.0 and a.item() == -1.0


def test_set_momentum_takes_effect(owned):
    w = tf.variable(tf.scalar(0.0))
    opt = tf.train.momentum(1.0, 0.9)
    owned += [w, opt]
    opt.set_momentum(0.0)
    opt.apply_gradients({w: tf.scalar(1.0)})
    opt.apply_gradients({w: tf.scalar(1.0)})
    assert w.item() == -2.0 and opt.get_config()["momentum"] == 0.0


def test_weights_roundtrip_continues_the_same_trajectory(owned):
    w1 = tf.variable(tf.tensor([1.0, -1.0]), name="w_rt")
    opt = tf.train.adam(0.1)
    owned += [w1, opt]
    for _ in range(3):
        opt.minimize(lambda: (w1 * w1 * tf.tensor([1.0, 3.0])).sum())
    saved = opt.get_weights()
    assert saved[0].tensor.dtype == "int32" and saved[0].tensor.item() == 3
    start = w1.numpy()
    opt.minimize(lambda: (w1 * w1 * tf.tensor([1.0, 3.0])).sum())
    after_one = w1.numpy()
    w1.assign(tf.tensor(start))
    fresh = tf.train.adam(0.1)
    owned.append(fresh)
    fresh.set_weights(saved)
    fresh.minimize(lambda: (w1 * w1 * tf.tensor([1.0, 3.0])).sum())
    np.testing.assert_allclose(w1.numpy(), after_one, rtol=1e-6)


def test_slots_are_not_trainable_and_are_disposed_with_the_optimizer(owned):
    w = tf.variable(tf.scalar(1.0))
    owned.append(w)
    before = tf.memory().num_tensors
    opt = tf.train.adam(0.1)
    opt.minimize(lambda: w.square())
    assert tf.memory().num_tensors == before + 2                 # m and v
    assert all(not s.trainable for _, s in opt.slot_table[id(w)][1].items())
    value, grads = tf.variable_grads(lambda: w.square())
    assert list(grads) == [w.name]                               # slots are not variables
    tf.dispose([value, grads])
    opt.dispose()
    assert tf.memory().num_tensors == before
    with pytest.raises(tf.FlowgradError, match="optimizer was disposed"):
        opt.minimize(lambda: w.square())


def test_minimize_without_variables_says_to_create_them(owned):
    opt = tf.train.sgd(0.1)
    owned.append(opt)
    with pytest.raises(tf.GradientError) as e:
        opt.minimize(lambda: tf.scalar(2.0).square())
    assert "Cannot find a connection between any variable" in str(e.value)
    assert "tf.variable" in str(e.value)
    assert opt.iterations == 0


def test_get_config_defaults_and_camel_keys():
    assert tf.train.rmsprop(0.1).get_config() == {
        "learning_rate": 0.1, "decay": 0.9, "momentum": 0.0, "epsilon": 1e-7,
        "centered": False}
    assert tf.train.adamax().get_config()["learningRate"] == 0.002
    opt = tf.train.momentum(0.1, 0.9, clip_norm=1.0)
    assert tf.train.MomentumOptimizer.from_config(opt.get_config()).get_config() == \
        opt.get_config()
    assert tf.train.SGDOptimizer is tf.SGDOptimizer


NON_DEFAULT = {     # every constructor option set away from its default
    "momentum": lambda: tf.train.momentum(0.1, 0.8, use_nesterov=True, clip_value=0.7),
    "adagrad": lambda: tf.train.adagrad(0.1, initial_accumulator_value=0.3),
    "adadelta": lambda: tf.train.adadelta(0.5, 0.8, 1e-4, use_updated_accumulator=True),
    "adam": lambda: tf.train.adam(0.05, 0.8, 0.9, 1e-4, clip_norm=2.0),
    "adamw": lambda: tf.train.adamw(0.05, weight_decay=0.2, beta1=0.7),
    "adamax": lambda: tf.train.adamax(0.05, 0.8, 0.9, 1e-4, 0.01),
    "rmsprop": lambda: tf.train.rmsprop(0.05, 0.8, 0.5, 1e-4, True, global_clip_norm=1.5),
}


@pytest.mark.parametrize("kind", list(NON_DEFAULT))
def test_from_config_rebuilds_the_same_update(kind):
    # the same config, and the same steps: an option missing from get_config would
    # rebuild its default silently (Adadelta's use_updated_accumulator did)
    opt = NON_DEFAULT[kind]()
    again = type(opt).from_config(opt.get_config())
    assert again.get_config() == opt.get_config()
    ws = []
    for o in (opt, again):
        w = tf.variable(tf.tensor([0.5, -1.5, 2.0]))
        for _ in range(3):
            o.minimize(lambda w=w: w.square().sum().add(w.sin().sum()))
        ws.append(w.numpy().tobytes())
        tf.dispose(w)
        o.dispose()
    assert ws[0] == ws[1]


@pytest.mark.parametrize("call, match", [
    (lambda: tf.train.sgd(), "learning_rate for SGDOptimizer must be defined."),
    (lambda: tf.train.rmsprop(), "learning_rate for RMSPropOptimizer must be defined."),
    (lambda: tf.train.momentum(0.1), "momentum for MomentumOptimizer must be defined."),
    (lambda: tf.train.sgd("fast"), "learning_rate must be a number or a schedule"),
    (lambda: tf.train.sgd(np.True_), "learning_rate must be a number or a schedule"),
    (lambda: tf.train.sgd(np.float32("nan")), "learning_rate must be a number or a schedule"),
    (lambda: tf.train.sgd(0.1, clip_norm=0), "clip_norm must be positive"),
    (lambda: tf.train.adam(0.1, bta1=0.9), r"AdamOptimizer: unknown option\(s\) 'bta1' "
                                           r"\(did you mean 'beta1'\?\); it takes learning_rate"),
    (lambda: tf.train.momentum(0.1, 0.9, useNesterov=True), "did you mean 'use_nesterov'"),
    (lambda: tf.train.sgd(0.1).apply_gradients({"no_such_var": tf.scalar(1.0)}),
     "no variable named 'no_such_var' is registered"),
    (lambda: tf.train.sgd(0.1).apply_gradients(5), "apply_gradients\\(\\) takes a mapping"),
    (lambda: tf.train.sgd(0.1).apply_gradients([5]), "list entries must be"),
    (lambda: tf.train.adam(0.1).set_weights([]), "at least the iteration count"),
    (lambda: tf.train.adam(0.1).set_weights([0, ("w/q", tf.scalar(1.0))]),
     "entries after the first need names|has no slot"),
])
def test_optimizer_errors(call, match):
    with pytest.raises(tf.FlowgradError, match=match):
        call()


@pytest.mark.parametrize("lr", [np.float32(0.5), np.float64(0.5), np.int64(1), 0.5])
def test_numpy_scalars_are_learning_rates(lr, owned):
    """np.float32(0.5) was refused as 'not a number'."""
    w = tf.variable(tf.tensor([1.0, 2.0]))
    opt = tf.train.sgd(lr)
    owned += [w, opt]
    opt.minimize(lambda: w.sum())
    np.testing.assert_array_equal(w.numpy(), np.float32([1.0, 2.0]) - np.float32(lr))
    assert w.numpy().dtype == np.float32


def test_gradient_of_wrong_shape_is_a_clear_error(owned):
    w = tf.variable(tf.tensor([1.0, 2.0, 3.0]))
    opt = tf.train.sgd(0.1)
    owned += [w, opt]
    with pytest.raises(tf.ShapeError, match="has shape \\(2,\\), which does not fit the "
                                            "variable's shape \\(3,\\)"):
        opt.apply_gradients({w: tf.tensor([1.0, 2.0])})


def test_skip_nonfinite_keeps_weights_and_counts(owned):
    w = tf.variable(tf.tensor([1.0, 4.0]))
    opt = tf.train.sgd(0.1)
    owned += [w, opt]
    with pytest.warns(tf.train.NonFiniteGradientWarning, match="update 1 skipped"):
        opt.minimize(lambda: (w - 1).sqrt().sum(), skip_nonfinite=True)   # sqrt'(0) = inf
    assert w.numpy().tolist() == [1, 4] and opt.skipped_steps == 1 and opt.iterations == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.minimize(lambda: (w - 0.5).sqrt().sum(), skip_nonfinite=True)
    assert opt.iterations == 1


def test_optimizer_clipping_options(owned):
    # gradients w -> [4, 3] (norm 5) and u -> 12 (norm 12); together a global norm of 13
    w = tf.variable(tf.tensor([0.0, 0.0]))
    u = tf.variable(tf.scalar(0.0))
    owned += [w, u]
    for kw, want_w, want_u in [
        ({"clip_value": 1.0}, [-1, -1], -1),
        ({"clip_norm": 1.0}, [-0.8, -0.6], -1),                      # each tensor alone
        ({"global_clip_norm": 2.0}, [-8 / 13, -6 / 13], -24 / 13),   # all scaled by 2/13
    ]:
        w.assign(tf.tensor([0.0, 0.0]))
        u.assign(tf.scalar(0.0))
        opt = tf.train.sgd(1.0, **kw)
        owned.append(opt)
        opt.apply_gradients({w: tf.tensor([4.0, 3.0]), u: tf.scalar(12.0)})
        assert w.numpy().tolist() == pytest.approx(want_w, rel=1e-6), kw
        assert u.item() == pytest.approx(want_u, rel=1e-6), kw


def test_schedules_drive_the_learning_rate(owned):
    w = tf.variable(tf.scalar(0.0))
    opt = tf.train.sgd(tf.train.piecewise_constant([0], [1.0, 0.1]))
    owned += [w, opt]
    assert opt.current_learning_rate() == 1.0
    opt.apply_gradients({w: tf.scalar(1.0)})
    opt.apply_gradients({w: tf.scalar(1.0)})
    assert w.item() == pytest.approx(-1.1)


@pytest.mark.parametrize("schedule, steps, want", [
    (tf.train.exponential_decay(1.0, 4, 0.5, staircase=True), [0, 3, 4, 9], [1, 1, .5, .25]),
    (tf.train.cosine_decay(2.0, 4, alpha=0.5), [0, 2, 4, 8], [2, 1.5, 1, 1]),
    (tf.train.warmup(tf.train.exponential_decay(1.0, 1, 0.5), 2, 0.2), [0, 1, 2, 3],
     [0.2, 0.6, 1.0, 0.5]),
])
def test_schedule_values_by_hand(schedule, steps, want):
    assert [schedule(s) for s in steps] == pytest.approx(want)


# ---------------------------------------------------------------- clipping functions

def test_clip_by_norm_values_axes_and_zero():
    assert tf.clip_by_norm(tf.tensor([3.0, 4.0]), 10).numpy().tolist() == [3, 4]
    got = tf.clip_by_norm(tf.tensor([[3.0, 4.0], [0.6, 0.8]]), 1.0, axes=1).numpy()
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.6, 0.8]], rtol=1e-6)
    z = tf.zeros([2])
    assert tf.clip_by_norm(z, 1.0).numpy().tolist() == [0, 0]
    assert tf.grad(lambda x: tf.clip_by_norm(x, 1.0).sum())(z).numpy().tolist() == [1, 1]


def test_clip_by_norm_gradient_when_clipping():
    # f = sum(x / |x|) for |x| > 1: df/dx_i = 1/|x| - x_i sum(x) / |x|^3
    x = np.array([3.0, 4.0])
    n = np.linalg.norm(x)
    want = 1 / n - x * x.sum() / n ** 3
    got = tf.grad(lambda t: tf.clip_by_norm(t, 1.0).sum())(tf.tensor(x, dtype="float64"))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_global_norm_and_clip_by_global_norm():
    ts = [tf.tensor([3.0]), None, tf.tensor([[4.0]])]
    assert tf.global_norm(ts).item() == 5
    clipped, norm = tf.clip_by_global_norm(ts, 2.5)
    assert norm.item() == 5 and clipped[1] is None
    assert clipped[0].item() == pytest.approx(1.5) and clipped[2].item() == pytest.approx(2.0)
    small, _ = tf.clip_by_global_norm([tf.tensor([0.3])], 2.5)
    assert small[0].item() == pytest.approx(0.3)
    nan, _ = tf.clip_by_global_norm([tf.tensor([math.inf])], 1.0)
    assert math.isnan(nan[0].item())


def test_global_clipping_of_float32_and_float64_together():
    # each tensor keeps its dtype; the norm is over both (by hand: grads 2a = [6, 8] and
    # 2d = [2, 4], norm √120, scaled to 1)
    c, norm = tf.clip_by_global_norm([tf.tensor([3.0]), tf.tensor(np.array([4.0]))], 1.0)
    assert [t.dtype for t in c] == ["float32", "float64"] and norm.dtype == "float64"
    a = tf.variable(tf.tensor([3.0, 4.0]))
    d = tf.variable(tf.tensor(np.array([1.0, 2.0])))
    tf.train.sgd(1.0, global_clip_norm=1.0).minimize(
        lambda: (a * a).sum() + (d * d).sum().cast("float32"))
    n = math.sqrt(120)
    assert a.dtype == "float32" and d.dtype == "float64"
    np.testing.assert_allclose(a.numpy(), [3 - 6 / n, 4 - 8 / n], rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), [1 - 2 / n, 2 - 4 / n], rtol=1e-14)
    tf.dispose([a, d])


def test_clip_by_value_gradient_at_the_bounds():
    x = tf.tensor([-1.0, -0.5, 0.5, 1.0])
    g = tf.grad(lambda x: x.clip_by_value(-0.5, 0.5))(x)
    assert g.numpy().tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize("kind, cfg, make", CONFIGS, ids=IDS)
def test_fused_updates_of_pooled_sizes_equal_the_op_by_op_rules_to_the_bit(kind, cfg, make,
                                                                          monkeypatch):
    """Big variables' fused updates write into buffers from the pool (train/fused.py) and
    matrix products into pooled outputs (the NumPy backend's matmul): the same bits."""
    from flowgrad import buffer_pool
    from flowgrad.train import fused as fused_rules, optimizers
    rng = np.random.default_rng(3)
    n = buffer_pool.MIN_ELEMENTS // 256 + 1                   # a (256, n) weight: pooled
    x = rng.standard_normal((300, 256)).astype(np.float32)
    w0 = (rng.standard_normal((256, n)) * 0.1).astype(np.float32)
    took, out = [], fused_rules._out
    monkeypatch.setattr(fused_rules, "_out", lambda B, like: took.append(out(B, like)) or
                        took[-1])
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(optimizers, "_FUSED", {})
        w = tf.variable(tf.tensor(w0))
        opt = make()
        xs = tf.tensor(x)
        try:
            for _ in range(4):
                opt.minimize(lambda: xs.mat_mul(w).tanh().square().mean())
            results.append(w.numpy())
            if fused:
                assert any(a is not None for a in took), "no update used a pooled buffer"
        finally:
            tf.dispose([w, xs])
            opt.dispose()
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("kind, cfg, make", CONFIGS, ids=IDS)
def test_fused_updates_equal_the_op_by_op_rules_to_the_bit(kind, cfg, make, monkeypatch):
    from flowgrad.train import optimizers
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(optimizers, "_FUSED", {})
        vs = [tf.variable(tf.tensor(w)) for w in MLP0] + [tf.variable(tf.scalar(0.7))]
        opt = make()
        try:
            for _ in range(4):
                opt.minimize(lambda: flowgrad_losses(vs[:4])() + vs[4].square())
            results.append([v.numpy() for v in vs])
        finally:
            tf.dispose(vs)
            opt.dispose()
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
