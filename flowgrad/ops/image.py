"""``tf.image``: resizing (bilinear, nearest neighbour) and simple transforms.

Images are NHWC: [batch, height, width, channels], or [height, width, channels] for one
image. A resize is linear in the image and separable: each output row reads one or two
input rows (and likewise columns), at the source coordinates of TF's transforms
(align_corners, half_pixel_centers). Its gradient is the adjoint, a scatter-add of dy with
the same taps and weights, declared as a primitive whose own gradient is the resize again,
so derivatives of every order are right (TF.js's bilinear gradient swaps height and width
for non-square images and both gradients ignore half_pixel_centers).
"""
from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import check_alloc, flag
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor
from ._core import as_float, as_ints, as_tensor, cast, export, primitive
from .creation import tensor
from .shape import reshape, reverse, tile


# ---------------------------------------------------------------- source coordinates

def _ratio(n_in, n_out, align):
    if align and n_out > 1:
        return (n_in - 1) / (n_out - 1)
    return n_in / n_out


def _bilinear_taps(B, n_in, n_out, align, half):
    """For each output row: the two input rows it reads (lo <= hi) and the weight of hi.

    Source coordinate: ratio·i, or ratio·(i + 0.5) - 0.5 with half-pixel centers; rows
    outside the image are clamped to its edge (then lo == hi and the weight is 0).
    """
    i = B.arange(n_out, dtype=B.float64)
    r = _ratio(n_in, n_out, align)
    s = r * (i + 0.5) - 0.5 if half else r * i
    lo = B.clip(B.floor(s), 0, n_in - 1)
    hi = B.clip(B.ceil(s), 0, n_in - 1)
    frac = B.where(hi > lo, s - lo, 0.0)
    return B.astype(lo, B.int64), B.astype(hi, B.int64), frac


def _nearest_index(B, n_in, n_out, align, half):
    """For each output row, the input row it copies: floor of the source coordinate
    (rounded half up with align_corners, as JS's Math.round), clamped to the image."""
    i = B.arange(n_out, dtype=B.float64)
    s = _ratio(n_in, n_out, align) * ((i + 0.5) if half else i)
    idx = B.floor(s + 0.5) if align else B.floor(s)
    return B.astype(B.clip(idx, 0, n_in - 1), B.int64)


def _along(B, frac, dtype, axis):
    """frac in ``dtype``, shaped to broadcast along ``axis`` of an NHWC array."""
    shape = [1] * 4
    shape[axis] = -1
    return B.reshape(B.astype(frac, dtype), tuple(shape))


def _lerp(B, x, lo, hi, frac, axis):
    """x read at the fractional rows (lo, hi, frac) along ``axis``."""
    f = _along(B, frac, x.dtype, axis)
    a = B.take(x, lo, axis=axis)
    b = B.take(x, hi, axis=axis)
    return a + (b - a) * f


def _lerp_adjoint(B, g, lo, hi, frac, axis, n):
    # take_adjoint: the scatter-add of a take along axis (backends/ext_nn.py)
    f = _along(B, frac, g.dtype, axis)
    return B.take_adjoint(g * (1 - f), lo, axis, n) + B.take_adjoint(g * f, hi, axis, n)


# ---------------------------------------------------------------- bilinear

@primitive("ResizeBilinear", vmap=V.merge_n(0))
def _resize_bilinear(B, images, size, align_corners, half_pixel_centers):
    h, w = images.shape[1:3]
    rows = _bilinear_taps(B, h, size[0], align_corners, half_pixel_centers)
    cols = _bilinear_taps(B, w, size[1], align_corners, half_pixel_centers)
    return _lerp(B, _lerp(B, images, *rows, 1), *cols, 2)


@_resize_bilinear.def_vjp
def _(dy, images, size, align_corners, half_pixel_centers):
    return E.run_kernel(_resize_bilinear_grad, (dy,), {
        "in_size": tuple(images.shape[1:3]), "align_corners": align_corners,
        "half_pixel_centers": half_pixel_centers})


@primitive("ResizeBilinearGrad", vmap=V.merge_n(0))
def _resize_bilinear_grad(B, dy, in_size, align_corners, half_pixel_centers):
    (h, w), (nh, nw) = in_size, dy.shape[1:3]
    rows = _bilinear_taps(B, h, nh, align_corners, half_pixel_centers)
    cols = _bilinear_taps(B, w, nw, align_corners, half_pixel_centers)
    return _lerp_adjoint(B, _lerp_adjoint(B, dy, *cols, 2, w), *rows, 1, h)


