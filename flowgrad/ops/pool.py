"""Pooling: max_pool and avg_pool (2D and 3D), pool (dilated), and dilation2d (the
morphological dilation: a max pool that adds a filter to each window first).

Windows come from the same strided views as the convolutions (flowgrad.ops.conv). Padding
never takes part: max ignores it, and the average divides by the number of input cells
in each window, forward and backward alike (TF.js's avgPool 'same' gradient divides by
the full window size: wrong at the borders).

Both pools are closed under differentiation. AvgPool is linear and its gradient
AvgPoolGrad is its adjoint, so each one's rule is the other. MaxPool's gradient
MaxPoolGrad(dy, x) sends each dy to the first maximum of its window (TF.js and TF break
ties so); its gradient in dy is MaxPoolGradGrad, the gather of the same cells, whose
gradient is MaxPoolGrad again. Both are piecewise constant in x: zero gradient there.
"""
import itertools
import math

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import choice, describe
from ..errors import ArgumentError, ShapeError
from ._core import as_float, as_numeric, cast, export, met_float, primitive
from .conv import (FORMATS, MAX_STRIDE, channels_last, check_rounding, check_strides_dilations,
                   geometry, ntuple, pad_input, to_first, to_last, window_slices)
from .shape import reshape


# ---------------------------------------------------------------- kernels
# NOTE: the window reductions and their adjoint are backend extensions (ext_conv.py): on
# NumPy one strided slice per window cell, measured 5x faster for max than reducing the
# window view, and first-maximum masks instead of an argmax plus a scatter (49 -> 19 ms
# for max_pool's gradient).

def _lowest(B, dtype):
    return -B.inf if dtype in B.float_dtypes else B.iinfo(dtype).min


def _counts(B, geo, dtype):
    """The number of input cells in each window, [1, *out, 1], in ``dtype``."""
    n = len(geo.k)
    total = None
    for i in range(n):
        pos = (B.arange(geo.out[i])[:, None] * geo.s[i] + B.arange(geo.k[i])[None, :]
               * geo.d[i] - geo.before[i])
        c = B.sum(B.astype((pos >= 0) & (pos < geo.xs[i]), dtype), axis=1)
        c = B.reshape(c, (1,) * (1 + i) + (geo.out[i],) + (1,) * (n - i))
        total = c if total is None else total * c
    # NOTE: a window wholly in the padding (explicit pads wider than the window) has no
    # cell; its average is 0, not 0/0.
    return B.maximum(total, 1.0)


def _reduce(B, xp, geo, kind):
    return B.reduce_windows(xp, geo.out, geo.s, geo.d, geo.k, kind)


def _scatter(B, parts, like, geo):
    """The adjoint of the window reads: parts [N, *out, C], one per window cell, summed
    onto the input cells [N, *xs, C]."""
    return B.scatter_windows(parts, like.shape[:1] + tuple(geo.xs) + like.shape[-1:], 1,
                             geo.out, geo.s, geo.d, geo.k, geo.before)


def _avg(B, x, geo):
    return _reduce(B, pad_input(B, x, geo), geo, "sum") / _counts(B, geo, x.dtype)


def _avg_grad(B, dy, geo):
    # each cell of a window gets its output's share
    dyc = dy / _counts(B, geo, dy.dtype)
    return _scatter(B, itertools.repeat(dyc, math.prod(geo.k)), dy, geo)


def _max(B, x, geo):
    return _reduce(B, pad_input(B, x, geo, _lowest(B, x.dtype)), geo, "max")


def _first_max(B, x, geo):
    """For each window cell (row-major), its slice of the padded x and the mask of the
    outputs whose first maximum it holds: ties go to the first cell. A generator: each
    mask is made when it is used."""
    xp = pad_input(B, x, geo, _lowest(B, x.dtype))
    y = _reduce(B, xp, geo, "max")
    taken = B.zeros(y.shape, dtype=B.dtypes["bool"])
    for sl in window_slices(geo):
        m = xp[sl] == y
        m &= ~taken
        taken |= m
        yield sl, m


