"""Rearranging space: mirror_pad, space_to_batch_nd / batch_to_space_nd,
depth_to_space / space_to_depth; and matrix structure: linalg.band_part, diag.

Every op here is linear, and each rule is the adjoint op: batch_to_space <-> space_to_batch,
depth_to_space <-> space_to_depth, diag <-> its diagonal part, band_part -> itself, and
mirror_pad -> scatter-adds of the mirrored copies. So higher orders come for free.
"""
import math

import numpy as np

from .. import batching as V
from .. import engine as E
from ..arg_checks import choice, describe
from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor
from ._core import as_int, as_ints, as_tensor, export, primitive
from .indexing import scatter_add_along


def _fresh(B, out, x):
    # a reshape after a transpose over size-1 axes can be a view of the input
    return B.asarray(out, copy=True) if B.may_share_memory(out, x) else out


def _listed(v):
    """Paddings given as a tensor or an array, as nested lists."""
    if isinstance(v, Tensor):
        return v.array_sync()
    return v.tolist() if isinstance(v, np.ndarray) else v


def _pairs(pairs, count, what, fn):
    """``pairs`` as a tuple of ``count`` (before, after) tuples of non-negative ints."""
    if not isinstance(pairs, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise ArgumentError(f"{fn}(): {what} must be a list of [before, after] pairs, got "
                            f"{pairs!r}")
    out = tuple(as_ints(p, what, fn) for p in pairs)
    if len(out) != count or any(v < 0 for p in out for v in p):
        raise ShapeError(f"{fn}(): {what} {[list(p) for p in out]} must give {count} "
                         f"non-negative [before, after] pair(s)")
    return out


# ---------------------------------------------------------------- mirror_pad

def _mirror_source(n, lo, hi, mode):
    """For each position of a padded axis, the entry of x it copies."""
    p = np.arange(-lo, n + hi)
    edge = 0 if mode == "reflect" else 1     # symmetric repeats the border entry
    p = np.where(p < 0, -p - edge, p)
    p = np.where(p >= n, 2 * n - 2 + edge - p, p)
    return p.astype(np.int32)


@primitive("MirrorPad", vmap=V.pad)
def _mirror_pad(B, x, paddings, mode):
    return B.mirror_pad(x, paddings, mode)        # an extension: backends/ext_nn.py


@_mirror_pad.def_vjp
def _(dy, x, paddings, mode):
    # NOTE: TF.js's rule only slices dy, dropping the mirrored copies (reference §12 #5).
    # Every padded entry is a copy of an entry of x: its gradient is added back there.
    g = dy
    for ax, (lo, hi) in enumerate(paddings):
        if lo or hi:
            src = E.constant_tensor(E.from_host(_mirror_source(x.shape[ax], lo, hi, mode)))
            g = scatter_add_along(g, src, ax, x.shape[ax])
    return g


@export
def mirror_pad(x, paddings, mode="reflect"):
    """x padded with its own mirror image: ``paddings`` is [[before, after], ...] per axis.
    'reflect' does not repeat the border (pads up to size - 1), 'symmetric' does (pads up
    to size). The gradient includes the mirrored copies (TF.js drops them).

    >>> import flowgrad as tf
    >>> tf.mirror_pad(tf.tensor([1, 2, 3]), [[2, 1]], "reflect").print()
    Tensor
        [3, 2, 1, 2, 3, 2]
    >>> tf.mirror_pad(tf.tensor([1, 2, 3]), [[2, 1]], "symmetric").print()
    Tensor
        [2, 1, 1, 2, 3, 3]
    """
    fn = "mirror_pad"
    x = as_tensor(x, fn)
    choice(mode, "mode", fn, ("reflect", "symmetric"), (
        f"{fn}(): Invalid mode. Mode must be either reflect or symmetric. Got "
        f"{describe(mode)}."))
    if x.rank == 0:
        raise ShapeError(f"{fn}(): mirrorPad(scalar) is not defined. Pass non-scalar to "
                         f"mirrorPad")
    paddings = _listed(paddings)
    if not isinstance(paddings, (list, tuple)) or len(paddings) != x.rank:
        got = len(paddings) if isinstance(paddings, (list, tuple)) else repr(paddings)
        raise ShapeError(f"{fn}(): Padding doesn't match input. Must be {x.rank}. Got {got}. "
                         f"Give one [before, after] pair per axis of x {x.shape}.")
    if not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in paddings):
        raise ShapeError(f"{fn}(): Invalid number of paddings. Must be length of 2 each. "
                         f"Got {paddings!r}.")
    pads = tuple(as_ints(p, "paddings", fn) for p in paddings)
    offset = 1 if mode == "reflect" else 0
    for i, ((lo, hi), n) in enumerate(zip(pads, x.shape)):
        if not (0 <= lo <= n - offset and 0 <= hi <= n - offset):
            raise ShapeError(f"{fn}(): Padding in dimension {i} cannot be greater than "
                             f"{n - offset} or less than 0 for input of shape {x.shape} "
                             f"(got {[lo, hi]}, mode {mode!r}).")
    if not any(lo or hi for lo, hi in pads):
        return x
    return E.run_kernel(_mirror_pad, (x,), {"paddings": pads, "mode": mode})


