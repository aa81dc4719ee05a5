"""The habits NumPy and PyTorch users bring, on flowgrad tensors (issue 31): ndarray
attributes and methods (.T, .mT, .ndim, .ravel, .astype, .swapaxes, reshape/transpose with
spread-out sizes...), NumPy's advanced indexing (int lists, arrays and tensors, bool masks;
differentiable, repeated indices accumulating), einsum's '...' and length-1 broadcasting,
tf.losses.sparse_softmax_cross_entropy with integer class labels, and tf.memory() as a
mapping. Values against NumPy, gradients against central finite differences in float64 (to
order 2, through tests/opcheck.py), every error path with its message."""
import numpy as np
import pytest
from opcheck import BACKENDS, Case, run_case

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, JitError, ShapeError

L = tf.losses
RNG = np.random.default_rng(31)


def f64(a):
    return tf.tensor(np.asarray(a, dtype=np.float64), dtype="float64")


# ---------------------------------------------------------------- ndarray habits

@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (1, 2, 1, 3)])
def test_T_ndim_ravel_tolist_as_numpy(shape):
    a = RNG.normal(size=shape)
    t = f64(a)
    assert t.ndim == a.ndim
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.ravel().numpy(), a.ravel())
    np.testing.assert_array_equal(t.flatten().numpy(), a.flatten())
    assert t.tolist() == a.tolist()


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), (2, 1, 3, 2)])
def test_mT_swapaxes_as_numpy(shape):
    a = RNG.normal(size=shape)
    t = f64(a)
    np.testing.assert_array_equal(t.mT.numpy(), np.swapaxes(a, -1, -2))
    for i in range(-a.ndim, a.ndim):
        for j in range(-a.ndim, a.ndim):
            np.testing.assert_array_equal(t.swapaxes(i, j).numpy(), a.swapaxes(i, j))


def test_T_mT_swapaxes_gradients():
    x = f64(RNG.normal(size=(2, 3, 4)))
    w, w2 = f64(RNG.normal(size=(4, 3, 2))), f64(RNG.normal(size=(3, 4, 2)))
    for f in (lambda v: (v.T * w).sin(), lambda v: (v.mT.swapaxes(0, 2) * w2).sin()):
        assert tf.debug.check_grads(f, [x], order=2).passed


def test_mT_and_swapaxes_errors():
    with pytest.raises(ShapeError, match=r"x.mT transposes the last two axes, but x has "
                                         r"shape \(3,\) \(rank 1\): use x.T"):
        _ = tf.zeros([3]).mT
    with pytest.raises(ArgumentError, match="swapaxes: axis 3 is out of range for a tensor "
                                            "of rank 2"):
        tf.zeros([2, 3]).swapaxes(0, 3)


def test_astype_copy_item_squeeze_sum():
    x = tf.tensor([1.7, -2.5, 3.0])
    y = x.astype("int32")
    assert y.dtype == "int32" and y.tolist() == [1, -2, 3]          # truncates, as NumPy
    assert x.astype(np.float64).dtype == "float64"
    assert x.astype(float).dtype == "float64"                       # NumPy's float
    assert x.astype(int).dtype == "int32" and x.astype(bool).tolist() == [True, True, True]
    assert f64([1.0]).astype("float32").dtype == "float32"
    c = x.copy()
    assert c is not x and c.tolist() == x.tolist() and c.dtype == x.dtype
    assert tf.tensor([[2.5]]).item() == 2.5
    a = RNG.normal(size=(1, 3, 1))
    t = f64(a)
    np.testing.assert_array_equal(t.squeeze().numpy(), a.squeeze())
    np.testing.assert_array_equal(t.squeeze(0).numpy(), a.squeeze(0))
    np.testing.assert_array_equal(t.squeeze(axis=-1).numpy(), a.squeeze(axis=-1))
    b = RNG.normal(size=(2, 3, 4))
    tb = f64(b)
    for axis in (None, 0, -1, (0, 2)):
        for keepdims in (False, True):
            np.testing.assert_allclose(tb.sum(axis=axis, keepdims=keepdims).numpy(),
                                       b.sum(axis=axis, keepdims=keepdims), rtol=1e-12)
            np.testing.assert_allclose(tb.mean(axis=axis, keepdims=keepdims).numpy(),
                                       b.mean(axis=axis, keepdims=keepdims), rtol=1e-12)
    # the gradient passes through astype between floats, and copy
    g = tf.grad(lambda v: (v.astype("float64").copy() ** 2).sum())(tf.tensor([1.0, 2.0]))
    assert g.dtype == "float32" and g.tolist() == [2.0, 4.0]


