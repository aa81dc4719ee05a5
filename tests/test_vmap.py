"""tf.vmap against per-example loops (issue 18): every op family of the oracle table with
in_axes 0, None and a non-leading axis, per-example gradients, nested vmap, composition
with grad, hessian, jacobian, custom_grad, variable_grads and jit, and the errors."""
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.batching import VmapError, VmapFallbackWarning
from oracle_cases import CASES, DOMAINS

B = 3
TABLE = [c for c in CASES if c.fixed is None]


def _flat(o):
    if isinstance(o, (list, tuple)):
        return [x for y in o for x in _flat(y)]
    return [o]


def _inputs(case):
    r = np.random.default_rng(abs(hash(case.name)) % 2 ** 32)
    return [DOMAINS[d](r, (B,) + tuple(s)) for s, d in case.inputs]


def _t(a):
    return tf.tensor(a, dtype="float64")


def _loop(f, arrays, axes):
    """f on each example (arrays sliced along their axis; None: shared), stacked."""
    outs = [f(*[_t(a) if ax is None else _t(np.take(a, i, axis=ax))
                for a, ax in zip(arrays, axes)]) for i in range(B)]
    return [np.stack([_flat(o)[k].numpy() for o in outs]) for k in range(len(_flat(outs[0])))]


def _axes_variants(case):
    n = case.n
    yield "axis0", [0] * n
    if n > 1:
        yield "first-shared", [None] + [0] * (n - 1)
    if case.inputs and len(case.inputs[0][0]) >= 1:
        yield "first-last-axis", [len(case.inputs[0][0])] + [0] * (n - 1)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VmapFallbackWarning)
        yield


@pytest.mark.parametrize("case", TABLE, ids=[c.name for c in TABLE])
def test_vmap_matches_a_loop_for_every_op_family(case):
    base = _inputs(case)
    for label, axes in _axes_variants(case):
        arrays = [a[0] if ax is None else np.moveaxis(a, 0, ax) for a, ax in zip(base, axes)]
        got = tf.vmap(case.fg, in_axes=tuple(axes))(*[_t(a) for a in arrays])
        want = _loop(case.fg, arrays, axes)
        for g, w in zip(_flat(got), want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12,
                                       err_msg=f"{case.name} ({label})")


@pytest.mark.parametrize("case", [c for c in TABLE if c.n], ids=[c.name for c in TABLE if c.n])
def test_per_example_gradients_match_a_loop(case):
    arrays = _inputs(case)

    def f(*xs):
        return _flat(case.fg(*xs))[0].sum()
    got = tf.vmap(lambda *xs: tf.grads(f)(list(xs)))(*[_t(a) for a in arrays])
    for k in range(case.n):
        want = np.stack([tf.grads(f)([_t(a[i]) for a in arrays])[k].numpy()
                         for i in range(B)])
        np.testing.assert_allclose(got[k].numpy(), want, rtol=1e-9, atol=1e-12,
                                   err_msg=f"{case.name}: d/d input {k}")


# ---------------------------------------------------------------- composition

X = np.random.default_rng(0).normal(size=(4, 3))
W = np.array([0.5, -1.0, 2.0])


def test_per_example_gradient_of_a_linear_loss_by_hand():
    xs, ys = _t(X), _t(np.arange(4.0))
    w = _t(W)
    per = tf.vmap(lambda x, y: tf.grad(lambda w_: (x.mul(w_).sum() - y).square())(w))(xs, ys)
    by_hand = 2 * (X @ W - np.arange(4.0))[:, None] * X        # d/dw (x.w - y)^2
    np.testing.assert_allclose(per.numpy(), by_hand, rtol=1e-12)


def test_grad_through_vmap_and_vmap_of_grad_agree():
    xs = _t(X)
    f = lambda x: x.sin().mul(x).sum()                            # noqa: E731
    outer = tf.grad(lambda xs: tf.vmap(f)(xs).sum())(xs).numpy()
    inner = tf.vmap(tf.grad(f))(xs).numpy()
    np.testing.assert_allclose(outer, np.cos(X) * X + np.sin(X), rtol=1e-12)
    np.testing.assert_allclose(inner, outer, rtol=1e-12)