# ---------------------------------------------------------------- space <-> batch

@primitive("SpaceToBatchND", vmap=V.loop)
def _space_to_batch(B, x, block_shape, paddings):
    m = len(block_shape)
    rest = x.shape[1 + m:]
    xp = B.pad(x, ((0, 0),) + paddings + ((0, 0),) * len(rest))
    split = [x.shape[0]]
    for k, b in enumerate(block_shape):
        split += [xp.shape[1 + k] // b, b]
    # [batch, p1/b1, b1, ..., rest] -> [b1, ..., bM, batch, p1/b1, ..., pM/bM, rest]
    perm = ([2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)]
            + list(range(1 + 2 * m, 1 + 2 * m + len(rest))))
    out = B.permute_dims(B.reshape(xp, tuple(split) + rest), tuple(perm))
    out = B.reshape(out, (x.shape[0] * math.prod(block_shape),) + tuple(split[1::2]) + rest)
    return _fresh(B, out, x)


@_space_to_batch.def_vjp
def _(dy, x, block_shape, paddings):
    return E.run_kernel(_batch_to_space, (dy,), {"block_shape": block_shape, "crops": paddings})


@primitive("BatchToSpaceND", vmap=V.loop)
def _batch_to_space(B, x, block_shape, crops):
    m = len(block_shape)
    n = x.shape[0] // math.prod(block_shape)
    spatial, rest = x.shape[1:1 + m], x.shape[1 + m:]
    # [b1, ..., bM, n, d1, ..., dM, rest] -> [n, d1, b1, ..., dM, bM, rest]
    perm = ([m] + [i for k in range(m) for i in (m + 1 + k, k)]
            + list(range(2 * m + 1, 2 * m + 1 + len(rest))))
    y = B.permute_dims(B.reshape(x, tuple(block_shape) + (n,) + spatial + rest), tuple(perm))
    y = B.reshape(y, (n,) + tuple(d * b for d, b in zip(spatial, block_shape)) + rest)
    key = (slice(None),) + tuple(slice(c0, y.shape[1 + k] - c1)
                                 for k, (c0, c1) in enumerate(crops)) + (Ellipsis,)
    return _fresh(B, y[key], x)


@_batch_to_space.def_vjp
def _(dy, x, block_shape, crops):
    return E.run_kernel(_space_to_batch, (dy,), {"block_shape": block_shape, "paddings": crops})


def _block(block_shape, fn):
    if isinstance(block_shape, (int, np.integer)):
        block_shape = [block_shape]
    return as_ints(block_shape, "block_shape", fn, 1)


@export
def space_to_batch_nd(x, block_shape, paddings):
    """Splits the M spatial axes of x (those after the batch axis) into blocks moved to the
    batch axis: x of shape [batch, *spatial, *rest] is zero-padded by ``paddings`` (one
    [before, after] pair per spatial axis), and the result has shape
    [batch * prod(block_shape), *(padded spatial / block_shape), *rest].

    >>> import flowgrad as tf
    >>> x = tf.tensor([[[[1], [2]], [[3], [4]]]])          # shape [1, 2, 2, 1]
    >>> y = tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
    >>> y.shape, y.reshape([4]).array_sync()
    ((4, 1, 1, 1), [1.0, 2.0, 3.0, 4.0])
    """
    fn = "space_to_batch_nd"
    x = as_tensor(x, fn)
    block = _block(block_shape, fn)
    m = len(block)
    paddings = _listed(paddings)
    if x.rank < 1 + m:
        raise ShapeError(f"{fn}(): input rank {x.rank} should be > than [blockShape] {m} "
                         f"(x of shape {x.shape} needs a batch axis and {m} spatial axes)")
    if not isinstance(paddings, (list, tuple)) or len(paddings) != m:
        got = len(paddings) if isinstance(paddings, (list, tuple)) else paddings
        raise ShapeError(f"{fn}(): paddings.shape[0] {got} must be equal to [blockShape] {m}")
    pads = _pairs(paddings, m, "paddings", fn)
    padded = [x.shape[1 + k] + lo + hi for k, (lo, hi) in enumerate(pads)]
    if any(p % b for p, b in zip(padded, block)):
        raise ShapeError(f"{fn}(): input spatial dimensions {list(x.shape[1:])} with paddings "
                         f"{[list(p) for p in pads]} must be divisible by blockShapes "
                         f"{list(block)} (padded sizes {padded})")
    return E.run_kernel(_space_to_batch, (x,), {"block_shape": block, "paddings": pads})


