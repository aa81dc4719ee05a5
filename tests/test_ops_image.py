"""tf.image: the resizes against a NumPy reference of TF's coordinate transforms (plain,
align_corners, half_pixel_centers) written here pixel by pixel, gradients against finite
differences (second order through the gradient kernels), the adjoint identity
<resize(x), y> = <x, resize'(y)> for random shapes, TF's published values, the color and
flip ops, and every error message."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as tf
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from opcheck import BACKEND_NAMES, BACKENDS, Case, run_case

MODES = {"plain": (False, False), "align": (True, False), "half": (False, True)}


# ---------------------------------------------------------------- NumPy references

def _scale(n_in, n_out, align):
    return (n_in - 1) / (n_out - 1) if align and n_out > 1 else n_in / n_out


def ref_bilinear(x, size, align=False, half=False):
    """TF's bilinear resize, one output pixel at a time (TF's compute_interpolation_weights:
    lower = max(floor(s), 0), upper = min(ceil(s), n - 1), lerp = s - floor(s))."""
    b, h, w, c = x.shape
    nh, nw = size
    out = np.zeros((b, nh, nw, c))

    def taps(i, n_in, n_out):
        s = _scale(n_in, n_out, align)
        src = (i + 0.5) * s - 0.5 if half else i * s
        return max(math.floor(src), 0), min(math.ceil(src), n_in - 1), src - math.floor(src)

    for i in range(nh):
        y0, y1, fy = taps(i, h, nh)
        for j in range(nw):
            x0, x1, fx = taps(j, w, nw)
            top = x[:, y0, x0] * (1 - fx) + x[:, y0, x1] * fx
            bottom = x[:, y1, x0] * (1 - fx) + x[:, y1, x1] * fx
            out[:, i, j] = top * (1 - fy) + bottom * fy
    return out


def ref_nearest(x, size, align=False, half=False):
    """TF's nearest-neighbour resize: floor (round half up with align_corners) of the
    source coordinate, clamped to the image."""
    b, h, w, c = x.shape
    nh, nw = size

    def source(i, n_in, n_out):
        s = _scale(n_in, n_out, align) * (i + 0.5 if half else i)
        k = math.floor(s + 0.5) if align else math.floor(s)
        return max(min(k, n_in - 1), 0)

    rows = [source(i, h, nh) for i in range(nh)]
    cols = [source(j, w, nw) for j in range(nw)]
    return x[:, rows][:, :, cols].astype(np.float64)


def ref_matrix(ref, shape, size, mode):
    """The resize as a matrix (columns: the images of the unit basis vectors)."""
    n = int(np.prod(shape))
    cols = [ref(np.eye(n)[k].reshape(shape), size, *MODES[mode]).ravel() for k in range(n)]
    return np.stack(cols, 1)


def ref_adjoint(ref, shape, size, mode):
    """dy -> M^T dy: the gradient of the resize w.r.t. the image, for dy of any batch."""
    def adj(dy):
        m = ref_matrix(ref, shape, size, mode)
        return (m.T @ dy.ravel()).reshape(shape)
    return adj


def with3(ref):
    """A rank-3 image through the rank-4 reference."""
    return lambda x, size, *flags: ref(x[None], size, *flags)[0]


# ---------------------------------------------------------------- table

OPS = {"bilinear": (tf.image.resize_bilinear, ref_bilinear),
       "nearest": (tf.image.resize_nearest_neighbor, ref_nearest)}
SHAPES = [((1, 3, 5, 2), (4, 3)),     # non-square, up in height, down in width
          ((2, 2, 3, 1), (5, 2)),
          ((1, 4, 2, 1), (1, 3))]     # one output row (align_corners keeps scale in/out)


def resize_cases():
    out = []
    for op, (fn, ref) in OPS.items():
        for mode, (align, half) in MODES.items():
            for shape, size in SHAPES:
                out.append(Case(
                    f"{op}[{mode}]{list(shape)}->{list(size)}",
                    (lambda f, s, a, h: lambda x: f(x, s, a, h))(fn, size, align, half),
                    (lambda r, s, a, h: lambda x: r(x, s, a, h))(ref, size, align, half),
                    [(shape, "real")], order=1))
            # second order: the gradient kernel's own rule (x² makes dy depend on x)
            out.append(Case(
                f"{op}[{mode}]_squared_order2",
                (lambda f, a, h: lambda x: f(x, [3, 2], a, h).square())(fn, align, half),
                (lambda r, a, h: lambda x: r(x, (3, 2), a, h) ** 2)(ref, align, half),
                [((1, 2, 3, 1), "real")], order=2))
            # the gradient as a function of dy (against M^T dy): its rule is the resize
            # (x0 is a NumPy array: a tensor made here would live on the default backend)
            x0 = np.random.default_rng(3).normal(size=(1, 3, 2, 1))
            out.append(Case(
                f"{op}[{mode}]_gradient_of_dy",
                (lambda f, a, h: lambda dy: tf.grad(
                    lambda x: (f(x, [2, 4], a, h) * dy).sum())(tf.tensor(x0, dtype=dy.dtype)))(
                        fn, align, half),
                (lambda r, m: lambda dy: ref_adjoint(r, (1, 3, 2, 1), (2, 4), m)(dy))(ref, mode),
                [((1, 2, 4, 1), "real")], order=2))
        out.append(Case(f"{op}_rank3", (lambda f: lambda x: f(x, [3, 4]))(fn),
                        (lambda r: lambda x: with3(r)(x, (3, 4)))(ref),
                        [((2, 3, 2), "real")], order=1))
    return out


def gray(x):
    return (x * np.array([0.2989, 0.5870, 0.1140])).sum(-1, keepdims=True)


CASES = resize_cases() + [
    Case("grayscale_to_rgb", tf.image.grayscale_to_rgb, lambda x: np.repeat(x, 3, -1),
         [((2, 3, 1), "real")], order=1),
    Case("grayscale_to_rgb_rank4", tf.image.grayscale_to_rgb,
         lambda x: np.concatenate([x, x, x], -1), [((1, 2, 2, 1), "real")], order=1),
    Case("rgb_to_grayscale", tf.image.rgb_to_grayscale, gray, [((2, 2, 3), "real")]),
    Case("rgb_to_grayscale_squared", lambda x: tf.image.rgb_to_grayscale(x).square(),
         lambda x: gray(x) ** 2, [((1, 2, 3), "real")], order=2),
    Case("flip_left_right", tf.image.flip_left_right, lambda x: x[:, :, ::-1],
         [((2, 2, 3, 2), "real")], order=1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


# ---------------------------------------------------------------- properties

SETTINGS = settings(max_examples=30, deadline=None)


@st.composite
def resize_problem(draw):
    b = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    c = draw(st.integers(1, 2))
    size = (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    mode = draw(st.sampled_from(sorted(MODES)))
    op = draw(st.sampled_from(sorted(OPS)))
    seed = draw(st.integers(0, 2 ** 16))
    backend = draw(st.sampled_from(BACKEND_NAMES))
    return op, (b, h, w, c), size, mode, seed, backend


def on_backend(test):
    """Run ``test(problem)`` with the problem's backend active."""
    def run(problem):
        prev = tf.set_backend(problem[-1])
        try:
            test(problem[:-1])
        finally:
            tf.set_backend(prev)
    run.__name__ = test.__name__
    return run


