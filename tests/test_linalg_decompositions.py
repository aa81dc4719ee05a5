"""tf.linalg's decompositions and what is built on them (flowgrad/ops/decompositions.py:
eigh, eigvalsh, svd, svdvals, NumPy's norm; flowgrad/ops/least_squares.py: pinv, lstsq).

The table checks values against NumPy (float64 and float32) and gradients against central
finite differences in float64 to second order (tests/opcheck.py), on every test backend.
Eigen- and singular vectors are unique up to sign, so the rows compare what does not depend
on it: squared entries, reconstructions V diag(g(w)) V^T, U diag(g(s)) Vh, and projectors on
the extra columns of a full SVD. Then: the results' fields, rank and residuals, batches,
dtypes, tf.vmap and tf.jit, the degenerate cases (what is still differentiable and what
raises GradientError) and the error messages."""
import warnings

import numpy as np
import pytest
from opcheck import BACKENDS, Case, run_case

import flowgrad as tf
from flowgrad.errors import ArgumentError, GradientError, KernelError, ShapeError

INF = float("inf")
F64 = "float64"
_rng = np.random.default_rng(7)


def t64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64), dtype=F64)


def _k(a):
    return min(a.shape[-2:])


# ---------------------------------------------------------------- the table

def _fg_eigh(uplo):
    def f(a):
        w, v = tf.linalg.eigh(a, uplo)
        return [w, v * v, tf.mat_mul(v * w.sin()[..., None, :], v, False, True)]
    return f


def _np_eigh(uplo):
    def f(a):
        w, v = np.linalg.eigh(a, uplo)
        return [w, v * v, (v * np.sin(w)[..., None, :]) @ np.swapaxes(v, -1, -2)]
    return f


def _fg_svd(full, hermitian=False):
    def f(a):
        u, s, vh = tf.linalg.svd(a, full, True, hermitian)
        k = s.shape[-1]
        u1, vh1 = u[..., :, :k], vh[..., :k, :]
        out = [s, u1 * u1, vh1 * vh1, tf.mat_mul(u1 * s.sin()[..., None, :], vh1)]
        if full:        # the extra columns: only their span is a function of a
            u2, vh2 = u[..., :, k:], vh[..., k:, :]
            out += [tf.mat_mul(u2, u2, False, True), tf.mat_mul(vh2, vh2, True, False)]
        return out
    return f


def _np_svd(full, hermitian=False):
    def f(a):
        u, s, vh = np.linalg.svd(a, full, True, hermitian)
        k = s.shape[-1]
        u1, vh1 = u[..., :, :k], vh[..., :k, :]
        out = [s, u1 * u1, vh1 * vh1, (u1 * np.sin(s)[..., None, :]) @ vh1]
        if full:
            u2, vh2 = u[..., :, k:], vh[..., k:, :]
            out += [u2 @ np.swapaxes(u2, -1, -2), np.swapaxes(vh2, -1, -2) @ vh2]
        return out
    return f


def _fg_lstsq(a, b):
    x, res, _, _ = tf.linalg.lstsq(a, b)
    return [x, res]


def _np_lstsq(a, b):
    x, res, _, _ = np.linalg.lstsq(a, b)
    return [x, res]


