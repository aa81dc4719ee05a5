"""Reductions over axes (``axis``: None for all, an int, negative ints, or a list;
``keep_dims`` keeps the reduced axes with length 1), and their composites.
"""
import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..arg_checks import describe
from ..errors import ArgumentError, ShapeError
from ..camel_case import Result
from ..tape import is_unit, mark_unit, units
from ._core import as_float, as_tensor, export, flag, norm_axes, norm_axis, primitive
from .logical import where
from .shape import broadcast_to, concat, reshape, reverse, slice, stop_gradient, transpose
from .creation import ones, ones_like


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _grow(dy, x, axes, keep_dims=False):
    """dy (x reduced over ``axes``) broadcast back to x's shape, keeping any extra leading
    (batch) axes dy carries in a vectorised backward pass."""
    out_rank = x.rank if keep_dims else x.rank - len(axes)
    lead = dy.shape[:dy.rank - out_rank]
    if dy.rank:         # (a scalar, a loss's, broadcasts as it is: one kernel, not two)
        dy = reshape(dy, lead + _keep_shape(x.shape, axes))
    return broadcast_to(dy, lead + x.shape)


def _check_nonempty(x, axes, fn):
    for a in axes:
        if x.shape[a] == 0:
            raise ShapeError(f"{fn}() of an empty axis: axis {a} of shape {x.shape} has no "
                             f"entries")


# ---------------------------------------------------------------- sum / mean / prod

@primitive("Sum", batched_vjp=True, vmap=V.reduce)
def _sum(B, x, axes, keep_dims):
    if x.dtype in B.float_dtypes:
        return B.sum(x, axis=axes, keepdims=keep_dims)
    return B.sum(B.summable(x), axis=axes, keepdims=keep_dims, dtype=B.dtypes["int32"])


@_sum.def_vjp
def _(dy, x, axes, keep_dims):
    dx = _grow(dy, x, axes, keep_dims)
    if units and is_unit(dy):
        mark_unit(dx)       # ones spread: the rules below may skip multiplying by them
    return dx


def sum_over(x, axes):
    """x summed over ``axes`` (a tuple of valid axes, none repeated) by the kernel itself:
    the engine's unbroadcasting, whose axes need none of sum's checks.

    >>> import flowgrad as tf
    >>> from flowgrad.ops.reduce import sum_over
    >>> sum_over(tf.tensor([[1, 2], [3, 4]]), (0,)).print()
    Tensor
        [4, 6]
    """
    return E.run_kernel(_sum, (x,), {"axes": axes, "keep_dims": False})


@export
def sum(x, axis=None, keep_dims=False):  # noqa: A001 - the TF.js name
    """The sum over ``axis`` (all axes when None). int32 and bool inputs sum to int32.

    >>> import flowgrad as tf
    >>> tf.sum(tf.tensor([[1, 2], [3, 4]]), 1).print()
    Tensor
        [3, 7]
    """
    x = as_tensor(x, "sum")
    axes = norm_axes(axis, x.rank, "sum")
    return E.run_kernel(_sum, (x,), {"axes": axes,
                                     "keep_dims": flag(keep_dims, "keep_dims", "sum")})


@primitive("Mean", batched_vjp=True, vmap=V.reduce)
def _mean(B, x, axes, keep_dims):
    return B.mean(x, axis=axes, keepdims=keep_dims)


@_mean.def_vjp
def _(dy, x, axes, keep_dims):
    n = 1
    for a in axes:
        n *= x.shape[a]
    # NOTE: divided before it is spread: one division per reduced value, not per element
    return _grow(dy / n, x, axes, keep_dims)


@export
def mean(x, axis=None, keep_dims=False):
    """The mean over ``axis`` (float32 for int32 and bool inputs).

    >>> import flowgrad as tf
    >>> tf.mean(tf.tensor([1, 2, 3, 4])).print()
    Tensor
        2.5
    """
    x = as_float(x, "mean")
    axes = norm_axes(axis, x.rank, "mean")
    _check_nonempty(x, axes, "mean")
    return E.run_kernel(_mean, (x,), {"axes": axes,
                                      "keep_dims": flag(keep_dims, "keep_dims", "mean")})


