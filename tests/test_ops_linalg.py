"""Linear algebra beyond mat_mul: einsum (against np.einsum, gradients to order 2, the
vectorised jacobian path), qr (against a NumPy port of TF.js's Householder algorithm:
values and signs; gradients of q and r to order 2) and gram_schmidt; every error path."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import ArgumentError, GradientError, ShapeError
from opcheck import BACKENDS, Case, run_case


# ---------------------------------------------------------------- einsum

def ein(eq, *shapes, ref=None, order=2):
    return Case(f"einsum[{eq}]{[list(s) for s in shapes]}",
                lambda *xs: tf.einsum(eq, *xs),
                ref or (lambda *xs: np.einsum(eq, *xs)),
                [(s, "real") for s in shapes], order)


EINSUM = [
    ein("ij,jk->ik", (2, 3), (3, 4)),                    # matmul
    ein("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),           # batched matmul
    ein("i,j->ij", (3,), (2,)),                          # outer
    ein("i,i->", (4,), (4,)),                            # dot
    ein("ij,ij->ij", (2, 3), (2, 3)),                    # elementwise
    ein("ii->", (3, 3)),                                 # trace
    ein("ii", (3, 3)),                                   # trace, implicit output
    ein("ii->i", (3, 3)),                                # diagonal
    ein("bii->bi", (2, 3, 3)),                           # batched diagonal
    ein("iij,j->i", (2, 2, 3), (3,)),                    # repeat in one operand + contraction
    ein("iii->i", (2, 2, 2)),                            # a label three times
    ein("ij->ji", (2, 3)),                               # transpose
    ein("ij->", (2, 3)),                                 # sum
    ein("ij->j", (2, 3)),                                # sum of an axis
    ein("ij,jk", (2, 3), (3, 2)),                        # implicit output: 'ik'
    ein("ba,Ab", (2, 3), (4, 2)),                        # implicit, mixed case: 'Aa'
    ein("ij,jk,kl->il", (2, 3), (3, 2), (2, 2)),         # three operands
    ein("i,i,i->i", (3,), (3,), (3,)),
    ein(",ij->ij", (), (2, 3)),                          # scalar operand
    ein("...ij,...jk->...ik", (2, 1, 2, 3), (4, 3, 2)),  # '...' broadcasting batch axes
    ein("...i->...", (2, 3, 2)),
    ein("i...->...i", (2, 3, 2)),
    ein("...,...->...", (3, 1), (1, 2)),
    ein("...ii->...i", (2, 3, 3)),
    ein("...i->i", (2, 3, 4), ref=lambda x: x.sum((0, 1))),   # '...' axes summed out
    ein("...", (2, 3)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", EINSUM, ids=repr)
def test_einsum(case, backend):
    run_case(case, backend)


def test_einsum_int_and_promotion():
    a = tf.tensor([[1, 2], [3, 4]], dtype="int32")
    y = tf.einsum("ij,jk->ik", a, a)
    assert y.dtype == "int32" and y.array_sync() == [[7, 10], [15, 22]]
    z = tf.einsum("i,i->", tf.tensor([1, 2], dtype="int32"), tf.tensor([0.5, 0.25]))
    assert z.dtype == "float32" and z.item() == 1.0
    b = tf.einsum("ij", tf.tensor([[True, False]]))
    assert b.dtype == "int32" and b.array_sync() == [[1, 0]]


def test_einsum_views_are_copies():
    # NumPy returns views for transposes and diagonals: the output owns its buffer
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    for eq in ("ij->ji", "ii->i", "ij->ij"):
        y = tf.einsum(eq, x)
        assert not np.shares_memory(y.numpy(), x.numpy())
        x2 = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
        y2 = tf.einsum(eq, x2)
        x2.dispose()
        np.testing.assert_array_equal(y2.numpy(), np.einsum(eq, np.array([[1.0, 2], [3, 4]])))


def test_einsum_whitespace_and_same_tensor_twice():
    x = tf.tensor([1.0, 2.0, 3.0])
    assert tf.einsum(" i , i -> ", x, x).item() == 14.0
    np.testing.assert_allclose(tf.grad(lambda v: tf.einsum("i,i->", v, v))(x).numpy(),
                               [2, 4, 6])


@pytest.fixture(params=BACKENDS)
def backend(request):
    prev = tf.set_backend(request.param)
    yield request.param
    tf.set_backend(prev)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 2)]), ("ii->i", [(3, 3)]),
                                       ("ij->i", [(2, 3)]), ("...i,i->...", [(2, 1, 3), (3,)])])
def test_einsum_jacobian(eq, shapes, backend):
    # one vectorised backward pass (einsum's rule takes a batch of cotangents, whose axis
    # broadcasts against length-1 axes: the generic einsum's squeeze path)
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=s) for s in shapes]
    others = [tf.tensor(a, dtype="float64") for a in arrays[1:]]
    jac = tf.jacobian(lambda x: tf.einsum(eq, x, *others))(tf.tensor(arrays[0], dtype="float64"))
    y = np.einsum(eq, *arrays)
    want = np.zeros(y.shape + arrays[0].shape)
    for j in np.ndindex(arrays[0].shape):
        e = np.zeros(arrays[0].shape)
        e[j] = 1
        want[(...,) + j] = np.einsum(eq, e, *arrays[1:])
    np.testing.assert_allclose(jac.numpy(), want, atol=1e-12)


def test_einsum_third_order(backend):
    # trace(x x x) is a cubic: d/dx = 3 (x²)ᵀ, and the third derivative is constant
    x = tf.tensor([[1.0, 2.0], [0.5, -1.0]], dtype="float64")
    f = lambda v: tf.einsum("ij,jk,ki->", v, v, v)   # noqa: E731
    g = tf.grad(f)(x).numpy()
    np.testing.assert_allclose(g, 3 * (x.numpy() @ x.numpy()).T)
    d3 = tf.grad(lambda v: tf.grad(lambda w: tf.grad(f)(w).sum())(v).sum())(x).numpy()
    # sum(3 (v v)ᵀ) has gradient 3 (1 1ᵀ vᵀ + vᵀ 1 1ᵀ), whose sum has gradient 3·(2+2)
    np.testing.assert_allclose(d3, np.full((2, 2), 12.0))


def einsum_err(id_, fn, cls, msg):
    return pytest.param(fn, cls, msg, id=id_)


M = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
V = tf.tensor([1.0, 2.0, 3.0])

EINSUM_ERRORS = [
    einsum_err("not-str", lambda: tf.einsum(3, M), ArgumentError,
               "einsum: equation must be a string like 'ij,jk->ik', got int"),
    einsum_err("two-arrows", lambda: tf.einsum("ij->ji->ij", M), ArgumentError,
               'einsum: Equation must contain exactly one arrow ("->"), got \'ij->ji->ij\''),
    einsum_err("count", lambda: tf.einsum("ij,jk->ik", M), ArgumentError,
               "einsum: Expected 2 input tensors, received 1 (equation 'ij,jk->ik')"),
    einsum_err("none", lambda: tf.einsum("ij"), ArgumentError,
               "einsum: no input tensors given for 'ij'"),
    einsum_err("bad-char", lambda: tf.einsum("i1->i", M), ArgumentError,
               "einsum: invalid subscripts 'i1' in 'i1->i': use the letters a-z and A-Z, and "
               "at most one '...' per operand"),
    einsum_err("two-ellipses", lambda: tf.einsum("...i...", M), ArgumentError,
               "einsum: invalid subscripts '...i...'"),
    einsum_err("rank", lambda: tf.einsum("ijk->i", M), ShapeError,
               "einsum: operand 0 has shape [2, 2] (rank 2) but its subscripts 'ijk' name 3 "
               "axes; add '...' to broadcast over the rest"),
    einsum_err("rank-ellipsis", lambda: tf.einsum("ijk...->i", M), ShapeError,
               "einsum: operand 0 has shape [2, 2] (rank 2) but its subscripts 'ijk...' name 3 "
               "axes"),
    einsum_err("label-size", lambda: tf.einsum("ij,jk->ik", M, tf.ones([3, 2])), ShapeError,
               "einsum: label 'j' has size 2 in one operand and 3 in operand 1 (shape [3, 2]): "
               "a label names one length (equation 'ij,jk->ik')"),
    einsum_err("diag-size", lambda: tf.einsum("ii->i", tf.ones([2, 3])), ShapeError,
               "einsum: label 'i' has size 2 in one operand and 3 in operand 0"),
    einsum_err("ellipsis-broadcast", lambda: tf.einsum("...,...->...", tf.ones([2]), V),
               ShapeError, "einsum: the '...' axes of the operands do not broadcast (shapes "
               "[[2], [3]], equation '...,...->...')"),
    einsum_err("output-label", lambda: tf.einsum("ij->k", M), ArgumentError,
               "einsum: Output subscripts contain the label k not present in the input "
               "subscripts."),
    einsum_err("output-repeat", lambda: tf.einsum("ij->ii", M), ArgumentError,
               "einsum: the output subscripts 'ii' repeat a label"),
    einsum_err("not-tensor", lambda: tf.einsum("i", "abc"), Exception, "einsum"),
]


@pytest.mark.parametrize("fn,cls,msg", EINSUM_ERRORS)
def test_einsum_errors(fn, cls, msg):
    with pytest.raises(cls) as e:
        fn()
    assert msg in str(e.value)


# ---------------------------------------------------------------- qr

def tfjs_qr2d(x, full=False):
    """TF.js's qr2d (Householder, tfjs-core/src/ops/linalg/qr.ts), ported to NumPy."""
    m, n = x.shape
    q, r = np.eye(m), x.astype(np.float64).copy()
    for j in range(min(m, n)):
        col = r[j:, j:j + 1]
        nrm = np.linalg.norm(col)
        s = -1.0 if r[j, j] > 0 else 1.0
        u1 = r[j, j] - s * nrm
        w = np.concatenate([[[1.0]], col[1:] / u1], 0)
        tau = -s * u1 / nrm
        r[j:, :] -= (tau * w) @ (w.T @ r[j:, :])
        q[:, j:] -= (q[:, j:] @ w) @ (tau * w).T
    if not full and m > n:
        q, r = q[:, :n], r[:n, :n]
    return q, r