DEC = {"f32_rtol": 1e-4}       # float32 eigen/singular vectors: rounding over the gaps
TABLE = [
    Case("eigh_L", _fg_eigh("L"), _np_eigh("L"), [((3, 3), "real")], **DEC),
    Case("eigh_U_batched", _fg_eigh("U"), _np_eigh("U"), [((2, 3, 3), "real")], **DEC),
    Case("eigvalsh_L", lambda a: tf.linalg.eigvalsh(a), np.linalg.eigvalsh,
         [((4, 4), "real")], **DEC),
    Case("eigvalsh_U_batched", lambda a: tf.linalg.eigvalsh(a, "U"),
         lambda a: np.linalg.eigvalsh(a, "U"), [((2, 3, 3), "real")], **DEC),
    Case("svd_square", _fg_svd(False), _np_svd(False), [((3, 3), "real")], **DEC),
    Case("svd_tall", _fg_svd(False), _np_svd(False), [((4, 3), "real")], **DEC),
    Case("svd_wide", _fg_svd(False), _np_svd(False), [((2, 4), "real")], **DEC),
    Case("svd_batched", _fg_svd(False), _np_svd(False), [((2, 3, 2), "real")], **DEC),
    Case("svd_full_tall", _fg_svd(True), _np_svd(True), [((4, 2), "real")], **DEC),
    Case("svd_full_wide", _fg_svd(True), _np_svd(True), [((2, 3), "real")], **DEC),
    Case("svd_full_square", _fg_svd(True), _np_svd(True), [((3, 3), "real")], **DEC),
    Case("svd_hermitian", _fg_svd(False, True), _np_svd(False, True), [((3, 3), "real")],
         **DEC),
    Case("svd_no_uv", lambda a: tf.linalg.svd(a, compute_uv=False),
         lambda a: np.linalg.svd(a, compute_uv=False), [((3, 4), "real")], **DEC),
    Case("svdvals", tf.linalg.svdvals, np.linalg.svdvals, [((2, 4, 3), "real")], **DEC),
    Case("pinv_square", tf.linalg.pinv, np.linalg.pinv, [((3, 3), "real")], **DEC),
    Case("pinv_tall", tf.linalg.pinv, np.linalg.pinv, [((4, 2), "real")], **DEC),
    Case("pinv_wide_batched", tf.linalg.pinv, np.linalg.pinv, [((2, 2, 3), "real")], **DEC),
    Case("pinv_hermitian", lambda a: tf.linalg.pinv(a, hermitian=True),
         lambda a: np.linalg.pinv(a, hermitian=True), [((3, 3), "real")], **DEC),
    Case("pinv_rtol_none", lambda a: tf.linalg.pinv(a, rtol=None),
         lambda a: np.linalg.pinv(a, rtol=None), [((3, 2), "real")], **DEC),
    Case("lstsq", _fg_lstsq, _np_lstsq, [((5, 3), "real"), ((5, 2), "real")], **DEC),
    Case("lstsq_vector_b", _fg_lstsq, _np_lstsq, [((4, 2), "real"), ((4,), "real")], **DEC),
    Case("lstsq_wide", lambda a, b: tf.linalg.lstsq(a, b).x,
         lambda a, b: np.linalg.lstsq(a, b)[0], [((2, 3), "real"), ((2, 2), "real")], **DEC),
]


def _norms(o, axis):
    return (lambda x: tf.linalg.norm(x, o, axis), lambda x: np.linalg.norm(x, o, axis))


for _ord in [None, 2, 1, 3, 4, 0.5, -1, -2.5, INF, -INF]:
    TABLE.append(Case(f"norm_vector[{_ord}]", *_norms(_ord, -1), [((2, 4), "nonzero")]))
for _ord in [None, "fro", "nuc", 2, -2, 1, -1, INF, -INF]:
    TABLE.append(Case(f"norm_matrix[{_ord}]", *_norms(_ord, None), [((3, 4), "nonzero")],
                      **DEC))
