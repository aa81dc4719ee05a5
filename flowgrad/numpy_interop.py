"""NumPy functions on tensors (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``).

``np.tanh(t)``, ``np.mean(t, axis=0)``, ``np.concatenate([t, u])`` run flowgrad ops, so
they return tensors and stay differentiable. The two tables below are the one place that
says which NumPy function is which flowgrad op. NumPy keywords are translated (``axis``,
``keepdims``, ``dtype``); those flowgrad cannot honour (``out=``, ``where=``...) are refused
with an ArgumentError naming them. Results follow flowgrad's dtype rules, not NumPy's
(``np.add(int32_tensor, 1)`` is float32, as ``int32_tensor + 1`` is).

A NumPy function that is not in the tables computes on the values and returns NumPy
(``np.median(t)`` outside a gradient is what a NumPy user expects); while a gradient is
being recorded it raises a GradientError naming the function and a flowgrad alternative,
because its result would silently be a constant to the tape.

>>> import numpy as np, flowgrad as tf
>>> x = tf.tensor([0.0, 1.0])
>>> tf.grad(lambda x: np.tanh(x).sum())(x).array_sync()
[1.0, 0.41997432708740234]
"""
import math

import numpy as np

from . import dtypes
from . import recording
from .errors import ArgumentError, GradientError, ShapeError
from .ops._core import OPS, binary_args
from .tensor import Tensor

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _op(name):
    return lambda *args: OPS[name](*args)


# ---------------------------------------------------------------- ufuncs -> ops
UFUNCS = {
    # one input
    np.negative: _op("neg"), np.positive: lambda x: OPS["clone"](x),
    np.absolute: _op("abs"), np.fabs: _op("abs"), np.sign: _op("sign"),
    np.exp: _op("exp"), np.expm1: _op("expm1"), np.exp2: lambda x: OPS["pow"](2.0, x),
    np.log: _op("log"), np.log1p: _op("log1p"),
    np.log2: lambda x: OPS["mul"](OPS["log"](x), 1 / _LN2),
    np.log10: lambda x: OPS["mul"](OPS["log"](x), 1 / _LN10),
    np.sqrt: _op("sqrt"), np.square: _op("square"), np.reciprocal: _op("reciprocal"),
    np.sin: _op("sin"), np.cos: _op("cos"), np.tan: _op("tan"),
    np.arcsin: _op("asin"), np.arccos: _op("acos"), np.arctan: _op("atan"),
    np.sinh: _op("sinh"), np.cosh: _op("cosh"), np.tanh: _op("tanh"),
    np.arcsinh: _op("asinh"), np.arccosh: _op("acosh"), np.arctanh: _op("atanh"),
    np.floor: _op("floor"), np.ceil: _op("ceil"), np.rint: _op("round"),
    np.isnan: _op("is_nan"), np.isinf: _op("is_inf"), np.isfinite: _op("is_finite"),
    np.logical_not: _op("logical_not"),
    # two inputs
    np.add: _op("add"), np.subtract: _op("sub"), np.multiply: _op("mul"),
    np.divide: _op("div"), np.floor_divide: _op("floor_div"), np.remainder: _op("mod"),
    np.power: _op("pow"), np.float_power: _op("pow"), np.arctan2: _op("atan2"),
    np.maximum: _op("maximum"), np.minimum: _op("minimum"),
    np.equal: _op("equal"), np.not_equal: _op("not_equal"), np.less: _op("less"),
    np.less_equal: _op("less_equal"), np.greater: _op("greater"),
    np.greater_equal: _op("greater_equal"), np.logical_and: _op("logical_and"),
    np.logical_or: _op("logical_or"), np.logical_xor: _op("logical_xor"),
    np.matmul: lambda a, b: _matmul(a, b),
}
# ufunc.reduce -> the reduction op (np.add.reduce(t, axis=0) is tf.sum(t, 0))
REDUCES = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min",
           np.logical_and: "all", np.logical_or: "any"}


