"""NumPy's numeric functions on tensors (NEP 18), and the argument machinery every NumPy
handler shares.

The machinery: refusing keywords flowgrad cannot honour (``refuse``), NumPy's ``dtype=`` and
``axis=`` (``cast_to``, ``axis_index``), and the path of a NumPy function flowgrad has no op
for (``unmapped``). The handlers here are reductions, statistics, selections, sorting,
differences (``np.diff``, ``np.gradient``), ``np.linspace``, ``np.sinc`` and
``np.nan_to_num``: each has NumPy's signature and is a composition of flowgrad ops, so it is
differentiable to any order. numpy_arrays.py holds the functions that rearrange arrays,
numpy_linalg.py the products and linear algebra; numpy_interop.py dispatches to all three.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes, recording
from .errors import ArgumentError, GradientError, ShapeError
from .ops._core import OPS, as_tensor, binary_args
from .tensor import Tensor


# ---------------------------------------------------------------- argument machinery
def np_name(func: Callable) -> str:
    """How messages name a NumPy function: ``np.mean``, ``np.linalg.norm``.

    >>> import numpy as np
    >>> np_name(np.mean), np_name(np.linalg.svd)
    ('np.mean', 'np.linalg.svd')
    """
    mod = getattr(func, "__module__", None) or "numpy"
    mod = "np" + mod[len("numpy"):] if mod.startswith("numpy") else mod
    return f"{mod}.{func.__name__}"


def refuse(fname: str, **given: tuple[Any, Any]) -> None:
    """An ArgumentError for the first NumPy keyword given a value flowgrad cannot honour
    (``given``: name -> (value, the value that means "not used")).

    >>> refuse("np.sum", out=(None, None))
    >>> try:
    ...     refuse("np.sum", out=([0.0], None))
    ... except ArgumentError as e:
    ...     print(str(e)[:54])
    np.sum(..., out=...) on a flowgrad tensor: 'out' is no
    """
    for k, (v, unused) in given.items():
        if v is unused or (type(v) is type(unused) and isinstance(v, (str, bool))
                           and v == unused):
            continue
        why = {"out": "tensors are immutable: use the returned tensor "
                      "(array = np.add(array, t) rather than out=array)",
               "where": "compute everywhere, then select with np.where(mask, y, other)",
               "copy": "tensors are immutable: use the returned tensor"
               }.get(k, "flowgrad has no such option")
        raise ArgumentError(f"{fname}(..., {k}=...) on a flowgrad tensor: '{k}' is not "
                            f"supported ({why}).")


def no_more(fname: str, kwargs: dict) -> None:
    """An ArgumentError naming the first keyword left in ``kwargs`` (one the handler does
    not know).

    >>> no_more("np.exp", {})
    """
    if kwargs:
        k = next(iter(kwargs))
        raise ArgumentError(f"{fname}(..., {k}=...) on a flowgrad tensor: '{k}' is not "
                            f"supported.")


def cast_to(x: Any, dtype: Any, fname: str) -> Any:
    """``x`` in NumPy's ``dtype=`` (unchanged when it is None), as a tensor.

    >>> import numpy as np, flowgrad as tf
    >>> cast_to(tf.tensor([1.0]), np.float64, "np.sum").dtype
    'float64'
    """
    if dtype is None:
        return x
    dt = dtypes.canonical(dtype, fn=fname)
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    return x if x.dtype == dt else OPS["cast"](x, dt)


def axis_index(axis: Any, rank: int, fname: str, what: str = "axis") -> int:
    """NumPy's axis (negative counts from the end) as an index in ``[0, rank)``; a
    ShapeError naming the call when it is out of range.

    >>> axis_index(-1, 3, "np.diff")
    2
    """
    try:
        a = operator.index(axis)
    except TypeError:
        raise ArgumentError(f"{fname}(..., {what}={axis!r}): an axis is an integer.") from None
    if not -rank <= a < rank:
        raise ShapeError(f"{fname}(..., {what}={a}): axis {a} is out of bounds for a tensor "
                         f"of rank {rank} (give one in [{-rank}, {rank - 1}]).")
    return a % rank


def flat(a: Any) -> Tensor:
    """``a`` flattened (NumPy's ``axis=None``).

    >>> import flowgrad as tf
    >>> flat(tf.ones([2, 3])).shape
    (6,)
    """
    return OPS["reshape"](a, [-1])


def along(x: Tensor, axis: int, start: int | None, stop: int | None,
          step: int | None = None) -> Tensor:
    """``x[start:stop:step]`` along ``axis`` (a non-negative axis), the other axes whole.

    >>> import flowgrad as tf
    >>> along(tf.ones([2, 5]), 1, 1, None).shape
    (2, 4)
    """
    return x[(slice(None),) * axis + (slice(start, stop, step),)]


# unmapped NumPy functions whose flowgrad spelling differs (for the error message)
ALTERNATIVES = {"np.argsort": "tf.top_k(x, k=x.shape[-1]).indices (descending)",
                "np.average": "tf.sum(x * w) / tf.sum(w)",
                "np.cbrt": "tf.sign(x) * tf.pow(tf.abs(x), 1 / 3)",
                "np.hypot": "tf.sqrt(tf.square(a) + tf.square(b))"}


def unmapped(fname: str, func: Callable, args: tuple, kwargs: dict, out: Any) -> Any:
    """A NumPy function with no flowgrad op: refused while recording (the tape would be cut
    silently), otherwise computed on the values, returning what NumPy returns.

    >>> import numpy as np, flowgrad as tf
    >>> float(unmapped("np.median", np.median, (tf.tensor([3.0, 1.0, 2.0]),), {}, None))
    2.0
    """
    if recording.is_recording() and _any_tensor((args, kwargs)):
        alt = ALTERNATIVES.get(fname)
        short = fname.rsplit(".", 1)[-1]
        if alt is None and short in OPS:
            alt = f"tf.{short}(...)"
        raise GradientError(
            f"{fname}() on a flowgrad tensor inside a gradient computation: flowgrad has no "
            f"op for it, and computing it with NumPy on the values would make its result a "
            f"constant to the gradient (silently wrong derivatives). "
            + (f"Use {alt} instead." if alt else
               "Write it with flowgrad ops, or compute it outside the gradient function "
               "(e.g. on x.numpy())."))
    if out is not None:
        kwargs = dict(kwargs, out=out)
    return func(*_values(args), **_values(kwargs))


def _any_tensor(obj):
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_any_tensor(o) for o in obj)
    if isinstance(obj, dict):
        return any(_any_tensor(o) for o in obj.values())
    return False


def _values(obj):
    if isinstance(obj, Tensor):
        return obj.numpy()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_values(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _values(v) for k, v in obj.items()}
    return obj


def _floating(x, fname):
    x = as_tensor(x, fname)
    return x if x.dtype in dtypes.FLOATS else OPS["cast"](x, dtypes.float32)


# ---------------------------------------------------------------- kinks, NumPy's way
# NOTE: at a kink NumPy code differentiates as autograd, JAX and PyTorch do it: |x|' is 0 at
# 0 and tied extremes share the gradient; tf.abs and tf.max keep TF.js's conventions (-1 at
# 0, every tied element the full gradient), which a NumPy user's finite differences refute.

def abs_numpy(x: Any) -> Tensor:
    """|x| with the derivative sign(x): 0 at 0 (np.abs, np.absolute, np.fabs on tensors).

    >>> import flowgrad as tf
    >>> tf.grad(lambda x: abs_numpy(x).sum())(tf.tensor([-2.0, 0.0, 3.0])).array_sync()
    [-1.0, 0.0, 1.0]
    """
    x = as_tensor(x, "np.abs", "x")
    return OPS["mul"](x, OPS["sign"](x))


def extreme_numpy(opname: str, x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """``OPS[opname]`` ("max" or "min") whose gradient is shared equally by tied extremes
    (np.max, np.min, np.amax, np.amin, np.maximum.reduce on tensors).

    >>> import flowgrad as tf
    >>> tf.grad(lambda x: extreme_numpy("max", x))(tf.tensor([3.0, 1.0, 3.0])).array_sync()
    [0.5, 0.0, 0.5]
    """
    y = OPS[opname](x, axis, keepdims)             # (its errors, its value)
    if not dtypes.is_float(y.dtype):
        return y
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    # value: the extreme itself, plus an exact 0 (x - m is 0 where the mask holds); gradient:
    # the mask over the number of ties
    m = OPS["stop_gradient"](OPS[opname](x, axis, True))
    mask = OPS["cast"](OPS["equal"](x, m), x.dtype)
    share = OPS["div"](OPS["sum"](OPS["mul"](mask, OPS["sub"](x, m)), axis, keepdims),
                       OPS["sum"](mask, axis, keepdims))
    return OPS["add"](OPS["stop_gradient"](y), share)


def _sqrt_zero_safe(v):
    # NOTE: std of a constant (one element, or equal ones) has no derivative at 0 variance;
    # sqrt's is +inf there and inf * 0 gives NaN: take 0 (autograd's answer)
    pos = OPS["greater"](v, 0)
    return OPS["where"](pos, OPS["sqrt"](OPS["where"](pos, v, OPS["ones_like"](v))),
                        OPS["zeros_like"](v))


# ---------------------------------------------------------------- reductions, statistics
FUNCTIONS: dict[Callable, Callable] = {}     # NumPy function -> handler with its signature


def registrar(table: dict[Callable, Callable]) -> Callable[..., Callable]:
    """The decorator ``@implements(np.f, ...)`` that enters a handler into ``table`` (each
    handler module keeps its own table; numpy_interop merges them)."""
    def implements(*funcs):
        def deco(h):
            for f in funcs:
                table[f] = h
            return h
        return deco
    return implements


_implements = registrar(FUNCTIONS)


def _reduction(opname, np_func, dtype_kw=True):
    fname = np_name(np_func)

    def h(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
          where=True):
        refuse(fname, out=(out, None), where=(where, True), initial=(initial, np._NoValue))
        if opname in ("max", "min"):
            return extreme_numpy(opname, cast_to(a, dtype, fname), axis, keepdims)
        return OPS[opname](cast_to(a, dtype, fname), axis, keepdims)

    def h_nodtype(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        return h(a, axis, None, out, keepdims, initial, where)
    FUNCTIONS[np_func] = h if dtype_kw else h_nodtype


for _f, _name, _dt in ((np.sum, "sum", True), (np.prod, "prod", True),
                       (np.max, "max", False), (np.min, "min", False),
                       (np.amax, "max", False), (np.amin, "min", False),
                       (np.all, "all", False), (np.any, "any", False)):
    _reduction(_name, _f, _dt)


@_implements(np.mean)
def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    refuse("np.mean", out=(out, None), where=(where, True))
    return OPS["mean"](cast_to(a, dtype, "np.mean"), axis, keepdims)


def _var(a, axis, dtype, out, ddof, keepdims, where, fname):
    refuse(fname, out=(out, None), where=(where, True))
    x = cast_to(a, dtype, fname)
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    v = OPS["moments"](x, axis, keepdims).variance
    if ddof:
        n = x.size // max(1, OPS["mean"](x, axis, keepdims).size)
        v = OPS["mul"](v, n / (n - ddof))
    return v


@_implements(np.var)
def _np_var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
            **kw):
    refuse("np.var", **{k: (v, None) for k, v in kw.items()})
    return _var(a, axis, dtype, out, ddof, keepdims, where, "np.var")


@_implements(np.std)
def _np_std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
            **kw):
    refuse("np.std", **{k: (v, None) for k, v in kw.items()})
    return _sqrt_zero_safe(_var(a, axis, dtype, out, ddof, keepdims, where, "np.std"))


# ---------------------------------------------------------------- complex parts of reals
# flowgrad's tensors are real: NumPy's complex accessors are what they are on real arrays
# (code written for complex data runs on real data as it does in NumPy)

@_implements(np.real, np.real_if_close)
def _real(val, tol=100):
    return as_tensor(val, "np.real", "val")


@_implements(np.imag)
def _imag(val):
    return OPS["zeros_like"](as_tensor(val, "np.imag", "val"))   # (connected: gradient 0)


@_implements(np.angle)
def _angle(z, deg=False):
    z = as_tensor(z, "np.angle", "z")
    half = 180.0 if deg else math.pi
    # NOTE: -0.0 has angle pi in NumPy (arctan2(0, -0.0)); signbit tells it from +0.0
    neg = OPS["logical_or"](OPS["less"](z, 0), OPS["logical_and"](
        OPS["equal"](z, 0), OPS["less"](OPS["div"](1.0, z), 0)))
    return OPS["add"](OPS["zeros_like"](z), OPS["mul"](OPS["cast"](neg, z.dtype), half))


def _arg(opname, fname):
    def h(a, axis=None, out=None, *, keepdims=False):
        refuse(fname, out=(out, None), keepdims=(keepdims, False))
        return OPS[opname](flat(a), 0) if axis is None else OPS[opname](a, axis)
    return h


FUNCTIONS[np.argmax] = _arg("arg_max", "np.argmax")
FUNCTIONS[np.argmin] = _arg("arg_min", "np.argmin")


def _cumulative(opname, fname):
    def h(a, axis=None, dtype=None, out=None):
        refuse(fname, out=(out, None))
        a = cast_to(a, dtype, fname)
        return OPS[opname](flat(a), 0) if axis is None else OPS[opname](a, axis)
    return h


FUNCTIONS[np.cumsum] = _cumulative("cumsum", "np.cumsum")
FUNCTIONS[np.cumprod] = _cumulative("cumprod", "np.cumprod")


# ---------------------------------------------------------------- selection
def _bool_tensor(c, fname, what):
    if isinstance(c, Tensor):
        return c
    return OPS["tensor"](np.asarray(c, dtype=bool))


@_implements(np.where)
def _where(condition, *xy):
    if len(xy) != 2:
        raise ArgumentError("np.where(condition) with one argument (the indices of true "
                            "elements) has no flowgrad op: give np.where(condition, x, y).")
    cond = _bool_tensor(condition, "np.where", "condition")
    if cond.dtype != dtypes.bool_:
        cond = OPS["cast"](cond, dtypes.bool_)
    return OPS["where"](cond, *xy)


@_implements(np.select)
def _select(condlist, choicelist, default=0):
    """The first choice whose condition holds, else ``default`` (NumPy's order: later
    conditions are overridden by earlier ones)."""
    if len(condlist) != len(choicelist):
        raise ArgumentError(f"np.select: {len(condlist)} conditions and {len(choicelist)} "
                            f"choices; give one choice per condition.")
    if not condlist:
        raise ArgumentError("np.select: no conditions given; give at least one.")
    conds = [_bool_tensor(c, "np.select", f"condlist[{i}]") for i, c in enumerate(condlist)]
    for i, c in enumerate(conds):
        if c.dtype != dtypes.bool_:
            raise ArgumentError(f"np.select: condlist[{i}] is a {c.dtype} tensor; conditions "
                                f"must be boolean (compare, e.g. x > 0).")
    like = next((c for c in choicelist if isinstance(c, Tensor)), None)
    choices = [as_tensor(c, "np.select", f"choicelist[{i}]",
                         like.dtype if like is not None else None)
               for i, c in enumerate(choicelist)]
    out = as_tensor(default, "np.select", "default", choices[0].dtype)
    for c, v in reversed(list(zip(conds, choices))):
        out = OPS["where"](c, v, out)
    return out


@_implements(np.clip)
def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
          max=np._NoValue, **kw):
    refuse("np.clip", out=(out, None), **{k: (v, None) for k, v in kw.items()})
    lo = a_min if a_min is not np._NoValue else min
    hi = a_max if a_max is not np._NoValue else max
    lo = -math.inf if lo is None or lo is np._NoValue else lo
    hi = math.inf if hi is None or hi is np._NoValue else hi
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return OPS["clip_by_value"](a, lo, hi)
    return OPS["minimum"](OPS["maximum"](a, lo), hi)        # array bounds


@_implements(np.round, np.around)
def _round(a, decimals=0, out=None):
    refuse("np.round", out=(out, None))
    if decimals == 0:
        return OPS["round"](a)
    s = 10.0 ** decimals
    return OPS["div"](OPS["round"](OPS["mul"](a, s)), s)


def _like_of(opname, fname):
    def h(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        refuse(fname, order=(order, "K"), shape=(shape, None))
        return cast_to(OPS[opname](a), dtype, fname)
    return h


FUNCTIONS[np.zeros_like] = _like_of("zeros_like", "np.zeros_like")
FUNCTIONS[np.ones_like] = _like_of("ones_like", "np.ones_like")


@_implements(np.nan_to_num)
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    refuse("np.nan_to_num", copy=(copy, True))
    x = as_tensor(x, "np.nan_to_num")
    if x.dtype not in dtypes.FLOATS:
        return x
    big = float(np.finfo(x.dtype.name).max)
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    # selects only: the gradient is 1 where x is finite and 0 where it was replaced
    y = OPS["where"](OPS["is_nan"](x), nan, x)
    y = OPS["where"](OPS["equal"](x, math.inf), posinf, y)
    return OPS["where"](OPS["equal"](x, -math.inf), neginf, y)


# Taylor coefficients of sin(z)/z in z**2: 1 - z^2/3! + z^4/5! - z^6/7! + z^8/9!
_SINC_TAYLOR = [(-1) ** i / math.factorial(2 * i + 1) for i in range(5)]


@_implements(np.sinc)
def _sinc(x):
    """sin(pi x) / (pi x), 1 at 0.

    NOTE: near 0 the quotient cancels: its derivatives lose ~2 log10(1/z) digits (and it is
    0/0 at 0). Below |pi x| = 0.1 a Taylor polynomial (truncation error < 1e-17) gives the
    value and every derivative, correct at 0 too (sinc'(0) = 0, sinc''(0) = -pi^2/3). Each
    branch of the select sees a safe input (the double-where trick), so the branch not taken
    never puts a NaN (0 * inf) into the gradient.
    """
    x = _floating(x, "np.sinc")
    z = OPS["mul"](x, math.pi)
    small = OPS["less"](OPS["abs"](z), 0.1)
    zs = OPS["where"](small, z, 0.0)
    z2 = OPS["square"](zs)
    poly = _SINC_TAYLOR[-1]
    for c in reversed(_SINC_TAYLOR[:-1]):
        poly = OPS["add"](OPS["mul"](poly, z2), c)
    zl = OPS["where"](small, 1.0, z)
    return OPS["where"](small, poly, OPS["div"](OPS["sin"](zl), zl))


# ---------------------------------------------------------------- sorting
@_implements(np.sort)
def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's ascending sort (NaN last); the gradient goes back to the entry each sorted
    value came from."""
    refuse("np.sort", order=(order, None))
    return _sorted(a, axis, "np.sort")


def _sorted(a, axis, fname):
    x = as_tensor(a, fname)
    if axis is None:
        x, axis = flat(x), 0
    if x.rank == 0:
        raise ShapeError(f"{fname}(x, axis={axis}) of a scalar: give axis=None, or a tensor "
                         f"with at least one axis.")
    ax = axis_index(axis, x.rank, fname)
    n = x.shape[ax]
    if n == 0:
        return x
    last = x.rank - 1
    if ax != last:
        x = OPS["transpose"](x, _swap(x.rank, ax, last))
    # NOTE: top_k ranks NaN first (descending): reversed, the order is NumPy's, NaN last
    y = OPS["reverse"](OPS["top_k"](x, n).values, [last])
    return y if ax == last else OPS["transpose"](y, _swap(y.rank, ax, last))


def _swap(rank, i, j):
    perm = list(range(rank))
    perm[i], perm[j] = j, i
    return perm


@_implements(np.median)
def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's median: the middle of the sorted values (the mean of the two middle ones for
    an even count), NaN where a NaN is among them; the gradient goes to the middle
    element(s) (a half each for two)."""
    refuse("np.median", out=(out, None))
    x = as_tensor(a, "np.median")
    if isinstance(axis, (tuple, list)):
        raise ArgumentError(f"np.median(a, axis={axis!r}) on a flowgrad tensor: give one axis "
                            f"or None (move the axes together and reshape them into one).")
    shape = x.shape
    if axis is None:
        x, ax = flat(x), 0
    else:
        ax = axis_index(axis, x.rank, "np.median")
    n = x.shape[ax]
    if n == 0:
        raise ShapeError(f"np.median of an empty axis (shape {shape}): there is no middle.")
    mid = along(_sorted(x, ax, "np.median"), ax, (n - 1) // 2, n // 2 + 1)
    m = OPS["mean"](mid, ax, True)
    if dtypes.is_float(x.dtype):
        m = OPS["where"](OPS["any"](OPS["is_nan"](x), ax, True),
                         OPS["fill"](m.shape, math.nan, m.dtype), m)
    if keepdims:
        return OPS["reshape"](m, [1] * len(shape)) if axis is None else m
    return OPS["reshape"](m, []) if axis is None else OPS["squeeze"](m, [ax])


@_implements(np.partition)
def _partition(a, kth, axis=-1, kind="introselect", order=None):
    """A full sort: every kth element is in its sorted place, smaller ones before it."""
    refuse("np.partition", order=(order, None))
    x = as_tensor(a, "np.partition")
    n = x.size if axis is None else x.shape[axis_index(axis, x.rank, "np.partition")]
    for k in np.atleast_1d(np.asarray(kth.numpy() if isinstance(kth, Tensor) else kth)):
        if not -n <= int(k) < n:
            raise ShapeError(f"np.partition(a, kth={kth!r}): kth {int(k)} is out of bounds "
                             f"for an axis of size {n}.")
    return _sorted(x, axis, "np.partition")


# ---------------------------------------------------------------- differences
@_implements(np.diff)
def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    x = as_tensor(a, "np.diff")
    n = operator.index(n)
    if n < 0:
        raise ArgumentError(f"np.diff(a, n={n}): the order n must be non-negative.")
    if x.rank == 0:
        raise ShapeError("np.diff of a scalar: diff needs a tensor with at least one axis.")
    ax = axis_index(axis, x.rank, "np.diff")
    parts = []
    for name, v in (("prepend", prepend), (None, x), ("append", append)):
        if v is np._NoValue:
            continue
        if name is not None:
            v = as_tensor(v, "np.diff", name, x.dtype if x.dtype in dtypes.FLOATS else None)
            if v.rank == 0:
                v = OPS["broadcast_to"](v, [1 if i == ax else s for i, s in enumerate(x.shape)])
        parts.append(v)
    if len(parts) > 1:
        x = OPS["concat"](parts, ax)
    for _ in range(n):
        hi, lo = along(x, ax, 1, None), along(x, ax, None, -1)
        x = OPS["not_equal"](hi, lo) if x.dtype == dtypes.bool_ else OPS["sub"](hi, lo)
    return x


@_implements(np.gradient)
def _gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient: second-order central differences inside, one-sided differences of
    order ``edge_order`` at the edges; spacing a scalar per axis or the coordinates."""
    f = _floating(f, "np.gradient")
    axes = list(range(f.rank)) if axis is None else \
        [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    axes = [axis_index(a, f.rank, "np.gradient") for a in axes]
    if len(set(axes)) != len(axes):
        raise ArgumentError(f"np.gradient(..., axis={axis!r}): an axis is repeated.")
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise ArgumentError(f"np.gradient: {len(varargs)} spacing arguments for "
                            f"{len(axes)} axes; give none, one scalar, or one per axis.")
    if edge_order not in (1, 2):
        raise ArgumentError(f"np.gradient(..., edge_order={edge_order!r}): edge_order must "
                            f"be 1 or 2.")
    out = tuple(_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, spacing))
    return out[0] if len(out) == 1 else out


def _gradient_along(f, ax, h, edge_order):
    n = f.shape[ax]
    if n < edge_order + 1:
        raise ShapeError(f"np.gradient: axis {ax} of f (shape {f.shape}) has {n} entries; "
                         f"edge_order={edge_order} needs at least {edge_order + 1}.")
    h = h if isinstance(h, Tensor) else OPS["tensor"](np.asarray(h, dtype=f.dtype.name))
    if h.rank not in (0, 1) or (h.rank == 1 and h.shape[0] != n):
        raise ShapeError(f"np.gradient: the spacing of axis {ax} has shape {h.shape}; give a "
                         f"scalar or the {n} coordinates along that axis.")

    def fs(start, stop):
        return along(f, ax, start, stop)

    def col(v):           # a vector along axis ax of f
        return OPS["reshape"](v, [-1 if i == ax else 1 for i in range(f.rank)])

    def add3(c0, f0, c1, f1, c2, f2):
        return OPS["add"](OPS["add"](OPS["mul"](c0, f0), OPS["mul"](c1, f1)),
                          OPS["mul"](c2, f2))
    if h.rank == 0:
        mid = OPS["div"](OPS["sub"](fs(2, None), fs(None, -2)), OPS["mul"](h, 2.0))
        if edge_order == 1:
            first = OPS["div"](OPS["sub"](fs(1, 2), fs(0, 1)), h)
            last = OPS["div"](OPS["sub"](fs(-1, None), fs(-2, -1)), h)
        else:
            first = OPS["div"](add3(-1.5, fs(0, 1), 2.0, fs(1, 2), -0.5, fs(2, 3)), h)
            last = OPS["div"](add3(0.5, fs(-3, -2), -2.0, fs(-2, -1), 1.5, fs(-1, None)), h)
        return OPS["concat"]([first, mid, last], ax)
    # coordinates: the weights of the quadratic through three neighbours
    dx = OPS["sub"](h[1:], h[:-1])
    d1, d2 = col(dx[:-1]), col(dx[1:])
    s = OPS["add"](d1, d2)
    a = OPS["div"](OPS["neg"](d2), OPS["mul"](d1, s))
    b = OPS["div"](OPS["sub"](d2, d1), OPS["mul"](d1, d2))
    c = OPS["div"](d1, OPS["mul"](d2, s))
    mid = add3(a, fs(None, -2), b, fs(1, -1), c, fs(2, None))
    if edge_order == 1:
        first = OPS["div"](OPS["sub"](fs(1, 2), fs(0, 1)), dx[0])
        last = OPS["div"](OPS["sub"](fs(-1, None), fs(-2, -1)), dx[-1])
    else:
        d1, d2 = dx[0], dx[1]
        s = OPS["add"](d1, d2)
        a = OPS["neg"](OPS["div"](OPS["add"](OPS["mul"](d1, 2.0), d2), OPS["mul"](d1, s)))
        b = OPS["div"](s, OPS["mul"](d1, d2))
        c = OPS["neg"](OPS["div"](d1, OPS["mul"](d2, s)))
        first = add3(a, fs(0, 1), b, fs(1, 2), c, fs(2, 3))
        d1, d2 = dx[-2], dx[-1]
        s = OPS["add"](d1, d2)
        a = OPS["div"](d2, OPS["mul"](d1, s))
        b = OPS["neg"](OPS["div"](s, OPS["mul"](d1, d2)))
        c = OPS["div"](OPS["add"](OPS["mul"](d2, 2.0), d1), OPS["mul"](d2, s))
        last = add3(a, fs(-3, -2), b, fs(-2, -1), c, fs(-1, None))
    return OPS["concat"]([first, mid, last], ax)


# ---------------------------------------------------------------- linspace
@_implements(np.linspace)
def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
              device=None):
    """NumPy's linspace; ``start`` and ``stop`` may be tensors (then it is differentiable
    in them) and arrays (then each sample has their broadcast shape)."""
    refuse("np.linspace", device=(device, None))
    num = operator.index(num)
    if num < 0:
        raise ArgumentError(f"np.linspace(..., num={num}): the number of samples must be "
                            f"non-negative.")
    a, b = binary_args(start, stop, "np.linspace")
    if a.dtype not in dtypes.FLOATS:
        a, b = OPS["cast"](a, dtypes.float32), OPS["cast"](b, dtypes.float32)
    shape = list(np.broadcast_shapes(a.shape, b.shape))
    div = num - 1 if endpoint else num
    ramp = OPS["tensor"](np.arange(num, dtype=a.dtype.name).reshape([num] + [1] * len(shape)))
    delta = OPS["sub"](b, a)
    step = OPS["div"](delta, div) if div > 0 else math.nan
    y = OPS["add"](OPS["mul"](ramp, step if div > 0 else delta), a)
    y = OPS["broadcast_to"](y, [num] + shape)
    if endpoint and num > 1:          # the last sample is stop itself, as NumPy's
        y = OPS["concat"]([y[:-1], OPS["expand_dims"](OPS["broadcast_to"](b, shape), 0)], 0)
    ax = axis_index(axis, y.rank, "np.linspace")
    if ax:
        y = OPS["transpose"](y, list(range(1, ax + 1)) + [0] + list(range(ax + 1, y.rank)))
    if dtype is not None:
        dt = dtypes.canonical(dtype, fn="np.linspace")
        if dt not in dtypes.FLOATS:
            y = OPS["floor"](y)
        y = cast_to(y, dt, "np.linspace")
    return (y, step) if retstep else y