def tfjs_qr(x, full=False):
    """Batched: each matrix of the last two axes (TF.js itself only manages square ones)."""
    lead = x.shape[:-2]
    pairs = [tfjs_qr2d(x[i], full) for i in np.ndindex(lead)]
    q = np.stack([p[0] for p in pairs]).reshape(lead + pairs[0][0].shape)
    r = np.stack([p[1] for p in pairs]).reshape(lead + pairs[0][1].shape)
    return [q, r]


def qr_case(shape, full=False, order=2):
    return Case(f"qr{list(shape)}{'-full' if full else ''}",
                lambda x: list(tf.linalg.qr(x, full)), lambda x: tfjs_qr(x, full),
                [(shape, "real")], order, f32_rtol=2e-4)


QR = [qr_case((3, 3)), qr_case((4, 2)), qr_case((2, 4)), qr_case((1, 1)), qr_case((3, 1)),
      qr_case((1, 3)), qr_case((2, 3, 3)), qr_case((2, 4, 3)), qr_case((2, 1, 2, 3)),
      qr_case((2, 4), full=True), qr_case((3, 3), full=True),
      qr_case((4, 2), full=True, order=-1)]    # full q with m > n: forward only


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", QR, ids=repr)
def test_qr(case, backend):
    run_case(case, backend)