@_resize_bilinear_grad.def_vjp
def _(ddx, dy, in_size, align_corners, half_pixel_centers):
    # the adjoint of a linear map is linear: its gradient is the map itself
    return E.run_kernel(_resize_bilinear, (ddx,), {
        "size": tuple(dy.shape[1:3]), "align_corners": align_corners,
        "half_pixel_centers": half_pixel_centers})


# ---------------------------------------------------------------- nearest neighbour

@primitive("ResizeNearestNeighbor", vmap=V.merge_n(0))
def _resize_nearest(B, images, size, align_corners, half_pixel_centers):
    h, w = images.shape[1:3]
    ri = _nearest_index(B, h, size[0], align_corners, half_pixel_centers)
    ci = _nearest_index(B, w, size[1], align_corners, half_pixel_centers)
    return B.take(B.take(images, ri, axis=1), ci, axis=2)


@_resize_nearest.def_vjp
def _(dy, images, size, align_corners, half_pixel_centers):
    return E.run_kernel(_resize_nearest_grad, (dy,), {
        "in_size": tuple(images.shape[1:3]), "align_corners": align_corners,
        "half_pixel_centers": half_pixel_centers})


@primitive("ResizeNearestNeighborGrad", vmap=V.merge_n(0))
def _resize_nearest_grad(B, dy, in_size, align_corners, half_pixel_centers):
    (h, w), (nh, nw) = in_size, dy.shape[1:3]
    ri = _nearest_index(B, h, nh, align_corners, half_pixel_centers)
    ci = _nearest_index(B, w, nw, align_corners, half_pixel_centers)
    return B.take_adjoint(B.take_adjoint(dy, ci, 2, w), ri, 1, h)


@_resize_nearest_grad.def_vjp
def _(ddx, dy, in_size, align_corners, half_pixel_centers):
    return E.run_kernel(_resize_nearest, (ddx,), {
        "size": tuple(dy.shape[1:3]), "align_corners": align_corners,
        "half_pixel_centers": half_pixel_centers})


def _resize(prim, x, size, align_corners, half_pixel_centers, camel):
    if x.rank not in (3, 4):
        raise ShapeError(f"Error in {camel}: x must be rank 3 or 4, but got rank {x.rank}. "
                         f"Give images as [batch, height, width, channels] or [height, "
                         f"width, channels].")
    if isinstance(size, Tensor):
        size = size.array_sync()
    elif hasattr(size, "tolist"):                # a NumPy array
        size = size.tolist()
    if not isinstance(size, (list, tuple)) or len(size) != 2:
        got = list(size) if isinstance(size, (list, tuple)) else repr(size)
        raise ShapeError(f"Error in {camel}: new shape must 2D, but got shape {got}. Give "
                         f"size as [newHeight, newWidth].")
    size = as_ints(size, "size", camel, minimum=1)
    align_corners = flag(align_corners, "align_corners", camel)
    half_pixel_centers = flag(half_pixel_centers, "half_pixel_centers", camel)
    check_alloc(x.shape[:-3] + tuple(size) + x.shape[-1:], x.dtype, camel)
    if half_pixel_centers and align_corners:
        raise ArgumentError(f"Error in {camel}: If halfPixelCenters is true, alignCorners "
                            f"must be false.")
    if 0 in x.shape[-3:-1]:
        raise ShapeError(f"Error in {camel}: the images have no pixels (shape "
                         f"{list(x.shape)}): height and width must be at least 1.")
    one = x.rank == 3
    if one:
        x = reshape(x, (1,) + x.shape)
    y = E.run_kernel(prim, (x,), {"size": size, "align_corners": align_corners,
                                  "half_pixel_centers": half_pixel_centers})
    return reshape(y, y.shape[1:]) if one else y


