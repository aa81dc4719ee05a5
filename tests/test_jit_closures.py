"""tf.jit and the tensors a function reads by name (its closure, globals, the functions it
calls): a replay checks they are still the ones traced, and raises naming them when not —
a jitted training step never silently trains on the first batch again (issue 27)."""
import numpy as np
import pytest

import flowgrad as tf

RNG = np.random.default_rng(27)
XS = RNG.normal(size=(4, 8, 3)).astype(np.float32)        # 4 batches of 8 examples
YS = RNG.normal(size=(4, 8, 1)).astype(np.float32)
W0 = np.array([[0.5], [-0.25], [0.1]], np.float32)
LR = 0.1


def hand_sgd(batches, steps):
    """Linear regression by SGD on mean squared error, in float64 NumPy: the loss of each
    step (before its update) on batch i % len(batches)."""
    w, costs = W0.astype(np.float64), []
    for i in range(steps):
        x, y = (a.astype(np.float64) for a in batches[i % len(batches)])
        r = x @ w - y
        costs.append(float((r ** 2).mean()))
        w = w - LR * 2 * x.T @ r / r.size
    return costs


BATCHES = list(zip(XS, YS))
REAL = hand_sgd(BATCHES, 4)                 # the losses on the real batches
FIRST = hand_sgd(BATCHES[:1], 4)            # batch 0 repeated: what the bug gave


def test_the_hand_computed_trajectories_differ():
    assert REAL[0] == FIRST[0] and abs(REAL[1] - FIRST[1]) > 1e-2


xb = yb = None      # the loop rebinds these globals


def test_rebinding_global_batches_raises_naming_them():
    global xb, yb
    w = tf.variable(tf.tensor(W0))
    opt = tf.train.sgd(LR)
    batches = [(tf.tensor(x), tf.tensor(y)) for x, y in BATCHES]
    step = tf.jit(lambda: opt.minimize(lambda: xb.mat_mul(w).sub(yb).square().mean(),
                                       return_cost=True))
    try:
        xb, yb = batches[0]
        assert step().item() == pytest.approx(REAL[0], rel=1e-5)     # traced: eager
        assert step().item() == pytest.approx(FIRST[1], rel=1e-5)    # same batch: replayed
        xb, yb = batches[1]
        with pytest.raises(tf.JitError) as e:
            step()
        msg = str(e.value)
        assert "`xb` (a global of module " in msg and "`yb` (a global" in msg
        assert "pass them as arguments to the jitted function" in msg
        assert "step = tf.jit(lambda xb, yb: ...); step(xb, yb)" in msg
        assert opt.iterations == 2          # the refused call changed nothing
        xb, yb = batches[0]                 # the traced tensors again: replays
        assert step().item() == pytest.approx(FIRST[2], rel=1e-5)
    finally:
        xb = yb = None
        w.dispose()
        opt.dispose()
        tf.dispose(batches)


def train_through_closure(jit):
    """The issue's loop, in a function: the step closes over xb and yb, rebound each step."""
    w = tf.variable(tf.tensor(W0))
    opt = tf.train.sgd(LR)
    batches = [(tf.tensor(x), tf.tensor(y)) for x, y in BATCHES]
    xb, yb = batches[0]
    step = lambda: opt.minimize(lambda: xb.mat_mul(w).sub(yb).square().mean(),  # noqa: E731
                                return_cost=True)
    if jit:
        step = tf.jit(step)
    costs = []
    try:
        for i in range(4):
            xb, yb = batches[i]
            costs.append(step().item())
    finally:
        w.dispose()
        opt.dispose()
        tf.dispose(batches)
    return costs


def test_the_eager_loop_follows_the_real_batches():
    np.testing.assert_allclose(train_through_closure(jit=False), REAL, rtol=1e-5)


def test_the_jitted_loop_raises_instead_of_repeating_batch_zero():
    with pytest.raises(tf.JitError, match=r"`xb` \(closed over by train_through_closure"
                       r"\.<lambda>\) held a float32 tensor of shape \[8, 3\] when the "
                       r"function was traced"):
        train_through_closure(jit=True)