def _np_name(func):
    mod = getattr(func, "__module__", None) or "numpy"
    mod = "np" + mod[len("numpy"):] if mod.startswith("numpy") else mod
    return f"{mod}.{func.__name__}"


def _refuse(fname, **given):
    """ArgumentError for the first NumPy keyword given a value flowgrad cannot honour
    (``given``: name -> (value, the value that means "not used"))."""
    for k, (v, unused) in given.items():
        if v is unused or (type(v) is type(unused) and isinstance(v, (str, bool))
                           and v == unused):
            continue
        why = {"out": "tensors are immutable: use the returned tensor "
                      "(array = np.add(array, t) rather than out=array)",
               "where": "compute everywhere, then select with np.where(mask, y, other)"
               }.get(k, "flowgrad has no such option")
        raise ArgumentError(f"{fname}(..., {k}=...) on a flowgrad tensor: '{k}' is not "
                            f"supported ({why}).")


def _cast_to(x, dtype, fname):
    if dtype is None:
        return x
    dt = dtypes.canonical(dtype, fn=fname)
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    return x if x.dtype == dt else OPS["cast"](x, dt)


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """Tensor.__array_ufunc__: NumPy ufuncs on tensors run flowgrad ops (NEP 13).

    >>> import numpy as np, flowgrad as tf
    >>> np.maximum(tf.tensor([1.0, -1.0]), 0).array_sync()
    [1.0, 0.0]
    """
    if not _ours(type(x) for x in inputs):
        return NotImplemented
    fname = _np_name(ufunc)
    out = kwargs.pop("out", None)
    _refuse(fname, out=(out, None), where=(kwargs.pop("where", True), True),
            casting=(kwargs.pop("casting", "same_kind"), "same_kind"),
            order=(kwargs.pop("order", "K"), "K"), subok=(kwargs.pop("subok", True), True),
            signature=(kwargs.pop("signature", None), None))
    dtype = kwargs.pop("dtype", None)
    if method == "reduce" and ufunc in REDUCES:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        _refuse(fname + ".reduce", initial=(kwargs.pop("initial", np._NoValue), np._NoValue))
        _no_more(fname, kwargs)
        x = _cast_to(inputs[0], dtype, fname)
        return OPS[REDUCES[ufunc]](x, axis, keepdims)
    f = UFUNCS.get(ufunc)
    if f is None or method != "__call__":
        what = fname if method == "__call__" else f"{fname}.{method}"
        return _unmapped(what, ufunc if method == "__call__" else getattr(ufunc, method),
                         inputs, dict(kwargs, dtype=dtype) if dtype is not None else kwargs,
                         out)
    _no_more(fname, kwargs)
    if dtype is not None:
        inputs = [_cast_to(x, dtype, fname) for x in inputs]
    return f(*inputs)


def _no_more(fname, kwargs):
    if kwargs:
        k = next(iter(kwargs))
        raise ArgumentError(f"{fname}(..., {k}=...) on a flowgrad tensor: '{k}' is not "
                            f"supported.")


def _ours(types):
    """True when every argument type is one flowgrad computes with (else NotImplemented
    lets another library's __array_ufunc__ / __array_function__ have a go)."""
    for t in types:
        if not (issubclass(t, (Tensor, np.ndarray, np.generic, int, float, bool, list, tuple))
                or (getattr(t, "__array_ufunc__", None) is None
                    and getattr(t, "__array_function__", None) is None)):
            return False
    return True


# ---------------------------------------------------------------- array functions -> ops
FUNCTIONS = {}     # NumPy function -> handler with NumPy's signature


def implements(*funcs):
    def deco(h):
        for f in funcs:
            FUNCTIONS[f] = h
        return h
    return deco