def test_nested_vmap_and_second_order():
    a = np.random.default_rng(1).normal(size=(2, 3, 4))
    got = tf.vmap(tf.vmap(lambda v: v.square().sum()))(_t(a)).numpy()
    np.testing.assert_allclose(got, (a ** 2).sum(2), rtol=1e-12)
    # d2/dx2 of x^3 per element: 6x, through grad of grad inside vmap
    d2 = tf.vmap(tf.grad(tf.grad(lambda x: x * x * x)))(_t(X[:, 0])).numpy()
    np.testing.assert_allclose(d2, 6 * X[:, 0], rtol=1e-12)


def test_hessian_and_jacobian_per_example():
    xs = _t(X[:2, :2])
    H = tf.vmap(tf.hessian(lambda x: x.square().sum() * x.sum()))(xs).numpy()
    for h, x in zip(H, X[:2, :2]):
        want = 2 * np.eye(2) * x.sum() + 2 * x[:, None] + 2 * x[None, :]
        np.testing.assert_allclose(h, want, rtol=1e-12)
    J = tf.vmap(tf.jacobian(lambda x: x.sin()))(xs).numpy()
    np.testing.assert_allclose(J, np.stack([np.diag(np.cos(x)) for x in X[:2, :2]]),
                               rtol=1e-12)


def test_custom_grad_inside_vmap():
    @tf.custom_grad
    def scaled(x, save):
        return {"value": x.square(), "grad_func": lambda dy, s: [dy.mul(10.0)]}
    got = tf.vmap(tf.grad(lambda x: scaled(x).sum()))(_t(X)).numpy()
    np.testing.assert_allclose(got, np.full_like(X, 10.0))


def test_variable_grads_per_example_over_captured_variables():
    w = tf.variable(_t(W), name="vmap_w")
    b = tf.variable(tf.scalar(0.5, dtype="float64"), name="vmap_b")
    try:
        def per(x, y):
            r = tf.variable_grads(lambda: (x.mul(w).sum().add(b) - y).square(), [w, b])
            return [r.grads["vmap_w"], r.grads["vmap_b"]]
        gw, gb = tf.vmap(per)(_t(X), _t(np.arange(4.0)))
        resid = X @ W + 0.5 - np.arange(4.0)
        np.testing.assert_allclose(gw.numpy(), 2 * resid[:, None] * X, rtol=1e-12)
        np.testing.assert_allclose(gb.numpy(), 2 * resid, rtol=1e-12)
    finally:
        tf.dispose([w, b])


def test_value_and_grad_and_out_axes():
    f = tf.value_and_grad(lambda x: x.square().sum())
    value, grad = tf.vmap(f, out_axes=(0, 1))(_t(X))
    np.testing.assert_allclose(value.numpy(), (X ** 2).sum(1), rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), (2 * X).T, rtol=1e-12)


def test_shared_outputs_and_structures():
    out = tf.vmap(lambda d: {"s": d["x"].sum(), "c": d["k"]},
                  in_axes=({"x": 0, "k": None},), out_axes={"s": 0, "c": None})(
        {"x": _t(X), "k": _t(W)})
    np.testing.assert_allclose(out["s"].numpy(), X.sum(1), rtol=1e-12)
    np.testing.assert_allclose(out["c"].numpy(), W)
    # an output that does not depend on the example is repeated along out_axes
    rep = tf.vmap(lambda x: tf.scalar(2.0, dtype="float64"))(_t(X)).numpy()
    np.testing.assert_allclose(rep, [2.0] * 4)