@export
def batch_to_space_nd(x, block_shape, crops):
    """The inverse of space_to_batch_nd: the batch axis of x (of size divisible by
    prod(block_shape)) is interleaved back into the M spatial axes after it, which are then
    cropped by ``crops`` (one [start, end] pair per spatial axis).

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4]).reshape([4, 1, 1, 1])
    >>> tf.batch_to_space_nd(x, [2, 2], [[0, 0], [0, 0]]).reshape([2, 2]).print()
    Tensor
        [[1, 2],
         [3, 4]]
    """
    fn = "batch_to_space_nd"
    x = as_tensor(x, fn)
    block = _block(block_shape, fn)
    m = len(block)
    crops = _listed(crops)
    if x.rank < 1 + m:
        raise ShapeError(f"{fn}(): input rank is {x.rank} but should be > than "
                         f"blockShape.length {m} (x of shape {x.shape})")
    if not isinstance(crops, (list, tuple)) or len(crops) != m:
        got = len(crops) if isinstance(crops, (list, tuple)) else crops
        raise ShapeError(f"{fn}(): crops.length is {got} but should be equal to "
                         f"blockShape.length  {m}")
    cr = _pairs(crops, m, "crops", fn)
    prod = math.prod(block)
    if x.shape[0] % prod:
        raise ShapeError(f"{fn}(): input tensor batch is {x.shape[0]} but is not divisible by "
                         f"the product of the elements of blockShape "
                         f"{' * '.join(map(str, block))} === {prod}")
    for k, ((c0, c1), b) in enumerate(zip(cr, block)):
        if c0 + c1 > x.shape[1 + k] * b:
            raise ShapeError(f"{fn}(): crops {list(cr[k])} of spatial axis {k} remove more "
                             f"than its {x.shape[1 + k] * b} entries "
                             f"(x.shape[{1 + k}] * blockShape[{k}])")
    return E.run_kernel(_batch_to_space, (x,), {"block_shape": block, "crops": cr})


# ---------------------------------------------------------------- depth <-> space
# The depth index of block entry (i, j) and channel c is (i * b + j) * C + c, in NHWC and
# NCHW alike (TF's layout).