def test_the_fix_the_error_gives_follows_the_real_batches():
    w = tf.variable(tf.tensor(W0))
    opt = tf.train.sgd(LR)
    traces = []

    def step(xb, yb):
        traces.append(1)
        return opt.minimize(lambda: xb.mat_mul(w).sub(yb).square().mean(), return_cost=True)
    step = tf.jit(step)
    try:
        costs = [step(tf.tensor(x), tf.tensor(y)).item() for x, y in BATCHES]
    finally:
        w.dispose()
        opt.dispose()
    np.testing.assert_allclose(costs, REAL, rtol=1e-5)
    assert len(traces) == 1                 # the same shapes: traced once, then replayed


def test_unchanged_closures_replay_without_retracing():
    w = tf.variable(tf.tensor([1.0, 2.0]))
    c = tf.tensor([3.0, -1.0])
    traces = []

    def f(x):
        traces.append(1)
        return (x * c + w).sum()
    jf = tf.jit(f)
    x = tf.tensor([0.5, 0.25])
    try:
        for _ in range(5):
            assert jf(x).item() == pytest.approx(0.5 * 3 - 0.25 + 3)
        w.assign(tf.tensor([10.0, 20.0]))   # variables are state: assigning them is fine
        assert jf(x).item() == pytest.approx(0.5 * 3 - 0.25 + 30)
        assert len(traces) == 1 and len(jf.traces) == 1
        prog = next(iter(jf.traces.values()))
        assert [p.name for p in prog.watch.places] == ["c", "w"]
    finally:
        w.dispose()


def test_nested_lambdas_and_functions_are_followed():
    c = tf.tensor([2.0])

    def make_loss():
        return lambda x: (x * c).square().sum()     # c: a cell of the inner lambda
    loss = make_loss()
    g = tf.jit(tf.grad(lambda x: loss(x)))          # through tf.grad's wrapper, then loss
    x = tf.tensor([3.0])
    np.testing.assert_allclose(g(x).numpy(), [8 * 3], rtol=1e-6)   # d/dx (2x)^2 = 8x
    np.testing.assert_allclose(g(x).numpy(), [8 * 3], rtol=1e-6)   # (replayed)
    c = tf.tensor([5.0])                            # noqa: F841 (read by loss's lambda)
    with pytest.raises(tf.JitError, match="`c` \\(closed over by .*make_loss.<lambda>\\)"):
        g(x)


SCALE = tf.tensor([2.0, 3.0])


def scaled(x):
    return x * SCALE            # a global read by a global function the jitted one calls


def test_globals_of_called_functions_are_followed():
    global SCALE
    f = tf.jit(lambda x: scaled(x).sum())
    x = tf.tensor([1.0, 1.0])
    assert f(x).item() == 5 and f(x).item() == 5
    old = SCALE
    try:
        SCALE = tf.tensor([4.0, 4.0])
        with pytest.raises(tf.JitError, match="`SCALE` \\(a global of module .*test_jit_closures"
                                              "\\) held a float32 tensor of shape \\[2\\]"):
            f(x)
        assert scaled(x).sum().item() == 8          # what eager gives now
    finally:
        SCALE = old
    assert f(x).item() == 5


def test_a_tensor_replaced_by_one_of_another_shape():
    c = tf.tensor([1.0, 2.0])
    f = tf.jit(lambda x: x * c)
    x = tf.scalar(2.0)
    assert f(x).numpy().tolist() == [2, 4] and f(x).numpy().tolist() == [2, 4]
    c = tf.tensor([1.0, 2.0, 3.0])      # noqa: F841
    with pytest.raises(tf.JitError, match=r"held a float32 tensor of shape \[2\] when the "
                       r"function was traced, and now holds another, a float32 tensor of "
                       r"shape \[3\]"):
        f(x)


def test_a_disposed_closure_tensor_raises_as_eager_would():
    c = tf.tensor([1.0, 2.0])
    f = tf.jit(lambda x: x * c)
    x = tf.scalar(2.0)
    f(x)
    f(x)
    c.dispose()
    with pytest.raises(tf.DisposedError, match=r"Tensor is disposed\. tf\.jit\(.*\): `c` "):
        f(x)
    with pytest.raises(tf.DisposedError, match="Tensor is disposed"):
        (lambda x: x * c)(x)            # eager


def test_variables_rebound_or_disposed():
    w = tf.variable(tf.tensor([1.0]))
    f = tf.jit(lambda: w * 2)
    assert f().item() == 2 and f().item() == 2
    w.assign(tf.tensor([4.0]))
    assert f().item() == 8
    old, w = w, tf.variable(tf.tensor([7.0]))
    try:
        with pytest.raises(tf.JitError, match=r"held variable '.*' when the function was "
                           r"traced, and now holds another, variable .*w\.assign\(\.\.\.\)"):
            f()
    finally:
        w.dispose()
    w = old
    assert f().item() == 8
    w.dispose()
    with pytest.raises(tf.DisposedError, match="Tensor is disposed"):
        f()