def test_jit_inside_and_outside_vmap():
    """Repeated calls (a replay, not only the tracing call) give the right numbers."""
    inside = tf.vmap(tf.jit(lambda x: x.exp().mul(x).sum()))
    outside = tf.jit(tf.vmap(lambda x: x.exp().mul(x).sum()))
    for shift in range(3):
        want = (np.exp(X + shift) * (X + shift)).sum(1)
        np.testing.assert_allclose(inside(_t(X + shift)).numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(outside(_t(X + shift)).numpy(), want, rtol=1e-12)


# ---------------------------------------------------------------- errors and warnings

def test_errors_name_the_problem():
    xs = _t(X)
    with pytest.raises(VmapError, match="batch sizes differ: 4 and 3"):
        tf.vmap(lambda a, b: a + b)(xs, _t(X[:3]))
    with pytest.raises(VmapError, match="no argument is batched"):
        tf.vmap(lambda a: a, in_axes=None)(xs)
    with pytest.raises(VmapError, match="out of range"):
        tf.vmap(lambda a: a, in_axes=2)(xs)
    with pytest.raises(VmapError, match="reads the values of a batched tensor"):
        tf.vmap(lambda a: tf.scalar(a.sum().item()))(xs)
    with pytest.raises(VmapError, match="differs per example"):
        tf.vmap(lambda a: a.sum(), out_axes=None)(xs)
    with pytest.raises(VmapError, match="in_axes has 2 entries for 1"):
        tf.vmap(lambda a: a, in_axes=(0, 0))(xs)
    with pytest.raises(VmapError, match=r"in_axes has 1 entries at \[0\] for 2 values"):
        tf.vmap(lambda p: p[0] + p[1], in_axes=([0],))([xs, xs])
    with pytest.raises(VmapError, match="gives a structure at .* a single Tensor"):
        tf.vmap(lambda a: a, in_axes=([0, 0],))(xs)
    with pytest.raises(VmapError, match="in_axes at args\\[0\\] must be an int or None"):
        tf.vmap(lambda a: a, in_axes="0")(xs)
    with pytest.raises(VmapError, match="out_axes 3 is out of range for output"):
        tf.vmap(lambda a: a, out_axes=3)(xs)
    with pytest.raises(VmapError, match="f must be a function, got int"):
        tf.vmap(3)
    np.testing.assert_allclose(tf.vmap(lambda a: a * 2)(xs).numpy(), 2 * X)


def test_vmap_leaves_no_tensor_behind():
    """Batched tensors are counted and freed like any other (inside tidy: none left)."""
    import gc
    xs = _t(X)
    f = tf.vmap(tf.grad(lambda x: x.sin().mul(x).sum()))
    tf.tidy(lambda: f(xs))
    gc.collect()
    before = tf.memory()
    for _ in range(3):
        tf.tidy(lambda: f(xs))
    with pytest.raises(VmapError):
        tf.tidy(lambda: tf.vmap(lambda a: tf.scalar(a.sum().item()))(xs))
    gc.collect()
    after = tf.memory()
    assert (after.num_tensors, after.num_bytes) == (before.num_tensors, before.num_bytes)


def test_a_kernel_without_a_rule_loops_once_with_a_warning_naming_it():
    from flowgrad import batching
    batching._warned.discard("Diag")
    a = np.random.default_rng(2).normal(size=(3, 4))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", VmapFallbackWarning)
        for _ in range(2):
            got = tf.vmap(lambda v: tf.diag(v))(_t(a)).numpy()
    named = [w for w in seen if issubclass(w.category, VmapFallbackWarning)]
    assert len(named) == 1 and "Diag" in str(named[0].message)
    assert named[0].filename == __file__
    np.testing.assert_allclose(got, np.stack([np.diag(v) for v in a]), rtol=1e-12)


def test_einsum_has_a_batching_rule():
    from flowgrad import batching
    r = np.random.default_rng(3)
    a, b = r.normal(size=(3, 2, 4)), r.normal(size=(4, 5))
    before = set(batching._warned)
    got = tf.vmap(lambda m, n: tf.einsum("ij,jk->ik", m, n), in_axes=(0, None))(_t(a), _t(b))
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-12)
    g = tf.vmap(tf.grad(lambda m: tf.einsum("ij,jk->i", m, _t(b)).square().sum()))(_t(a))
    want = np.stack([2 * (m @ b).sum(1)[:, None] * b.sum(1)[None, :] for m in a])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
    assert set(batching._warned) == before


