"""String tensors (TF.js's dtype 'string'): made, printed, read, reshaped and disposed.

``tf.tensor(["a", "bc"])`` is a tensor of dtype ``'string'``. Strings are data, not numbers:
what works on them is creation (``tensor``, ``scalar``, ``tensor1d`` ... ``tensor6d``),
printing in TF.js's format (``['a', 'bc']``), reading the values (``array_sync``,
``data_sync``, ``numpy``, ``item``), ``dtype`` / ``shape`` / ``size``, ``tidy`` / ``keep`` /
``dispose``, memory accounting, and the ops that only move whole elements without reading
them: ``clone`` and ``reshape`` (with the ops that are reshapes: ``expand_dims``,
``squeeze``, ``flatten``, ``as1d`` ... ``as_scalar``). Any other op raises a ``DtypeError``
in TF.js's words (``Argument 'x' passed to 'square' must be numeric tensor, but got string
tensor``).

``tf.memory().num_bytes`` counts the bytes of the UTF-8 encoded strings, as TF.js does
(``['ab', 'cde']`` is 5 bytes), not Python's object overhead. Strings live in host memory,
on the NumPy backend.

The values are held by a :class:`StringArray`: an object array of Python ``str`` that
refuses every NumPy computation (ufuncs, functions, operators, indexing) with a
``TypeError`` naming what was tried; the engine turns that into the ``DtypeError`` of the
kernel that tried it.

>>> import flowgrad as tf
>>> t = tf.tensor([["a", "bc"], ["def", "g"]])
>>> t.dtype, t.shape, t.array_sync()
('string', (2, 2), [['a', 'bc'], ['def', 'g']])
"""
import math

import numpy as np

from .errors import ArgumentError, DtypeError, ShapeError

STRING = "string"


class StringDType:
    """The dtype object of string arrays (what ``StringArray.dtype`` is; the engine maps it
    to the dtype name ``'string'``)."""
    name = STRING

    def __repr__(self):
        return "dtype('string')"


STRING_DTYPE = StringDType()

OPS_HINT = ("string tensors support creation, printing, reading values, clone, reshape "
             "(and expand_dims, squeeze, flatten, as1d...), tidy/keep/dispose and memory()")


def _refuse(what):
    return TypeError(f"string tensors cannot be used in {what}: {OPS_HINT}")


def utf8_bytes(values):
    """The number of bytes of the UTF-8 encoding of every string of an object array."""
    return sum(len(s.encode("utf-8")) for s in values.flat)


class StringArray:
    """An array of strings: ``values``, an object array of Python ``str``.

    It has ``shape``, ``ndim`` and ``dtype`` (:data:`STRING_DTYPE`), and ``size``, which is
    the number of bytes of its UTF-8 encoded strings, not the number of strings: the engine
    counts a tensor's bytes as ``size`` times its dtype's item size, which is 1 for strings
    (``count`` is the number of strings). ``reshape`` returns a view; ``np.asarray`` gives a
    NumPy unicode array (a copy); everything else NumPy could do to it is refused.
    """
    __slots__ = ("values", "size")
    dtype = STRING_DTYPE
    __hash__ = None

    def __init__(self, values, nbytes=None):
        self.values = values
        self.size = utf8_bytes(values) if nbytes is None else nbytes

    @property
    def shape(self):
        return self.values.shape

    @property
    def ndim(self):
        return self.values.ndim

    @property
    def count(self):
        """The number of strings."""
        return self.values.size

    def reshape(self, shape, *args, **kw):
        return StringArray(self.values.reshape(shape), self.size)

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype).kind not in "UO":
            raise _refuse(f"a conversion to {np.dtype(dtype)}")
        if copy is False:
            raise ValueError("string values are stored as Python objects: reading them as a "
                             "NumPy array makes a copy")
        out = self.values.astype(np.str_)
        return out if dtype is None else out.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _refuse(f"numeric computations (NumPy's {ufunc.__name__})")

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if name in ("may_share_memory", "shares_memory"):
            a, b = (x.values if isinstance(x, StringArray) else x for x in args[:2])
            return func(a, b)
        if name == "reshape":
            return args[0].reshape(args[1] if len(args) > 1 else kwargs["shape"])
        raise _refuse(f"NumPy's {name}")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _refuse(f"an array operation ('{name}')")

    def __getitem__(self, key):
        raise _refuse("indexing")

    def __setitem__(self, key, value):
        raise _refuse("indexing")

    def _operator(self, *args):
        raise _refuse("arithmetic or comparisons")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = \
        __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = \
        __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __abs__ = __invert__ = \
        __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lt__ = __le__ = \
        __gt__ = __ge__ = __eq__ = __ne__ = __iadd__ = __imul__ = __isub__ = __iand__ = \
        __ior__ = __bool__ = __len__ = __iter__ = __float__ = __int__ = __index__ = _operator

    def __repr__(self):
        return f"StringArray({self.values.tolist()!r})"


