"""Convolutions: conv1d, conv2d (NHWC and NCHW), conv3d, depthwise and separable conv2d,
and the transposed convolutions, with strides, padding and dilation in value and gradient.

Each family is three primitives closed under differentiation (TF.js's kernel names):
``conv(x, w)``, its input gradient ``backprop_input(dy, w)`` (the transposed convolution)
and its filter gradient ``backprop_filter(x, dy)``. All three are bilinear and adjoint to
each other, so each one's rule is written with the other two and every order of
derivative works, dilated or not (TF.js refuses dilated gradients and cannot differentiate
its backprop kernels).

Kernels are vectorised: a strided window view (im2col) and one matrix product. The input
gradient (col2im) is either a matmul then one strided add per kernel cell, or, when that
costs more (many more input than output channels), the *adjoint* window view: dy spread
on a zero grid, whose windows read back to front list each input cell's outputs, in one
matmul. Kernels take channels-last arrays with any number of spatial axes; the public
functions transpose channels-first data.
"""
import itertools
import math
from collections import namedtuple
from fractions import Fraction

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import check_alloc, choice, describe
from ..backends.ext_conv import cell_slices
from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor
from ._core import as_floats, as_int, as_ints, cast, export, primitive
from .shape import reshape, transpose

# The geometry of a windowed op, per spatial axis: input size, kernel size, stride,
# dilation, padding before, output size. The padding after is whatever the windows need.
Geo = namedtuple("Geo", "xs k s d before out")

FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


# ---------------------------------------------------------------- geometry

def ntuple(v, n, what, op, at_most=None):
    """An int, or a list of ``n`` ints, each >= 1 (strides, dilations, filter sizes) and
    at most ``at_most``."""
    if isinstance(v, (list, tuple, np.ndarray, Tensor)):
        t = as_ints(v, what, op, 1)
        if len(t) != n:
            raise ArgumentError(f"Error in {op}: {what} must be an int or a list of {n} ints, "
                                f"got {list(t)}")
    else:
        t = (as_int(v, what, op, 1),) * n
    if at_most is not None and max(t) > at_most:
        raise ArgumentError(f"Error in {op}: {what} must be at most {at_most:,} (an int32), "
                            f"got {max(t)}")
    return t


MAX_STRIDE = 2 ** 31 - 1      # TF.js's strides are int32 (a larger one: one window anyway)


def check_strides_dilations(op, s, d, strides, dilations, names=("strides", "dilations")):
    """TF.js (and TF) refuse a dilated window that also strides."""
    if any(v != 1 for v in s) and any(v != 1 for v in d):
        raise ArgumentError(f"Error in {op}: Either {names[0]} or {names[1]} must be 1. Got "
                            f"{names[0]} {strides} and {names[1]} '{dilations}' (a dilated "
                            f"window must move by 1; downsample with a separate strided op)")


def channels_last(op, data_format, n):
    """True for NHWC-style formats, False for NCHW-style ones; anything else is refused."""
    last, first = FORMATS[n]
    return choice(data_format, "data_format", op, (last, first), (
        f"Error in {op}: Unknown dataFormat {describe(data_format)}: use '{last}' (channels "
        f"last, the default) or '{first}' (channels first)")) == last


def _round(v, mode):
    if mode is None:
        return math.trunc(v)           # TF.js truncates when no rounding mode is given
    if mode == "floor":
        return math.floor(v)
    if mode == "ceil":
        return math.ceil(v)
    return math.floor(v + (0.5 if isinstance(v, float) else Fraction(1, 2)))  # JS Math.round


def _ratio(num, den):
    """num / den, exact when a float cannot hold num (a pad of 10**400)."""
    return num / den if -2 ** 53 < num < 2 ** 53 else Fraction(num, den)


