"""The op table. Importing this package declares every op, attaches the Tensor methods and
operators, and gives the backprop sweep the ops it uses."""
from .. import tape as _tape
from ..tensor import Tensor
from . import (_core, activations, binary, creation, indexing, linalg, logical,  # noqa: F401
               nn, reduce, shape, subscript, unary)
from . import conv, image, losses, pool, scan, spatial  # noqa: F401,E402
from . import decompositions, least_squares, matrices  # noqa: F401,E402
from ._core import COMPOSITES, NAMESPACES, OPS, PRIMITIVES, cast, export

_O = OPS


@export
def to_float(x):
    """x cast to float32.

    >>> import flowgrad as tf
    >>> tf.to_float(tf.tensor([1], dtype="int32")).dtype
    'float32'
    """
    return cast(x, "float32")


@export
def to_int(x):
    """x cast to int32 (truncating toward zero).

    >>> import flowgrad as tf
    >>> tf.to_int(tf.tensor([-1.5])).array_sync()
    [-1]
    """
    return cast(x, "int32")


@export
def to_bool(x):
    """x cast to bool (non-zero is true).

    >>> import flowgrad as tf
    >>> tf.to_bool(tf.tensor([0, 2])).array_sync()
    [False, True]
    """
    return cast(x, "bool")


def _matmul_op(a, b):
    like = _core.met_float(a, b)
    a = _core.as_tensor(a, "matmul", "a", like)
    b = _core.as_tensor(b, "matmul", "b", like)
    if a.rank >= 2 and b.rank >= 2:
        return _O["mat_mul"](a, b)
    return _O["dot"](a, b)


def _reflected(name):
    f = _O[name]
    return lambda self, other: f(other, self)


def _tensorlike(other):
    return isinstance(other, (Tensor, bool, int, float, list, tuple)) or hasattr(other,
                                                                                  "__array__")


def _comparison(name):
    f = _O[name]

    def op(self, other):
        if not _tensorlike(other):
            return NotImplemented
        return f(self, other)
    return op


def _logic(name):
    f = _O[name]

    def op(self, other):
        return f(self, other)
    return op


Tensor.__add__ = _O["add"]
Tensor.__radd__ = _reflected("add")
Tensor.__sub__ = _O["sub"]
Tensor.__rsub__ = _reflected("sub")
Tensor.__mul__ = _O["mul"]
Tensor.__rmul__ = _reflected("mul")
Tensor.__truediv__ = _O["div"]
Tensor.__rtruediv__ = _reflected("div")
Tensor.__floordiv__ = _O["floor_div"]
Tensor.__rfloordiv__ = _reflected("floor_div")
Tensor.__mod__ = _O["mod"]
Tensor.__rmod__ = _reflected("mod")
Tensor.__pow__ = _O["pow"]
Tensor.__rpow__ = _reflected("pow")
Tensor.__matmul__ = _matmul_op
Tensor.__rmatmul__ = lambda self, other: _matmul_op(other, self)
Tensor.__neg__ = _O["neg"]
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = _O["abs"]
Tensor.__lt__ = _comparison("less")
Tensor.__le__ = _comparison("less_equal")
Tensor.__gt__ = _comparison("greater")
Tensor.__ge__ = _comparison("greater_equal")
Tensor.__eq__ = _comparison("equal")
Tensor.__ne__ = _comparison("not_equal")
Tensor.__invert__ = _O["logical_not"]
Tensor.__and__ = _logic("logical_and")
Tensor.__rand__ = _reflected("logical_and")
Tensor.__or__ = _logic("logical_or")
Tensor.__ror__ = _reflected("logical_or")
Tensor.__xor__ = _logic("logical_xor")
Tensor.__rxor__ = _reflected("logical_xor")


from .reduce import sum_over as _sum_over  # noqa: E402


class _TapeOps:
    add = staticmethod(_O["add"])
    cast = staticmethod(cast)
    sum = staticmethod(_sum_over)
    reshape = staticmethod(_O["reshape"])
    zeros = staticmethod(_O["zeros"])
    tensor = staticmethod(_O["tensor"])
    clone = staticmethod(_O["clone"])


_tape.bind_ops(_TapeOps)