def test_the_mlp_path_needs_no_loop():
    """Per-example gradients of an MLP run every kernel batched (no fallback)."""
    from flowgrad import batching
    r = np.random.default_rng(3)
    w1, w2 = _t(r.normal(size=(5, 8))), _t(r.normal(size=(8, 2)))
    xs, ys = _t(r.normal(size=(6, 5))), _t(np.eye(2)[r.integers(0, 2, 6)])
    before = set(batching._warned)

    def loss(p1, p2, x, y):
        logits = x.reshape([1, 5]).mat_mul(p1).relu().mat_mul(p2)
        return tf.losses.softmax_cross_entropy(y.reshape([1, 2]), logits)
    per = tf.vmap(lambda x, y: tf.grads(lambda a, b: loss(a, b, x, y))([w1, w2]))(xs, ys)
    assert set(batching._warned) == before
    for i in range(6):
        g1, g2 = tf.grads(lambda a, b: loss(a, b, xs[i], ys[i]))([w1, w2])
        np.testing.assert_allclose(per[0].numpy()[i], g1.numpy(), rtol=1e-10)
        np.testing.assert_allclose(per[1].numpy()[i], g2.numpy(), rtol=1e-10)


# ---------------------------------------------------------------- the debugger's use

def test_per_example_grad_norms_find_a_poisoned_example_and_match_a_loop():
    r = np.random.default_rng(4)
    w1 = tf.variable(_t(r.normal(size=(4, 8))), name="pe_w1")
    w2 = tf.variable(_t(r.normal(size=(8, 1))), name="pe_w2")
    xs, ys = r.normal(size=(16, 4)), r.normal(size=(16, 1))
    ys[11, 0] = 1e4                                       # one wild label
    try:
        def loss(x, y):
            return x.reshape([1, 4]).mat_mul(w1).tanh().mat_mul(w2).sub(y).square().mean()
        norms = tf.debug.per_example_grad_norms(loss, (_t(xs), _t(ys)))
        want = []
        for i in range(16):
            g = tf.variable_grads(lambda: loss(_t(xs[i]), _t(ys[i])), [w1, w2]).grads
            want.append(np.sqrt(sum((v.numpy() ** 2).sum() for v in g.values())))
        np.testing.assert_allclose(norms.numpy(), want, rtol=1e-10)
        assert tf.debug.worst_examples(norms, 1) == [11]
        xs[5, 0] = np.nan                                 # and a NaN: it comes first
        norms = tf.debug.per_example_grad_norms(loss, (_t(xs), _t(ys)))
        assert np.isnan(norms.numpy()[5])
        assert tf.debug.worst_examples(norms, 2) == [5, 11]
    finally:
        tf.dispose([w1, w2])


# ---------------------------------------------------------------- kernels the oracle table
# (differentiable functions) does not reach: boolean, integer and index kernels, and the
# second-order kernels of pooling and dilation

_R = np.random.default_rng(5)
_F = _R.normal(size=(B, 6))                               # floats, a NaN and an Inf below
_F[0, 1], _F[1, 2] = np.nan, np.inf
_I = _R.integers(0, 4, size=(B, 6))
_BOOL = _R.random((B, 6)) > 0.5
_IMG = _R.normal(size=(B, 1, 5, 5, 2))

EXTRA = [
    ("all/any", lambda b: [tf.all(b, 0), tf.any(b)], [_BOOL]),
    ("arg_max/arg_min", lambda x: [tf.arg_max(x), tf.arg_min(x)],
     [np.where(np.isfinite(_F[:, :4]), 0.0, np.nan) + _R.normal(size=(B, 4))]),
    ("logical", lambda a, b: [tf.logical_not(a), tf.logical_or(a, b), tf.logical_xor(a, b)],
     [_BOOL, ~_BOOL[::-1]]),
    ("is_nan/is_inf", lambda x: [tf.is_nan(x), tf.is_inf(x)], [_F]),
    ("one_hot", lambda i: tf.one_hot(i, 4), [_I]),
    ("ones/zeros_like", lambda x: [tf.ones_like(x), tf.zeros_like(x)], [_F]),
    ("search_sorted", lambda s, v: tf.search_sorted(s, v), [np.sort(_R.normal(size=(B, 6))),
                                                           _R.normal(size=(B, 3))]),
    ("bincount", lambda i, w: tf.bincount(i, w, 5), [_I.astype(np.int32), _R.random((B, 6))]),
    ("gather, batched indices", lambda x, i: tf.gather(x, i), [_R.normal(size=(B, 6)), _I]),
    ("dilation2d", lambda x, f: tf.dilation2d(x, f, 1, "same"),
     [_IMG, _R.normal(size=(B, 2, 2, 2))]),
    ("pool grad-grad", lambda x: tf.grad(lambda v: tf.grad(
        lambda u: tf.max_pool(u, 2, 1, "valid").square().sum())(v).square().sum())(x),
     [_IMG]),
    ("avg_pool grad", lambda x: tf.grad(lambda v: tf.avg_pool(v, 2, 1, "valid").square()
                                        .sum())(x), [_IMG]),
]