@pytest.mark.parametrize("shape,full", [((5, 3), False), ((5, 3), True), ((3, 5), False),
                                        ((3, 3), False), ((2, 4, 4), False)])
def test_qr_properties(shape, full, backend):
    x = np.random.default_rng(3).normal(size=shape)
    q, r = (t.numpy() for t in tf.linalg.qr(tf.tensor(x, dtype="float64"), full))
    k = q.shape[-1]
    np.testing.assert_allclose(q @ r, x, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2]
                                                                       + (k, k)), atol=1e-12)
    np.testing.assert_array_equal(np.tril(r, -1), 0)


def test_qr_tfjs_signs_fixed_points(backend):
    # TF.js reflects even a column that is already zero below the pivot: qr(I) = (-I, -I)
    q, r = tf.linalg.qr(tf.eye(3))
    np.testing.assert_array_equal(q.numpy(), -np.eye(3))
    np.testing.assert_array_equal(r.numpy(), -np.eye(3))
    # an upper triangular input: every diagonal sign flips, as in TF.js
    u = np.array([[2.0, 1.0], [0.0, -3.0]])
    q, r = tf.linalg.qr(tf.tensor(u))
    np.testing.assert_allclose(r.numpy(), [[-2, -1], [0, 3]])
    np.testing.assert_allclose(q.numpy(), -np.eye(2))
    q, r = tf.linalg.qr(tf.tensor([[1.0, 2.0], [3.0, 4.0]]))   # TF.js's doc example
    np.testing.assert_allclose(r.numpy(), tfjs_qr2d(np.array([[1.0, 2], [3, 4]]))[1], rtol=1e-6,
                               atol=1e-6)
    assert r.numpy()[1, 1] > 0      # LAPACK alone would give -0.632...