def test_tensors_made_inside_the_function_are_not_watched():
    cache = {}

    def f(x):
        if "k" not in cache:
            cache["k"] = tf.tensor([10.0, 20.0])    # made while tracing: a constant
        return x + cache["k"]
    jf = tf.jit(f)
    x = tf.tensor([1.0, 2.0])
    assert jf(x).numpy().tolist() == [11, 22]
    assert next(iter(jf.traces.values())).watch is None
    assert jf(x).numpy().tolist() == [11, 22]


def test_rebinding_a_tensor_it_reads_while_being_traced_is_an_error():
    state = tf.tensor([1.0])

    def f():
        nonlocal state
        state = state * 2           # a Python assignment: a replay would not repeat it
        return state
    with pytest.raises(tf.JitError, match="rebinds `state` .* while being traced.*tf.Variable"):
        tf.jit(f)()


def test_values_read_while_tracing_are_watched_too():
    c = tf.tensor([3.0])
    f = tf.jit(lambda x: x * float(c.numpy()[0]))   # c's value, baked in as a number
    x = tf.tensor([2.0])
    assert f(x).item() == 6 and f(x).item() == 6
    c = tf.tensor([5.0])                             # noqa: F841
    with pytest.raises(tf.JitError, match="`c`"):
        f(x)


class Model:
    def __init__(self):
        self.mask = tf.tensor([1.0, 0.0])

    def __call__(self, x):
        return x * self.mask


def test_attributes_one_level_down_and_methods():
    model = Model()
    f = tf.jit(lambda x: model(x).sum())             # Model.__call__ reads self.mask
    x = tf.tensor([2.0, 3.0])
    assert f(x).item() == 2 and f(x).item() == 2
    model.mask = tf.tensor([0.0, 1.0])
    with pytest.raises(tf.JitError, match=r"`model\.mask`"):
        f(x)
    g = tf.jit(model.__call__)                       # a bound method: self's attributes
    assert g(x).numpy().tolist() == [0, 3] and g(x).numpy().tolist() == [0, 3]
    model.mask = tf.tensor([1.0, 1.0])
    with pytest.raises(tf.JitError, match=r"`self\.mask`"):
        g(x)
    h = tf.jit(lambda x: (x * batch["x"]).sum())      # a dict item
    batch = {"x": tf.tensor([1.0, 1.0])}
    assert h(x).item() == 5 and h(x).item() == 5
    batch["x"] = tf.tensor([2.0, 2.0])
    with pytest.raises(tf.JitError, match=r"`batch\['x'\]`"):
        h(x)
    model = Model()                                  # a new object: the path changed
    with pytest.raises(tf.JitError, match=r"`model` .* held a Model .*now holds a Model"):
        f(x)


def test_what_is_not_detected_stays_a_constant():
    """Longer attribute chains are not followed (documented): the trace keeps its
    constant, as before."""
    class Holder:
        pass
    outer = Holder()
    outer.inner = Holder()
    outer.inner.c = tf.tensor([2.0])
    f = tf.jit(lambda x: x * outer.inner.c)
    x = tf.tensor([3.0])
    assert f(x).item() == 6
    outer.inner.c = tf.tensor([5.0])
    assert f(x).item() == 6             # the traced constant (eager would give 15)


def test_functions_rebound_with_other_tensors_fixed_in_them():
    """A tensor fixed in a function (functools.partial, a default argument) cannot change,
    but the name holding the function can: the trace read tensors through it."""
    import functools

    def mse(x, target):
        return (x - target).square().sum()
    loss = traced_loss = functools.partial(mse, target=tf.tensor([1.0]))
    scale = lambda x, k=tf.tensor([2.0]): x * k      # noqa: E731
    f = tf.jit(lambda x: loss(scale(x)))
    x = tf.tensor([3.0])
    assert f(x).item() == 25 and f(x).item() == 25   # (2*3 - 1)^2
    loss = functools.partial(mse, target=tf.tensor([0.0]))
    with pytest.raises(tf.JitError, match=r"`loss` .* held a partial .*now holds a partial"):
        f(x)
    loss = traced_loss
    assert f(x).item() == 25
    scale = lambda x, k=tf.tensor([3.0]): x * k      # noqa: E731
    with pytest.raises(tf.JitError, match=r"`scale` .* held function .*<lambda> when the "
                       r"function was traced, and now holds function"):
        f(x)