def _to(a):
    if a.dtype == bool:
        return tf.tensor(a)
    if a.dtype.kind == "i":
        return tf.tensor(a, dtype="int32")
    return tf.tensor(a, dtype="float64")


@pytest.mark.parametrize("name, f, arrays", EXTRA, ids=[e[0] for e in EXTRA])
def test_vmap_matches_a_loop_for_the_other_kernels(name, f, arrays):
    got = _flat(tf.vmap(f)(*[_to(a) for a in arrays]))
    outs = [_flat(f(*[_to(a[i]) for a in arrays])) for i in range(B)]
    for k, g in enumerate(got):
        want = np.stack([o[k].numpy() for o in outs])
        if want.dtype.kind == "f":              # (a batched sum may add in another order)
            np.testing.assert_allclose(g.numpy(), want, rtol=1e-12, atol=1e-14,
                                       err_msg=f"{name}, output {k}")
        else:
            np.testing.assert_array_equal(g.numpy(), want, err_msg=f"{name}, output {k}")


def test_jacobian_and_hessian_of_a_vmapped_function():
    """The other order: derivatives of vmap (jacobian's batched backward pass runs through
    vmap's entry and exit), checked against the closed forms."""
    f = tf.vmap(lambda x: x.sin().sum())                       # row sums of sin
    xs = _t(X[:3, :2])
    J = tf.jacobian(f)(xs).numpy()                             # d out_i / d x_jk
    want = np.stack([np.eye(3)[i][:, None] * np.cos(X[:3, :2]) for i in range(3)])
    np.testing.assert_allclose(J, want, rtol=1e-12)
    H = tf.hessian(lambda m: f(m).sum())(xs).numpy().reshape(6, 6)
    np.testing.assert_allclose(H, np.diag(-np.sin(X[:3, :2]).ravel()), atol=1e-12)