@SETTINGS
@given(resize_problem())
@on_backend
def test_forward_matches_reference(problem):
    op, shape, size, mode, seed = problem
    fn, ref = OPS[op]
    x = np.random.default_rng(seed).normal(size=shape)
    got = fn(tf.tensor(x, dtype="float64"), list(size), *MODES[mode]).numpy()
    np.testing.assert_allclose(got, ref(x, size, *MODES[mode]), rtol=1e-12, atol=1e-12)


@SETTINGS
@given(resize_problem())
@on_backend
def test_adjoint_identity(problem):
    """<resize(x), y> = <x, grad_x <resize(x), y>>: the gradient kernel is the adjoint
    (on array-api-strict: the generic take_adjoint)."""
    op, shape, size, mode, seed = problem
    fn = OPS[op][0]
    rng = np.random.default_rng(seed)
    x = tf.tensor(rng.normal(size=shape), dtype="float64")
    y = tf.tensor(rng.normal(size=(shape[0],) + size + (shape[3],)), dtype="float64")
    lhs = float((fn(x, list(size), *MODES[mode]) * y).sum().item())
    g = tf.grad(lambda t: (fn(t, list(size), *MODES[mode]) * y).sum())(x)
    assert g.shape == x.shape
    rhs = float((x * g).sum().item())
    assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------- fixed points

