"""The cockpit's instruments (issue 30) against brute force on small float64 models: full
Hessians by tf.hessian (eigenvalues, trace, spectrum), per-example gradients by a Python loop
(the noise statistics, ghost norms), and the loss at perturbed weights evaluated directly
(the landscape). None of them changes a variable or an optimizer's slots, bitwise."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError, GradientError, ShapeError

R = np.random.default_rng(7)


@pytest.fixture
def mlp():
    """A 3-4-2 tanh MLP in float64 (26 parameters) and 6 examples."""
    vs = [tf.variable(tf.tensor(R.normal(size=s) * 0.8), name=f"ci_{n}")
          for n, s in (("w1", (3, 4)), ("b1", (4,)), ("w2", (4, 2)), ("b2", (2,)))]
    x = tf.tensor(R.normal(size=(6, 3)))
    y = tf.tensor(R.normal(size=(6, 2)))
    yield vs, x, y
    tf.dispose(vs + [x, y])


def forward(ps, x):
    w1, b1, w2, b2 = ps
    return x.mat_mul(w1).add(b1).tanh().mat_mul(w2).add(b2)


def batch_loss(ps, x, y):
    return (forward(ps, x) - y).square().sum() / x.shape[0]


def full_hessian(vs, f):
    """The Hessian of f(*params) as one [n, n] NumPy matrix (tf.hessian's blocks)."""
    blocks = tf.hessian(f, argnums=tuple(range(len(vs))))(*[tf.tensor(v.numpy()) for v in vs])
    sizes = [v.size for v in vs]
    return np.block([[np.asarray(b.numpy()).reshape(sizes[i], sizes[j])
                      for j, b in enumerate(row)] for i, row in enumerate(blocks)])


# ---------------------------------------------------------------- curvature

def test_eigenvalues_are_the_full_hessians(mlp):
    vs, x, y = mlp
    H = full_hessian(vs, lambda *ps: batch_loss(ps, x, y))
    lam = np.linalg.eigvalsh(H)
    want = lam[np.argsort(-np.abs(lam))][:3]
    e = tf.debug.hessian_eigenvalues(lambda: batch_loss(vs, x, y), k=3, max_iter=100,
                                     tol=1e-10, seed=1)
    np.testing.assert_allclose(e.values, want, rtol=1e-8, atol=1e-10)
    assert e.converged and e.variables == [v.name for v in vs]
    for lam_i, vec in zip(e.values, e.vectors):
        assert [a.shape for a in vec] == [tuple(v.shape) for v in vs]
        flat = np.concatenate([a.reshape(-1) for a in vec])
        np.testing.assert_allclose(H @ flat, lam_i * flat, atol=1e-7)
        assert abs(np.linalg.norm(flat) - 1) < 1e-12
    # the default tolerance: close, after fewer products than parameters
    quick = tf.debug.hessian_eigenvalues(lambda: batch_loss(vs, x, y), seed=2)
    assert abs(quick.values[0] - want[0]) <= 1e-2 * abs(want[0])


def test_trace_is_the_full_hessians_and_exact_for_a_diagonal_one(mlp):
    vs, x, y = mlp
    H = full_hessian(vs, lambda *ps: batch_loss(ps, x, y))
    t = tf.debug.hessian_trace(lambda: batch_loss(vs, x, y), max_iter=400, tol=0, seed=3)
    assert t.iterations == 400 and not t.converged
    assert abs(t.value - np.trace(H)) <= 4 * t.std_error
    assert abs(sum(t.per_variable.values()) - t.value) < 1e-9
    # each variable's block: the same probes restricted to it
    at, blocks = 0, []
    for v in vs:
        blocks.append(np.trace(H[at:at + v.size, at:at + v.size]))
        at += v.size
    spread = 4 * t.std_error + 0.2 * np.abs(blocks)
    assert np.all(np.abs(np.array(list(t.per_variable.values())) - blocks) <= spread)
    # a diagonal Hessian: every Rademacher probe gives the trace
    w = tf.variable(tf.tensor(R.normal(size=(5,))), name="ci_diag")
    c = tf.tensor(R.normal(size=(5,)))
    d = tf.debug.hessian_trace(lambda: (c * w.square() + w.exp()).sum(), seed=4)
    exact = float(np.sum(2 * c.numpy() + np.exp(w.numpy())))
    assert abs(d.value - exact) < 1e-12 * abs(exact) and d.iterations == 2 and d.converged
    w.dispose()
    c.dispose()


def test_spectrum_nodes_are_the_eigenvalues_and_its_moments_the_traces(mlp, tmp_path):
    vs, x, y = mlp
    H = full_hessian(vs, lambda *ps: batch_loss(ps, x, y))
    s = tf.debug.hessian_spectrum(lambda: batch_loss(vs, x, y), iters=26, runs=2, seed=5)
    assert s.nodes.shape == s.weights.shape == (2, 26) and s.size == 26
    np.testing.assert_allclose(s.weights.sum(axis=1), 1.0, atol=1e-12)
    for run in s.nodes:
        np.testing.assert_allclose(np.sort(run), np.linalg.eigvalsh(H), atol=1e-8)
    grid, dens = s.density()
    assert abs(np.sum(dens) * (grid[1] - grid[0]) - 1) < 1e-3
    # a diagonal Hessian, probed by ±1/√n: the quadrature's moments are tr(Hᵖ)/n exactly
    w = tf.variable(tf.tensor(R.normal(size=(6,))), name="ci_sdiag")
    diag = 2 + np.exp(w.numpy())
    d = tf.debug.hessian_spectrum(lambda: (w.square() + w.exp()).sum(), iters=3, seed=6)
    for p in (0, 1, 2, 3):
        assert abs(d.moment(p) - np.mean(diag ** p)) < 1e-9 * np.mean(diag ** p)
    w.dispose()
    pytest.importorskip("matplotlib")
    s.plot(tmp_path / "spectrum.png")
    assert (tmp_path / "spectrum.png").stat().st_size > 0


def test_curvature_errors_say_what_to_fix(mlp):
    vs, x, y = mlp
    with pytest.raises(ArgumentError, match="k can be at most 26"):
        tf.debug.hessian_eigenvalues(lambda: batch_loss(vs, x, y), k=27)
    with pytest.raises(ArgumentError, match="k must be >= 1"):
        tf.debug.hessian_eigenvalues(lambda: batch_loss(vs, x, y), k=0)
    with pytest.raises(ArgumentError, match="loss_fn must be a function"):
        tf.debug.hessian_trace(3.0)
    with pytest.raises(GradientError, match="scalar"):
        tf.debug.hessian_trace(lambda: forward(vs, x))
    with pytest.raises(ArgumentError, match="var_list"):
        tf.debug.hessian_spectrum(lambda: batch_loss(vs, x, y), var_list=vs[0])
    s = tf.debug.hessian_spectrum(lambda: batch_loss(vs, x, y), iters=4, seed=0)
    with pytest.raises(ArgumentError, match="suffix picks the format"):
        s.plot("spectrum.txt")
    assert tf.memory().num_tensors < 10_000     # (the calls above left nothing behind)


# ---------------------------------------------------------------- per-example gradients

def looped_grads(loss_fn, inputs, vs):
    """[B, n] per-example gradients, one variable_grads call per example."""
    rows = []
    for i in range(inputs[0].shape[0]):
        g = tf.variable_grads(lambda i=i: loss_fn(*[t[i] for t in inputs]), vs).grads
        rows.append(np.concatenate([g[v].numpy().reshape(-1) if v.name in g
                                    else np.zeros(v.size) for v in vs]))
    return np.array(rows)


def mlp_example_loss(vs):
    def loss(xi, yi):
        return (forward(vs, xi.reshape([1, 3])) - yi.reshape([1, 2])).square().sum()
    return loss


def test_gradient_noise_is_the_loops_statistics(mlp):
    vs, x, y = mlp
    G = looped_grads(mlp_example_loss(vs), (x, y), vs)
    n = tf.debug.gradient_noise(mlp_example_loss(vs), (x, y))
    B = G.shape[0]
    mean = G.mean(0)
    m2 = mean @ mean
    var = sum(np.sum((g - mean) ** 2) for g in G) / (B - 1)
    assert n.batch_size == B and n.size == G.shape[1]
    np.testing.assert_allclose(n.b_simple, var / m2, rtol=1e-10)
    np.testing.assert_allclose(n.norm_test, np.sqrt(var / (B * m2)), rtol=1e-10)
    proj = np.array([g @ mean for g in G])
    inner = np.sqrt(np.var(proj, ddof=1) / (B * m2 ** 2))
    np.testing.assert_allclose(n.inner_test, inner, rtol=1e-10)
    orth = [g - (g @ mean) / m2 * mean for g in G]
    ortho = np.sqrt(sum(o @ o for o in orth) / (B - 1) / (B * m2))
    np.testing.assert_allclose(n.ortho_test, ortho, rtol=1e-10)
    eps = 1e-5
    gsnr = np.mean(mean ** 2 / (np.var(G, axis=0) + eps))
    np.testing.assert_allclose(n.gsnr, gsnr, rtol=1e-10)
    eb = 1 - B * np.mean(mean ** 2 / (np.var(G, axis=0, ddof=1) + eps))
    np.testing.assert_allclose(n.early_stopping, eb, rtol=1e-10)
    # per variable: the same statistics of its own columns
    at = 0
    for v in vs:
        col = G[:, at:at + v.size]
        at += v.size
        mv = col.mean(0)
        want = np.sum((col - mv) ** 2) / (B - 1) / (mv @ mv)
        np.testing.assert_allclose(n.per_variable[v.name].b_simple, want, rtol=1e-10)
    with pytest.raises(ArgumentError, match="at least 2"):
        tf.debug.gradient_noise(mlp_example_loss(vs), (x[:1], y[:1]))


def test_ghost_norms_equal_vmaps_and_the_loops(mlp):
    vs, x, y = mlp
    loss = mlp_example_loss(vs)
    loop = np.linalg.norm(looped_grads(loss, (x, y), vs), axis=1)
    for method in ("ghost", "vmap", "auto"):
        got = tf.debug.per_example_grad_norms(loss, (x, y), method=method)
        np.testing.assert_allclose(got.numpy(), loop, rtol=1e-10)
        got.dispose()


@pytest.mark.parametrize("steps, d_in, d_out", [(3, 8, 9), (6, 4, 5)],
                         ids=["pairs of steps", "the gradient itself"])
def test_ghost_norms_of_sequences_transposes_and_shared_weights(steps, d_in, d_out):
    """A time axis (the Σ_{t,s} form while steps² ≤ the weight's size, else the product),
    a weight used transposed and on either side of mat_mul, one used twice, and a bias
    broadcast over the time axis."""
    w = tf.variable(tf.tensor(R.normal(size=(d_in, d_out))), name=f"ci_seq_w{steps}")
    b = tf.variable(tf.tensor(R.normal(size=(d_out,))), name=f"ci_seq_b{steps}")
    u = tf.variable(tf.tensor(R.normal(size=(3, d_out))), name=f"ci_seq_u{steps}")
    xs = tf.tensor(R.normal(size=(5, steps, d_in)))     # 5 examples of `steps` steps

    def loss(x):
        h = x.mat_mul(w).add(b).tanh()                   # [steps, d_out]
        again = tf.mat_mul(w, x, True, True).sin()       # wᵀ xᵀ: w on the left
        return (h.square().sum() + again.sum()
                + tf.mat_mul(h, u, False, True).square().sum())
    vs = [w, b, u]
    loop = np.linalg.norm(looped_grads(loss, (xs,), vs), axis=1)
    ghost = tf.debug.per_example_grad_norms(loss, (xs,), method="ghost")
    vmapped = tf.debug.per_example_grad_norms(loss, (xs,), method="vmap")
    np.testing.assert_allclose(ghost.numpy(), loop, rtol=1e-10)
    np.testing.assert_allclose(vmapped.numpy(), loop, rtol=1e-10)
    # var_list: only those variables' gradients count
    part = tf.debug.per_example_grad_norms(loss, (xs,), var_list=[u], method="ghost")
    np.testing.assert_allclose(part.numpy(), np.linalg.norm(
        looped_grads(loss, (xs,), [u]), axis=1), rtol=1e-10)
    tf.dispose([w, b, u, xs, ghost, vmapped, part])


def test_ghost_norms_make_no_per_example_weight_gradient():
    """B=5, D=7, H=11: vmap makes a [5, 7, 11] gradient; ghost never a tensor that big."""
    w = tf.variable(tf.tensor(R.normal(size=(7, 11))), name="ci_big_w")
    xs = tf.tensor(R.normal(size=(5, 7)))

    def loss(x):
        return x.reshape([1, 7]).mat_mul(w).tanh().sum()
    big = 5 * 7 * 11 * 8

    def largest(method):
        info = tf.profile(lambda: tf.debug.per_example_grad_norms(loss, (xs,), method=method))
        return max(k.bytes_added for k in info.kernels)
    assert largest("vmap") >= big              # (what the check below would catch)
    assert largest("ghost") < big
    assert largest("auto") < big
    tf.dispose([w, xs])


def test_auto_falls_back_to_vmap_and_ghost_says_why(mlp):
    vs, x, y = mlp
    scale = tf.variable(tf.scalar(1.5, "float64"), name="ci_scale")

    def loss(xi, yi):
        return mlp_example_loss(vs)(xi, yi) * scale
    loop = np.linalg.norm(looped_grads(loss, (x, y), vs + [scale]), axis=1)
    auto = tf.debug.per_example_grad_norms(loss, (x, y))
    np.testing.assert_allclose(auto.numpy(), loop, rtol=1e-10)
    with pytest.raises(ArgumentError, match="'ci_scale' is used by Multiply.*method='vmap'"):
        tf.debug.per_example_grad_norms(loss, (x, y), method="ghost")
    with pytest.raises(ArgumentError, match="method must be"):
        tf.debug.per_example_grad_norms(loss, (x, y), method="fast")
    tf.dispose([scale, auto])


def test_ghost_norms_in_float32_stay_float32_and_match_vmap(mlp):
    vs64, x, y = mlp
    vs = [tf.variable(tf.tensor(v.numpy().astype(np.float32)), name=v.name + "_32")
          for v in vs64]
    x32, y32 = x.cast("float32"), y.cast("float32")
    loss = mlp_example_loss(vs)
    ghost = tf.debug.per_example_grad_norms(loss, (x32, y32), method="ghost")
    vmapped = tf.debug.per_example_grad_norms(loss, (x32, y32), method="vmap")
    assert ghost.dtype == vmapped.dtype == "float32"
    np.testing.assert_allclose(ghost.numpy(), vmapped.numpy(), rtol=1e-5)
    tf.dispose(vs + [x32, y32, ghost, vmapped])


# ---------------------------------------------------------------- the landscape

def test_landscape_losses_are_the_loss_at_the_perturbed_weights(mlp):
    vs, x, y = mlp
    def f():
        return batch_loss(vs, x, y)
    theta = [v.numpy().copy() for v in vs]

    def direct(ds, coefs):
        for v, t, *d in zip(vs, theta, *ds):
            v.assign(tf.tensor(t + sum(c * di for c, di in zip(coefs, d))))
        out = tf.tidy(lambda: f().item())
        for v, t in zip(vs, theta):
            v.assign(tf.tensor(t))
        return out
    line = tf.debug.loss_landscape(f, steps=7, span=0.5, seed=8)
    assert line.dims == 1 and line.losses.shape == (7,) and line.betas is None
    np.testing.assert_allclose(line.alphas, np.linspace(-0.5, 0.5, 7))
    for i, a in enumerate(line.alphas):
        assert abs(line.losses[i] - direct(line.directions, (a,))) < 1e-12
    assert abs(line.origin - direct(line.directions, (0.0,))) < 1e-12
    # filter normalisation: each output unit's slice has its weights' norm; biases stay
    for v, d in zip(vs, line.directions[0]):
        if v.rank == 1:
            assert not d.any()
        else:
            np.testing.assert_allclose(np.linalg.norm(d, axis=0),
                                       np.linalg.norm(v.numpy(), axis=0), rtol=1e-12)
    plane = tf.debug.loss_landscape(f, dims=2, steps=5, normalize="layer", seed=9)
    assert plane.losses.shape == (5, 5)
    for i, j in ((0, 0), (1, 3), (4, 2)):
        want = direct(plane.directions, (plane.alphas[i], plane.betas[j]))
        assert abs(plane.losses[i, j] - want) < 1e-12
    # given directions, as a dict by name, used as given
    d = {vs[0].name: np.ones((3, 4))}
    given = tf.debug.loss_landscape(f, var_list=vs, steps=3, directions=[d])
    zeros = [np.zeros(v.shape) for v in vs[1:]]
    assert abs(given.losses[0] - direct([[np.ones((3, 4))] + zeros], (-1.0,))) < 1e-12


def test_landscape_errors_say_what_to_fix(mlp, tmp_path):
    vs, x, y = mlp
    def f():
        return batch_loss(vs, x, y)
    with pytest.raises(ArgumentError, match="dims must be 1"):
        tf.debug.loss_landscape(f, dims=3)
    with pytest.raises(ArgumentError, match="normalize must be"):
        tf.debug.loss_landscape(f, normalize="unit")
    with pytest.raises(ShapeError, match="shape"):
        tf.debug.loss_landscape(f, var_list=vs[:1], directions=[[np.ones((4, 3))]])
    with pytest.raises(ArgumentError, match="not among the variables"):
        tf.debug.loss_landscape(f, var_list=vs[:1], directions=[{"nope": np.ones(3)}])
    pytest.importorskip("matplotlib")
    ls = tf.debug.loss_landscape(f, dims=2, steps=4, seed=0)
    ls.plot(tmp_path / "plane.svg")
    assert (tmp_path / "plane.svg").stat().st_size > 0


# ---------------------------------------------------------------- nothing changes

def test_no_instrument_changes_a_variable_or_an_optimizers_slots(mlp):
    vs, x, y = mlp
    opt = tf.train.adam(0.01)
    opt.minimize(lambda: batch_loss(vs, x, y))

    def state():
        return ([v.numpy().tobytes() for v in vs]
                + [(w.name, w.tensor.numpy().tobytes()) for w in opt.get_weights()])
    before = state()
    def f():
        return batch_loss(vs, x, y)
    tf.debug.hessian_eigenvalues(f, k=2, seed=0)
    tf.debug.hessian_trace(f, max_iter=5, seed=0)
    tf.debug.hessian_spectrum(f, iters=5, seed=0)
    tf.debug.gradient_noise(mlp_example_loss(vs), (x, y))
    tf.dispose(tf.debug.per_example_grad_norms(mlp_example_loss(vs), (x, y), method="ghost"))
    tf.debug.loss_landscape(f, dims=2, steps=3, seed=0)

    def failing():
        if getattr(failing, "calls", 0) == 3:
            raise RuntimeError("interrupted in the middle of the landscape")
        failing.calls = getattr(failing, "calls", 0) + 1
        return f()
    with pytest.raises(RuntimeError, match="interrupted"):
        tf.debug.loss_landscape(failing, var_list=vs, steps=5, seed=0)
    assert state() == before
    opt.dispose()