def check_rounding(op, pad, mode):
    if mode is None:
        return
    choice(mode, "dim_rounding_mode", op, ("floor", "round", "ceil"), (
        f"Error in {op}: Unknown roundingMode {describe(mode)}: use 'floor', 'round' or "
        f"'ceil'"))
    if isinstance(pad, str):
        raise ArgumentError(f"Error in {op}: pad must be an integer when using dimRoundingMode "
                            f"{mode} but got pad {pad}. (The rounding mode only applies to "
                            f"numeric padding.)")


def _explicit(op, pad, n, last):
    """Spatial (before, after) pairs from TF.js's explicit form, one pair per axis of x."""
    form = ("[[0, 0], " + ", ".join(["[before, after]"] * n) + ", [0, 0]]" if last
            else "[[0, 0], [0, 0], " + ", ".join(["[before, after]"] * n) + "]")
    bad = ArgumentError(f"Error in {op}: explicit padding must be {n + 2} pairs of "
                        f"non-negative ints, {form}; got {pad!r}")
    if len(pad) != n + 2:
        raise bad
    pairs = []
    for p in pad:
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise bad
        try:
            pairs.append(as_ints(p, "pad", op, 0))
        except ArgumentError:
            raise bad from None
    spatial = pairs[1:-1] if last else pairs[2:]
    other = [pairs[0], pairs[-1]] if last else pairs[:2]
    if any(p != (0, 0) for p in other):
        raise ArgumentError(f"Error in {op}: explicit padding of the batch and channel axes "
                            f"must be [0, 0]; got {pad!r} (the form is {form})")
    return spatial