def _reduction(opname, np_func, dtype_kw=True):
    fname = _np_name(np_func)

    def h(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
          where=True):
        _refuse(fname, out=(out, None), where=(where, True), initial=(initial, np._NoValue))
        return OPS[opname](_cast_to(a, dtype, fname), axis, keepdims)

    def h_nodtype(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        return h(a, axis, None, out, keepdims, initial, where)
    FUNCTIONS[np_func] = h if dtype_kw else h_nodtype


for _f, _name, _dt in ((np.sum, "sum", True), (np.prod, "prod", True),
                       (np.max, "max", False), (np.min, "min", False),
                       (np.amax, "max", False), (np.amin, "min", False),
                       (np.all, "all", False), (np.any, "any", False)):
    _reduction(_name, _f, _dt)


@implements(np.mean)
def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _refuse("np.mean", out=(out, None), where=(where, True))
    return OPS["mean"](_cast_to(a, dtype, "np.mean"), axis, keepdims)


def _var(a, axis, dtype, out, ddof, keepdims, where, fname):
    _refuse(fname, out=(out, None), where=(where, True))
    x = _cast_to(a, dtype, fname)
    x = x if isinstance(x, Tensor) else OPS["tensor"](x)
    v = OPS["moments"](x, axis, keepdims).variance
    if ddof:
        n = x.size // max(1, OPS["mean"](x, axis, keepdims).size)
        v = OPS["mul"](v, n / (n - ddof))
    return v


@implements(np.var)
def _np_var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
            **kw):
    _refuse("np.var", **{k: (v, None) for k, v in kw.items()})
    return _var(a, axis, dtype, out, ddof, keepdims, where, "np.var")


@implements(np.std)
def _np_std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
            **kw):
    _refuse("np.std", **{k: (v, None) for k, v in kw.items()})
    return OPS["sqrt"](_var(a, axis, dtype, out, ddof, keepdims, where, "np.std"))


def _flat(a):
    return OPS["reshape"](a, [-1])


def _arg(opname, fname):
    def h(a, axis=None, out=None, *, keepdims=False):
        _refuse(fname, out=(out, None), keepdims=(keepdims, False))
        return OPS[opname](_flat(a), 0) if axis is None else OPS[opname](a, axis)
    return h


FUNCTIONS[np.argmax] = _arg("arg_max", "np.argmax")
FUNCTIONS[np.argmin] = _arg("arg_min", "np.argmin")


def _cumulative(opname, fname):
    def h(a, axis=None, dtype=None, out=None):
        _refuse(fname, out=(out, None))
        a = _cast_to(a, dtype, fname)
        return OPS[opname](_flat(a), 0) if axis is None else OPS[opname](a, axis)
    return h


FUNCTIONS[np.cumsum] = _cumulative("cumsum", "np.cumsum")
FUNCTIONS[np.cumprod] = _cumulative("cumprod", "np.cumprod")


@implements(np.where)
def _where(condition, *xy):
    if len(xy) != 2:
        raise ArgumentError("np.where(condition) with one argument (the indices of true "
                            "elements) has no flowgrad op: give np.where(condition, x, y).")
    cond = condition if isinstance(condition, Tensor) else OPS["tensor"](
        np.asarray(condition, dtype=bool))
    if cond.dtype != dtypes.bool_:
        cond = OPS["cast"](cond, dtypes.bool_)
    return OPS["where"](cond, *xy)


@implements(np.concatenate)
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _refuse("np.concatenate", out=(out, None), casting=(casting, "same_kind"))
    arrays = [_cast_to(a, dtype, "np.concatenate") for a in arrays]
    return OPS["concat"]([_flat(a) for a in arrays], 0) if axis is None else \
        OPS["concat"](arrays, axis)


@implements(np.stack)
def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _refuse("np.stack", out=(out, None), casting=(casting, "same_kind"))
    return OPS["stack"]([_cast_to(a, dtype, "np.stack") for a in arrays], axis)


@implements(np.reshape)
def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    _refuse("np.reshape", order=(order, "C"))
    return OPS["reshape"](a, newshape if shape is None else shape)