def test_qr_dtypes(backend):
    q, r = tf.linalg.qr(tf.tensor([[1, 2], [3, 4]], dtype="int32"))
    assert q.dtype == r.dtype == "float32"
    q, r = tf.linalg.qr(tf.ones([2, 2], "float64"))
    assert q.dtype == "float64"


def test_qr_full_gradient(backend):
    x = tf.tensor(np.random.default_rng(4).normal(size=(4, 2)), dtype="float64")
    # r (and q's first n columns) are functions of x: differentiable
    g = tf.grad(lambda v: tf.linalg.qr(v, True)[1].sum())(x)
    g_red = tf.grad(lambda v: tf.linalg.qr(v)[1].sum())(x)
    np.testing.assert_allclose(g.numpy(), g_red.numpy(), atol=1e-12)
    g = tf.grad(lambda v: tf.linalg.qr(v, True)[0][:, :2].sum())(x)
    g_red = tf.grad(lambda v: tf.linalg.qr(v)[0].sum())(x)
    np.testing.assert_allclose(g.numpy(), g_red.numpy(), atol=1e-12)
    with pytest.raises(GradientError) as e:
        tf.grad(lambda v: tf.linalg.qr(v, True)[0].sum())(x)
    assert ("qr(x, full_matrices=True) of a 4x2 matrix (m > n) is not differentiable with "
            "respect to q's last 2 columns: they are any orthonormal basis of the complement "
            "of x's columns, not a function of x. Use full_matrices=False") in str(e.value)


def test_qr_rank_error():
    with pytest.raises(ShapeError) as e:
        tf.linalg.qr(V)
    assert str(e.value) == "qr() requires input tensor to have a rank >= 2, but got rank 1"


def test_qr_camel_case():
    assert tf.linalg.qr is tf.linalg.qr and tf.linalg.gramSchmidt is tf.linalg.gram_schmidt


# ---------------------------------------------------------------- gram_schmidt

def gs_ref(x):
    """Orthonormal rows spanning the same flags: QR of xᵀ with r's diagonal made positive."""
    q, r = np.linalg.qr(x.T)
    return (q * np.sign(np.diag(r))).T


GS = [
    Case("gram_schmidt[2d]", tf.linalg.gram_schmidt, gs_ref, [((3, 4), "real")]),
    Case("gram_schmidt[square]", tf.linalg.gram_schmidt, gs_ref, [((3, 3), "real")]),
    Case("gram_schmidt[list]", lambda a, b: tf.linalg.gram_schmidt([a, b]),
         lambda a, b: list(gs_ref(np.stack([a, b]))), [((3,), "real"), ((3,), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", GS, ids=repr)
def test_gram_schmidt(case, backend):
    run_case(case, backend)


def test_gram_schmidt_properties():
    x = np.random.default_rng(5).normal(size=(4, 6))
    y = tf.linalg.gram_schmidt(tf.tensor(x, dtype="float64")).numpy()
    np.testing.assert_allclose(y @ y.T, np.eye(4), atol=1e-12)
    ys = tf.linalg.gram_schmidt([tf.tensor([3.0, 4.0]), tf.tensor([1.0, 0.0])])
    assert isinstance(ys, list) and len(ys) == 2
    np.testing.assert_allclose(ys[1].numpy(), [0.8, -0.6], atol=1e-6)


@pytest.mark.parametrize("fn,cls,msg", [
    (lambda: tf.linalg.gram_schmidt([]), ArgumentError,
     "Gram-Schmidt process: input must not be null, undefined, or empty"),
    (lambda: tf.linalg.gram_schmidt([V, tf.ones([2])]), ShapeError,
     "Gram-Schmidt: Non-unique lengths found in the input vectors: (2 vs. 3)"),
    (lambda: tf.linalg.gram_schmidt([M]), ShapeError,
     "Gram-Schmidt: xs[0] must be a 1-D tensor, got shape [2, 2]"),
    (lambda: tf.linalg.gram_schmidt(V), ShapeError,
     "Gram-Schmidt: xs must be a list of 1-D tensors or a 2-D tensor, got a tensor of rank 1"),
    (lambda: tf.linalg.gram_schmidt(tf.ones([3, 2])), ShapeError,
     "Gram-Schmidt: Number of vectors (3) exceeds number of dimensions (2)."),
])
def test_gram_schmidt_errors(fn, cls, msg):
    with pytest.raises(cls) as e:
        fn()
    assert str(e.value) == msg
