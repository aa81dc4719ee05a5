"""NumPy functions on tensors (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``).

``np.tanh(t)``, ``np.mean(t, axis=0)``, ``np.concatenate([t, u])`` run flowgrad ops, so
they return tensors and stay differentiable. The two tables below, UFUNCS and FUNCTIONS, are
the one place that says which NumPy function is which flowgrad op (the array functions'
handlers live in numpy_functions.py, numpy_arrays.py and numpy_linalg.py). NumPy keywords
are translated (``axis``, ``keepdims``, ``dtype``); those flowgrad cannot honour (``out=``,
``where=``...) are refused with an ArgumentError naming them. Results follow flowgrad's
dtype rules, not NumPy's (``np.add(int32_tensor, 1)`` is float32, as ``int32_tensor + 1``
is).

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

from . import numpy_arrays, numpy_functions, numpy_linalg, user_frames
from .numpy_functions import (abs_numpy, cast_to, extreme_numpy, no_more, np_name, refuse,
                              unmapped)
from .errors import DtypeError
from .ops._core import OPS, binary_args
from .tensor import Tensor

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _op(name):
    return lambda *args: OPS[name](*args)


def _logaddexp(a, b):
    """log(exp(a) + exp(b)), stable, with the gradient exp(a) / (exp(a) + exp(b)) at ties.

    NOTE: max(a, b) + log1p(exp(-|a - b|)) is stable but its gradient at a == b depends on
    the conventions at the kinks of max and abs (they give 1.5 and -0.5 there). Here the
    shift m = max(a, b) is a constant (stop_gradient; 0 where infinite, so that inf - inf
    never appears): m + log(exp(a - m) + exp(b - m)) has the exact gradient for any m. The
    sum is formed as expm1 of the larger term plus exp of the other, so that log1p keeps
    the digits of the smaller one.
    """
    a, b = binary_args(a, b, "np.logaddexp")
    m = OPS["maximum"](a, b)
    m = OPS["stop_gradient"](OPS["where"](OPS["is_finite"](m), m, OPS["zeros_like"](m)))
    da, db = OPS["sub"](a, m), OPS["sub"](b, m)
    s = OPS["where"](OPS["greater_equal"](a, b),
                     OPS["add"](OPS["expm1"](da), OPS["exp"](db)),
                     OPS["add"](OPS["exp"](da), OPS["expm1"](db)))
    return OPS["add"](m, OPS["log1p"](s))


def _logaddexp2(a, b):
    a, b = binary_args(a, b, "np.logaddexp2")
    return OPS["div"](_logaddexp(OPS["mul"](a, _LN2), OPS["mul"](b, _LN2)), _LN2)


def _bitwise(logical, bitwise=None):
    """np.bitwise_and / or / xor: on bools the logical op (what `&`, `|`, `^` run on
    tensors, whichever side the NumPy value is on), on int32 the bitwise op where flowgrad
    has one; anything else is a DtypeError, never NumPy's own answer."""
    def f(a, b):
        name = f"np.bitwise_{logical[len('logical_'):]}"
        given = [str(getattr(x, "dtype", type(x).__name__)) for x in (a, b)]
        a, b = binary_args(a, b, name)
        if a.dtype == "bool" and b.dtype == "bool":
            return OPS[logical](a, b)
        if bitwise is not None and a.dtype == "int32" and b.dtype == "int32":
            return OPS[bitwise](a, b)
        raise DtypeError(f"{name} takes two bool tensors (the logical op)"
                         + (" or two int32 tensors" if bitwise else "")
                         + f", got {given[0]} and {given[1]}")
    return f


def _fmax_fmin(opname):
    def f(a, b):
        # NaN loses: each NaN is replaced by the other operand (two NaNs stay NaN); the
        # gradient of an entry goes to the operand it came from
        a, b = binary_args(a, b, f"np.f{opname[:3]}")
        a2 = OPS["where"](OPS["is_nan"](a), b, a)
        return OPS[opname](a2, OPS["where"](OPS["is_nan"](b), a2, b))
    return f