def test_astype_unknown_dtype():
    with pytest.raises(DtypeError, match="Unknown dtype 'int64': flowgrad supports"):
        tf.zeros([2]).astype("int64")


def test_reshape_and_transpose_spread_out_as_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = f64(a)
    np.testing.assert_array_equal(t.reshape(4, 6).numpy(), a.reshape(4, 6))
    np.testing.assert_array_equal(t.reshape(4, -1).numpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(t.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.reshape([6, 4]).numpy(), a.reshape([6, 4]))
    np.testing.assert_array_equal(t.reshape((3, 8)).numpy(), a.reshape((3, 8)))
    np.testing.assert_array_equal(t.reshape(shape=[24]).numpy(), a.reshape(24))
    np.testing.assert_array_equal(t.transpose(1, 0, 2).numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(t.transpose([2, 0, 1]).numpy(), a.transpose([2, 0, 1]))
    np.testing.assert_array_equal(t.transpose().numpy(), a.transpose())
    np.testing.assert_array_equal(t.transpose(perm=[0, 2, 1]).numpy(), a.transpose(0, 2, 1))
    with pytest.raises(ArgumentError, match=r"x.reshape\(\): shape given both by position"):
        t.reshape(4, 6, shape=[24])
    with pytest.raises(ShapeError, match=r"Size\(24\) must match the product of shape"):
        t.reshape(5, 5)
    g = tf.grad(lambda v: (v.reshape(4, 6).transpose(1, 0) * f64(np.arange(24.0).reshape(6, 4)))
                .sum())(t)
    np.testing.assert_array_equal(g.numpy(), np.arange(24.0).reshape(6, 4).T.reshape(2, 3, 4))


# ---------------------------------------------------------------- advanced indexing

X = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
B = np.array

KEYS = [
    [1, 0, 1],
    (B([0, -1]),),
    (slice(None), [2, 0, 2]),
    (Ellipsis, [4, 0]),
    (0, slice(None), [1, 2]),                   # int + array parted by a slice: S first
    (slice(None), 0, [1, 2]),                   # adjacent: S in place
    ([0, 1], [2, 0]),
    ([[0], [1]], [0, 2, 1]),                    # arrays broadcast (2, 1) with (3,)
    ([0, 1], slice(None), [2, 0]),
    ([0, 1], None, [2, 0]),
    (slice(None), [0, 1], slice(1, 3), [2, 3]),
    (None, [0, 1], 2),
    (1, [0, 2], 3, slice(None)),
    (B([[1], [0]]),),
    ([],),
    (slice(None), []),
    ([0, 1], [[0], [1], [2]], slice(None), -1),
    (slice(None, None, -1), [0, 2], slice(None, None, 2)),
    ([-1, -2], -1),
    ((0, 1), 1),                                # a tuple inside the key is an index list
    (X > 50,),                                  # masks
    (X[..., 0] > 10,),
    (slice(None), X[0, :, :, 0] > 5),
    (slice(None), X[0, :, :, 1] > 7, 1),
    (Ellipsis, B([True, False, True, False, True])),
    (X[:, 0, 0, 0] > 0, [1, 2], slice(None), 0),
    (np.array(1),),                             # 0-d int arrays: ints, as NumPy reads them
    (slice(None), np.array(-1), np.int64(2)),
    (B([1, 0]), np.array(2)),
]


def _np_key(k):
    return k if isinstance(k, list) else tuple(k)


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_indexing_values_as_numpy(key):
    want = X[_np_key(key)]
    for dtype in ("float64", "float32", "int32"):
        got = tf.tensor(X, dtype=dtype)[key]
        assert got.dtype == dtype and got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_array_equal(got.numpy(), want.astype(got.numpy().dtype))


def test_indexing_with_index_tensors():
    t = f64(X)
    i = tf.tensor([[1, -1], [0, 0]], dtype="int32")
    np.testing.assert_array_equal(t[i].numpy(), X[np.array([[1, -1], [0, 0]])])
    j = tf.tensor([2, -1, 0], dtype="int32")
    np.testing.assert_array_equal(t[:, j].numpy(), X[:, [2, -1, 0]])
    np.testing.assert_array_equal(t[1, j, 3].numpy(), X[1, [2, -1, 0], 3])
    # whole numbers in a float tensor index, as tf.gather takes them (tf.tensor([0, 2]) is
    # float32, as JS numbers are)
    np.testing.assert_array_equal(t[:, tf.tensor([0, 2])].numpy(), X[:, [0, 2]])
    # a bool tensor is a mask; a rank-0 int tensor an int
    np.testing.assert_array_equal(t[t > 100].numpy(), X[X > 100])
    np.testing.assert_array_equal(t[tf.scalar(1, "int32"), [0, 2]].numpy(), X[1, [0, 2]])


def test_indexing_fuzz_against_numpy():
    """Random keys of ints, slices, None, '...', int lists and arrays and masks: the same
    value as NumPy, or both refuse (flowgrad with its own error)."""
    rng = np.random.default_rng(0)
    agree = 0
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=rng.integers(1, 5)))
        x = rng.normal(size=shape)
        key, axis, ell = [], 0, False
        for _ in range(rng.integers(1, len(shape) + 2)):
            n = shape[axis] if axis < len(shape) else 3
            c = rng.integers(0, 8)
            if c == 0:
                key.append(int(rng.integers(-n, n)))
            elif c == 1:
                key.append(slice(None if rng.random() < .5 else int(rng.integers(-n, n)), None,
                                 int(rng.choice([1, 2, -1]))))
            elif c == 2:
                key.append(None)
                continue
            elif c == 3 and not ell:
                key.append(Ellipsis)
                ell = True
                continue
            elif c in (3, 4, 5):
                key.append(rng.integers(-n, n, size=tuple(
                    int(s) for s in rng.integers(1, 3, size=rng.integers(0, 3)))).tolist())
            elif c == 6:
                key.append(rng.integers(-n, n, size=(int(rng.integers(0, 3)),)))
            else:
                key.append(rng.random(n) < 0.5)
            axis += 1
        key = tuple(key)
        try:
            want = x[key]
        except IndexError:
            want = None
        if want is None:
            with pytest.raises((ShapeError, ArgumentError, DtypeError)):
                f64(x)[key]
        else:
            got = f64(x)[key]
            assert got.shape == want.shape, (shape, key)
            np.testing.assert_array_equal(got.numpy(), want, err_msg=str((shape, key)))
            agree += 1
    assert agree > 250          # (most keys are valid: the comparison did happen)


