"""Property-based tests (hypothesis): broadcasting, dtype promotion, reductions over any
axes, and shape ops against NumPy; gradients of broadcast inputs keep their input's shape."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowgrad as tf

SETTINGS = settings(max_examples=40, deadline=None)
floats = st.floats(-3, 3, allow_nan=False, width=32)


@st.composite
def broadcast_pair(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    max_side=3))
    a = draw(hnp.arrays(np.float64, shapes.input_shapes[0], elements=floats))
    b = draw(hnp.arrays(np.float64, shapes.input_shapes[1], elements=floats))
    return a, b


@SETTINGS
@given(broadcast_pair(), st.sampled_from(["add", "sub", "mul", "maximum", "minimum",
                                          "squared_difference"]))
def test_broadcast_forward_and_gradient_shapes(pair, op):
    a, b = pair
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum, "squared_difference": lambda x, y: (x - y) ** 2}[op]
    ta, tb = tf.tensor(a, dtype="float64"), tf.tensor(b, dtype="float64")
    out = getattr(tf, op)(ta, tb)
    np.testing.assert_allclose(out.numpy(), ref(a, b))
    ga, gb = tf.grads(lambda x, y: getattr(tf, op)(x, y).sum(), allow_unconnected=True)([ta, tb])
    assert ga.shape == a.shape and gb.shape == b.shape


@SETTINGS
@given(broadcast_pair())
def test_broadcast_gradient_of_product_is_reduced_other_operand(pair):
    a, b = pair
    ga, gb = tf.grads(lambda x, y: (x * y).sum())([tf.tensor(a, dtype="float64"),
                                                   tf.tensor(b, dtype="float64")])
    full = np.broadcast_shapes(a.shape, b.shape)

    def reduce_to(g, shape):
        g = np.broadcast_to(g, full)
        lead = len(full) - len(shape)
        g = g.sum(tuple(range(lead)))
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
        return g.sum(axes, keepdims=True).reshape(shape)
    np.testing.assert_allclose(ga.numpy(), reduce_to(b, a.shape))
    np.testing.assert_allclose(gb.numpy(), reduce_to(a, b.shape))


DT = ["bool", "int32", "float32", "float64"]


@SETTINGS
@given(st.sampled_from(DT), st.sampled_from(DT))
def test_promotion_is_the_max_of_the_chain(da, db):
    a = tf.tensor([1, 0, 1], dtype=da)
    b = tf.tensor([1, 1, 0], dtype=db)
    want = max(da, db, key=DT.index)
    if want == "bool":
        assert (a.logical_or(b)).dtype == "bool"
    else:
        s = a + b
        assert s.dtype == want
        assert s.numpy().tolist() == [2, 1, 1]


@st.composite
def array_and_axes(draw):
    x = draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=4, max_side=3),
                        elements=floats))
    axes = draw(st.lists(st.integers(-x.ndim, x.ndim - 1), unique_by=lambda a: a % x.ndim,
                         max_size=x.ndim))
    return x, axes


@SETTINGS
@given(array_and_axes(), st.booleans(), st.sampled_from(["sum", "mean", "max", "min", "prod"]))
def test_reductions_match_numpy(xa, keep, op):
    x, axes = xa
    axis = tuple(a % x.ndim for a in axes) if axes else None
    got = getattr(tf, op)(tf.tensor(x, dtype="float64"), axes or None, keep)
    want = getattr(np, op)(x, axis=axis, keepdims=keep)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    g = tf.grad(lambda t: getattr(tf, op)(t, axes or None, keep).sum())(
        tf.tensor(x, dtype="float64"))
    assert g.shape == x.shape


@SETTINGS
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=4, max_side=4),
                  elements=floats), st.data())
def test_transpose_reshape_roundtrip(x, data):
    perm = data.draw(st.permutations(range(x.ndim)))
    t = tf.tensor(x, dtype="float64")
    np.testing.assert_array_equal(tf.transpose(t, perm).numpy(), x.transpose(perm))
    back = tf.transpose(tf.transpose(t, perm), list(np.argsort(perm)))
    np.testing.assert_array_equal(back.numpy(), x)
    np.testing.assert_array_equal(t.reshape([-1]).reshape(list(x.shape)).numpy(), x)


@SETTINGS
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
                  elements=floats), st.data())
def test_slice_and_pad_are_adjoint(x, data):
    begin = [data.draw(st.integers(0, s - 1)) for s in x.shape]
    size = [data.draw(st.integers(1, s - b)) for s, b in zip(x.shape, begin)]
    y = data.draw(hnp.arrays(np.float64, tuple(size), elements=floats))
    t, ty = tf.tensor(x, dtype="float64"), tf.tensor(y, dtype="float64")
    # <slice(x), y> = <x, pad(y)>: the gradient of the left side is pad(y)
    g = tf.grad(lambda t: (tf.slice(t, begin, size) * ty).sum())(t)
    pads = [(b, s - b - n) for b, n, s in zip(begin, size, x.shape)]
    np.testing.assert_array_equal(g.numpy(), np.pad(y, pads))
    np.testing.assert_array_equal(tf.slice(t, begin, size).numpy(),
                                  x[tuple(slice(b, b + n) for b, n in zip(begin, size))])


@SETTINGS
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=5),
                  elements=floats), st.data())
def test_split_concat_roundtrip_and_gradient(x, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = x.shape[axis]
    cut = data.draw(st.integers(1, n - 1))
    t = tf.tensor(x, dtype="float64")
    parts = tf.split(t, [cut, n - cut], axis)
    np.testing.assert_array_equal(tf.concat(parts, axis).numpy(), x)
    g = tf.grad(lambda t: (tf.split(t, [cut, n - cut], axis)[1] * 2).sum())(t)
    mask = np.zeros_like(x)
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(cut, None)
    mask[tuple(idx)] = 2
    np.testing.assert_array_equal(g.numpy(), mask)