TABLE += [
    Case("norm_vector[0]", lambda x: tf.linalg.norm(x, 0, axis=0),
         lambda x: np.linalg.norm(x, 0, axis=0), [np.array([[0.0, 1.5], [2.0, 0.0],
                                                           [0.5, -1.0]])], order=0),
    Case("norm_matrix_axes_keepdims", lambda x: tf.linalg.norm(x, "nuc", (2, 0), True),
         lambda x: np.linalg.norm(x, "nuc", (2, 0), True), [((3, 2, 4), "real")], **DEC),
    Case("norm_matrix_axes[inf]", lambda x: tf.linalg.norm(x, INF, (0, 2)),
         lambda x: np.linalg.norm(x, INF, (0, 2)), [((3, 2, 4), "nonzero")]),
    Case("norm_flat_keepdims", lambda x: tf.linalg.norm(x, keepdims=True),
         lambda x: np.linalg.norm(x, keepdims=True), [((2, 3, 2), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", TABLE, ids=repr)
def test_table(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- results, rank, dtypes

def test_results_are_numpys_named_fields():
    a = t64(_rng.normal(size=(4, 3)))
    r = tf.linalg.eigh(a[:3])
    assert r._fields == ("eigenvalues", "eigenvectors") and r.eigenvalues is r[0]
    assert isinstance(r, tuple)         # (NumPy's results are named tuples too)
    r = tf.linalg.svd(a)
    assert r._fields == ("U", "S", "Vh")
    assert (r.U.shape, r.S.shape, r.Vh.shape) == ((4, 4), (3,), (3, 3))
    r = tf.linalg.svd(a, full_matrices=False)
    assert (r.U.shape, r.S.shape, r.Vh.shape) == ((4, 3), (3,), (3, 3))
    r = tf.linalg.lstsq(a, t64(np.ones((4, 2))))
    assert r._fields == ("x", "residuals", "rank", "s")


def test_lstsq_rank_and_residuals_follow_numpy():
    rng = np.random.default_rng(3)
    cases = [(rng.normal(size=(5, 3)), rng.normal(size=(5, 2))),
             (rng.normal(size=(5, 2)) @ rng.normal(size=(2, 3)), rng.normal(size=(5, 2))),
             (rng.normal(size=(2, 4)), rng.normal(size=(2,))),
             (rng.normal(size=(4, 3)), rng.normal(size=(4,)))]
    for a, b in cases:
        x, res, rank, s = tf.linalg.lstsq(t64(a), t64(b))
        wx, wres, wrank, ws = np.linalg.lstsq(a, b)
        np.testing.assert_allclose(x.numpy(), wx, rtol=1e-9, atol=1e-12)
        assert res.shape == wres.shape, (a.shape, res.shape, wres.shape)
        np.testing.assert_allclose(res.numpy(), wres, rtol=1e-9, atol=1e-12)
        assert rank.dtype == "int32" and int(rank.item()) == wrank
        np.testing.assert_allclose(s.numpy(), ws, rtol=1e-12, atol=1e-12)


def test_lstsq_rcond_cuts_small_singular_values():
    a = np.diag([1.0, 1e-3, 1e-9])[:, :3]
    b = np.ones((3, 1))
    for rcond in (None, 1e-6, 1e-2, -1):
        x, _, rank, _ = tf.linalg.lstsq(t64(a), t64(b), rcond)
        wx, _, wrank, _ = np.linalg.lstsq(a, b, rcond)
        np.testing.assert_allclose(x.numpy(), wx, rtol=1e-9)
        assert int(rank.item()) == wrank


def test_lstsq_batched_matches_per_matrix():
    a, b = _rng.normal(size=(3, 5, 2)), _rng.normal(size=(3, 5, 2))
    x, res, rank, _ = tf.linalg.lstsq(t64(a), t64(b))
    for i in range(3):
        wx, wres, wrank, _ = np.linalg.lstsq(a[i], b[i])
        np.testing.assert_allclose(x.numpy()[i], wx, rtol=1e-9)
        np.testing.assert_allclose(res.numpy()[i], wres, rtol=1e-9)
        assert int(rank.numpy()[i]) == wrank


def test_pinv_rcond_and_rank_deficiency_match_numpy():
    a = _rng.normal(size=(4, 2)) @ _rng.normal(size=(2, 3))
    for kw in ({}, {"rcond": 1e-10}, {"rtol": 0.5}, {"rtol": None}):
        np.testing.assert_allclose(tf.linalg.pinv(t64(a), **kw).numpy(),
                                   np.linalg.pinv(a, **kw), rtol=1e-9, atol=1e-12)


def test_pinv_gradient_along_rank_preserving_directions():
    # A+ is continuous only where the rank stays: check d/dt pinv(A + t E) for E = U X Vh
    # inside A's row and column spaces against finite differences
    u = np.linalg.qr(_rng.normal(size=(4, 2)))[0]
    vh = np.linalg.qr(_rng.normal(size=(3, 2)))[0].T
    a = u @ np.diag([2.0, 0.7]) @ vh
    e = u @ _rng.normal(size=(2, 2)) @ vh
    w = _rng.normal(size=(3, 4))
    f = lambda a: (tf.linalg.pinv(a) * t64(w)).sum()
    g = tf.grad(f)(t64(a)).numpy()
    h = 1e-6
    fd = (f(t64(a + h * e)).item() - f(t64(a - h * e)).item()) / (2 * h)
    assert abs((g * e).sum() - fd) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("name,f", [
    ("eigh", lambda a: tf.linalg.eigh(a[..., :3, :])),
    ("eigvalsh", lambda a: tf.linalg.eigvalsh(a[..., :3, :])),
    ("svd", lambda a: tf.linalg.svd(a)),
    ("svdvals", tf.linalg.svdvals),
    ("pinv", tf.linalg.pinv),
    ("lstsq", lambda a: tf.linalg.lstsq(a, a[..., :1])),
    ("norm", lambda a: [tf.linalg.norm(a, o, (-2, -1)) for o in ("nuc", 2, 1, "fro")]),
])
def test_float32_stays_float32(name, f):
    a = _rng.normal(size=(2, 4, 3))
    for dt in ("float32", "float64"):
        outs = f(tf.tensor(a, dtype=dt))
        for o in (outs if isinstance(outs, list) else list(outs)):
            assert o.dtype == (dt if o.dtype != "int32" else "int32"), (name, dt, o.dtype)
        g = tf.grad(lambda a: tf.add_n([o.sum() for o in (
            f(a) if isinstance(f(a), list) else list(f(a))) if o.dtype != "int32"]))(
                tf.tensor(a, dtype=dt))
        assert g.dtype == dt


def test_int_input_becomes_float32():
    assert tf.linalg.eigvalsh(tf.tensor([[2, 1], [1, 2]], dtype="int32")).dtype == "float32"
    assert tf.linalg.norm([3, 4]).dtype == "float32"
    assert tf.linalg.norm([3, 4]).item() == pytest.approx(5.0)


def test_norm_matches_numpy_on_every_axis_form():
    x = _rng.normal(size=(3, 4, 5))
    for ord in [None, 2, 1, INF, -INF, 0, 3, -1, 0.5]:
        for axis in (0, -1, (1,)):
            for kd in (False, True):
                got = tf.linalg.norm(t64(x), ord, axis, kd).numpy()
                want = np.linalg.norm(x, ord, axis, kd)
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-12)
    for ord in [None, "fro", "nuc", 2, -2, 1, -1, INF, -INF]:
        for axis in ((0, 1), (1, 0), (2, 0), (-1, -2)):
            for kd in (False, True):
                got = tf.linalg.norm(t64(x), ord, axis, kd).numpy()
                want = np.linalg.norm(x, ord, axis, kd)
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-12)
    for v in (x[0, 0], x[0]):          # axis=None: the shape picks vector or matrix norms
        for ord in [None, 2, 1, INF]:
            np.testing.assert_allclose(tf.linalg.norm(t64(v), ord).numpy(),
                                       np.linalg.norm(v, ord), rtol=1e-12)
    assert tf.linalg.norm(t64(x), keepdims=True).shape == (1, 1, 1)


def test_norm_of_nothing_is_zero_as_numpys():
    for ord, shape, axis in [(None, (0, 3), None), (2, (0,), None), ("nuc", (2, 0, 3), (0, 1)),
                             (INF, (0, 3), None), (3, (2, 0), 1), (2, (0, 3), None)]:
        got = tf.linalg.norm(tf.zeros(shape), ord, axis)
        want = np.linalg.norm(np.zeros(shape), ord, axis)
        assert got.shape == np.shape(want)
        np.testing.assert_array_equal(got.numpy(), want)


def test_norm_subgradient_at_zero_and_tf_norm_unchanged():
    for ord in (None, 2, 3):
        g = tf.grad(lambda x, o=ord: tf.linalg.norm(x, o))(tf.zeros([3], dtype=F64))
        np.testing.assert_array_equal(g.numpy(), 0.0)
    assert tf.linalg.norm is not tf.norm
    assert tf.norm(tf.tensor([3.0, 4.0])).item() == pytest.approx(5.0)


def test_eigh_reads_one_triangle():
    a = _rng.normal(size=(3, 3))
    for uplo, tri in (("L", np.tril), ("U", np.triu)):
        s = tri(a) + tri(a, -1 if uplo == "L" else 1).T
        np.testing.assert_allclose(tf.linalg.eigvalsh(t64(a), uplo).numpy(),
                                   np.linalg.eigvalsh(s), rtol=1e-12)
        g = tf.grad(lambda a, u=uplo: tf.linalg.eigvalsh(a, u).square().sum())(t64(a)).numpy()
        other = np.triu(g, 1) if uplo == "L" else np.tril(g, -1)
        np.testing.assert_array_equal(other, 0.0)
        # sum(w^2) = ||S||_F^2: each off-diagonal entry of the triangle counts twice
        np.testing.assert_allclose(g, 2 * s * (tri(np.full((3, 3), 2.0)) - np.eye(3)),
                                   rtol=1e-10)


# ---------------------------------------------------------------- tf.vmap and tf.jit

def _sym(a):
    return a + tf.transpose(a, list(range(a.rank - 2)) + [a.rank - 1, a.rank - 2])


FUNCTIONS = {
    "eigh": lambda a: (tf.linalg.eigh(_sym(a[..., :3, :])).eigenvectors.square()
                       * tf.linalg.eigvalsh(_sym(a[..., :3, :]))[..., None, :]).sum(),
    "eigvalsh": lambda a: tf.linalg.eigvalsh(a[..., :3, :], "U").sin().sum(),
    "svd": lambda a: (tf.linalg.svd(a)[0][..., :3].square()
                      * tf.linalg.svd(a)[1][..., None, :]).sum(),
    "svdvals": lambda a: tf.linalg.svdvals(a).sin().sum(),
    "pinv": lambda a: tf.linalg.pinv(a).sin().sum(),
    "lstsq": lambda a: (tf.linalg.lstsq(a, a[..., :1] + 1).residuals.sum()
                        + tf.linalg.lstsq(a, a[..., :1] + 1).x.sum()),
    "norm": lambda a: tf.linalg.norm(a, 2, (-2, -1)) + tf.linalg.norm(a, 3, -1).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_vmap_matches_per_example(name):
    f = FUNCTIONS[name]
    a = _rng.normal(size=(3, 4, 3))
    want = np.stack([f(t64(a[i])).numpy() for i in range(3)])
    want_g = np.stack([tf.grad(f)(t64(a[i])).numpy() for i in range(3)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")         # no per-example loop fallback
        got = tf.vmap(f)(t64(a)).numpy()
        got_g = tf.vmap(tf.grad(f))(t64(a)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jit_replays_values_and_gradients(name):
    f = FUNCTIONS[name]
    jf, jg = tf.jit(f), tf.jit(tf.grad(f))
    for i in range(3):              # the first call traces, the others replay
        a = t64(_rng.normal(size=(4, 3)))
        np.testing.assert_allclose(jf(a).numpy(), f(a).numpy(), rtol=1e-12)
        np.testing.assert_allclose(jg(a).numpy(), tf.grad(f)(a).numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_jit_replay_still_checks_degenerate_eigenvalues():
    dep = lambda s: tf.linalg.eigh(s).eigenvectors[:, 0].square().mul(t64([1, 2, 3])).sum()
    jg = tf.jit(tf.grad(dep))
    q = _orthogonal(3)
    jg(t64(q @ np.diag([1.0, 2.0, 3.0]) @ q.T))       # traced on distinct eigenvalues
    with pytest.raises(GradientError, match="eigenvalues 0 and 1 coincide"):
        jg(t64(q @ np.diag([1.0, 1.0, 3.0]) @ q.T))


def test_jit_replay_of_lstsq_residuals_follows_the_rank():
    # residuals are empty for a rank-deficient a: a replay traced at full rank must agree
    b = t64(_rng.normal(size=(4, 1)))
    f = lambda a: tf.linalg.lstsq(a, b).residuals.sum()
    jf, jg = tf.jit(f), tf.jit(tf.grad(f))
    full, low = _rng.normal(size=(4, 2)), np.outer(_rng.normal(size=4), [1.0, 2.0])
    for a in (full, low, full):
        np.testing.assert_allclose(jf(t64(a)).numpy(), f(t64(a)).numpy(), rtol=1e-12)
        np.testing.assert_allclose(jg(t64(a)).numpy(), tf.grad(f)(t64(a)).numpy(), rtol=1e-10)
    assert f(t64(low)).item() == 0.0 and np.abs(tf.grad(f)(t64(full)).numpy()).max() > 0


# ---------------------------------------------------------------- degenerate spectra

def _fd_along(f, a, e, h=1e-6):
    return (f(t64(a + h * e)).item() - f(t64(a - h * e)).item()) / (2 * h)


def _orthogonal(n):
    return np.linalg.qr(_rng.normal(size=(n, n)))[0]


W3 = np.arange(9.0).reshape(3, 3)


def test_eigh_repeated_eigenvalue_basis_free_function_is_differentiated():
    q = _orthogonal(3)
    s = q @ np.diag([1.0, 1.0, 2.0]) @ q.T
    # the projector on the repeated eigenvalue's eigenspace does not depend on its basis
    def f(s):
        v = tf.linalg.eigh(s)[1][:, :2]
        return (tf.mat_mul(v, v, False, True) * t64(W3)).sum()
    g = tf.grad(f)(t64(s)).numpy()
    for _ in range(3):
        e = np.tril(_rng.normal(size=(3, 3)))
        assert (g * e).sum() == pytest.approx(_fd_along(f, s, e), rel=1e-6, abs=1e-8)
    # eigvalsh (and functions of the eigenvalues) are differentiable at any spectrum
    for values in (tf.linalg.eigvalsh, lambda a: tf.linalg.eigh(a).eigenvalues):
        g = tf.grad(lambda a, f=values: f(a).square().sum())(tf.eye(3, dtype=F64))
        np.testing.assert_allclose(g.numpy(), 2 * np.eye(3), atol=1e-12)


def test_eigh_repeated_eigenvalue_basis_dependent_function_raises():
    q = _orthogonal(3)
    s = q @ np.diag([1.0, 1.0, 2.0]) @ q.T
    f = lambda s: tf.linalg.eigh(s)[1][..., 0].square().mul(t64([1.0, 2.0, 3.0])).sum()
    with pytest.raises(GradientError, match=r"eigenvalues 0 and 1 coincide \(1 and 1\).*"
                       r"eigvalsh.*projector"):
        tf.grad(f)(t64(s))
    batch = np.stack([s + np.diag([0.0, 0.5, 1.0]), s])
    with pytest.raises(GradientError, match=r"matrix \[1\] of the batch"):
        tf.grad(f)(t64(batch))


def test_eigh_close_but_distinct_eigenvalues_are_still_differentiated():
    s = np.diag([1.0, 1.0 + 1e-7, 2.0])
    f = lambda s: tf.linalg.eigh(s)[1][:, 0].square().mul(t64([1.0, 2.0, 3.0])).sum()
    g = tf.grad(f)(t64(s)).numpy()
    assert np.isfinite(g).all() and abs(g[1, 0]) == 0.0     # (upper triangle: not read)


def test_svd_repeated_singular_value():
    a = _orthogonal(3) @ np.diag([2.0, 2.0, 1.0]) @ _orthogonal(3)
    def f(a):
        u, _, vh = tf.linalg.svd(a)
        return (tf.mat_mul(u[:, :2], vh[:2]) * t64(W3)).sum()
    g = tf.grad(f)(t64(a)).numpy()
    e = _rng.normal(size=(3, 3))
    assert (g * e).sum() == pytest.approx(_fd_along(f, a, e), rel=1e-6, abs=1e-8)
    with pytest.raises(GradientError, match="singular values 0 and 1 coincide"):
        tf.grad(lambda a: tf.linalg.svd(a)[0][:, 0].square().mul(t64([1, 2, 3])).sum())(t64(a))
    g = tf.grad(lambda a: tf.linalg.svdvals(a).sum())(tf.eye(3, dtype=F64))
    np.testing.assert_allclose(g.numpy(), np.eye(3), atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 2), (2, 4)])
def test_svd_full_matrices_extra_columns(shape):
    a = _rng.normal(size=shape)
    w = _rng.normal(size=(4, 4))
    tall = shape[0] > shape[1]

    def proj(a):        # the projector on the extra columns: basis-free
        u, _, vh = tf.linalg.svd(a)
        q = u[:, 2:] if tall else tf.transpose(vh[2:, :])
        return (tf.mat_mul(q, q, False, True) * t64(w)).sum()
    g = tf.grad(proj)(t64(a)).numpy()
    e = _rng.normal(size=shape)
    assert (g * e).sum() == pytest.approx(_fd_along(proj, a, e), rel=1e-6, abs=1e-8)
    one = (lambda a: tf.linalg.svd(a)[0][:, 3].mul(t64(w[0])).sum()) if tall else \
        (lambda a: tf.linalg.svd(a)[2][3].mul(t64(w[0])).sum())
    with pytest.raises(GradientError, match=("U's last 2 columns" if tall else
                                             "Vh's last 2 rows") + ".*full_matrices=False"):
        tf.grad(one)(t64(a))
    # unused extra columns: nothing flows into them
    g = tf.grad(lambda a: tf.linalg.svd(a)[1].sum())(t64(a))
    np.testing.assert_allclose(g.numpy(), tf.grad(lambda a: tf.linalg.svdvals(a).sum())(
        t64(a)).numpy(), rtol=1e-12)


def test_svd_zero_singular_value_of_a_tall_matrix():
    a = _rng.normal(size=(4, 1)) @ _rng.normal(size=(1, 2))
    g = tf.grad(lambda a: tf.linalg.svdvals(a).sum())(t64(a))      # fine: U diag(dS) Vh
    assert np.isfinite(g.numpy()).all()
    with pytest.raises(GradientError, match="singular value 1 is zero"):
        tf.grad(lambda a: tf.linalg.svd(a, False)[0][:, 1].mul(t64([1, 2, 3, 4])).sum())(
            t64(a))


def test_hessian_of_singular_values_matches_frobenius():
    # sum(s^2) = ||a||_F^2: its Hessian is 2 I, through svdvals' rule twice
    a = t64(_rng.normal(size=(3, 2)))
    h = tf.hessian(lambda a: tf.linalg.svdvals(a).square().sum())(a).numpy()
    np.testing.assert_allclose(h.reshape(6, 6), 2 * np.eye(6), atol=1e-10)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call,cls,msg", [
    (lambda: tf.linalg.eigh(tf.ones([2, 3])), ShapeError, r"eigh: a must be a square matrix"),
    (lambda: tf.linalg.eigvalsh(tf.ones([3])), ShapeError, r"square matrix.*shape \[3\]"),
    (lambda: tf.linalg.eigh(tf.eye(2), "X"), ArgumentError, "UPLO must be 'L'"),
    (lambda: tf.linalg.svd(tf.ones([3])), ShapeError, "reshape a vector to"),
    (lambda: tf.linalg.svd(tf.ones([2, 2]), full_matrices="yes"), ArgumentError,
     "full_matrices"),
    (lambda: tf.linalg.svd(tf.tensor([[1.0, float("nan")], [0.0, 1.0]])),
     np.linalg.LinAlgError, "svd: the matrix contains NaN or Inf"),
    (lambda: tf.linalg.eigh(tf.tensor([[1.0, 0.0], [float("inf"), 1.0]])), KernelError,
     "eigh: the matrix contains NaN or Inf"),
    (lambda: tf.linalg.pinv(tf.eye(2), 0.1, rtol=0.1), ArgumentError, "give only one"),
    (lambda: tf.linalg.pinv(tf.eye(2), "big"), ArgumentError, "rcond must be a number"),
    (lambda: tf.linalg.lstsq(tf.eye(2), tf.ones([2]), float("nan")), ArgumentError,
     "rcond .* must be a number, got nan"),
    (lambda: tf.linalg.norm(tf.ones([3]), 10 ** 400), ArgumentError, "ord must be a number"),
    (lambda: tf.linalg.lstsq(tf.ones([3, 2]), tf.ones([4])), ShapeError,
     "b must have 3 rows"),
    (lambda: tf.linalg.lstsq(tf.ones([3, 2]), tf.ones([2, 2])), ShapeError,
     r"got shape \[2, 2\]"),
    (lambda: tf.linalg.norm(tf.ones([3]), "fro"), ArgumentError,
     "invalid norm order 'fro' for vectors"),
    (lambda: tf.linalg.norm(tf.ones([3, 3]), 3), ArgumentError,
     "invalid norm order 3 for matrices"),
    (lambda: tf.linalg.norm(tf.ones([2, 2, 2]), 2), ShapeError, "give axis"),
    (lambda: tf.linalg.norm(tf.ones([2, 2]), axis=(0, 0)), ArgumentError, "duplicate axes"),
    (lambda: tf.linalg.norm(tf.ones([2, 2, 2]), axis=(0, 1, 2)), ArgumentError,
     "an int or a pair"),
    (lambda: tf.linalg.norm(tf.ones([2]), ord=[1]), ArgumentError, "ord must be a number"),
    (lambda: tf.linalg.norm(tf.ones([2, 2]), axis=[]), ArgumentError, "an int or a pair"),
    (lambda: tf.linalg.eigvalsh(tf.eye(2), np.array([1, 0])), ArgumentError, "UPLO must be"),
])
def test_errors_name_the_cause_and_fix(call, cls, msg):
    with pytest.raises(cls, match=msg):
        call()