def _max_grad(B, dy, x, geo):
    return _scatter(B, (B.where(m, dy, 0) for _, m in _first_max(B, x, geo)), dy, geo)


def _max_gather(B, grad, x, geo):
    gp = pad_input(B, grad, geo)
    out = 0
    for sl, m in _first_max(B, x, geo):
        out = B.where(m, gp[sl], out)
    return out


def _family(names, kind):
    if kind == "avg":
        fwd = primitive(names[0], vmap=V.merge_n(0))(lambda B, x, geo: _avg(B, x, geo))
        back = primitive(names[1], vmap=V.merge_n(0))(
            lambda B, dy, geo: _avg_grad(B, dy, geo))

        @fwd.def_vjp
        def _(dy, x, geo):
            return E.run_kernel(back, (dy,), {"geo": geo})

        @back.def_vjp
        def _(g, dy, geo):
            return E.run_kernel(fwd, (g,), {"geo": geo})

        return fwd, back
    # (under tf.vmap, the batch of images folds into N)
    fwd = primitive(names[0], vmap=V.merge_n(0))(lambda B, x, geo: _max(B, x, geo))
    back = primitive(names[1], vmap=V.merge_n(0, 1))(
        lambda B, dy, x, geo: _max_grad(B, dy, x, geo))
    gather = primitive(names[2], vmap=V.merge_n(0, 1))(
        lambda B, grad, x, geo: _max_gather(B, grad, x, geo))

    @fwd.def_vjp
    def _(dy, x, geo):
        return E.run_kernel(back, (dy, x), {"geo": geo})

    @back.def_vjp
    def _(g, dy, x, geo):
        # linear in dy (a scatter to the maxima: its adjoint gathers from them); locally
        # constant in x, whose gradient is 0 away from ties
        return E.run_kernel(gather, (g, x), {"geo": geo}), None

    @gather.def_vjp
    def _(h, grad, x, geo):
        return E.run_kernel(back, (h, x), {"geo": geo}), None

    return fwd, back, gather


MAX2D = _family(("MaxPool", "MaxPoolGrad", "MaxPoolGradGrad"), "max")
MAX3D = _family(("MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad"), "max")
AVG2D = _family(("AvgPool", "AvgPoolGrad"), "avg")
AVG3D = _family(("AvgPool3D", "AvgPool3DGrad"), "avg")


# ---------------------------------------------------------------- public functions

def _pool(op, kind, n, x, filter_size, strides, pad, mode, data_format, dilations=1,
          input_name="x"):
    if kind == "max":
        x = as_numeric(x, op, input_name)
    else:
        x = as_float(x, op, input_name)
    batched = x.rank == n + 2
    if x.rank == n + 1:
        x = reshape(x, (1,) + x.shape)
    if x.rank != n + 2:
        raise ShapeError(f"Error in {op}: {input_name} must be rank {n + 2} but got rank "
                         f"{x.rank} (shape {list(x.shape)}); rank {n + 1} means a batch of "
                         f"one.")
    last = channels_last(op, data_format, n)
    check_rounding(op, pad, mode)
    k = ntuple(filter_size, n, "filter_size", op)
    s = ntuple(strides, n, "strides", op, MAX_STRIDE)
    d = ntuple(dilations, n, "dilations", op)
    check_strides_dilations(op, s, d, strides, dilations)
    if not last:
        x = to_last(x, n)
    g = geometry(op, x.shape[1:1 + n], k, s, d, pad, mode, last)
    fam = {("max", 2): MAX2D, ("max", 3): MAX3D, ("avg", 2): AVG2D, ("avg", 3): AVG3D}
    y = E.run_kernel(fam[kind, n][0], (x,), {"geo": g})
    if not last:
        y = to_first(y, n)
    return y if batched else reshape(y, y.shape[1:])


@export
def max_pool(x, filter_size, strides, pad, dim_rounding_mode=None):
    """2D max pooling of x [batch, height, width, channels] (rank 3: a batch of one).

    ``pad``: 'same', 'valid', a number or [[0, 0], [top, bottom], [left, right], [0, 0]];
    padding never wins the max. The gradient goes to the first maximum of each window.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 5, 3, 4, 2, 8, 0, 6, 7], [1, 3, 3, 1])
    >>> tf.max_pool(x, 2, 1, "valid").reshape([2, 2]).print()
    Tensor
        [[5, 8],
         [6, 8]]
    """
    return _pool("max_pool", "max", 2, x, filter_size, strides, pad, dim_rounding_mode,
                 "NHWC")