@implements(np.ravel)
def _ravel(a, order="C"):
    _refuse("np.ravel", order=(order, "C"))
    return _flat(a)


@implements(np.transpose)
def _transpose(a, axes=None):
    return OPS["transpose"](a, None if axes is None else list(axes))


@implements(np.clip)
def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
          max=np._NoValue, **kw):
    _refuse("np.clip", out=(out, None), **{k: (v, None) for k, v in kw.items()})
    lo = a_min if a_min is not np._NoValue else min
    hi = a_max if a_max is not np._NoValue else max
    lo = -math.inf if lo is None or lo is np._NoValue else lo
    hi = math.inf if hi is None or hi is np._NoValue else hi
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return OPS["clip_by_value"](a, lo, hi)
    return OPS["minimum"](OPS["maximum"](a, lo), hi)        # array bounds


@implements(np.squeeze)
def _squeeze(a, axis=None):
    return OPS["squeeze"](a, None if axis is None else
                          ([axis] if isinstance(axis, int) else list(axis)))


@implements(np.expand_dims)
def _expand_dims(a, axis):
    return OPS["expand_dims"](a, axis)


@implements(np.broadcast_to)
def _broadcast_to(array, shape, subok=False):
    return OPS["broadcast_to"](array, [shape] if isinstance(shape, int) else list(shape))


@implements(np.tile)
def _tile(A, reps):
    a = A if isinstance(A, Tensor) else OPS["tensor"](A)
    reps = [reps] if isinstance(reps, int) else list(reps)
    while a.rank < len(reps):
        a = OPS["expand_dims"](a, 0)
    return OPS["tile"](a, [1] * (a.rank - len(reps)) + reps)


@implements(np.flip)
def _flip(m, axis=None):
    return OPS["reverse"](m, axis)


@implements(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kw):
    _refuse("np.einsum", out=(out, None), **{k: (v, None) for k, v in kw.items()})
    return OPS["einsum"](subscripts, *operands)


@implements(np.round, np.around)
def _round(a, decimals=0, out=None):
    _refuse("np.round", out=(out, None))
    if decimals == 0:
        return OPS["round"](a)
    s = 10.0 ** decimals
    return OPS["div"](OPS["round"](OPS["mul"](a, s)), s)


def _like_of(opname, fname):
    def h(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        _refuse(fname, order=(order, "K"), shape=(shape, None))
        return _cast_to(OPS[opname](a), dtype, fname)
    return h


FUNCTIONS[np.zeros_like] = _like_of("zeros_like", "np.zeros_like")
FUNCTIONS[np.ones_like] = _like_of("ones_like", "np.ones_like")


@implements(np.linalg.norm)
def _norm(x, ord=None, axis=None, keepdims=False):
    if ord not in (None, 2, "fro") or (ord == 2 and axis is None and np.ndim(x) != 1):
        raise ArgumentError(f"np.linalg.norm(x, ord={ord!r}): only the Euclidean / "
                            f"Frobenius norm maps to flowgrad; use tf.norm(x, ord, axis).")
    return OPS["euclidean_norm"](x, axis if axis is None or isinstance(axis, int)
                                 else list(axis), keepdims)


# ---------------------------------------------------------------- products
# np.dot, np.matmul, np.inner, np.vdot, np.outer, np.tensordot with NumPy's semantics (shapes
# and values), written with transpose / reshape / mat_mul: differentiable to any order.

def _contract(a, b, axes_a, axes_b, fname):
    """Sum over a's ``axes_a`` paired with b's ``axes_b``; the result's axes are a's other
    axes, then b's (np.tensordot). One mat_mul of a (rows, k) by a (k, cols) matrix."""
    for i, j in zip(axes_a, axes_b):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"{fname}: shapes {a.shape} and {b.shape} not aligned: "
                             f"{a.shape[i]} (dim {i}) != {b.shape[j]} (dim {j}).")
    free_a = [i for i in range(a.rank) if i not in axes_a]
    free_b = [j for j in range(b.rank) if j not in axes_b]
    k = math.prod(a.shape[i] for i in axes_a)
    a2 = _matrix(a, free_a + list(axes_a), math.prod(a.shape[i] for i in free_a), k)
    b2 = _matrix(b, list(axes_b) + free_b, k, math.prod(b.shape[j] for j in free_b))
    y = OPS["mat_mul"](a2, b2)
    shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b)
    return y if y.shape == shape else OPS["reshape"](y, list(shape))