@primitive("Prod", batched_vjp=True, vmap=V.reduce)
def _prod(B, x, axes, keep_dims):
    if x.dtype in B.float_dtypes:
        return B.prod(x, axis=axes, keepdims=keep_dims)
    return B.prod(B.summable(x), axis=axes, keepdims=keep_dims, dtype=B.dtypes["int32"])


@_prod.def_vjp
def _(dy, x, axes, keep_dims):
    return _grow(dy, x, axes, keep_dims) * _prod_others(x, axes)


def _excl_cumprod_last(v):
    """Exclusive cumulative product along the last axis, in log2(n) multiplications
    (Hillis-Steele scan). Built from mul, slice and concat only, so it is exact with zeros
    and differentiable to any order."""
    n = v.shape[-1]
    lead = v.shape[:-1]

    def shift(t, k):   # t moved k places right along the last axis, ones shifted in
        head = ones(lead + (k,), t.dtype)
        return concat([head, slice(t, [0] * len(lead) + [0], list(lead) + [n - k])], -1)

    c = shift(v, 1)
    k = 1
    while k < n:
        c = c * shift(c, k)
        k *= 2
    return c


def _prod_others(x, axes):
    """For each element, the product of the other elements of its reduction group."""
    r = x.rank
    rest = [i for i in range(r) if i not in axes]
    perm = rest + list(axes)
    xt = transpose(x, perm)
    lead = xt.shape[:len(rest)]
    n = 1
    for a in axes:
        n *= x.shape[a]
    if n == 1 or x.size == 0:
        # NOTE: no other element (not x * 0 + 1: that is NaN at ±inf); an empty x has an
        # empty gradient (the scan below would slice n - 1 < 0 elements)
        return ones_like(x)
    flat = reshape(xt, lead + (n,))
    left = _excl_cumprod_last(flat)
    right = reverse(_excl_cumprod_last(reverse(flat, -1)), -1)
    others = reshape(left * right, xt.shape)
    inv = [0] * r
    for i, p in enumerate(perm):
        inv[p] = i
    return transpose(others, inv)


@export
def prod(x, axis=None, keep_dims=False):
    """The product over ``axis``. The gradient is exact with zeros ([2, 0, 3] -> [0, 6, 0])
    and differentiable again.

    >>> import flowgrad as tf
    >>> tf.prod(tf.tensor([2, 3, 4])).print()
    Tensor
        24
    """
    x = as_tensor(x, "prod")
    if x.dtype == dtypes.bool_:
        x = x.cast("int32")
    axes = norm_axes(axis, x.rank, "prod")
    return E.run_kernel(_prod, (x,), {"axes": axes,
                                      "keep_dims": flag(keep_dims, "keep_dims", "prod")})


# ---------------------------------------------------------------- max / min

@primitive("Max", save_y=True, batched_vjp=True, vmap=V.reduce)
def _max(B, x, axes, keep_dims):
    return B.max(x, axis=axes, keepdims=keep_dims)


@_max.def_vjp
def _(dy, x, y, axes, keep_dims):
    # [conv] every element equal to the extreme gets the full dy (TF.js)
    return where(x.equal(_grow(y, x, axes, keep_dims)), _grow(dy, x, axes, keep_dims), 0)


@primitive("Min", save_y=True, batched_vjp=True, vmap=V.reduce)
def _min(B, x, axes, keep_dims):
    return B.min(x, axis=axes, keepdims=keep_dims)


_min.def_vjp(_max.vjp)


def _extreme(prim, x, axis, keep_dims, fn):
    x = as_tensor(x, fn)
    axes = norm_axes(axis, x.rank, fn)
    _check_nonempty(x, axes, fn)
    return E.run_kernel(prim, (x,), {"axes": axes, "keep_dims": flag(keep_dims, "keep_dims", fn)})


@export
def max(x, axis=None, keep_dims=False):  # noqa: A001 - the TF.js name
    """The maximum over ``axis``. [conv] ties all receive the gradient.

    >>> import flowgrad as tf
    >>> tf.max(tf.tensor([3, 1, 3])).print()
    Tensor
        3
    """
    return _extreme(_max, x, axis, keep_dims, "max")


@export
def min(x, axis=None, keep_dims=False):  # noqa: A001 - the TF.js name
    """The minimum over ``axis``. [conv] ties all receive the gradient.

    >>> import flowgrad as tf
    >>> tf.min(tf.tensor([3, 1, 3])).print()
    Tensor
        1
    """
    return _extreme(_min, x, axis, keep_dims, "min")