# ---------------------------------------------------------------- creation

def _first_leaf(values):
    while isinstance(values, (list, tuple)) and len(values):
        values = values[0]
    return values


def is_strings(values):
    """Whether creation ``values`` are strings: a str, nested lists whose first entry is a
    str, or a NumPy array of strings."""
    if isinstance(values, str):
        return True
    if isinstance(values, (list, tuple)):
        return isinstance(_first_leaf(values), str)
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "US" or (values.dtype.kind == "O" and values.size > 0
                                              and isinstance(values.flat[0], str))
    return False


def wants_strings(values, dtype):
    """Whether creation with these ``values`` and ``dtype`` makes a string tensor."""
    return (isinstance(dtype, str) and dtype == STRING) or is_strings(values)


def _nest(values, where):
    """(flat list of str, shape) of nested lists of str; ragged lists and non-str entries
    are refused."""
    if isinstance(values, str):
        return [values], ()
    if not isinstance(values, (list, tuple)):
        got = type(values).__name__
        raise DtypeError(f"{where}: a string tensor's values must all be strings, got "
                         f"{values!r} ({got}) among them")
    if not values:
        return [], (0,)
    parts = [_nest(v, where) for v in values]
    shape = parts[0][1]
    if any(p[1] != shape for p in parts):
        raise ShapeError(f"{where}: the nested lists are ragged (every row must have the same "
                         f"length): shapes {sorted({list(p[1]).__repr__() for p in parts})}")
    return [s for p in parts for s in p[0]], (len(values),) + shape


def string_array(values, shape=None, dtype=None, where="tensor()", rank=None):
    """The StringArray of a string tensor made from a str, nested lists of str or a NumPy
    array of strings (``tf.tensor`` and friends call this for string values or
    ``dtype='string'``; a string tensor's values come as its ``StringArray.values``)."""
    if dtype is not None and not (isinstance(dtype, str) and dtype == STRING):
        if not isinstance(dtype, (str, type)):
            raise DtypeError(f"{where}: dtype must be 'string' (or None) for string values, "
                             f"got a {type(dtype).__name__}")
        raise DtypeError(f"{where}: string values make a 'string' tensor; dtype {dtype!r} "
                         f"is for numbers (cast strings to numbers in Python first)")
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "S":
            raise DtypeError(f"{where}: byte strings are not supported: decode them to str "
                             f"first")
        flat, vshape = values.reshape(-1).tolist(), values.shape
        if any(not isinstance(s, str) for s in flat):
            raise DtypeError(f"{where}: a string tensor's values must all be strings")
    elif isinstance(values, (str, list, tuple)):
        flat, vshape = _nest(values, where)
    else:
        raise DtypeError(f"{where}: dtype 'string' needs string values (a str or nested lists "
                         f"of str), got {type(values).__name__}")
    if rank is not None and len(vshape) not in (rank, 1):
        raise ShapeError(f"{where} requires values to be string{'[]' * rank} or a flat list")
    if shape is not None:
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, (list, tuple)) or any(
                isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0
                for s in shape):
            raise ArgumentError(f"{where}: shape must be a list of non-negative ints, got "
                                f"{shape!r}")
        shape = tuple(int(s) for s in shape)
        if rank is not None and len(shape) != rank:
            raise ShapeError(f"{where} requires shape to have {rank} numbers, got "
                             f"{list(shape)}")
        n = math.prod(shape)            # (exact: a size past int64 is simply wrong)
        if n != len(flat):
            raise ShapeError(f"Based on the provided shape, {list(shape)}, the tensor should "
                             f"have {n} values but has {len(flat)}")
    elif rank is not None and len(vshape) != rank:
        raise ShapeError(f"{where} requires shape to be provided when `values` are a flat "
                         f"list")
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    return StringArray(arr.reshape(shape if shape is not None else vshape))