def test_tf_published_values():
    # TF.js's resize_bilinear_test.ts, values computed by TensorFlow
    img = tf.tensor3d([2, 2, 4, 4], [2, 2, 1])
    np.testing.assert_allclose(tf.image.resize_bilinear(img, [3, 3]).numpy().ravel(),
                               [2, 2, 2, 10 / 3, 10 / 3, 10 / 3, 4, 4, 4], rtol=1e-6)
    np.testing.assert_allclose(img.resizeBilinear([3, 3], True).numpy().ravel(),   # chained
                               [2, 2, 2, 3, 3, 3, 4, 4, 4], rtol=1e-6)
    ints = tf.tensor3d([1, 2, 3, 4, 5], [1, 5, 1], "int32")
    out = tf.image.resize_bilinear(ints, [1, 10])
    assert out.dtype == "float32" and out.shape == (1, 10, 1)
    np.testing.assert_allclose(out.numpy().ravel(), [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5])
    x = tf.tensor3d([[[100.0], [50.0]], [[60.0], [20.0]]])
    dy = tf.tensor(np.arange(1.0, 17).reshape(4, 4, 1))
    g = tf.grad(lambda i: tf.image.resize_bilinear(i, [4, 4]))(x, dy)
    np.testing.assert_allclose(g.numpy().ravel(), [6, 17, 38, 75], rtol=1e-6)
    g = tf.grad(lambda i: tf.image.resize_bilinear(i, [4, 4], True))(x, dy)
    np.testing.assert_allclose(g.numpy().ravel(), [17.33333, 24, 44, 50.66667], rtol=1e-5)
    dy9 = tf.tensor(np.arange(1.0, 37).reshape(9, 4, 1))
    g = tf.grad(lambda i: tf.image.resize_bilinear(i, [9, 4]))(x, dy9)
    np.testing.assert_allclose(g.numpy().ravel(), [25.555555, 55.555553, 208.44444, 376.44443],
                               rtol=1e-5)


def test_non_square_gradient_shape_and_half_pixel():
    # TF.js reports the bilinear gradient as [b, W, H, c] and ignores half_pixel_centers
    x = tf.tensor(np.arange(6.0).reshape(1, 2, 3, 1))
    for half in (False, True):
        g = tf.grad(lambda t: tf.image.resize_bilinear(t, [3, 5], False, half).sum())(x)
        assert g.shape == (1, 2, 3, 1)
        want = ref_matrix(ref_bilinear, (1, 2, 3, 1), (3, 5), "half" if half else "plain")
        np.testing.assert_allclose(g.numpy().ravel(), want.sum(0), rtol=1e-6)
    # nearest, 2 -> 3 columns: half-pixel centers read columns 0, 1, 1 (sources 1/3, 1,
    # 5/3); without them 0, 0, 1 (sources 0, 2/3, 4/3). TF.js's gradient gives [2, 1] both.
    x = tf.tensor([[[[1.0], [2.0]]]])
    g = tf.grad(lambda t: tf.image.resize_nearest_neighbor(t, [1, 3], False, True).sum())(x)
    np.testing.assert_array_equal(g.numpy().ravel(), [1, 2])
    g = tf.grad(lambda t: tf.image.resize_nearest_neighbor(t, [1, 3]).sum())(x)
    np.testing.assert_array_equal(g.numpy().ravel(), [2, 1])


def test_nearest_rounding_and_dtypes():
    # align_corners, 3 -> 5 columns: sources 0, 0.5, 1, 1.5, 2 round half up (JS's
    # Math.round) to 0, 1, 1, 2, 2
    x = tf.tensor([[[[0], [1], [2]]]], dtype="int32")
    out = tf.image.resize_nearest_neighbor(x, [1, 5], True)
    assert out.dtype == "int32"
    np.testing.assert_array_equal(out.numpy().ravel(), [0, 1, 1, 2, 2])
    out = tf.image.resize_nearest_neighbor(x.cast("float64"), [1, 2])
    assert out.dtype == "float64"
    np.testing.assert_array_equal(out.numpy().ravel(), [0, 1])
    assert tf.image.resize_bilinear(x.cast("float64"), [2, 2]).dtype == "float64"
    # the camelCase names resolve, and size may be a tensor
    y = tf.image.resizeNearestNeighbor(x, tf.tensor([1, 6], dtype="int32"))
    np.testing.assert_array_equal(y.numpy().ravel(), [0, 0, 1, 1, 2, 2])


def test_identity_resize_and_gradient():
    x = tf.tensor(np.random.default_rng(0).normal(size=(2, 3, 4, 2)))
    for fn in (tf.image.resize_bilinear, tf.image.resize_nearest_neighbor):
        for align, half in MODES.values():
            np.testing.assert_allclose(fn(x, [3, 4], align, half).numpy(), x.numpy(),
                                       rtol=1e-6)
            g = tf.grad(lambda t: fn(t, [3, 4], align, half).sum())(x)
            np.testing.assert_allclose(g.numpy(), 1, rtol=1e-6)