def geometry(op, xs, k, s, d, pad, mode=None, last=True):
    """The Geo of a windowed op, with TF.js's output sizes for each kind of padding:
    'same' gives ceil(in / stride) outputs (padding split evenly, the extra cell after),
    'valid' gives ceil((in - window + 1) / stride), a number pads both sides, and the
    explicit form pads each side as given; the last two round with ``mode``."""
    n = len(xs)
    eff = tuple((k[i] - 1) * d[i] + 1 for i in range(n))
    if isinstance(pad, str) and pad.lower() in ("same", "valid"):
        if pad.lower() == "same":
            out = tuple(-(-xs[i] // s[i]) for i in range(n))
            along = [max(0, (out[i] - 1) * s[i] + eff[i] - xs[i]) for i in range(n)]
            before = tuple(a // 2 for a in along)
        else:
            out = tuple(-(-(xs[i] - eff[i] + 1) // s[i]) for i in range(n))
            before = (0,) * n
    elif isinstance(pad, (int, np.integer)) and not isinstance(pad, bool):
        p = int(pad)
        if p < 0:
            raise ArgumentError(f"Error in {op}: pad must be non-negative, got {p}")
        before = (p,) * n
        out = tuple(_round(_ratio(xs[i] - eff[i] + 2 * p, s[i]) + 1, mode) for i in range(n))
    elif isinstance(pad, (list, tuple)):
        pairs = _explicit(op, pad, n, last)
        before = tuple(p[0] for p in pairs)
        out = tuple(_round(_ratio(xs[i] - eff[i] + sum(pairs[i]), s[i]) + 1, mode)
                    for i in range(n))
    else:
        raise ArgumentError(f"Unknown padding parameter: {pad!r} (Error in {op}: pad must be "
                            f"'same', 'valid', a non-negative int, or the explicit form "
                            f"[[0, 0], [top, bottom], [left, right], [0, 0]])")
    if any(o <= 0 for o in out):
        raise ShapeError(f"Error in {op}: the output would be empty: input spatial shape "
                         f"{list(xs)}, window {list(k)} (dilated to {list(eff)}), strides "
                         f"{list(s)}, pad {pad!r} give output {list(out)}. Use a smaller "
                         f"window or dilation, or pad='same'.")
    g = Geo(tuple(xs), tuple(k), tuple(s), tuple(d), before, out)
    padded = tuple(x + b + a for x, b, a in zip(xs, before, pad_after(g)))
    check_alloc(padded, dtypes.float32, op, "the padded input (its spatial axes alone)")
    check_alloc(out, dtypes.float32, op, "the output (its spatial axes alone)")
    return g


# ---------------------------------------------------------------- window views
# The window reads and their adjoint are backend extensions (backends/ext_conv.py):
# strided views and in-place adds on NumPy and CuPy, the standard alone elsewhere.

def pad_after(g):
    return tuple(max(0, (g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1 - g.xs[i]
                     - g.before[i]) for i in range(len(g.k)))


def pad_input(B, x, g, value=0):
    """x [N, *xs, ...] padded as the windows of g need (``value`` in the padding)."""
    after = pad_after(g)
    if not any(g.before) and not any(after):
        return x
    n = len(g.k)
    widths = [(0, 0)] + list(zip(g.before, after)) + [(0, 0)] * (x.ndim - 1 - n)
    return B.pad(x, widths, value)


def forward_windows(B, x, g, value=0):
    """The windows [N, *out, *k, C] of x [N, *xs, C] (a view where the backend has them)."""
    return B.windows(pad_input(B, x, g, value), g.out, g.s, g.d, g.k)


def window_slices(g, lead=1):
    """For each kernel cell (row-major), the strided slice of the padded input that cell
    reads across all outputs (``lead`` whole axes first)."""
    return cell_slices(g.out, g.s, g.d, g.k, lead)


def col2im(B, cols, g):
    """The adjoint of forward_windows: cols [*k, C, N, *out] (channels first: see the NOTE)
    summed back onto the input cells each window read, [N, *xs, C].

    NOTE: one strided add per kernel position (a loop over the k cells of a window, never
    over data). Measured against the loop-free adjoint_windows contraction below, it is
    faster when the windows overlap little (strides > 1: 5x) and no slower at stride 1
    unless the input has many more channels than the output; see _use_loop. Channels
    first, each add moves whole rows of the image: 20% faster than channels last.
    """
    n = len(g.k)
    parts = (cols[j + (Ellipsis,)] for j in itertools.product(*(range(v) for v in g.k)))
    dx = B.scatter_windows(parts, cols.shape[n:n + 2] + tuple(g.xs), 2, g.out, g.s, g.d,
                           g.k, g.before)
    return B.contiguous(B.moveaxis(dx, 0, -1))


def adjoint_windows(B, dy, g):
    """The windows T [N, *xs, *k, ...] with T[n, i, j] = dy[n, o] where o*s + j*d - before
    = i (0 where no output o does): the windows seen from the input side, so contracting T
    over j is col2im as one matrix product.

    dy's row o goes to z[o*s + e - before] (e = (k-1)*d) on a zero grid of xs + e cells;
    then T[i, j] = z[i + e - j*d], the stride-1 dilated windows of z read back to front.
    """
    n = len(g.k)
    e = tuple((g.k[i] - 1) * g.d[i] for i in range(n))
    ones = (1,) * n
    z = B.scatter_windows([dy], dy.shape[:1] + tuple(g.xs[i] + e[i] for i in range(n))
                          + dy.shape[1 + n:], 1, g.out, g.s, ones, ones,
                          tuple(g.before[i] - e[i] for i in range(n)))
    t = B.windows(z, g.xs, ones, g.d, g.k)
    return B.flip(t, axis=tuple(range(1 + n, 1 + 2 * n)))


# Which col2im conv's input gradient uses: None picks by cost, "loop" / "adjoint" force one.
COL2IM = None


def _use_loop(g, cin, cout):
    """The loop writes out*K*cin cells (a matmul, then K strided adds); the adjoint copies
    xs*K*cout cells (the windows of the spread dy) into one matmul. Measured per cell (3x3,
    float32, one thread) the loop costs 1.5x the adjoint's: e.g. 9 vs 12 ms at 16 -> 32
    channels, 18 vs 6 ms at 32 -> 16, 3 vs 9 ms at stride 2."""
    if COL2IM is not None:
        return COL2IM == "loop"
    return 3 * math.prod(g.out) * cin <= 2 * math.prod(g.xs) * cout


# ---------------------------------------------------------------- kernels
# Each contraction is one matmul on 2D (or channel-batched 3D) arrays: reshaping the
# window view copies it once (the im2col), and BLAS reads transposed operands in place.

def _conv(B, x, w, geo):
    n = len(geo.k)
    cols = forward_windows(B, x, geo)                       # [N, *out, *k, C]
    rows = cols.shape[:1 + n]
    y = B.matmul(B.reshape(cols, (math.prod(rows), -1)), B.reshape(w, (-1, w.shape[-1])))
    return B.reshape(y, rows + w.shape[-1:])


def _conv_bi(B, dy, w, geo):
    n = len(geo.k)
    c, o = w.shape[-2:]
    if _use_loop(geo, c, o):
        cols = B.matmul(B.reshape(w, (-1, o)), B.reshape(dy, (-1, o)).T)   # [K*C, N*P]
        return col2im(B, B.reshape(cols, w.shape[:-1] + dy.shape[:-1]), geo)
    t = adjoint_windows(B, dy, geo)                         # [N, *xs, *k, O]
    rows = t.shape[:1 + n]
    wk = B.reshape(B.permute_dims(B.reshape(w, (-1, c, o)), (0, 2, 1)), (-1, c))  # [K*O, C]
    return B.reshape(B.matmul(B.reshape(t, (math.prod(rows), -1)), wk), rows + (c,))


def _conv_bf(B, x, dy, geo):
    n = len(geo.k)
    cols = forward_windows(B, x, geo)                       # [N, *out, *k, C]
    rows = math.prod(cols.shape[:1 + n])
    dw = B.matmul(B.reshape(cols, (rows, -1)).T, B.reshape(dy, (rows, -1)))
    return B.reshape(dw, tuple(geo.k) + (x.shape[-1], dy.shape[-1]))


def _batched_windows(inputs, attrs, levels):
    """For tf.vmap of a filter gradient: x's windows with the vmap axes joined to N
    [S*N, *out, *k, C], dy with its vmap axes [S, ...], the vmap sizes."""
    x, dy = inputs
    sizes = V.sizes_of(inputs, levels)
    s = math.prod(sizes)
    xa = E.B.reshape(V.full(x, levels, sizes), (s * x.shape[0],) + tuple(x.shape[1:]))
    return forward_windows(E.B, xa, attrs["geo"]), V.full(dy, levels, sizes), sizes, s


def _conv_bf_batched(prim, inputs, attrs, levels):
    """tf.vmap of a filter gradient (per-example weight gradients of a convolution): one
    matrix product per example, not a loop."""
    B, k = E.B, tuple(attrs["geo"].k)
    cols, dy, sizes, s = _batched_windows(inputs, attrs, levels)
    cols = B.reshape(cols, (s, -1, math.prod(cols.shape[1 + len(k):])))        # [S, N*P, K*C]
    d = B.reshape(dy, (s, -1, dy.shape[-1]))                                 # [S, N*P, O]
    dw = B.matmul(B.permute_dims(cols, (0, 2, 1)), d)                       # [S, K*C, O]
    return B.reshape(dw, tuple(sizes) + k + (cols.shape[-1] // math.prod(k), d.shape[-1]))


def _dw_bf_batched(prim, inputs, attrs, levels):
    """tf.vmap of a depthwise filter gradient: one product per example and channel."""
    B, k = E.B, tuple(attrs["geo"].k)
    cols, dy, sizes, s = _batched_windows(inputs, attrs, levels)
    c = cols.shape[-1]
    a = B.permute_dims(B.reshape(cols, (s, -1, math.prod(k), c)), (0, 3, 2, 1))   # [S,C,K,NP]
    d = B.reshape(dy, (s, -1, c, dy.shape[-1] // c))                          # [S,NP,C,M]
    r = B.matmul(a, B.permute_dims(d, (0, 2, 1, 3)))                          # [S, C, K, M]
    return B.reshape(B.permute_dims(r, (0, 2, 1, 3)), tuple(sizes) + k + (c, r.shape[-1]))


# Depthwise: a filter [*k, C, M] maps channel c to outputs c*M .. c*M + M-1.

def _dw(B, x, w, geo):
    y = B.depthwise_dot(forward_windows(B, x, geo), w)     # [N, *out, C, M]
    return B.reshape(y, y.shape[:-2] + (y.shape[-2] * y.shape[-1],))


def _dw_bi(B, dy, w, geo):
    # NOTE: always col2im's loop: the adjoint windows would make one matrix-vector product
    # per channel, measured 5x to 10x slower
    n = len(geo.k)
    c, m = w.shape[-2:]
    rows = dy.shape[:1 + n]
    wc = B.permute_dims(B.reshape(w, (-1, c, m)), (1, 0, 2))               # [C, K, M]
    d = B.permute_dims(B.reshape(dy, (math.prod(rows), c, m)), (1, 2, 0))      # [C, M, NP]
    cols = B.permute_dims(B.matmul(wc, d), (1, 0, 2))                       # [K, C, NP]
    return col2im(B, B.reshape(cols, tuple(geo.k) + (c,) + rows), geo)


def _dw_bf(B, x, dy, geo):
    n = len(geo.k)
    cols = forward_windows(B, x, geo)                       # [N, *out, *k, C]
    c = cols.shape[-1]
    rows = math.prod(cols.shape[:1 + n])
    a = B.permute_dims(B.reshape(cols, (rows, -1, c)), (2, 1, 0))          # [C, K, NP]
    b = B.permute_dims(B.reshape(dy, (rows, c, -1)), (1, 0, 2))            # [C, NP, M]
    r = B.matmul(a, b)                                                       # [C, K, M]
    return B.reshape(B.permute_dims(r, (1, 0, 2)), tuple(geo.k) + (c, r.shape[-1]))


def _family(names, fwd, bi, bf, bf_vmap):
    """Declare conv / backprop-input / backprop-filter as three mutually adjoint primitives
    (under tf.vmap, the batch of images folds into N; the filter gradient, per example, is
    ``bf_vmap``)."""
    conv = primitive(names[0], vmap=V.merge_n(0))(
        lambda B, x, filter, geo: fwd(B, x, filter, geo))
    back_in = primitive(names[1], vmap=V.merge_n(0))(
        lambda B, dy, filter, geo: bi(B, dy, filter, geo))
    back_f = primitive(names[2], vmap=bf_vmap)(lambda B, x, dy, geo: bf(B, x, dy, geo))

    @conv.def_vjp
    def _(dy, x, filter, geo, needs):
        return (E.run_kernel(back_in, (dy, filter), {"geo": geo}) if needs[0] else None,
                E.run_kernel(back_f, (x, dy), {"geo": geo}) if needs[1] else None)

    @back_in.def_vjp
    def _(g, dy, filter, geo, needs):
        # <bi(dy, w), g> = <dy, conv(g, w)>
        return (E.run_kernel(conv, (g, filter), {"geo": geo}) if needs[0] else None,
                E.run_kernel(back_f, (g, dy), {"geo": geo}) if needs[1] else None)

    @back_f.def_vjp
    def _(g, x, dy, geo, needs):
        # <bf(x, dy), g> = <conv(x, g), dy>
        return (E.run_kernel(back_in, (dy, g), {"geo": geo}) if needs[0] else None,
                E.run_kernel(conv, (x, g), {"geo": geo}) if needs[1] else None)

    return conv, back_in, back_f


# Conv1D is TF.js's Conv2D on a height-1 image; the kernels take any number of axes.
CONV2D = _family(("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"),
                 _conv, _conv_bi, _conv_bf, _conv_bf_batched)
CONV3D = _family(("Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2"),
                 _conv, _conv_bi, _conv_bf, _conv_bf_batched)
DEPTHWISE = _family(("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                     "DepthwiseConv2dNativeBackpropFilter"), _dw, _dw_bi, _dw_bf, _dw_bf_batched)


# ---------------------------------------------------------------- public functions

def floats(op, x, w, wname="filter"):
    """x and the filter as float tensors of one dtype (float64 if either is)."""
    x, w = as_floats(op, **{"x": x, wname: w})
    if x.dtype != w.dtype:
        x, w = cast(x, dtypes.float64), cast(w, dtypes.float64)
    return x, w


def to_last(x, n):
    return transpose(x, (0,) + tuple(range(2, n + 2)) + (1,))


def to_first(x, n):
    return transpose(x, (0, n + 1) + tuple(range(1, n + 1)))


def _convolve(op, n, fam, x, filter, strides, pad, data_format, dilations, mode,
              depthwise=False, names=("strides", "dilations")):
    x, w = floats(op, x, filter)
    batched = x.rank == n + 2
    if x.rank == n + 1:
        x = reshape(x, (1,) + x.shape)
    if x.rank != n + 2:
        raise ShapeError(f"Error in {op}: input must be rank {n + 2}, but got rank {x.rank} "
                         f"(shape {list(x.shape)}); rank {n + 1} means a batch of one.")
    if w.rank != n + 2:
        raise ShapeError(f"Error in {op}: filter must be rank {n + 2}, but got rank {w.rank} "
                         f"(shape {list(w.shape)}).")
    last = channels_last(op, data_format, n)
    check_rounding(op, pad, mode)
    cin = x.shape[-1] if last else x.shape[1]
    if cin != w.shape[n]:
        if depthwise:
            raise ShapeError(f"Error in {op}: number of input channels ({cin}) must match the "
                             f"inChannels dimension in filter {w.shape[n]} (filter shape "
                             f"{list(w.shape)}).")
        raise ShapeError(f"Error in {op}: depth of input ({cin}) must match input depth for "
                         f"filter {w.shape[n]} (input shape {list(x.shape)}, filter shape "
                         f"{list(w.shape)}, data format {data_format}).")
    s = ntuple(strides, n, names[0], op, MAX_STRIDE)
    d = ntuple(dilations, n, names[1], op)
    check_strides_dilations(op, s, d, strides, dilations, names)
    if not last:
        x = to_last(x, n)
    g = geometry(op, x.shape[1:1 + n], w.shape[:n], s, d, pad, mode, last)
    y = E.run_kernel(fam[0], (x, w), {"geo": g})
    if not last:
        y = to_first(y, n)
    return y if batched else reshape(y, y.shape[1:])


@export
def conv1d(x, filter, stride, pad, data_format="NWC", dilation=1, dim_rounding_mode=None):
    """1D convolution of x [batch, width, inChannels] (or [width, inChannels]) with a
    filter [filterWidth, inChannels, outChannels].

    ``pad``: 'same', 'valid', a number, or [[0, 0], [left, right], [0, 0]]. Dilation and
    channels-first ('NCW') data work in value and gradient.

    >>> import flowgrad as tf
    >>> tf.conv1d(tf.tensor([[[1], [2], [3]]]), tf.ones([2, 1, 1]), 1, "valid").print()
    Tensor
        [[[3],
          [5]]]
    """
    return _convolve("conv1d", 1, CONV2D, x, filter, stride, pad, data_format, dilation,
                     dim_rounding_mode, names=("stride", "dilation"))


@export
def conv2d(x, filter, strides, pad, data_format="NHWC", dilations=(1, 1),
           dim_rounding_mode=None):
    """2D convolution of x [batch, height, width, inChannels] (rank 3: a batch of one) with
    a filter [filterHeight, filterWidth, inChannels, outChannels].

    ``pad``: 'same', 'valid', a number, or explicit [[0, 0], [top, bottom], [left, right],
    [0, 0]] ([[0, 0], [0, 0], [top, bottom], [left, right]] for 'NCHW'). Gradients for x
    and the filter, of every order, also with dilations > 1.

    >>> import flowgrad as tf
    >>> y = tf.conv2d(tf.ones([1, 3, 3, 1]), tf.ones([2, 2, 1, 1]), 1, "valid")
    >>> y.reshape([2, 2]).print()
    Tensor
        [[4, 4],
         [4, 4]]
    """
    return _convolve("conv2d", 2, CONV2D, x, filter, strides, pad, data_format, dilations,
                     dim_rounding_mode)


@export
def conv3d(x, filter, strides, pad, data_format="NDHWC", dilations=(1, 1, 1)):
    """3D convolution of x [batch, depth, height, width, inChannels] (rank 4: a batch of
    one) with a filter [filterDepth, filterHeight, filterWidth, inChannels, outChannels].

    >>> import flowgrad as tf
    >>> tf.conv3d(tf.ones([1, 2, 2, 2, 1]), tf.ones([2, 2, 2, 1, 1]), 1, "valid").shape
    (1, 1, 1, 1, 1)
    """
    return _convolve("conv3d", 3, CONV3D, x, filter, strides, pad, data_format, dilations,
                     None)


@export
def depthwise_conv2d(x, filter, strides, pad, data_format="NHWC", dilations=(1, 1),
                     dim_rounding_mode=None):
    """Depthwise 2D convolution: a filter [filterHeight, filterWidth, inChannels,
    channelMultiplier] convolves each input channel separately; output channel
    c * channelMultiplier + m comes from input channel c.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4], [1, 2, 2, 1])
    >>> tf.depthwise_conv2d(x, tf.tensor([1, 10], [1, 1, 1, 2]), 1, "valid").reshape([4, 2]).print()
    Tensor
        [[1, 10],
         [2, 20],
         [3, 30],
         [4, 40]]
    """
    return _convolve("depthwise_conv2d", 2, DEPTHWISE, x, filter, strides, pad, data_format,
                     dilations, dim_rounding_mode, depthwise=True)


@export
def separable_conv2d(x, depthwise_filter, pointwise_filter, strides, pad, dilation=(1, 1),
                     data_format="NHWC"):
    """A depthwise convolution followed by a 1x1 convolution that mixes the channels:
    depthwise_filter [fh, fw, inChannels, channelMultiplier], pointwise_filter
    [1, 1, inChannels * channelMultiplier, outChannels].

    >>> import flowgrad as tf
    >>> y = tf.separable_conv2d(tf.ones([1, 3, 3, 2]), tf.ones([2, 2, 2, 1]),
    ...                         tf.ones([1, 1, 2, 3]), 1, "valid")
    >>> y.shape, y.max().item()
    ((1, 2, 2, 3), 8.0)
    """
    op = "separable_conv2d"
    x, dw = floats(op, x, depthwise_filter, "depthwise_filter")
    x, pw = floats(op, x, pointwise_filter, "pointwise_filter")
    if dw.dtype != pw.dtype:
        dw = cast(dw, pw.dtype)
    if dw.rank != 4:
        raise ShapeError(f"Error in {op}: depthwise filter must be rank 4, but got rank "
                         f"{dw.rank} (shape {list(dw.shape)}).")
    if pw.rank != 4:
        raise ShapeError(f"Error in {op}: pointwise filter must be rank 4, but got rank "
                         f"{pw.rank} (shape {list(pw.shape)}).")
    if pw.shape[:2] != (1, 1):
        raise ShapeError(f"Error in {op}: the pointwise filter must be [1, 1, inChannels * "
                         f"channelMultiplier, outChannels], but got shape {list(pw.shape)}.")
    cm = dw.shape[2] * dw.shape[3]
    if pw.shape[2] != cm:
        raise ShapeError(f"Error in {op}: the third dimension of pointwise filter must be "
                         f"{cm}, but got {pw.shape[2]} (inChannels {dw.shape[2]} x "
                         f"channelMultiplier {dw.shape[3]}).")
    y = _convolve(op, 2, DEPTHWISE, x, dw, strides, pad, data_format, dilation, None,
                  depthwise=True, names=("strides", "dilation"))
    return _convolve(op, 2, CONV2D, y, pw, 1, "valid", data_format, 1, None)


def _transposed(op, n, fam, x, filter, output_shape, strides, pad, mode):
    x, w = floats(op, x, filter)
    shape = as_ints(output_shape, "output_shape", op, 1)
    if len(shape) != x.rank:
        raise ShapeError(f"Error in {op}: Length of inShape ({len(shape)}) and rank of dy "
                         f"({x.rank}) must match: output_shape {list(shape)} and x of shape "
                         f"{list(x.shape)} must both have a batch axis or neither.")
    batched = x.rank == n + 2
    if x.rank == n + 1:
        x = reshape(x, (1,) + x.shape)
        shape = (1,) + shape
    if x.rank != n + 2:
        raise ShapeError(f"Error in {op}: x must be rank {n + 2}, but got rank {x.rank}.")
    if w.rank != n + 2:
        raise ShapeError(f"Error in {op}: filter must be rank {n + 2}, but got rank {w.rank}.")
    check_rounding(op, pad, mode)
    if shape[-1] != w.shape[n]:
        raise ShapeError(f"Error in {op}: depth of output ({shape[-1]}) must match output "
                         f"depth for filter {w.shape[n]} (output_shape {list(shape)}; the "
                         f"filter {list(w.shape)} is [..., outDepth, inDepth]).")
    if x.shape[-1] != w.shape[n + 1]:
        raise ShapeError(f"Error in {op}: depth of input ({x.shape[-1]}) must match input "
                         f"depth for filter {w.shape[n + 1]} (x shape {list(x.shape)}; the "
                         f"filter {list(w.shape)} is [..., outDepth, inDepth]).")
    s = ntuple(strides, n, "strides", op, MAX_STRIDE)
    g = geometry(op, shape[1:1 + n], w.shape[:n], s, (1,) * n, pad, mode)
    if g.out != x.shape[1:1 + n] or shape[0] != x.shape[0]:
        raise ShapeError(f"Error in {op}: output_shape {list(shape)} does not fit x of shape "
                         f"{list(x.shape)}: convolving output_shape with this filter, strides "
                         f"{list(s)} and pad {pad!r} gives {[shape[0], *g.out]} spatially, "
                         f"not x's batch and spatial shape. Give the output_shape whose "
                         f"convolution has x's shape.")
    y = E.run_kernel(fam[1], (x, w), {"geo": g})
    return y if batched else reshape(y, y.shape[1:])


@export
def conv2d_transpose(x, filter, output_shape, strides, pad, dim_rounding_mode=None):
    """The transposed 2D convolution (the gradient of conv2d with respect to its input):
    x [batch, height, width, inDepth], filter [fh, fw, outDepth, inDepth], output_shape
    [batch, outHeight, outWidth, outDepth] (the shape conv2d would map back to x's).

    >>> import flowgrad as tf
    >>> y = tf.conv2d_transpose(tf.ones([1, 2, 2, 1]), tf.ones([2, 2, 1, 1]), [1, 3, 3, 1],
    ...                         1, "valid")
    >>> y.reshape([3, 3]).print()
    Tensor
        [[1, 2, 1],
         [2, 4, 2],
         [1, 2, 1]]
    """
    return _transposed("conv2d_transpose", 2, CONV2D, x, filter, output_shape, strides, pad,
                       dim_rounding_mode)


@export
def conv3d_transpose(x, filter, output_shape, strides, pad):
    """The transposed 3D convolution: x [batch, depth, height, width, inDepth], filter
    [fd, fh, fw, outDepth, inDepth], output_shape [batch, outD, outH, outW, outDepth].

    >>> import flowgrad as tf
    >>> tf.conv3d_transpose(tf.ones([1, 1, 1, 1, 2]), tf.ones([2, 2, 2, 3, 2]),
    ...                     [1, 2, 2, 2, 3], 1, "valid").shape
    (1, 2, 2, 2, 3)
    """
    return _transposed("conv3d_transpose", 3, CONV3D, x, filter, output_shape, strides, pad,
                       None)