# ---------------------------------------------------------------- logic reductions

@primitive("All", vmap=V.reduce)
def _all(B, x, axes, keep_dims):
    return B.all(x, axis=axes, keepdims=keep_dims)


@primitive("Any", vmap=V.reduce)
def _any(B, x, axes, keep_dims):
    return B.any(x, axis=axes, keepdims=keep_dims)


@export
def all(x, axis=None, keep_dims=False):  # noqa: A001 - the TF.js name
    """True where every value along ``axis`` is true (non-zero).

    >>> import flowgrad as tf
    >>> tf.all(tf.tensor([True, False])).print()
    Tensor
        false
    """
    x = as_tensor(x, "all")
    x = x if x.dtype == dtypes.bool_ else x.cast("bool")
    return E.run_kernel(_all, (x,), {"axes": norm_axes(axis, x.rank, "all"),
                                     "keep_dims": flag(keep_dims, "keep_dims", "all")})


@export
def any(x, axis=None, keep_dims=False):  # noqa: A001 - the TF.js name
    """True where some value along ``axis`` is true (non-zero).

    >>> import flowgrad as tf
    >>> tf.any(tf.tensor([True, False])).print()
    Tensor
        true
    """
    x = as_tensor(x, "any")
    x = x if x.dtype == dtypes.bool_ else x.cast("bool")
    return E.run_kernel(_any, (x,), {"axes": norm_axes(axis, x.rank, "any"),
                                     "keep_dims": flag(keep_dims, "keep_dims", "any")})


# ---------------------------------------------------------------- arg max / min

@primitive("ArgMax", zero_grad=True, vmap=V.axis_rule())
def _arg_max(B, x, axis):
    return B.astype(B.argmax(x, axis=axis), B.dtypes["int32"])


@primitive("ArgMin", zero_grad=True, vmap=V.axis_rule())
def _arg_min(B, x, axis):
    return B.astype(B.argmin(x, axis=axis), B.dtypes["int32"])


@export
def arg_max(x, axis=0):
    """Index of the largest value along ``axis`` (0 by default, as TF.js), as int32.

    >>> import flowgrad as tf
    >>> tf.arg_max(tf.tensor([1, 9, 3])).print()
    Tensor
        1
    """
    x = as_tensor(x, "arg_max")
    a = norm_axis(axis, x.rank, "arg_max")
    _check_nonempty(x, (a,), "arg_max")
    return E.run_kernel(_arg_max, (x,), {"axis": a})


@export
def arg_min(x, axis=0):
    """Index of the smallest value along ``axis`` (0 by default), as int32.

    >>> import flowgrad as tf
    >>> tf.arg_min(tf.tensor([4, 1, 3])).print()
    Tensor
        1
    """
    x = as_tensor(x, "arg_min")
    a = norm_axis(axis, x.rank, "arg_min")
    _check_nonempty(x, (a,), "arg_min")
    return E.run_kernel(_arg_min, (x,), {"axis": a})


# ---------------------------------------------------------------- composites

@export
def log_sum_exp(x, axis=None, keep_dims=False):
    """log(sum(exp(x))) over ``axis``, without overflow.

    >>> import flowgrad as tf
    >>> tf.log_sum_exp(tf.tensor([0, 0])).print()
    Tensor
        0.6931471824645996
    """
    x = as_float(x, "log_sum_exp")
    axes = norm_axes(axis, x.rank, "log_sum_exp")
    keep_dims = flag(keep_dims, "keep_dims", "log_sum_exp")
    # NOTE: shifting by the max keeps exp() finite; the shift is a constant, since the
    # result does not depend on it (and an all -Inf group is shifted by 0, not -Inf)
    m = stop_gradient(x.max(axes, True))
    m = where(m.is_finite(), m, 0)
    y = (x - m).exp().sum(axes, True).log() + m
    return y if keep_dims else reshape(y, tuple(s for i, s in enumerate(y.shape)
                                                if i not in axes))