# ---------------------------------------------------------------- ufuncs -> ops
UFUNCS = {
    # one input
    np.negative: _op("neg"), np.positive: lambda x: OPS["clone"](x),
    np.absolute: abs_numpy, np.fabs: abs_numpy, np.sign: _op("sign"),
    np.conjugate: lambda x: OPS["clone"](x),
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
    np.deg2rad: lambda x: OPS["mul"](x, math.pi / 180),
    np.radians: lambda x: OPS["mul"](x, math.pi / 180),
    np.rad2deg: lambda x: OPS["mul"](x, 180 / math.pi),
    np.degrees: lambda x: OPS["mul"](x, 180 / math.pi),
    # two inputs
    np.add: _op("add"), np.subtract: _op("sub"), np.multiply: _op("mul"),
    np.divide: _op("div"), np.floor_divide: _op("floor_div"), np.remainder: _op("mod"),
    np.power: _op("pow"), np.float_power: _op("pow"), np.arctan2: _op("atan2"),
    np.maximum: _op("maximum"), np.minimum: _op("minimum"),
    np.fmax: _fmax_fmin("maximum"), np.fmin: _fmax_fmin("minimum"),
    np.logaddexp: _logaddexp, np.logaddexp2: _logaddexp2,
    np.equal: _op("equal"), np.not_equal: _op("not_equal"), np.less: _op("less"),
    np.less_equal: _op("less_equal"), np.greater: _op("greater"),
    np.greater_equal: _op("greater_equal"), np.logical_and: _op("logical_and"),
    np.logical_or: _op("logical_or"), np.logical_xor: _op("logical_xor"),
    np.bitwise_and: _bitwise("logical_and", "bitwise_and"),
    np.bitwise_or: _bitwise("logical_or"), np.bitwise_xor: _bitwise("logical_xor"),
    np.matmul: numpy_linalg.matmul,
}
# ufunc.reduce -> the reduction op (np.add.reduce(t, axis=0) is tf.sum(t, 0))
REDUCES = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min",
           np.logical_and: "all", np.logical_or: "any"}


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """Tensor.__array_ufunc__: NumPy ufuncs on tensors run flowgrad ops (NEP 13).

    >>> import numpy as np, flowgrad as tf
    >>> np.maximum(tf.tensor([1.0, -1.0]), 0).array_sync()
    [1.0, 0.0]
    """
    if not _ours(type(x) for x in inputs):
        return NotImplemented
    fname = np_name(ufunc)
    out = kwargs.pop("out", None)
    refuse(fname, out=(out, None), where=(kwargs.pop("where", True), True),
           casting=(kwargs.pop("casting", "same_kind"), "same_kind"),
           order=(kwargs.pop("order", "K"), "K"), subok=(kwargs.pop("subok", True), True),
           signature=(kwargs.pop("signature", None), None))
    dtype = kwargs.pop("dtype", None)
    if method == "reduce" and ufunc in REDUCES:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        refuse(fname + ".reduce", initial=(kwargs.pop("initial", np._NoValue), np._NoValue))
        no_more(fname, kwargs)
        x = cast_to(inputs[0], dtype, fname)
        if REDUCES[ufunc] in ("max", "min"):
            return extreme_numpy(REDUCES[ufunc], x, axis, keepdims)
        return OPS[REDUCES[ufunc]](x, axis, keepdims)
    f = UFUNCS.get(ufunc)
    if f is None or method != "__call__":
        what = fname if method == "__call__" else f"{fname}.{method}"
        return unmapped(what, ufunc if method == "__call__" else getattr(ufunc, method),
                        inputs, dict(kwargs, dtype=dtype) if dtype is not None else kwargs,
                        out)
    no_more(fname, kwargs)
    if dtype is not None:
        inputs = [cast_to(x, dtype, fname) for x in inputs]
    return f(*inputs)


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
FUNCTIONS = {**numpy_functions.FUNCTIONS, **numpy_arrays.FUNCTIONS,
             **numpy_linalg.FUNCTIONS}     # NumPy function -> handler with its signature
# metadata: no values read, nothing to record
FUNCTIONS[np.shape] = lambda a: tuple(a.shape)
FUNCTIONS[np.ndim] = lambda a: a.rank
FUNCTIONS[np.size] = lambda a, axis=None: a.size if axis is None else a.shape[axis]


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
        return unmapped(np_name(func), func, args, kwargs, None)
    return h(*args, **kwargs)


for _name, _fn in (("__array_ufunc__", array_ufunc), ("__array_function__", array_function)):
    # frames named as the protocol: debug reports of value reads say "a NumPy function"
    _fn.__code__ = _fn.__code__.replace(co_name=_name)
    setattr(Tensor, _name, _fn)


def _called(frame):
    """What the user called, for the debug reports' op names: np.log, np.add.reduce..."""
    loc = frame.f_locals
    if "ufunc" in loc:
        method = loc.get("method", "__call__")
        return np_name(loc["ufunc"]) + ("" if method == "__call__" else f".{method}")
    return np_name(loc["func"])


user_frames.FRAME_NAMERS.update(__array_ufunc__=_called, __array_function__=_called)