class Config:
    offset = tf.tensor([1.0])


def test_class_attributes_one_level_down():
    f = tf.jit(lambda x: x + Config.offset)
    x = tf.tensor([1.0])
    assert f(x).item() == 2 and f(x).item() == 2
    old = Config.offset
    Config.offset = tf.tensor([5.0])
    try:
        with pytest.raises(tf.JitError, match=r"`Config\.offset`"):
            f(x)
    finally:
        Config.offset = old


class Net:
    def __init__(self):
        self.w = tf.tensor([2.0])

    def forward(self, x):
        return x * self.w


net = Net()


def net_loss(x):
    return net.forward(x).sum()         # net read again, with other attribute names


def test_an_object_read_by_several_functions():
    f = tf.jit(lambda x: net_loss(x) + 0 * len([net]))
    x = tf.tensor([3.0])
    assert f(x).item() == 6 and f(x).item() == 6
    old = net.w
    net.w = tf.tensor([4.0])
    try:
        with pytest.raises(tf.JitError, match=r"`net\.w` \(an attribute read by "
                           r"Net\.forward\)"):
            f(x)
    finally:
        net.w = old
    assert f(x).item() == 6


def cnn_costs(mode):
    """The issue's case: a small CNN on 8x8 "digits" (random here), Adam, 4 mini-batches.
    mode: "eager", "jit-args" (the batch as arguments) or "jit-closure" (rebound names)."""
    rng = np.random.default_rng(4)
    images = rng.random((4, 16, 8, 8, 1)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, (4, 16))]
    k = tf.variable(tf.tensor(rng.normal(0, 0.3, (3, 3, 1, 4)).astype(np.float32)))
    d = tf.variable(tf.tensor(rng.normal(0, 0.1, (144, 10)).astype(np.float32)))
    opt = tf.train.adam(0.01)
    batches = [(tf.tensor(images[i]), tf.tensor(labels[i])) for i in range(4)]

    def loss(xb, yb):
        h = tf.conv2d(xb, k, 1, "valid").relu().reshape([16, 144])
        return tf.losses.softmax_cross_entropy(yb, h.mat_mul(d))
    xb, yb = batches[0]
    if mode == "jit-args":
        step = tf.jit(lambda xb, yb: opt.minimize(lambda: loss(xb, yb), return_cost=True))
    else:
        step = lambda: opt.minimize(lambda: loss(xb, yb), return_cost=True)  # noqa: E731
        step = tf.jit(step) if mode == "jit-closure" else step
    costs = []
    try:
        for i in range(4):
            xb, yb = batches[i]
            costs.append((step(xb, yb) if mode == "jit-args" else step()).item())
    finally:
        tf.dispose([k, d] + batches)
        opt.dispose()
    return costs


def test_a_small_cnn_trains_on_each_batch_or_raises():
    eager = cnn_costs("eager")
    np.testing.assert_allclose(cnn_costs("jit-args"), eager, rtol=1e-5)
    with pytest.raises(tf.JitError, match="`xb` .*`yb` .*pass them as arguments"):
        cnn_costs("jit-closure")


def test_objects_holding_the_variables_used_are_watched():
    """An optimizer's slots (made while tracing) and a model's weights are read through
    the object: rebinding the name to a new optimizer or model is caught."""
    w = tf.variable(tf.tensor([1.0]))
    opt = tf.train.sgd(0.25)
    step = tf.jit(lambda: opt.minimize(lambda: (w * w).sum(), return_cost=True))
    try:
        assert step().item() == pytest.approx(1.0)
        assert step().item() == pytest.approx(0.25)       # w: 1 - 0.25 * 2 = 0.5
        traced_opt, opt = opt, tf.train.adam(0.1)
        with pytest.raises(tf.JitError, match=r"`opt` .* held a SGDOptimizer when the "
                           r"function was traced, and now holds a AdamOptimizer"):
            step()
        opt.dispose()
        opt = traced_opt
        assert step().item() == pytest.approx(0.0625)
    finally:
        w.dispose()
        opt.dispose()