@primitive("DepthToSpace", vmap=V.merge_n(0))
def _depth_to_space(B, x, block_size, data_format):
    b = block_size
    if data_format == "NHWC":
        n, h, w, c = x.shape
        y = B.permute_dims(B.reshape(x, (n, h, w, b, b, c // (b * b))), (0, 1, 3, 2, 4, 5))
        return _fresh(B, B.reshape(y, (n, h * b, w * b, c // (b * b))), x)
    n, c, h, w = x.shape
    y = B.permute_dims(B.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return _fresh(B, B.reshape(y, (n, c // (b * b), h * b, w * b)), x)


@_depth_to_space.def_vjp
def _(dy, x, block_size, data_format):
    return E.run_kernel(_space_to_depth, (dy,),
                        {"block_size": block_size, "data_format": data_format})


@primitive("SpaceToDepth", vmap=V.merge_n(0))
def _space_to_depth(B, x, block_size, data_format):
    b = block_size
    if data_format == "NHWC":
        n, h, w, c = x.shape
        y = B.permute_dims(B.reshape(x, (n, h // b, b, w // b, b, c)), (0, 1, 3, 2, 4, 5))
        return _fresh(B, B.reshape(y, (n, h // b, w // b, b * b * c)), x)
    n, c, h, w = x.shape
    y = B.permute_dims(B.reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return _fresh(B, B.reshape(y, (n, b * b * c, h // b, w // b)), x)


@_space_to_depth.def_vjp
def _(dy, x, block_size, data_format):
    return E.run_kernel(_depth_to_space, (dy,),
                        {"block_size": block_size, "data_format": data_format})


def _image_args(x, block_size, data_format, fn):
    x = as_tensor(x, fn)
    choice(data_format, "data_format", fn, ("NHWC", "NCHW"), (
        f"{fn}(): data_format must be 'NHWC' or 'NCHW', got {describe(data_format)}"))
    if x.rank != 4:
        raise ShapeError(f"{fn}(): x must be a rank-4 tensor ({data_format}), got rank "
                         f"{x.rank} (shape {x.shape})")
    b = as_int(block_size, "block_size", fn)
    if b <= 1:
        raise ArgumentError(f"{fn}(): blockSize should be > 1 for {fn}, but was: {b}")
    h, w, c = (x.shape[1:] if data_format == "NHWC" else x.shape[2:] + x.shape[1:2])
    return x, b, h, w, c


@export
def depth_to_space(x, block_size, data_format="NHWC"):
    """Moves blocks of channels of a 4-D image tensor into block_size x block_size spatial
    blocks: [n, h, w, c] becomes [n, h*b, w*b, c/b²] (NHWC; NCHW likewise).

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4]).reshape([1, 1, 1, 4])
    >>> tf.depth_to_space(x, 2).reshape([2, 2]).print()
    Tensor
        [[1, 2],
         [3, 4]]
    """
    fn = "depth_to_space"
    x, b, h, w, c = _image_args(x, block_size, data_format, fn)
    if c % (b * b):
        raise ShapeError(f"{fn}(): Dimension size must be evenly divisible by {b * b} but is "
                         f"{c} for depthToSpace with input shape {x.shape}")
    return E.run_kernel(_depth_to_space, (x,), {"block_size": b, "data_format": data_format})


@export
def space_to_depth(x, block_size, data_format="NHWC"):
    """The inverse of depth_to_space: block_size x block_size spatial blocks of a 4-D image
    tensor become channels: [n, h, w, c] becomes [n, h/b, w/b, c*b²] (NHWC; NCHW likewise).

    >>> import flowgrad as tf
    >>> x = tf.tensor([[1, 2], [3, 4]]).reshape([1, 2, 2, 1])
    >>> tf.space_to_depth(x, 2).reshape([4]).print()
    Tensor
        [1, 2, 3, 4]
    """
    fn = "space_to_depth"
    x, b, h, w, c = _image_args(x, block_size, data_format, fn)
    if h % b or w % b:
        raise ShapeError(f"{fn}(): Image height {h} and width {w} should be divisible by "
                         f"block_size: {b} (input shape {x.shape}, {data_format})")
    return E.run_kernel(_space_to_depth, (x,), {"block_size": b, "data_format": data_format})


# ---------------------------------------------------------------- band_part / diag

@primitive("MatrixBandPart", vmap=V.leading)
def _band_part(B, a, num_lower, num_upper):
    m, n = a.shape[-2:]
    d = B.arange(m)[:, None] - B.arange(n)[None, :]      # row - column
    lo = m if num_lower < 0 else num_lower
    hi = n if num_upper < 0 else num_upper
    keep = (d <= lo) & (-d <= hi)
    return B.where(keep, a, B.zeros((), dtype=a.dtype))


@_band_part.def_vjp
def _(dy, a, num_lower, num_upper):
    return E.run_kernel(_band_part, (dy,), {"num_lower": num_lower, "num_upper": num_upper})


@export(namespace="linalg")
def band_part(a, num_lower, num_upper):
    """Each innermost matrix of ``a`` with everything outside a central band set to 0:
    ``num_lower`` subdiagonals and ``num_upper`` superdiagonals are kept (-1: all of them).
    ``band_part(a, 0, -1)`` is the upper triangle, ``band_part(a, 0, 0)`` the diagonal.

    >>> import flowgrad as tf
    >>> a = tf.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    >>> tf.linalg.band_part(a, 1, 0).print()
    Tensor
        [[1, 0, 0],
         [4, 5, 0],
         [0, 8, 9]]
    """
    fn = "band_part"
    a = as_tensor(a, fn, "a")
    lo = as_int(num_lower, "num_lower", fn)
    hi = as_int(num_upper, "num_upper", fn)
    if a.rank < 2:
        raise ShapeError(f"{fn}(): Rank must be at least 2, got {a.rank}.")
    m, n = a.shape[-2:]
    if lo > m:
        raise ArgumentError(f"{fn}(): num_lower ({lo}) must not be greater than the number of "
                            f"rows ({m}).")
    if hi > n:
        raise ArgumentError(f"{fn}(): num_upper ({hi}) must not be greater than the number of "
                            f"columns ({n}).")
    return E.run_kernel(_band_part, (a,), {"num_lower": lo, "num_upper": hi})


@primitive("Diag", vmap=V.loop)
def _diag(B, x):
    return B.reshape(B.diagflat(x), x.shape + x.shape)     # an extension: ext_nn.py


@_diag.def_vjp
def _(dy, x):
    return E.run_kernel(_diag_part, (dy,), {"shape": x.shape})


@primitive("DiagPart", vmap=V.loop)
def _diag_part(B, y, shape):
    flat = B.reshape(y, (-1,))[::math.prod(shape) + 1]
    return _fresh(B, B.reshape(flat, shape), y)


@_diag_part.def_vjp
def _(ddx, y, shape):
    return E.run_kernel(_diag, (ddx,))


@export
def diag(x):
    """The tensor of shape ``x.shape + x.shape`` holding x on its diagonal
    (out[i, j, ..., i, j, ...] = x[i, j, ...]) and zeros elsewhere.

    >>> import flowgrad as tf
    >>> tf.diag(tf.tensor([1, 2])).print()
    Tensor
        [[1, 0],
         [0, 2]]
    """
    return E.run_kernel(_diag, (as_tensor(x, "diag"),))
