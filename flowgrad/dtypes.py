"""dtypes: float32 (the default), float64, int32, bool, and how they combine.

TF.js promotes the two operands of a binary op to a common dtype in the order
bool < int32 < float32; flowgrad extends the chain with float64 on top. A Python number
behaves like a float32 tensor (as a JS number does), so ``int32 + 1`` is float32, while
``float64 + 1`` stays float64.
"""
import numpy as np

from .errors import ArgumentError, DtypeError

_str_eq = str.__eq__


class DType(str):
    """A flowgrad dtype: its name (a ``str``, so code that compares ``x.dtype == "float32"``
    or keys dicts by dtype names keeps working) that also equals NumPy's spelling.

    ``tf.float32`` equals ``"float32"``, ``np.float32`` and ``np.dtype("float32")`` (both
    ways round), hashes like the string and prints as ``float32``.

    >>> import numpy as np, flowgrad as tf
    >>> t = tf.tensor([1.0])
    >>> t.dtype == np.float32, np.dtype("float32") == t.dtype, t.dtype == "float32"
    (True, True, True)
    >>> print(t.dtype), np.zeros(1, dtype=t.dtype).dtype
    float32
    (None, dtype('float32'))
    """
    __slots__ = ()
    __hash__ = str.__hash__      # (the C slot: dict and set lookups stay as fast as a str's)

    def __eq__(self, other):
        if isinstance(other, str):
            return _str_eq(self, other)
        if isinstance(other, np.dtype) or (isinstance(other, type)
                                           and issubclass(other, np.generic)):
            mine = NP.get(self)
            return mine is not None and mine == np.dtype(other)
        return NotImplemented

    def __ne__(self, other):
        if isinstance(other, str):
            return not _str_eq(self, other)
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __reduce__(self):            # unpickled and deep-copied dtypes are the singletons
        return (_by_name, (str(self),))

    @property
    def name(self):
        """The name as a plain ``str`` (as ``np.dtype.name``)."""
        return str(self)

    @property
    def itemsize(self):
        """Bytes per element (as ``np.dtype.itemsize``)."""
        return NP[self].itemsize


def _by_name(name):
    return _ALIASES[name]


float32 = DType("float32")
float64 = DType("float64")
int32 = DType("int32")
bool_ = DType("bool")

DTYPES = (bool_, int32, float32, float64)
NP = {float32: np.dtype(np.float32), float64: np.dtype(np.float64),
      int32: np.dtype(np.int32), bool_: np.dtype(np.bool_)}
# numpy dtype -> flowgrad name, for kernel outputs (which must already be one of ours)
NAME = {v: k for k, v in NP.items()}
_RANK = {bool_: 0, int32: 1, float32: 2, float64: 3}
FLOATS = (float32, float64)

_ALIASES = {"float": float32, "float32": float32, "float64": float64, "double": float64,
            "int": int32, "int32": int32, "bool": bool_, "boolean": bool_}


def canonical(dtype, where="dtype", fn=None):
    """The flowgrad name of ``dtype`` (a name, a NumPy dtype or a Python type); a
    DtypeError naming ``fn`` (the op) and the valid names for anything else.

    >>> canonical(np.float64), canonical(int), canonical("bool")
    ('float64', 'int32', 'bool')
    """
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype)
        if name is not None:
            return name
    elif dtype is float:
        return float32
    elif dtype is int:
        return int32
    elif dtype is bool:
        return bool_
    elif isinstance(dtype, (type, np.dtype)):     # never a tensor, an array or a number
        try:
            return from_numpy(np.dtype(dtype))
        except TypeError:
            pass
    shape = getattr(dtype, "shape", None)
    shown = repr(dtype) if shape is None or isinstance(dtype, (type, np.dtype)) else \
        f"(a {type(dtype).__name__} of shape {list(shape)})"
    if isinstance(dtype, str) and dtype == "string":
        raise DtypeError(f"{fn + ': ' if fn else ''}{where} 'string' is not possible here: "
                         f"string tensors come only from strings (tf.tensor(['a', 'b'])), "
                         f"and numeric ops take 'float32', 'float64', 'int32' or 'bool'.")
    raise DtypeError(f"{fn + ': ' if fn else ''}Unknown {where} {shown}: flowgrad supports "
                     f"'float32', 'float64', 'int32' and 'bool'.")


def from_numpy(npdtype):
    """The flowgrad dtype that stores a NumPy array of dtype ``npdtype``.

    Floats keep float64 and become float32 otherwise; integers become int32.

    >>> from_numpy(np.dtype(np.int64))
    'int32'
    """
    name = NAME.get(npdtype)
    if name is not None:
        return name
    kind = npdtype.kind
    if kind == "f":
        return float64 if npdtype.itemsize > 8 else float32
    if kind in "iu":
        return int32
    if kind == "b":
        return bool_
    raise DtypeError(f"NumPy dtype {npdtype} has no flowgrad equivalent: flowgrad supports "
                     f"float32, float64, int32 and bool (strings and complex numbers are not "
                     f"supported).")


INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


def check_int(v, dtype, where):
    """Refuse a Python int that a tensor of ``dtype`` cannot hold: int32 has its range, and
    no dtype holds an int beyond a float's (10**400). An ArgumentError naming ``where``,
    never a value wrapped around nor an OverflowError."""
    if dtype == int32 and not INT32_MIN <= v <= INT32_MAX:
        raise ArgumentError(f"{where}: {_short(v)} does not fit in int32 (accepted: integers "
                            f"from {INT32_MIN:,} to {INT32_MAX:,})")
    if not -2 ** 63 <= v < 2 ** 63:
        try:
            float(v)
        except OverflowError:
            raise ArgumentError(f"{where}: the integer {_short(v)} is too large for a float "
                                f"(accepted: numbers up to about 1.8e308)") from None


def beyond_int64(v, where):
    """The error for an int beyond int64 among a list's values (NumPy makes them objects)."""
    try:
        hint = f"write it as a float, e.g. {float(v):.3g}, if a float tensor is meant"
    except OverflowError:
        hint = "it is too large even for a float: numbers go up to about 1.8e308"
    return ArgumentError(f"{where}: the integer {_short(v)} does not fit in int64 ({hint})")


def _short(v):
    s = str(v)
    return s if len(s) <= 24 else f"{s[:12]}... ({len(s.lstrip('-'))} digits)"


def promote(a, b, op=None):
    """The common dtype of two operands (``op``: the op, for the message).

    >>> promote("int32", "float32"), promote("float32", "float64")
    ('float32', 'float64')
    """
    try:
        return a if _RANK[a] >= _RANK[b] else b
    except KeyError:
        if "string" not in (a, b):
            raise
        from .strings import OPS_HINT
        raise DtypeError(f"{op + ': ' if op else ''}A {a} and a {b} tensor cannot meet in an "
                         f"op that computes: {OPS_HINT}") from None


def is_float(dtype):
    """True for float32 and float64."""
    return dtype == float32 or dtype == float64


def grad_dtype(dtype):
    """The dtype of a gradient with respect to a tensor of ``dtype``.

    Floats keep their dtype; int32 and bool tensors get float32 gradients (as in TF.js).
    """
    return dtype if dtype is float64 or dtype == float64 else float32