def _matrix(x, perm, rows, cols):
    if perm != list(range(x.rank)):
        x = OPS["transpose"](x, perm)
    return x if x.shape == (rows, cols) else OPS["reshape"](x, [rows, cols])


@implements(np.dot)
def _dot(a, b, out=None):
    """NumPy's dot: a scalar multiplies; otherwise dot(a, b)[i.., k.., m] =
    sum(a[i.., :] * b[k.., :, m]) (the last axis of a with the one before last of b, or
    b's only axis) -- not matmul's batching."""
    _refuse("np.dot", out=(out, None))
    a, b = binary_args(a, b, "np.dot")
    if a.rank == 0 or b.rank == 0:
        return OPS["mul"](a, b)
    return _contract(a, b, [a.rank - 1], [max(b.rank - 2, 0)], "np.dot")


def _matmul(a, b):
    """NumPy's matmul: batch axes broadcast; a vector operand gets an axis for the product,
    removed from the result; scalars are refused (as NumPy does)."""
    a, b = binary_args(a, b, "np.matmul")
    for i, t in enumerate((a, b)):
        if t.rank == 0:
            raise ShapeError(f"np.matmul: operand {i} is a scalar (shape ()); matmul needs "
                             f"at least one axis (use np.multiply or * for a scalar).")
    n, m = a.shape[-1], b.shape[0 if b.rank == 1 else -2]
    if n != m:
        raise ShapeError(f"np.matmul: shapes {a.shape} and {b.shape}: the last axis of the "
                         f"first ({n}) does not match the "
                         f"{'only' if b.rank == 1 else 'second to last'} axis of the second "
                         f"({m}).")
    if a.rank >= 2 and b.rank >= 2:
        return OPS["mat_mul"](a, b)
    if b.rank == 1:                 # (.., k, n) . (n,): a's last axis against b
        return _contract(a, b, [a.rank - 1], [0], "np.matmul")
    y = OPS["mat_mul"](OPS["reshape"](a, [1, n]), b)        # (n,) @ (.., n, m)
    return OPS["squeeze"](y, [y.rank - 2])


@implements(np.inner)
def _inner(a, b):
    """NumPy's inner: the last axes of a and b, summed (a scalar multiplies)."""
    a, b = binary_args(a, b, "np.inner")
    if a.rank == 0 or b.rank == 0:
        return OPS["mul"](a, b)
    return _contract(a, b, [a.rank - 1], [b.rank - 1], "np.inner")


@implements(np.vdot)
def _vdot(a, b):
    """NumPy's vdot (real numbers): the flattened a and b, multiplied and summed."""
    a, b = binary_args(a, b, "np.vdot")
    if a.size != b.size:
        raise ShapeError(f"np.vdot: a (shape {a.shape}) has {a.size} elements and b (shape "
                         f"{b.shape}) {b.size}: vdot needs as many in both.")
    return _contract(_flat(a), _flat(b), [0], [0], "np.vdot")


@implements(np.outer)
def _outer(a, b, out=None):
    _refuse("np.outer", out=(out, None))
    a, b = binary_args(a, b, "np.outer")
    return _contract(_flat(a), _flat(b), [], [], "np.outer")