def test_color_ops():
    rgb = tf.tensor([[[255, 0, 0], [10, 20, 30]]], dtype="int32")
    g = tf.image.rgb_to_grayscale(rgb)
    assert g.dtype == "int32" and g.shape == (1, 2, 1)
    np.testing.assert_array_equal(g.numpy().ravel(), [76, 18])   # 76.2195, 18.131 truncated
    grad = tf.grad(lambda t: tf.image.rgb_to_grayscale(t).sum())(tf.ones([2, 3]))
    np.testing.assert_allclose(grad.numpy(), [[0.2989, 0.587, 0.114]] * 2, rtol=1e-6)
    rgb = tf.image.grayscale_to_rgb(tf.tensor([[[3]]], dtype="int32"))
    assert rgb.dtype == "int32"
    np.testing.assert_array_equal(rgb.numpy(), [[[3, 3, 3]]])


# ---------------------------------------------------------------- errors

IMG = tf.zeros([1, 2, 2, 1])


@pytest.mark.parametrize("fn, cls, message", [
    (lambda: tf.image.resize_bilinear(tf.zeros([2, 2]), [1, 1]), ShapeError,
     "Error in resizeBilinear: x must be rank 3 or 4, but got rank 2."),
    (lambda: tf.image.resize_nearest_neighbor(tf.zeros([1, 1, 2, 2, 1]), [1, 1]), ShapeError,
     "Error in resizeNearestNeighbor: x must be rank 3 or 4, but got rank 5."),
    (lambda: tf.image.resize_bilinear(IMG, [1, 2, 3]), ShapeError,
     "Error in resizeBilinear: new shape must 2D, but got shape [1, 2, 3]."),
    (lambda: tf.image.resize_bilinear(IMG, 4), ShapeError,
     "Error in resizeBilinear: new shape must 2D, but got shape 4."),
    (lambda: tf.image.resize_bilinear(IMG, [2, 0]), ArgumentError,
     "resizeBilinear: size[1] must be >= 1, got 0"),
    (lambda: tf.image.resize_nearest_neighbor(IMG, [2.5, 1]), ArgumentError,
     "resizeNearestNeighbor: size[0] must be an integer, got 2.5"),
    (lambda: tf.image.resize_bilinear(IMG, [2, 2], True, True), ArgumentError,
     "Error in resizeBilinear: If halfPixelCenters is true, alignCorners must be false."),
    (lambda: tf.image.resize_nearest_neighbor(IMG, [2, 2], True, True), ArgumentError,
     "Error in resizeNearestNeighbor: If halfPixelCenters is true, alignCorners must be "
     "false."),
    (lambda: tf.image.resize_bilinear(tf.zeros([1, 0, 2, 1]), [2, 2]), ShapeError,
     "Error in resizeBilinear: the images have no pixels (shape [1, 0, 2, 1])"),
    (lambda: tf.image.resize_nearest_neighbor(IMG > 0, [2, 2]), DtypeError,
     "Error in resizeNearestNeighbor: `images` must have `int32` or `float32` as dtype, "
     "got bool"),
    (lambda: tf.image.resize_bilinear({}, [2, 2]), ArgumentError,
     "Argument 'images' passed to 'resize_bilinear' must be a Tensor or TensorLike"),
    (lambda: tf.image.grayscale_to_rgb(tf.zeros([3])), ShapeError,
     "Error in grayscaleToRGB: images must be at least rank 2, but got rank 1."),
    (lambda: tf.image.grayscale_to_rgb(tf.zeros([2, 3])), ShapeError,
     "Error in grayscaleToRGB: last dimension of a grayscale image should be size 1, but got "
     "size 3."),
    (lambda: tf.image.rgb_to_grayscale(tf.zeros([3])), ShapeError,
     "Error in RGBToGrayscale: images must be at least rank 2, but got rank 1."),
    (lambda: tf.image.rgb_to_grayscale(tf.zeros([2, 1])), ShapeError,
     "Error in RGBToGrayscale: last dimension of an RGB image should be size 3, but got size "
     "1."),
    (lambda: tf.image.flip_left_right(tf.zeros([2, 2, 1])), ShapeError,
     "Error in flipLeftRight: image must be rank 4, but got rank 3."),
], ids=["rank2", "rank5", "size3", "size-int", "size0", "size-float", "flags", "flags-nn",
        "empty", "bool", "not-tensor", "g2rgb-rank", "g2rgb-channels", "rgb2g-rank",
        "rgb2g-channels", "flip-rank"])
def test_errors(fn, cls, message):
    with pytest.raises(cls) as e:
        fn()
    assert message in str(e.value)