@export
def norm(x, ord="euclidean", axis=None, keep_dims=False):
    """Vector norms (ord 1, 2/'euclidean', inf, -inf, or any p > 0) over one axis or all,
    and matrix norms ('fro', 'euclidean', 1, inf, -inf) over two axes, ``axis[0]`` the
    rows' axis and ``axis[1]`` the columns'.

    >>> import flowgrad as tf
    >>> tf.norm(tf.tensor([3, 4])).print()
    Tensor
        5
    """
    x = as_float(x, "norm")
    keep_dims = flag(keep_dims, "keep_dims", "norm")
    if isinstance(ord, (bool, np.bool_)) or not isinstance(ord, (str, int, float, np.integer,
                                                                 np.floating)):
        raise ArgumentError(f"Error in norm: ord must be a number or a string ('euclidean', "
                            f"'fro'), got {describe(ord)}")
    if x.rank == 0:
        x = reshape(x, (1,))
    if axis is None:
        axes = tuple(range(x.rank))
        flat = reshape(x, (x.size,))
        out = _vector_norm(flat, ord, 0, "norm")
        return reshape(out, (1,) * x.rank) if keep_dims else out
    axes = norm_axes(axis, x.rank, "norm")
    if len(axes) == 1:
        out = _vector_norm(x, ord, axes[0], "norm")
    elif len(axes) == 2:
        # in the order given: axis[0] is the rows' axis, axis[1] the columns' (NumPy's and
        # TF.js's reading; sorted, [1, 0] took the 1-norm for the inf-norm)
        rows, cols = (norm_axis(a, x.rank, "norm") for a in axis)
        out = _matrix_norm(x, ord, (rows, cols))
    else:
        raise ArgumentError(f"Error in norm: invalid axis: {axis} (one or two axes)")
    if keep_dims:
        out = reshape(out, _keep_shape(x.shape, axes))
    return out


def _vector_norm(x, ord, axis, fn):
    inf = float("inf")
    a = x.abs()
    if ord in ("euclidean", "fro", 2):
        return x.square().sum(axis).sqrt()
    if ord == 1:
        return a.sum(axis)
    if ord == inf:
        return a.max(axis)
    if ord == -inf:
        return a.min(axis)
    if isinstance(ord, (int, float)) and ord > 0:
        return a.pow(ord).sum(axis).pow(1.0 / ord)
    raise ArgumentError(f"Error in {fn}: invalid ord {ord!r} for a vector norm (use 1, 2, "
                        f"'euclidean', inf, -inf or a positive number)")


def _matrix_norm(x, ord, axes):
    inf = float("inf")
    a0, a1 = axes
    if ord in ("euclidean", "fro"):
        return x.square().sum(list(axes)).sqrt()
    if ord == 1:
        return x.abs().sum(a0, True).max(a1, True).squeeze(list(axes))
    if ord == inf:
        return x.abs().sum(a1, True).max(a0, True).squeeze(list(axes))
    if ord == -inf:
        return x.abs().sum(a1, True).min(a0, True).squeeze(list(axes))
    raise ArgumentError(f"Error in norm: invalid ord {ord!r} for a matrix norm (use 'fro', "
                        f"'euclidean', 1, inf or -inf)")


@export
def euclidean_norm(x, axis=None, keep_dims=False):
    """The Euclidean norm: of all entries (axis None), of vectors along one axis, or the
    Frobenius norm of matrices over two axes. ``norm(x, 'euclidean', axis, keep_dims)``.

    >>> import flowgrad as tf
    >>> tf.euclidean_norm(tf.tensor([[3, 4], [0, 12]]), 1).print()
    Tensor
        [5, 12]
    """
    return norm(x, "euclidean", axis, keep_dims)


@export(method=False)
def moments(x, axis=None, keep_dims=False):
    """The mean and the (population) variance over ``axis`` (all axes when None), as
    ``(mean, variance)`` (also ``r.mean``, ``r["variance"]``, as TF.js's object).

    >>> import flowgrad as tf
    >>> mean, variance = tf.moments(tf.tensor([1, 2, 3, 4]))
    >>> print(mean.item(), variance.item())
    2.5 1.25
    """
    x = as_float(x, "moments")
    axes = norm_axes(axis, x.rank, "moments")
    keep_dims = flag(keep_dims, "keep_dims", "moments")
    _check_nonempty(x, axes, "moments")
    m = x.mean(axes, True)
    variance = x.squared_difference(m).mean(axes, keep_dims)
    if not keep_dims:
        m = reshape(m, tuple(s for i, s in enumerate(x.shape) if i not in axes))
    return Result(mean=m, variance=variance)