@export
def avg_pool(x, filter_size, strides, pad, dim_rounding_mode=None):
    """2D average pooling of x [batch, height, width, channels] (rank 3: a batch of one).

    Each window averages the input cells it covers: with 'same' padding the border windows
    divide by fewer cells, in the value and (unlike TF.js) in the gradient too.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4], [1, 2, 2, 1])
    >>> tf.avg_pool(x, 2, 1, "same").reshape([2, 2]).print()
    Tensor
        [[2.5, 3],
         [3.5, 4]]
    """
    return _pool("avg_pool", "avg", 2, x, filter_size, strides, pad, dim_rounding_mode,
                 "NHWC")


@export
def max_pool3d(x, filter_size, strides, pad, dim_rounding_mode=None, data_format="NDHWC"):
    """3D max pooling of x [batch, depth, height, width, channels] (rank 4: a batch of one).

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 2, 2, 1])
    >>> y = tf.max_pool3d(x, 2, 1, "valid")
    >>> y.shape, y.item()
    ((1, 1, 1, 1, 1), 8.0)
    """
    return _pool("max_pool3d", "max", 3, x, filter_size, strides, pad, dim_rounding_mode,
                 data_format)


@export
def avg_pool3d(x, filter_size, strides, pad, dim_rounding_mode=None, data_format="NDHWC"):
    """3D average pooling of x [batch, depth, height, width, channels] (rank 4: a batch of
    one); windows average the input cells they cover.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 2, 2, 1])
    >>> tf.avg_pool3d(x, [1, 2, 2], 1, "valid").reshape([2]).print()
    Tensor
        [2.5, 6.5]
    """
    return _pool("avg_pool3d", "avg", 3, x, filter_size, strides, pad, dim_rounding_mode,
                 data_format)


@export
def pool(input, window_shape, pooling_type, pad, dilations=None, strides=None,  # noqa: A002
         dim_rounding_mode=None, *, dilation_rate=None):
    """N-D pooling ('max' or 'avg') with dilated windows: x [batch, height, width,
    channels] (rank 3: a batch of one); a window_shape of 3 ints pools [batch, depth,
    height, width, channels]. ``dilation_rate`` is another name of ``dilations``.

    Padding never takes part (TF.js pads dilated 'same' windows with zeros, which then
    count in the max and the average).

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 3, 3, 1])
    >>> y = tf.pool(x, 2, "max", "valid", dilations=2)
    >>> y.shape, y.item()
    ((1, 1, 1, 1), 9.0)
    """
    op = "pool"
    if dilations is None:
        dilations = 1 if dilation_rate is None else dilation_rate
    if strides is None:
        strides = 1
    choice(pooling_type, "pooling_type", op, ("max", "avg"), (
        f"Error in pool: poolingType must be 'max' or 'avg', got {describe(pooling_type)}"))
    n = len(window_shape) if isinstance(window_shape, (list, tuple)) else 2
    if n not in (2, 3):
        raise ArgumentError(f"Error in pool: window_shape must be an int or a list of 2 or 3 "
                            f"ints, got {window_shape!r}")
    if type(pad) is int and pad == 0:
        pad = "valid"
    return _pool(op, pooling_type, n, input, window_shape, strides, pad, dim_rounding_mode,
                 FORMATS[n][0], dilations)


# ---------------------------------------------------------------- dilation2d
# Grayscale morphological dilation: y[n, o, c] = max over the window cells j of
# x[n, o*s + j*d - before, c] + filter[j, c]. Like max pooling, the gradient goes to the
# first maximum of each window (TF.js's Dilation2DBackpropInput/Filter: the argmax), to
# the input cell for x and to the filter cell for the filter. Both backprop kernels are
# linear in dy and locally constant in x and the filter: their adjoints gather from the
# argmax (Dilation2DBackpropInputGrad/FilterGrad), whose adjoints are the backprops again,
# so every order works. Padding is -inf: it never wins, and a window that sees no input
# cell gives -inf and no gradient (TF.js's cpu kernel starts its max at
# Number.MIN_SAFE_INTEGER instead).