def test_debug_seams_inside_and_around_vmap():
    """check_numerics around vmap sees the batched kernels; switched on inside the vmapped
    function it leaves the batching seam on top (the values stay right)."""
    import warnings
    xs = _t(np.array([[1.0, 0.0], [2.0, 3.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tf.debug.check_numerics(mode="warn") as chk:
            out = tf.vmap(lambda x: x.log().sum())(xs).numpy()
    assert chk.findings and chk.findings[0].op == "log" and chk.findings[0].created

    def inside(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with tf.debug.check_numerics(mode="warn"):
                y = x.log().sum()
        return y.add(x.square().sum())          # after the seam went off again
    got = tf.vmap(inside)(xs).numpy()
    want = np.array([-np.inf, np.log([2.0, 3.0]).sum() + 13.0])      # (log 0: -inf)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(out, want - [1.0, 13.0], rtol=1e-14)


def test_per_example_gradients_of_a_conv_net_run_batched_and_match_a_loop():
    """The filter gradient of a convolution has its own batching rule (DP-SGD on a CNN):
    no kernel loops, and the per-example gradients are the loop's."""
    from flowgrad import batching
    r = np.random.default_rng(6)
    xs, ys = _t(r.normal(size=(5, 6, 6, 2))), _t(np.eye(3)[r.integers(0, 3, 5)])
    k, w = _t(r.normal(size=(3, 3, 2, 4)) * 0.3), _t(r.normal(size=(6 * 6 * 4, 3)) * 0.1)

    def loss(k_, w_, x, y):
        h = tf.conv2d(x.reshape([1, 6, 6, 2]), k_, 1, "same").relu().reshape([1, -1])
        return tf.losses.softmax_cross_entropy(y.reshape([1, 3]), h.mat_mul(w_))
    before = set(batching._warned)
    gk, gw = tf.vmap(lambda x, y: tf.grads(lambda a, b: loss(a, b, x, y))([k, w]))(xs, ys)
    assert set(batching._warned) == before
    for i in range(5):
        lk, lw = tf.grads(lambda a, b: loss(a, b, xs[i], ys[i]))([k, w])
        np.testing.assert_allclose(gk.numpy()[i], lk.numpy(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(gw.numpy()[i], lw.numpy(), rtol=1e-10, atol=1e-14)


def test_vmap_in_several_threads_at_once():
    """Each thread's batched tensors are its own; the shared kernel seam stays on while any
    thread batches, and plain ops of other threads pass through it unchanged."""
    import threading
    r = np.random.default_rng(8)
    xs = [r.normal(size=(6, 3)) for _ in range(3)]
    errors, results = [], {}

    def work(k):
        try:
            for _ in range(30):
                if k == 2:                      # a thread of plain ops, meanwhile
                    got = tf.tidy(lambda: tf.grad(lambda v: v.sin().sum())(_t(xs[k])).numpy())
                else:
                    got = tf.tidy(lambda: tf.vmap(tf.grad(lambda v: v.sin().sum()))(
                        _t(xs[k])).numpy())
                np.testing.assert_allclose(got, np.cos(xs[k]), rtol=1e-12)
            results[k] = True
        except Exception as e:                  # (reported below, in the main thread)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert results == {0: True, 1: True, 2: True}
    from flowgrad import batching, engine
    assert batching.users == 0 and engine.run_kernel is not batching.run_batched


def test_a_weight_closed_over_by_a_vmapped_loss_gets_the_batch_sum_outside_vmap():
    # the weight is broadcast over the examples inside vmap; a gradient taken outside sums
    # the examples' contributions (it used to come back batched over the ended vmap level)
    xs = np.array([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0], [0.0, 3.0]])
    x = tf.tensor(xs, dtype="float64")
    w0 = np.array([1.0, 2.0])
    want = (2 * (xs @ w0)[:, None] * xs).mean(0)            # d/dw mean_i (x_i . w)^2
    hess = 2 * xs.T @ xs / len(xs)

    def loss(w):
        return tf.vmap(lambda xi: (xi * w).sum().square())(x).mean()
    w = tf.variable(tf.tensor(w0, dtype="float64"), name="w_closed_over")
    try:
        g = tf.variable_grads(lambda: loss(w), [w]).grads["w_closed_over"]
        assert type(g) is tf.Tensor
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(tf.grad(loss)(tf.tensor(w0, dtype="float64")).numpy(),
                                   want, rtol=1e-12)
        np.testing.assert_allclose(tf.hessian(loss)(tf.tensor(w0, dtype="float64")).numpy(),
                                   hess, rtol=1e-12)
        tf.train.sgd(0.01).minimize(lambda: loss(w))
        np.testing.assert_allclose(w.numpy(), w0 - 0.01 * want, rtol=1e-12)
        # nested: the inner vmap's level ends inside the outer one, whose level stays
        inner = tf.grad(lambda s: tf.vmap(lambda xi: tf.vmap(lambda e: e * s)(xi).sum())(x)
                        .sum())(tf.scalar(2.0, "float64"))
        assert inner.item() == pytest.approx(xs.sum(), rel=1e-12)
        # inside vmap the gradient stays per example
        per = tf.vmap(lambda xi: tf.grad(lambda v: (xi * v).sum().square())(
            tf.tensor(w0, dtype="float64")))(x)
        np.testing.assert_allclose(per.numpy(), 2 * (xs @ w0)[:, None] * xs, rtol=1e-12)
    finally:
        w.dispose()