def idx(name, shape, key):
    return Case(f"index[{name}]", lambda x: x[key], lambda x: x[_np_key(key)],
                [(shape, "real")])


INDEX_GRADS = [
    idx("list", (4, 3), [0, 2, 2, 0, 3]),                     # repeated: accumulate
    idx("array-2d", (4, 3), (B([[1], [1], [3]]),)),
    idx("slice+list", (3, 4), (slice(1, None), [3, 0, 3])),
    idx("two-lists", (3, 4), ([0, 2, 0], [1, 1, 1])),
    idx("parted", (2, 3, 4), ([1, 0], slice(None), [3, 3])),
    idx("int+list", (2, 3, 4), (1, slice(None, None, -1), [0, 0, 2])),
    idx("broadcast", (3, 4), ([[0], [2]], [1, 3, 1])),
    idx("mask", (3, 4), (RNG.random((3, 4)) < 0.5,)),
    idx("mask-rows", (3, 4), (B([True, False, True]), slice(None, 3))),
    idx("negative", (5,), ([-1, -5, 0],)),
    idx("0-d array", (3, 4), (np.array(2), slice(1, None))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", INDEX_GRADS, ids=repr)
def test_indexing_gradients(case, backend):
    run_case(case, backend)


def test_repeated_indices_accumulate_their_gradient():
    key = ([0, 2, 2, 0, 0], [1, 1, 1, 3, 1])
    dy = RNG.uniform(0.5, 1.5, size=5)
    g = tf.grad(lambda v: (v[key] * f64(dy)).sum())(f64(np.zeros((3, 4))))
    want = np.zeros((3, 4))
    np.add.at(want, key, dy)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-15)


def test_indexing_under_vmap_and_jit():
    xs = RNG.normal(size=(3, 4, 5))
    t = f64(xs)
    np.testing.assert_array_equal(tf.vmap(lambda v: v[[2, 0], 1:])(t).numpy(),
                                  xs[:, [2, 0], 1:])
    np.testing.assert_array_equal(tf.vmap(lambda v: v[[2, 0], [1, 4]])(t).numpy(),
                                  xs[:, [2, 0], [1, 4]])
    ids = np.array([[0, 3], [2, 2], [1, 0]])
    got = tf.vmap(lambda v, i: v[i, [0, 1]])(t, tf.tensor(ids, dtype="int32"))
    np.testing.assert_array_equal(got.numpy(), np.stack([xs[b][ids[b], [0, 1]]
                                                         for b in range(3)]))
    g = tf.vmap(tf.grad(lambda v: v[[1, 1, 3], 0].sum()))(t)
    want = np.zeros_like(xs)
    want[:, 1, 0], want[:, 3, 0] = 2, 1
    np.testing.assert_array_equal(g.numpy(), want)
    f = tf.jit(lambda v: v[[3, 0], [1, 4]] * 2)
    np.testing.assert_array_equal(f(t[0]).numpy(), 2 * xs[0][[3, 0], [1, 4]])
    np.testing.assert_array_equal(f(t[1]).numpy(), 2 * xs[1][[3, 0], [1, 4]])
    # a mask computed inside is a value the trace cannot replay: jit's own error
    with pytest.raises(JitError, match="reads the value of a tensor it computed"):
        tf.jit(lambda v: v[v > 0])(t[0])


def test_indexing_leaves_no_tensor_behind():
    t = f64(X)
    tf.tidy(lambda: None)
    before = tf.memory().num_tensors
    out = tf.tidy(lambda: t[[0, 1], [2, 0], B([1, 1])] + t[t > 3].sum())
    assert tf.memory().num_tensors == before + 1
    out.dispose()


INDEX_ERRORS = [
    (lambda t: t[[0, 5]], ShapeError,
     "x[key]: index 5 is out of bounds for axis 0 with size 2"),
    (lambda t: t[:, [-4]], ShapeError, "index -4 is out of bounds for axis 1 with size 3"),
    (lambda t: t[[0.5, 1]], DtypeError,
     "arrays used as indices must be of integer (or boolean) type, got float64"),
    (lambda t: t[[[0, 1], [0]]], ShapeError, "the index list is ragged"),
    (lambda t: t[[0, 1], [0, 1, 2]], ShapeError,
     "shape mismatch: the index arrays could not be broadcast together with shapes (2,) (3,)"),
    (lambda t: t[B([True, False, True])], ShapeError,
     "x[key]: a boolean mask of shape (3,) must match the axes it covers, (2,)"),
    (lambda t: t[B(True)], ArgumentError,
     "x[key]: a boolean scalar (True / False) is not an index"),
    (lambda t: t[[0], 0, 0, 0, 0], ShapeError,
     "too many indices for a tensor of shape (2, 3, 4, 5): the key indexes 5 axes"),
    (lambda t: t[[0], ..., ...], ShapeError, "an index can only have a single ellipsis"),
    (lambda t: t[tf.tensor([0.5])], DtypeError,
     "or booleans, got a float32 tensor with fractions: give tf.tensor(index, dtype='int32')"),
    (lambda t: t[[0], 1.5], ArgumentError,
     "Tensors are indexed with ints, slices, None, '...' and int or bool arrays"),
    (lambda t: t["a"], ArgumentError, "Tensors are indexed with ints, slices, None, '...'"),
    (lambda t: t[[0], 3], ShapeError, "index 3 is out of bounds for axis 1 with size 3"),
]


@pytest.mark.parametrize("fn,cls,msg", INDEX_ERRORS, ids=[str(i) for i in range(len(INDEX_ERRORS))])
def test_indexing_errors(fn, cls, msg):
    with pytest.raises(cls) as e:
        fn(f64(X))
    assert msg in str(e.value)


# ---------------------------------------------------------------- einsum: '...' and length 1

def ein(eq, *shapes):
    return Case(f"einsum[{eq}]{[list(s) for s in shapes]}", lambda *xs: tf.einsum(eq, *xs),
                lambda *xs: np.einsum(eq, *xs), [(s, "real") for s in shapes])


EINSUM = [
    ein("...ij,...jk->...ik", (2, 3, 2), (2, 2, 3)),
    ein("...ij,...jk->...ik", (3, 2), (2, 2, 3)),            # one operand without the batch
    ein("...ij,...jk", (1, 3, 2), (2, 2, 3)),                # implicit output, '...' of 1
    ein("ij...,jk...->ik...", (3, 2, 2), (2, 3, 2)),         # '...' last
    ein("i...i", (3, 2, 3)),                                 # '...' inside a diagonal
    ein("a...,a...->...", (2, 1, 3), (2, 4, 1)),
    ein("...j,j...->...", (2, 3), (3, 2)),
    ein("ij,ij->ij", (1, 3), (2, 3)),                        # a named length 1 broadcasts
    ein("ij,jk->ik", (2, 1), (4, 3)),                        # ... summed over its length
    ein("ij,ij->", (2, 1), (1, 3)),
    ein("...ij->...ji", (3, 2)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", EINSUM, ids=repr)
def test_einsum_ellipsis_and_broadcasting(case, backend):
    run_case(case, backend)


def test_einsum_ellipsis_under_vmap_and_jit():
    a, b = RNG.normal(size=(3, 1, 2, 4)), RNG.normal(size=(3, 4, 2))
    ta, tb = f64(a), f64(b)
    eq = "...ij,...jk->...ik"
    want = np.stack([np.einsum(eq, a[i], b[i]) for i in range(3)])
    np.testing.assert_allclose(tf.vmap(lambda x, y: tf.einsum(eq, x, y))(ta, tb).numpy(),
                               want, rtol=1e-12)
    np.testing.assert_allclose(tf.jit(lambda x, y: tf.einsum(eq, x, y))(ta, tb).numpy(),
                               np.einsum(eq, a, b), rtol=1e-12)
    g = tf.vmap(tf.grad(lambda x: tf.einsum("ij,jk->ik", x, f64(np.ones((4, 3)))).sum()))(
        f64(np.ones((2, 5, 1))))
    np.testing.assert_allclose(g.numpy(), np.full((2, 5, 1), 12.0))


@pytest.mark.parametrize("eq", ["i..j", "....", ". ..ij", "i.j"])
def test_einsum_stray_dots(eq):
    with pytest.raises(ArgumentError, match="hold a '.' that is not part of an ellipsis"):
        tf.einsum(eq, tf.zeros([2, 3]))


def test_einsum_length_mismatch_and_diagonal_errors():
    with pytest.raises(ShapeError, match=r"label 'j' has size 2 in one operand and 3 in "
                                         r"operand 1 .* or 1, which broadcasts"):
        tf.einsum("ij,jk->ik", tf.zeros([2, 2]), tf.zeros([3, 2]))
    with pytest.raises(ShapeError, match="a label repeated in an operand takes a diagonal"):
        tf.einsum("ii->i", tf.zeros([1, 3]))


# ---------------------------------------------------------------- sparse softmax cross entropy

def np_sparse_ce(labels, logits):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]


LABELS = np.array([2, 0, 1, 2])
LOGITS = RNG.normal(size=(4, 3)) * 2


@pytest.mark.parametrize("reduction", ["NONE", "SUM", "MEAN", "SUM_BY_NONZERO_WEIGHTS"])
@pytest.mark.parametrize("weights", [None, 0.5, np.array([1.0, 0.0, 2.0, 0.5])])
def test_sparse_softmax_cross_entropy_values(reduction, weights):
    per = np_sparse_ce(LABELS, LOGITS)
    w = np.ones(4) if weights is None else np.broadcast_to(weights, (4,))
    want = {"NONE": per * w, "SUM": (per * w).sum(), "MEAN": (per * w).sum() / w.sum(),
            "SUM_BY_NONZERO_WEIGHTS": (per * w).sum() / (w != 0).sum()}[reduction]
    got = L.sparse_softmax_cross_entropy(tf.tensor(LABELS, dtype="int32"), f64(LOGITS),
                                         None if weights is None else f64(weights),
                                         reduction=reduction)
    assert got.dtype == "float64"
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    # the same as the one-hot loss
    onehot = np.eye(3)[LABELS]
    dense = L.softmax_cross_entropy(f64(onehot), f64(LOGITS),
                                    None if weights is None else f64(weights),
                                    reduction=reduction)
    np.testing.assert_allclose(got.numpy(), dense.numpy(), rtol=1e-12)


def test_sparse_softmax_cross_entropy_label_forms_and_dtypes():
    want = np_sparse_ce(LABELS, LOGITS).mean()
    x = f64(LOGITS)
    for labels in (LABELS.tolist(), LABELS, tf.tensor(LABELS), tf.tensor(LABELS[:, None]),
                   LABELS[:, None].astype(np.int64)):
        np.testing.assert_allclose(L.sparse_softmax_cross_entropy(labels, x).item(), want,
                                   rtol=1e-12)
    y32 = L.sparse_softmax_cross_entropy(LABELS, tf.tensor(LOGITS.astype(np.float32)))
    assert y32.dtype == "float32"
    np.testing.assert_allclose(y32.item(), want, rtol=1e-5)
    # a sequence: labels (batch, time), logits (batch, time, classes); one example alone
    seq, lab = RNG.normal(size=(2, 3, 4)), np.array([[0, 3, 1], [2, 2, 0]])
    np.testing.assert_allclose(
        L.sparse_softmax_cross_entropy(lab, f64(seq), reduction="NONE").numpy(),
        np_sparse_ce(lab, seq), rtol=1e-12)
    np.testing.assert_allclose(L.sparse_softmax_cross_entropy(1, f64(seq[0, 0])).item(),
                               np_sparse_ce(np.array(1), seq[0, 0]), rtol=1e-12)
    assert L.sparseSoftmaxCrossEntropy is L.sparse_softmax_cross_entropy


def test_sparse_softmax_cross_entropy_gradient_is_softmax_minus_onehot():
    g = tf.grad(lambda x: L.sparse_softmax_cross_entropy(LABELS, x, reduction="SUM"))(
        f64(LOGITS))
    p = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
    np.testing.assert_allclose(g.numpy(), p - np.eye(3)[LABELS], rtol=1e-12, atol=1e-14)


def test_sparse_softmax_cross_entropy_under_jit_and_vmap():
    """Labels traced by jit or batched by vmap cannot be read: the loss runs on ops alone,
    and a row whose label is not a class index gets NaN (eagerly, an error)."""
    x = RNG.normal(size=(3, 4, 5))
    y = np.array([[0, 1, 2, 3], [4, 4, 0, 1], [2, 2, 2, 2]])
    f = tf.jit(lambda a, b: L.sparse_softmax_cross_entropy(b, a))
    for i in range(3):
        np.testing.assert_allclose(f(f64(x[i]), tf.tensor(y[i], dtype="int32")).item(),
                                   np_sparse_ce(y[i], x[i]).mean(), rtol=1e-12)
    assert np.isnan(f(f64(x[0]), tf.tensor([0, 1, 5, 0], dtype="int32")).item())
    got = tf.vmap(lambda a, b: L.sparse_softmax_cross_entropy(b, a, reduction="NONE"))(
        f64(x), tf.tensor([[0, 1, 2, 3], [4, -1, 0, 1], [2, 2, 2, 2.5]]))
    want = np_sparse_ce(np.clip(y, 0, 4), x)
    want[1, 1] = want[2, 3] = np.nan
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    # per-example gradients: vmap of grad, against the softmax - one_hot rule
    g = tf.vmap(lambda a, b: tf.grad(lambda v: L.sparse_softmax_cross_entropy(b, v))(a))(
        f64(x), tf.tensor(y, dtype="int32"))
    p = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    np.testing.assert_allclose(g.numpy(), (p - np.eye(5)[y]) / 4, rtol=1e-12, atol=1e-15)


def test_sparse_softmax_cross_entropy_with_masked_classes():
    """A logit of -inf (a class masked out) is no NaN: the loss and its gradient ignore it."""
    m = np.array([[0.5, -np.inf, 1.0], [2.0, 0.0, -np.inf]])
    loss = L.sparse_softmax_cross_entropy([0, 1], f64(m))
    z = np.exp(np.array([[0.5, 1.0], [2.0, 0.0]]))
    want = -np.log(np.array([z[0, 0] / z[0].sum(), z[1, 1] / z[1].sum()]))
    np.testing.assert_allclose(loss.item(), want.mean(), rtol=1e-12)
    g = tf.grad(lambda v: L.sparse_softmax_cross_entropy([0, 1], v))(f64(m))
    assert np.all(np.isfinite(g.numpy())) and g.numpy()[0, 1] == 0 and g.numpy()[1, 2] == 0


SPARSE_GRADS = [
    Case("sparse_ce[mean]", lambda x: L.sparse_softmax_cross_entropy(LABELS, x),
         lambda x: np_sparse_ce(LABELS, x).mean(), [((4, 3), "real")]),
    Case("sparse_ce[none]",
         lambda x: L.sparse_softmax_cross_entropy(LABELS, x, reduction="NONE"),
         lambda x: np_sparse_ce(LABELS, x), [((4, 3), "real")]),
    Case("sparse_ce[weights]",
         lambda x: L.sparse_softmax_cross_entropy(LABELS, x, tf.tensor([1, 0, 2, 1.0])),
         lambda x: (np_sparse_ce(LABELS, x) * [1, 0, 2, 1]).sum() / 3, [((4, 3), "real")]),
    Case("sparse_ce[seq]",
         lambda x: L.sparse_softmax_cross_entropy([[1, 0], [0, 0]], x, reduction="SUM"),
         lambda x: np_sparse_ce(np.array([[1, 0], [0, 0]]), x).sum(), [((2, 2, 2), "real")]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SPARSE_GRADS, ids=repr)
def test_sparse_softmax_cross_entropy_gradients(case, backend):
    run_case(case, backend)


@pytest.mark.extra("torch", "oracle")
def test_sparse_softmax_cross_entropy_against_pytorch():
    import torch
    x = RNG.normal(size=(5, 4))
    y = np.array([3, 0, 1, 1, 2])
    w = np.array([0.2, 1.0, 0.0, 3.0, 1.0])
    tx = torch.tensor(x, requires_grad=True)
    tl = (torch.nn.functional.cross_entropy(tx, torch.tensor(y), reduction="none")
          * torch.tensor(w)).sum()
    (tg,) = torch.autograd.grad(tl, tx, create_graph=True)
    (th,) = torch.autograd.grad((tg * torch.tensor(x)).sum(), tx)
    f = lambda v: L.sparse_softmax_cross_entropy(y, v, f64(w), reduction="SUM")
    np.testing.assert_allclose(f(f64(x)).item(), tl.item(), rtol=1e-12)
    g = tf.grad(f)(f64(x))
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-12)
    h = tf.grad(lambda v: (tf.grad(f)(v) * f64(x)).sum())(f64(x))
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-10, atol=1e-14)


SPARSE_ERRORS = [
    (lambda: L.sparse_softmax_cross_entropy([0, 3], tf.zeros([2, 3])), ArgumentError,
     ("sparse_softmax_cross_entropy: label 3 is out of range: logits of shape [2, 3] have 3 "
      "classes, so labels must be in [0, 2].")),
    (lambda: L.sparse_softmax_cross_entropy([-1, 0], tf.zeros([2, 3])), ArgumentError,
     "label -1 is out of range"),
    (lambda: L.sparse_softmax_cross_entropy([0.5, 1], tf.zeros([2, 3])), DtypeError,
     "labels must be whole class indices, got 0.5"),
    (lambda: L.sparse_softmax_cross_entropy([True, False], tf.zeros([2, 3])), DtypeError,
     "labels must hold integer class indices (int32), got a bool tensor"),
    (lambda: L.sparse_softmax_cross_entropy([0, 1, 2], tf.zeros([2, 3])), ShapeError,
     ("labels of shape [3] do not match logits of shape [2, 3]: give one class index per row "
      "of logits, labels of shape [2]")),
    (lambda: L.sparse_softmax_cross_entropy(tf.zeros([2, 3]), tf.zeros([2, 3])), ShapeError,
     "labels of the logits' shape are one-hot rows: use tf.losses.softmax_cross_entropy"),
    (lambda: L.sparse_softmax_cross_entropy(0, tf.scalar(1.0)), ShapeError,
     "logits must have a class axis (rank >= 1), got a scalar"),
    (lambda: L.sparse_softmax_cross_entropy([0], tf.zeros([1, 3]), reduction="bad"),
     ArgumentError, "Unknown reduction: 'bad'"),
    (lambda: L.softmax_cross_entropy(tf.tensor([0, 2], dtype="int32"), tf.zeros([2, 3])),
     ShapeError, ("For integer class labels (one per example), use "
                  "tf.losses.sparse_softmax_cross_entropy(labels, logits), or "
                  "tf.one_hot(labels, 3).")),
]


@pytest.mark.parametrize("fn,cls,msg", SPARSE_ERRORS,
                         ids=[str(i) for i in range(len(SPARSE_ERRORS))])
def test_sparse_softmax_cross_entropy_errors(fn, cls, msg):
    with pytest.raises(cls) as e:
        fn()
    assert msg in str(e.value)


# ---------------------------------------------------------------- tf.memory() as a mapping

def test_memory_is_a_mapping():
    m = tf.memory()
    keys = ["unreliable", "reasons", "num_tensors", "num_data_buffers", "num_bytes"]
    assert m.keys() == keys and list(m) == keys and len(m) == 5
    assert m.values() == [m.unreliable, m.reasons, m.num_tensors, m.num_data_buffers,
                          m.num_bytes]
    assert m.items() == list(zip(keys, m.values()))
    assert dict(m) == dict(m.items()) and dict(m)["num_tensors"] == m.num_tensors
    assert "num_tensors" in m and "numTensors" in m and "num_bytes_in_gpu" not in m
    assert 0 not in m and None not in m
    assert m.get("numBytes") == m.num_bytes and m.get("nope") is None and m.get("x", 7) == 7
    assert m["numDataBuffers"] == m.num_data_buffers == m.numDataBuffers
    with pytest.raises(KeyError, match="tf.memory\\(\\) has no field 'nope' \\(it has "
                                       "unreliable, reasons, num_tensors"):
        m["nope"]


def test_memory_items_count_a_new_tensor():
    before = dict(tf.memory().items())
    t = tf.tensor([1.0, 2.0, 3.0])
    after = dict(tf.memory().items())
    assert after["num_tensors"] - before["num_tensors"] == 1
    assert after["num_bytes"] - before["num_bytes"] == 12
    t.dispose()