@implements(np.tensordot)
def _tensordot(a, b, axes=2):
    """NumPy's tensordot: ``axes=N`` sums a's last N axes with b's first N; ``axes=(p, q)``
    sums a's axes p with b's axes q (each an int or a sequence)."""
    a, b = binary_args(a, b, "np.tensordot")
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(a.rank, b.rank):
            raise ShapeError(f"np.tensordot(a, b, axes={n}): a (shape {a.shape}) and b "
                             f"(shape {b.shape}) have no {n} axes to sum over.")
        pa, pb = list(range(a.rank - n, a.rank)), list(range(n))
    else:
        try:
            pa, pb = ([p] if isinstance(p, (int, np.integer)) else [int(i) for i in p]
                      for p in axes)
        except (TypeError, ValueError):
            raise ArgumentError(f"np.tensordot(a, b, axes={axes!r}): axes must be an int or "
                                f"a pair (axes of a, axes of b).") from None
        pa, pb = _axes(pa, a, "a", axes), _axes(pb, b, "b", axes)
        if len(pa) != len(pb):
            raise ShapeError(f"np.tensordot(a, b, axes={axes!r}): {len(pa)} axes of a "
                             f"against {len(pb)} of b.")
    return _contract(a, b, pa, pb, "np.tensordot")


def _axes(axes, t, name, given):
    out = []
    for i in axes:
        if not -t.rank <= i < t.rank or i % t.rank in out:
            raise ArgumentError(f"np.tensordot(a, b, axes={given!r}): axis {i} of {name} "
                                f"(shape {t.shape}) is out of range or repeated.")
        out.append(i % t.rank)
    return out


# metadata: no values read, nothing to record
FUNCTIONS[np.shape] = lambda a: tuple(a.shape)
FUNCTIONS[np.ndim] = lambda a: a.rank
FUNCTIONS[np.size] = lambda a, axis=None: a.size if axis is None else a.shape[axis]

# unmapped NumPy functions whose flowgrad spelling differs (for the error message)
ALTERNATIVES = {"np.sort": "tf.top_k(x, k=x.shape[-1]).values (descending)",
                "np.argsort": "tf.top_k(x, k=x.shape[-1]).indices (descending)",
                "np.pad": "tf.pad(x, paddings, constant_value)",
                "np.take": "tf.gather(x, indices, axis)",
                "np.diff": "x[1:] - x[:-1]",
                "np.median": "tf.top_k on the flattened tensor, then its middle element",
                "np.trace": "tf.sum(x * tf.eye(n))",
                "np.average": "tf.sum(x * w) / tf.sum(w)",
                "np.cbrt": "tf.sign(x) * tf.pow(tf.abs(x), 1 / 3)",
                "np.hypot": "tf.sqrt(tf.square(a) + tf.square(b))",
                "np.logaddexp": "tf.log_sum_exp(tf.stack([a, b]), 0)",
                "np.split": "tf.split(x, sizes, axis)", "np.array_split": "tf.split(x, ...)"}


def array_function(self, func, types, args, kwargs):
    """Tensor.__array_function__: NumPy functions on tensors run flowgrad ops (NEP 18).

    >>> import numpy as np, flowgrad as tf
    >>> np.mean(tf.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0, keepdims=True).shape
    (1, 2)
    """
    if not _ours(types):
        return NotImplemented
    h = FUNCTIONS.get(func)
    if h is None:
        return _unmapped(_np_name(func), func, args, kwargs, None)
    return h(*args, **kwargs)


def _unmapped(fname, func, args, kwargs, out):
    """A NumPy function with no flowgrad op: refuse while recording (the tape would be cut
    silently), otherwise compute on the values and return what NumPy returns."""
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


for _name, _fn in (("__array_ufunc__", array_ufunc), ("__array_function__", array_function)):
    # frames named as the protocol: debug reports of value reads say "a NumPy function"
    _fn.__code__ = _fn.__code__.replace(co_name=_name)
    setattr(Tensor, _name, _fn)