@export(namespace="image")
def resize_bilinear(images, size, align_corners=False, half_pixel_centers=False):
    """Bilinear resize of images [batch, height, width, channels] (or one image, rank 3)
    to ``size`` = [newHeight, newWidth]. Integer images give float32.

    align_corners maps the corner pixels onto each other (scale (in-1)/(out-1));
    half_pixel_centers puts pixel centers at +0.5. The gradient is exact in every mode.

    >>> import flowgrad as tf
    >>> img = tf.tensor([[[[0], [4]]]])             # one 1x2 image, one channel
    >>> tf.image.resize_bilinear(img, [1, 4]).reshape([4]).print()
    Tensor
        [0, 2, 4, 4]
    """
    x = as_float(images, "resize_bilinear", "images")
    return _resize(_resize_bilinear, x, size, align_corners, half_pixel_centers,
                   "resizeBilinear")


@export(namespace="image")
def resize_nearest_neighbor(images, size, align_corners=False, half_pixel_centers=False):
    """Nearest-neighbour resize of images [batch, height, width, channels] (or rank 3) to
    ``size`` = [newHeight, newWidth]; keeps the dtype (float or int32). The gradient sends
    each output pixel's dy to the pixel it copies.

    >>> import flowgrad as tf
    >>> img = tf.tensor([[[[1], [2]]]])
    >>> tf.image.resize_nearest_neighbor(img, [1, 4]).reshape([4]).print()
    Tensor
        [1, 1, 2, 2]
    """
    x = as_tensor(images, "resize_nearest_neighbor", "images")
    if x.dtype == dtypes.bool_:
        raise DtypeError("Error in resizeNearestNeighbor: `images` must have `int32` or "
                         "`float32` as dtype, got bool. Cast it first: images.cast('int32').")
    return _resize(_resize_nearest, x, size, align_corners, half_pixel_centers,
                   "resizeNearestNeighbor")


# TF.js chains these two as tensor methods too (x.resizeBilinear(size))
Tensor.resize_bilinear = resize_bilinear
Tensor.resize_nearest_neighbor = resize_nearest_neighbor


# ---------------------------------------------------------------- color and flips

def _channels(x, n, camel, kind):
    if x.rank < 2:
        raise ShapeError(f"Error in {camel}: images must be at least rank 2, but got rank "
                         f"{x.rank}.")
    if x.shape[-1] != n:
        raise ShapeError(f"Error in {camel}: last dimension of {kind} image should be size "
                         f"{n}, but got size {x.shape[-1]}.")


@export(namespace="image")
def grayscale_to_rgb(image):
    """Grayscale images [..., 1] to RGB [..., 3]: the channel repeated three times.

    >>> import flowgrad as tf
    >>> tf.image.grayscale_to_rgb(tf.tensor([[0.5]])).print()
    Tensor
         [[0.5, 0.5, 0.5],]
    """
    x = as_tensor(image, "grayscale_to_rgb", "image")
    _channels(x, 1, "grayscaleToRGB", "a grayscale")
    return tile(x, [1] * (x.rank - 1) + [3])


_RGB_WEIGHTS = (0.2989, 0.5870, 0.1140)   # TF.js's luma weights


@export(namespace="image")
def rgb_to_grayscale(image):
    """RGB images [..., 3] to grayscale [..., 1]: 0.2989·R + 0.5870·G + 0.1140·B.
    Integer images are converted in float32 and truncated back (TF.js). Differentiable
    (TF.js's is not: it uses Einsum, which has no gradient there).

    >>> import flowgrad as tf
    >>> tf.image.rgb_to_grayscale(tf.tensor([[0, 1, 0]])).print()
    Tensor
         [[0.587],]
    """
    x = as_tensor(image, "rgb_to_grayscale", "image")
    _channels(x, 3, "RGBToGrayscale", "an RGB")
    f = x if x.dtype in dtypes.FLOATS else cast(x, dtypes.float32)
    gray = (f * tensor(_RGB_WEIGHTS, None, f.dtype)).sum(-1, True)
    return gray if gray.dtype == x.dtype else cast(gray, x.dtype)


@export(namespace="image")
def flip_left_right(image):
    """Images [batch, height, width, channels] mirrored left to right (the width axis).

    >>> import flowgrad as tf
    >>> tf.image.flip_left_right(tf.tensor([[[[1], [2], [3]]]])).reshape([3]).print()
    Tensor
        [3, 2, 1]
    """
    x = as_tensor(image, "flip_left_right", "image")
    if x.rank != 4:
        raise ShapeError(f"Error in flipLeftRight: image must be rank 4, but got rank "
                         f"{x.rank}. Give images as [batch, height, width, channels].")
    return reverse(x, 2)