def _dilation_arrays(B, x, w):
    """x and w in the dtype windows are compared in: floats as they are, int32 in float64
    (exact, and -inf pads it)."""
    if x.dtype in B.float_dtypes:
        return x, w
    f = B.dtypes["float64"]
    return B.astype(x, f), B.astype(w, f)


def _dilation_cells(geo):
    return itertools.product(*(range(v) for v in geo.k))


def _dilation(B, x, w, geo):
    xf, wf = _dilation_arrays(B, x, w)
    y = B.dilate_windows(pad_input(B, xf, geo, -B.inf), wf, geo.out, geo.s, geo.d, geo.k)
    return y if xf is x else B.astype(y, x.dtype)


def _dilation_argmax(B, x, w, geo):
    """For each window cell j (row-major): j, its slice of the padded x and the mask of the
    outputs whose first maximum it holds. A generator: each mask is made when used."""
    x, w = _dilation_arrays(B, x, w)
    xp = pad_input(B, x, geo, -B.inf)
    y = B.dilate_windows(xp, w, geo.out, geo.s, geo.d, geo.k)
    taken = y == -B.inf                  # windows that see no input cell: no argmax
    for j, sl in zip(_dilation_cells(geo), window_slices(geo)):
        m = (xp[sl] + w[j + (Ellipsis,)]) == y
        m &= ~taken
        taken |= m
        yield j, sl, m


def _dilation_back_input(B, x, w, dy, geo):
    return _scatter(B, (B.where(m, dy, 0) for _, _, m in _dilation_argmax(B, x, w, geo)),
                    dy, geo)


def _dilation_back_filter(B, x, w, dy, geo):
    axes = tuple(range(1 + len(geo.k)))
    parts = [B.sum(B.where(m, dy, 0), axis=axes) for _, _, m in _dilation_argmax(B, x, w, geo)]
    return B.reshape(B.stack(parts, axis=0), w.shape)


def _dilation_gather_input(B, x, w, gx, geo):
    gp = pad_input(B, gx, geo)
    out = 0
    for _, sl, m in _dilation_argmax(B, x, w, geo):
        out = B.where(m, gp[sl], out)
    return out


def _dilation_gather_filter(B, x, w, gw, geo):
    out = 0
    for j, _, m in _dilation_argmax(B, x, w, geo):
        out = B.where(m, gw[j + (Ellipsis,)], out)
    return out


# (under tf.vmap: once per example, no rule batches them yet)
DILATION = primitive("Dilation2D", vmap=V.loop)(
    lambda B, x, filter, geo: _dilation(B, x, filter, geo))
DILATION_INPUT = primitive("Dilation2DBackpropInput", vmap=V.loop)(
    lambda B, x, filter, dy, geo: _dilation_back_input(B, x, filter, dy, geo))
DILATION_FILTER = primitive("Dilation2DBackpropFilter", vmap=V.loop)(
    lambda B, x, filter, dy, geo: _dilation_back_filter(B, x, filter, dy, geo))
DILATION_GATHER_INPUT = primitive("Dilation2DBackpropInputGrad", vmap=V.loop)(
    lambda B, x, filter, gx, geo: _dilation_gather_input(B, x, filter, gx, geo))
DILATION_GATHER_FILTER = primitive("Dilation2DBackpropFilterGrad", vmap=V.loop)(
    lambda B, x, filter, gw, geo: _dilation_gather_filter(B, x, filter, gw, geo))


def _run3(prim, x, w, t, geo):
    return E.run_kernel(prim, (x, w, t), {"geo": geo})


@DILATION.def_vjp
def _(dy, x, filter, geo, needs):
    return (_run3(DILATION_INPUT, x, filter, dy, geo) if needs[0] else None,
            _run3(DILATION_FILTER, x, filter, dy, geo) if needs[1] else None)


# each backprop is linear in its last input (its adjoint gathers from the argmax) and
# locally constant in x and the filter (zero gradient away from ties); and conversely
@DILATION_INPUT.def_vjp
def _(g, x, filter, dy, geo):
    return None, None, _run3(DILATION_GATHER_INPUT, x, filter, g, geo)


@DILATION_FILTER.def_vjp
def _(g, x, filter, dy, geo):
    return None, None, _run3(DILATION_GATHER_FILTER, x, filter, g, geo)


@DILATION_GATHER_INPUT.def_vjp
def _(g, x, filter, gx, geo):
    return None, None, _run3(DILATION_INPUT, x, filter, g, geo)


@DILATION_GATHER_FILTER.def_vjp
def _(g, x, filter, gw, geo):
    return None, None, _run3(DILATION_FILTER, x, filter, g, geo)


@export
def dilation2d(x, filter, strides, pad, dilations=1, data_format="NHWC"):  # noqa: A002
    """Grayscale morphological 2D dilation of x [batch, height, width, depth] (rank 3: a
    batch of one) by filter [filter_height, filter_width, depth]:
    ``y[b, i, j, c] = max over (di, dj) of x[b, i*sh + di*dh - top, j*sw + dj*dw - left, c]
    + filter[di, dj, c]``, with strides (sh, sw), dilations (dh, dw) and ``pad`` 'same' or
    'valid' (padding never wins the max). Only ``data_format='NHWC'`` exists, as in TF.js.

    The gradients, with respect to x and to the filter, go to the first maximum of each
    window (TF.js's Dilation2DBackpropInput/Filter); they are themselves differentiable.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 5, 3, 4, 2, 8, 0, 6, 7], [3, 3, 1])
    >>> w = tf.tensor([0, -1, -1, 1], [2, 2, 1])
    >>> tf.dilation2d(x, w, 1, "valid").reshape([2, 2]).print()
    Tensor
        [[4, 9],
         [7, 8]]
    >>> tf.grad(lambda f: tf.dilation2d(x, f, 1, "valid").sum())(w).reshape([2, 2]).print()
    Tensor
        [[0, 1],
         [0, 3]]
    """
    op = "dilation2d"
    like = met_float(x, filter)
    x = as_numeric(x, op, "x", like)
    filter = as_numeric(filter, op, "filter", like)  # noqa: A001
    if x.dtype != filter.dtype:
        dt = dtypes.promote(x.dtype, filter.dtype, op)
        x, filter = cast(x, dt), cast(filter, dt)  # noqa: A001
    batched = x.rank == 4
    if x.rank == 3:
        x = reshape(x, (1,) + x.shape)
    if x.rank != 4:
        raise ShapeError(f"Error in {op}: input must be rank 4, but got rank {x.rank} (shape "
                         f"{list(x.shape)}); rank 3 means a batch of one.")
    if filter.rank != 3:
        raise ShapeError(f"Error in {op}: filter must be rank 3, but got rank {filter.rank} "
                         f"(shape {list(filter.shape)}): [filter_height, filter_width, "
                         f"depth].")
    choice(data_format, "data_format", op, ("NHWC",), (
        f"Error in {op}: only NHWC is currently supported, but got dataFormat "
        f"{describe(data_format)} (transpose the input to [batch, height, width, depth])."))
    if filter.shape[2] != x.shape[3]:
        raise ShapeError(f"Error in {op}: the filter's depth ({filter.shape[2]}) must match "
                         f"the input's depth ({x.shape[3]}): filter shape "
                         f"{list(filter.shape)}, input shape {list(x.shape)}.")
    if not (isinstance(pad, str) and pad in ("same", "valid")):
        raise ArgumentError(f"Error in {op}: pad must be 'same' or 'valid', got {pad!r}")
    s = ntuple(strides, 2, "strides", op, MAX_STRIDE)
    d = ntuple(dilations, 2, "dilations", op)
    g = geometry(op, x.shape[1:3], filter.shape[:2], s, d, pad)
    y = E.run_kernel(DILATION, (x, filter), {"geo": g})
    return y if batched else reshape(y, y.shape[1:])
