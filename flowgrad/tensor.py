"""Tensor and Variable.

A Tensor is an immutable array plus what autodiff and memory accounting need. Its op
methods (``x.square().add(x)``) and Python operators are attached by the op table in
``flowgrad.ops``; this file holds only what is not an op: conversion, printing, disposal,
variables and their registry. TF.js camelCase method names resolve to the snake_case ones.
"""
from __future__ import annotations

import inspect
import itertools
import linecache
import os
import sys
from typing import Any

import numpy as np

from . import dtypes
from . import engine as E
from . import interceptors
from .arg_checks import flag, norm_axis
from .errors import (ArgumentError, DisposedError, DtypeError, GradientError, ShapeError,
                     VariableError)
from .camel_case import CamelCase
from .printing import tensor_to_string
from .strings import string_array
from .recording import current_session, is_recorded
from .thread_state import next_id


# where __array__ looks for the user's line: the first frame outside flowgrad and NumPy
_NOT_USER = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                  for m in (E, np))


class Tensor(CamelCase):
    """An immutable n-dimensional array of float32, float64, int32 or bool.

    Create with ``tf.tensor``, ``tf.scalar``, ``tf.zeros``...; combine with ops
    (``x.square().add(x)``, ``tf.mat_mul(a, b)``) or Python operators.

    >>> import flowgrad as tf
    >>> x = tf.tensor([1, 2, 3])
    >>> print(x.square().add(x))
    Tensor
        [2, 6, 12]
    """
    __slots__ = ("_data", "shape", "dtype", "id", "_node", "_idx", "kept", "_disposed", "_buf",
                 "_pin", "__weakref__")
    # NumPy ufuncs and functions on tensors run flowgrad ops: both are set by
    # flowgrad.numpy_interop (it needs the op table, which sits above this file)
    __array_ufunc__ = None
    __hash__ = object.__hash__

    def __init__(self, *args, **kwargs):
        raise TypeError("Create tensors with tf.tensor(values, shape=None, dtype=None), "
                        "tf.scalar(...), tf.zeros(...) and the other creation functions.")

    # ------------------------------------------------------------- properties
    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def backend(self) -> str:
        """The name of the backend that holds the values (the one active when the tensor
        was made).

        >>> import flowgrad as tf
        >>> tf.tensor([1.0]).backend
        'numpy'
        """
        self.throw_if_disposed()
        ns = E.backends.backend_of(self._data)      # (not a read of the values: jit may ask)
        return ns.name if ns is not None else type(self._data).__name__

    @property
    def is_disposed(self) -> bool:
        """True once the tensor was disposed (by ``dispose`` or a ``tidy``)."""
        return self._disposed

    def _rewrap(self) -> Tensor:
        """A new tensor over this one's array, of the same kind (batched in tf.vmap)."""
        return E.make_tensor(self._data)

    def throw_if_disposed(self) -> None:
        if self._disposed:
            raise DisposedError(f"Tensor is disposed. (a {self.dtype} tensor of shape "
                                f"{self.shape}, id {self.id})")

    def _array(self):
        """The array, for reading values (user-facing conversions go through here)."""
        if self._disposed:
            self.throw_if_disposed()
        if interceptors.reader is not None:
            interceptors.reader(self)
        return self._data

    # ------------------------------------------------------------- conversion
    def numpy(self) -> np.ndarray:
        """A NumPy copy of the values.

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2]]).numpy()
        array([[1., 2.]], dtype=float32)
        """
        return np.array(E.to_host(self._array()), copy=True)

    def data_sync(self) -> np.ndarray:
        """The values as a flat NumPy array (TF.js ``dataSync``).

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2], [3, 4]]).data_sync()
        array([1., 2., 3., 4.], dtype=float32)
        """
        return np.array(E.to_host(self._array()), copy=True).reshape(-1)

    def array_sync(self) -> Any:
        """The values as nested Python lists (a Python number for a scalar).

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2], [3, 4]], dtype="int32").array_sync()
        [[1, 2], [3, 4]]
        """
        return np.asarray(E.to_host(self._array())).tolist()

    async def data(self) -> np.ndarray:
        """Awaitable ``data_sync()`` (TF.js ``data()``)."""
        return self.data_sync()

    async def array(self) -> Any:
        """Awaitable ``array_sync()`` (TF.js ``array()``)."""
        return self.array_sync()

    def item(self) -> float | int | bool:
        """The single value of a one-element tensor, as a Python number or bool.

        >>> import flowgrad as tf
        >>> tf.scalar(3).item()
        3.0
        """
        a = self._array()
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor with one element, but this one has shape "
                             f"{self.shape} ({self.size} elements).")
        return np.asarray(E.to_host(a)).reshape(-1)[0].item()

    def __array__(self, dtype=None, copy=None):
        """The values for NumPy (``np.asarray(t)``), as NumPy 2 specifies: a fresh array
        unless ``copy=False``, which gives a read-only view of the tensor's memory (tensors
        are immutable) or raises ValueError when a copy is needed (another dtype, a tensor
        on a device).

        >>> import numpy as np, flowgrad as tf
        >>> np.asarray(tf.tensor([1, 2]), dtype=np.float64)
        array([1., 2.])
        """
        data = self._array()
        if is_recorded(self):
            # a recorded tensor made a constant to the tape: refused, as JAX refuses to
            # turn a traced value into an array (x.numpy() says a constant is meant)
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename.startswith(_NOT_USER):
                f = f.f_back
            at = ""
            if f is not None:
                fn, ln = f.f_code.co_filename, f.f_lineno
                code = linecache.getline(fn, ln).strip()
                at = f", at {fn}:{ln}" + (f": {code}" if code else "")
            raise GradientError(
                f"NumPy turned a {self.dtype} tensor of shape {self.shape} into an array "
                f"inside a gradient computation (np.asarray, np.array, np.r_ / np.c_, or a "
                f"list of tensors given to a NumPy function such as np.mean([x, y])){at}\n"
                f"  The array is a constant to the gradient: derivatives through it would "
                f"be silently wrong. Build tensors from tensors with tf.stack([x, y]) or "
                f"tf.concat([x, y]) (np.stack and np.concatenate on tensors run them too); "
                f"where a constant is meant, say so: x.numpy() (an array) or "
                f"tf.stop_gradient(x) (a tensor).")
        a = np.asarray(E.to_host(data))
        if copy is False:
            if a is not data and not isinstance(data, np.ndarray):
                raise ValueError(f"Unable to avoid a copy: the tensor's values are on "
                                 f"backend '{self.backend}' and must be copied to the host.")
            if dtype is not None and np.dtype(dtype) != a.dtype:
                raise ValueError(f"A copy is needed to change the dtype. (np.asarray of a "
                                 f"{self.dtype} tensor as {np.dtype(dtype)} with copy=False)")
            v = a.view()
            v.flags.writeable = False
            return v
        return np.array(a, dtype=dtype, copy=True)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The DLPack capsule of the tensor's array: ``np.from_dlpack(t)`` (CuPy, PyTorch,
        JAX likewise) reads the tensor's memory without a copy. Do not write through it:
        tensors are immutable.

        >>> import numpy as np, flowgrad as tf
        >>> t = tf.tensor([1.0, 2.0])
        >>> np.shares_memory(np.from_dlpack(t), t._data)
        True
        """
        a = _dlpack_array(self._array())
        kw = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                ("dl_device", dl_device), ("copy", copy)) if v is not None}
        return a.__dlpack__(**kw)

    def __dlpack_device__(self):
        """(device type, device id) of the tensor's array, as DLPack defines them."""
        return _dlpack_array(self._array()).__dlpack_device__()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype not in (dtypes.int32, dtypes.bool_):
            raise DtypeError(f"Only int32 or bool tensors can be used as an index, not "
                             f"{self.dtype}.")
        return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise ShapeError(f"The truth value of a tensor with {self.size} elements "
                             f"(shape {self.shape}) is ambiguous: use tf.any(x) or tf.all(x).")
        return bool(self.item())

    # ------------------------------------------------------------- copies and pickles
    # A copy is a new counted tensor (a clone: it shares the buffer, and a gradient flows
    # through it); a pickle holds the values, and loading it makes a new tensor. Copying the
    # object's slots gave a second tensor of the same id that tf.memory() never counted and
    # uncounted when freed (negative counts).
    def __copy__(self):
        self.throw_if_disposed()
        return self.clone()

    def __deepcopy__(self, memo):
        self.throw_if_disposed()
        return self.clone()

    def __reduce__(self):
        self.throw_if_disposed()
        values = self.numpy()
        if self.dtype == "string":
            return _from_pickle, (values.tolist(), list(self.shape), None)
        return _from_pickle, (values, list(self.shape), str(self.dtype))

    def __setitem__(self, key, value):
        raise ArgumentError(
            "Tensors are immutable (x[key] = value): build the new tensor instead, e.g. "
            "tf.where(mask, value, x) or tf.tensor_scatter_update(x, indices, values); state "
            "that changes is a tf.variable, whose assign() takes the whole new value")

    def __len__(self):
        if not self.shape:
            raise ArgumentError("len() of a scalar tensor (rank 0): it has no length; x.size "
                                "counts its elements")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise ArgumentError("iteration over a scalar tensor (rank 0): it has no entries; "
                                "x.item() is its value")
        return iter(self.unstack())

    # ------------------------------------------------------------- NumPy's ndarray habits
    # (the ops they run are attached by flowgrad.ops, above this file: called, not imported)
    @property
    def ndim(self) -> int:
        """Number of dimensions (NumPy's name for ``rank``)."""
        return len(self.shape)

    @property
    def T(self) -> Tensor:
        """All axes reversed, as NumPy's ``a.T`` (a vector or scalar is returned as is).

        >>> import flowgrad as tf
        >>> tf.zeros([2, 3, 4]).T.shape
        (4, 3, 2)
        """
        return self.transpose()

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (a batch of matrices transposed), as NumPy's ``a.mT``.

        >>> import flowgrad as tf
        >>> tf.zeros([5, 2, 3]).mT.shape
        (5, 3, 2)
        """
        if len(self.shape) < 2:
            raise ShapeError(f"x.mT transposes the last two axes, but x has shape "
                             f"{self.shape} (rank {len(self.shape)}): use x.T, or x.reshape"
                             f"([1, -1]).mT for a row vector.")
        return self.swapaxes(-1, -2)

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """x with axes ``axis1`` and ``axis2`` interchanged (NumPy's ``a.swapaxes``).

        >>> import flowgrad as tf
        >>> tf.zeros([2, 3, 4]).swapaxes(0, -1).shape
        (4, 3, 2)
        """
        a = norm_axis(axis1, len(self.shape), "swapaxes")
        b = norm_axis(axis2, len(self.shape), "swapaxes")
        perm = list(range(len(self.shape)))
        perm[a], perm[b] = b, a
        return self.transpose(perm)

    def ravel(self) -> Tensor:
        """x as a 1-D tensor, in row-major order (NumPy's ``a.ravel()``; ``flatten``).

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2], [3, 4]]).ravel().print()
        Tensor
            [1, 2, 3, 4]
        """
        return self.flatten()

    def astype(self, dtype: Any) -> Tensor:
        """x converted to ``dtype``, as ``cast``; a Python type means what it means to NumPy
        (``float`` is float64, ``int`` int32: flowgrad has no int64).

        >>> import flowgrad as tf
        >>> tf.tensor([1.7, -2.5]).astype("int32").array_sync()
        [1, -2]
        >>> tf.tensor([1.0]).astype(float).dtype
        'float64'
        """
        if dtype is float:
            dtype = dtypes.float64
        return self.cast(dtype)

    def copy(self) -> Tensor:
        """A new tensor with the same values (NumPy's ``a.copy()``; ``clone``)."""
        return self.clone()

    def tolist(self) -> Any:
        """The values as nested Python lists (NumPy's ``a.tolist()``; ``array_sync``).

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2]], dtype="int32").tolist()
        [[1, 2]]
        """
        return self.array_sync()

    # ------------------------------------------------------------- printing
    def to_string(self, verbose: bool = False) -> str:
        """The TF.js string of the tensor (``Tensor\\n    [1, 2, 3]``)."""
        if verbose is not False and verbose is not True and not isinstance(verbose, np.bool_):
            raise ArgumentError(f"to_string(verbose) / print(verbose): verbose must be True or "
                                f"False, got {type(verbose).__name__}")
        return tensor_to_string(np.asarray(E.to_host(self._array())), self.shape, self.dtype,
                                bool(verbose))

    def print(self, verbose: bool = False) -> None:
        """Print the tensor as TF.js does.

        >>> import flowgrad as tf
        >>> tf.tensor([1, 2, 3]).print()
        Tensor
            [1, 2, 3]
        """
        print(self.to_string(verbose))

    def __str__(self):
        if self._disposed:
            return f"<disposed Tensor shape={self.shape} dtype={self.dtype} id={self.id}>"
        return self.to_string()

    def __repr__(self):
        """Shape, dtype and the values in TF.js's layout (long axes elided as ``...``);
        ``str``, ``print`` and ``to_string`` keep TF.js's exact format.

        >>> import flowgrad as tf
        >>> tf.tensor([[1, 2], [3, 4]])
        <tf.Tensor shape=[2, 2] dtype=float32
         [[1, 2],
          [3, 4]]>
        >>> tf.scalar(3.5)
        <tf.Tensor shape=[] dtype=float32 3.5>
        """
        head = f"<tf.{type(self).__name__}{self._repr_name()} shape={list(self.shape)} " \
               f"dtype={self.dtype}"
        if self._disposed:
            return f"{head} disposed>"
        body = self.to_string().split("\n")[1:]
        if len(body) == 1:
            return f"{head} {body[0].strip()}>"
        return head + "".join("\n " + line[4:] for line in body) + ">"

    def _repr_name(self):
        return ""

    def __format__(self, spec):
        """``f"{t:.2f}"``: a scalar (or one-element tensor) formats its value; a larger
        tensor formats each element (nested brackets, long axes elided as NumPy does). An
        empty spec is ``str(t)``.

        >>> import flowgrad as tf
        >>> f"{tf.scalar(1.234):.2f}", f"{tf.tensor([1.234, 5]):.1f}"
        ('1.23', '[1.2, 5.0]')
        """
        if not isinstance(spec, str):
            raise ArgumentError(f"format(tensor, spec): spec must be a format string, got "
                                f"{type(spec).__name__}")
        if not spec:
            return str(self)
        if self.dtype == "string":
            raise ArgumentError(f"format(tensor, {spec!r}): a string tensor has no numeric "
                                f"format; use str(t).")
        a = np.asarray(E.to_host(self._array()))
        try:
            if a.ndim == 0:
                return format(a.item(), spec)
            return np.array2string(a, separator=", ",
                                   formatter={"all": lambda v: format(v.item(), spec)})
        except (ValueError, TypeError) as e:
            raise ArgumentError(f"format(tensor, {spec!r}) on a {self.dtype} tensor: {e}") \
                from None

    # ------------------------------------------------------------- memory
    def dispose(self) -> None:
        """Free the tensor now. Using it afterwards raises ``Tensor is disposed.``"""
        E.dispose_tensor(self)

    def variable(self, trainable: bool = True, name: str | None = None,
                 dtype: str | None = None) -> Variable:
        """A new Variable initialised with this tensor (``tf.variable(self, ...)``)."""
        return variable(self, trainable, name, dtype)

    __del__ = E.tensor_del


class Variable(Tensor):
    """A mutable tensor that ``variable_grads`` and optimizers update in place.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(1.0), name="w_doc")
    >>> w.assign(tf.scalar(2.0)).item()
    2.0
    >>> w.dispose()
    """
    __slots__ = ("name", "_trainable")

    @property
    def trainable(self) -> bool:
        """Whether ``minimize`` and ``variable_grads`` (without a var_list) train it; it may
        change at any time, and tf.jit's traces follow (they trace again)."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        value = flag(value, "trainable", "Variable.trainable")
        if value != self._trainable:
            self._trainable = value
            for fn in list(on_trainable_change):
                fn(self)

    def assign(self, value: Any) -> Variable:
        """Replace the value (same dtype and shape). Returns the variable itself.

        Not recorded: assignment is not an op, and gradients never flow through it.
        """
        self.throw_if_disposed()
        if isinstance(value, Tensor):
            if value.dtype != self.dtype:
                raise VariableError(f"dtype of the new value ({value.dtype}) and previous "
                                    f"value ({self.dtype}) must match")
        else:
            value = _owned(convert(value, "value", "assign", dtype=self.dtype), value)
        if value.shape != self.shape:
            raise VariableError(f"shape of the new value {value.shape} and previous value "
                                f"{self.shape} must match")
        value.throw_if_disposed()
        data = value._data          # not a read of the value (tf.jit traces assignments)
        sess = current_session()
        if sess is not None:
            for n in sess.nodes:
                if any(t is self for t in n.inputs):
                    raise VariableError(
                        f"Variable '{self.name}' is assigned inside a gradient function after "
                        f"an op used it, so its gradient would be computed from the new "
                        f"value. Compute the new value inside, and assign() after the "
                        f"gradient call returns.")
        if interceptors.assigner is not None:
            interceptors.assigner(self, value)
        E.share_buffer(value, self)
        self._data = data
        return self

    def dispose(self) -> None:
        """Free the variable and unregister its name."""
        if not self._disposed:
            if _VARIABLES.get(self.name) is self:
                del _VARIABLES[self.name]
                _registry_changed()
            E.dispose_tensor(self)

    def _refuse_copy(self, what):
        raise VariableError(
            f"{what} of Variable '{self.name}': a variable is state registered by its name, "
            f"and a second one of the same name would update apart from it. Copy its value "
            f"with v.clone() (a tensor) or tf.variable(v.clone(), name=...) (a new "
            f"variable), and save variables with tf.train.Checkpoint.")

    def __copy__(self):
        self._refuse_copy("copy.copy")

    def __deepcopy__(self, memo):
        self._refuse_copy("copy.deepcopy")

    def __reduce__(self):
        self._refuse_copy("pickling")

    def _repr_name(self):
        return f" name={self.name!r}"


def varargs_method(op, param: str):
    """The Tensor method of ``op(x, param)`` that also takes ``param`` spread out, as
    NumPy's ndarray methods do: ``x.reshape(2, 3)`` is ``x.reshape([2, 3])``, and
    ``x.transpose(1, 0)`` is ``x.transpose([1, 0])``. One argument (or none, or a keyword)
    is passed as it is, so TF.js's forms keep their meaning."""
    def method(self, *args, **kwargs):
        if len(args) > 1:
            if param in kwargs:
                raise ArgumentError(f"x.{op.__name__}(): {param} given both by position "
                                    f"{args} and as a keyword; pass it once.")
            args = (args,)
        return op(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = op.__name__
    method.__doc__ = op.__doc__
    method.__wrapped__ = op
    # what IDEs and the stubs show: both forms, x.reshape(2, 3) and x.reshape([2, 3])
    P = inspect.Parameter
    method.__signature__ = inspect.Signature(
        [P("self", P.POSITIONAL_ONLY), P(param, P.VAR_POSITIONAL)], return_annotation="Tensor")
    method.__annotations__ = {param: "int | Sequence[int]", "return": "Tensor"}
    return method


# ---------------------------------------------------------------- variable registry

_VARIABLES = {}
_auto_names = itertools.count()


def variable(initial_value: Any, trainable: bool = True, name: str | None = None,
             dtype: str | None = None) -> Variable:
    """A Variable holding ``initial_value`` (a Tensor or TensorLike).

    Names are unique: auto-named ``"0"``, ``"1"``... when not given.

    >>> import flowgrad as tf
    >>> v = tf.variable(tf.tensor([1, 2]), name="v_doc")
    >>> v.name, v.trainable
    ('v_doc', True)
    >>> v.dispose()
    """
    trainable = flag(trainable, "trainable", "variable()")
    dtype = dtypes.canonical(dtype, fn="variable()")
    init = _owned(convert(initial_value, "initial_value", "variable"), initial_value)
    init.throw_if_disposed()
    if dtype is not None and dtype != init.dtype:
        init = init.cast(dtype)
    if name is None or (isinstance(name, str) and name == ""):
        name = str(next(_auto_names))
    elif not isinstance(name, str):
        raise ArgumentError(f"Variable names are strings, got {type(name).__name__}.")
    if name in _VARIABLES:
        raise VariableError(f"Variable with name {name} was already registered")
    v = _new_variable(init, name, trainable)
    _VARIABLES[name] = v
    _registry_changed()
    return v


def _registry_changed():
    # tf.jit refuses a trace that creates or disposes variables (a replay would not): the
    # tracer counts this thread's changes, never another thread's
    tr = interceptors.tracer
    if tr is not None and tr.traces_this_thread():
        tr.variables_changed = True


def _from_pickle(values, shape, dtype):
    """A tensor loaded from a pickle: a new tensor of these values (Tensor.__reduce__)."""
    if dtype is None:           # (strings)
        return E.make_tensor(string_array(values, shape))
    a = to_array(values, dtype, where="pickle").reshape(shape)
    return E.make_tensor(E.from_host(a))


def _owned(t, source):
    """``t``, converted from ``source``, holding an array of its own: a variable keeps its
    value, and the caller's NumPy array must not change it later (convert() reads arrays in
    place, which an op that uses them at once may)."""
    a = t._data
    if isinstance(source, np.ndarray) and isinstance(a, np.ndarray) and \
            np.may_share_memory(a, source):
        t._data = a.copy()
    return t


def slot_variable(initial_value, name):
    """A non-trainable variable that is not registered by name: optimizer state, owned and
    disposed by its optimizer (two optimizers may hold slots of the same variable)."""
    init = convert(initial_value, "initial_value", "slot_variable")
    return _new_variable(init, name, False)


# fn(variable) after a variable's trainable flag changed (tf.jit drops its traces, which
# chose the variables to train when they were made)
on_trainable_change: list = []


def _new_variable(init, name, trainable):
    v = Variable.__new__(Variable)
    v._data = init._data
    v.shape = init.shape
    v.dtype = init.dtype
    v.id = next_id()
    v._node = None
    v._pin = None
    v.name = name
    v._trainable = bool(trainable)
    E.account_new(v, shares=init)      # (sets the live flags: an unfinished v uncounts nothing)
    return v


def registered_variables() -> dict[str, Variable]:
    """The live variables, by name, in registration order."""
    return dict(_VARIABLES)


def all_variables() -> list[Variable]:
    """The live variables, in registration order (what variable_grads and minimize take by
    default)."""
    return list(_VARIABLES.values())


def find_variable(name: str) -> Variable | None:
    """The live variable registered as ``name``, or None."""
    return _VARIABLES.get(name)


def dispose_variables() -> None:
    """Dispose every variable and free their names."""
    for v in list(_VARIABLES.values()):
        v.dispose()
    _VARIABLES.clear()


# ---------------------------------------------------------------- TensorLike -> Tensor

_SCALARS = (bool, int, float, np.generic)


def to_array(values, dtype=None, where="tensor"):
    """A NumPy array of a flowgrad dtype from a TensorLike.

    Python numbers become float32 (as JS numbers do in TF.js), Python bools bool; NumPy
    arrays keep their dtype (float64 stays float64, int64 becomes int32).
    """
    if isinstance(values, Tensor):
        arr = np.asarray(E.to_host(values._array()))
        src = values.dtype
    elif isinstance(values, np.ndarray) or isinstance(values, np.generic):
        arr = np.asarray(values)
        if arr.dtype.kind in "US":
            raise DtypeError(f"{where}: strings are not numbers (a string tensor, "
                             f"tf.tensor(['a', ...]), takes part in no numeric op).")
        try:
            src = dtypes.from_numpy(arr.dtype)
        except DtypeError as e:         # object, complex, datetime... arrays: say where
            raise DtypeError(f"{where}: a NumPy array of dtype {arr.dtype} is not a "
                             f"TensorLike. {e}") from None
    elif isinstance(values, (bool, int, float)):
        if type(values) is int:
            dtypes.check_int(values, dtype, where)
        arr = np.asarray(values)
        src = dtypes.bool_ if isinstance(values, bool) else dtypes.float32
    elif isinstance(values, (list, tuple)):
        try:
            arr = np.asarray(values)
        except ValueError as e:
            raise ShapeError(f"{where}: the nested lists are ragged (every row must have the "
                             f"same length): {e}") from None
        if arr.dtype.kind == "c":
            raise DtypeError(f"{where}: complex numbers are not supported (flowgrad tensors "
                             f"are float32, float64, int32 or bool)")
        if arr.dtype.kind in "USO":
            huge = next((v for v in arr.reshape(-1)
                         if type(v) is int and not -2 ** 63 <= v < 2 ** 63),
                        None) if arr.dtype.kind == "O" else None
            if huge is not None:
                raise dtypes.beyond_int64(huge, where)
            raise DtypeError(f"{where}: values must be numbers or booleans, got "
                             f"{arr.dtype.kind == 'O' and 'mixed objects' or 'strings'}.")
        if dtype == dtypes.int32 and arr.dtype.kind in "iu" and arr.size and (
                arr.min() < dtypes.INT32_MIN or arr.max() > dtypes.INT32_MAX):
            dtypes.check_int(int(arr.min() if arr.min() < dtypes.INT32_MIN else arr.max()),
                             dtype, where)
        src = dtypes.bool_ if arr.dtype.kind == "b" else (
            dtypes.from_numpy(arr.dtype) if arr.dtype == np.float64 and _has_float64(values)
            else dtypes.float32)
    elif _foreign_array(values):
        return to_array(_from_foreign(values, where), dtype, where)
    else:
        raise ArgumentError(f"{where}: expected a Tensor or TensorLike (number, bool, nested "
                            f"list or NumPy array), but got '{_type_name(values)}' (another "
                            f"library's arrays are read through __dlpack__ or __array__)")
    target = dtypes.NP[dtype or src]
    if arr.dtype != target:
        if target == np.int32 and arr.dtype.kind in "iu" and arr.size and \
                arr.dtype.itemsize >= (4 if arr.dtype.kind == "u" else 8):
            # int64 (NumPy's default), uint32, torch's int64...: refused beyond int32, never
            # wrapped around
            lo, hi = int(arr.min()), int(arr.max())
            if lo < dtypes.INT32_MIN or hi > dtypes.INT32_MAX:
                dtypes.check_int(lo if lo < dtypes.INT32_MIN else hi, dtypes.int32,
                                 f"{where} (an array of {arr.dtype}; flowgrad's integers are "
                                 f"int32: cast to float64 for larger values)")
        if target == np.int32 and arr.dtype.kind == "f":
            arr = np.trunc(arr)
        with np.errstate(invalid="ignore"):     # NaN -> int32, as TF.js: no warning
            arr = arr.astype(target)
    return arr


def _type_name(x):
    """``torch.Tensor``, ``numpy.ndarray``, ``int``: the type with its module (another
    library's ``Tensor`` is not ours)."""
    t = type(x)
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def _foreign_array(x):
    return hasattr(x, "__dlpack__") or hasattr(x, "__array__")


def _from_foreign(x, where):
    """A NumPy copy of another library's array (torch, JAX, CuPy, array-api arrays):
    through DLPack when it can be read on the host, else ``__array__``."""
    first = None
    if hasattr(x, "__dlpack__"):
        try:
            return np.array(np.from_dlpack(x), copy=True)
        except (BufferError, RuntimeError, TypeError, ValueError, AttributeError) as e:
            first = e
    if hasattr(x, "__array__"):
        try:
            # NOTE: np.array(x, copy=True) passes copy= to __array__, and NumPy 2 warns
            # (DeprecationWarning) for the libraries whose __array__ takes no copy (torch)
            return np.asarray(x).copy()
        except Exception as e:         # (each library raises its own kind)
            first = e
    hint = ""
    if getattr(x, "requires_grad", False):
        hint = " (a torch tensor that requires grad: pass x.detach())"
    elif first is not None:
        hint = " (on a device? copy it to the host first: x.cpu(), x.get() or np.asarray)"
    raise ArgumentError(f"{where}: cannot read the values of a '{_type_name(x)}'{hint}: "
                        f"{first}") from None


def _has_float64(values):
    # a list holding float64 NumPy arrays or tensors keeps float64; plain numbers do not
    for v in values:
        if isinstance(v, (list, tuple)):
            if _has_float64(v):
                return True
        elif isinstance(v, np.ndarray) and v.dtype == np.float64:
            return True
        elif isinstance(v, Tensor) and v.dtype == dtypes.float64:
            return True
        elif isinstance(v, np.float64):
            return True
    return False


def convert(x, arg="x", fn="op", dtype=None):
    """``x`` as a Tensor: tensors pass through, TensorLikes become new tensors.

    Raises TF.js's message for anything else:
    ``Argument 'x' passed to 'sqrt' must be a Tensor or TensorLike, but got 'str'``.
    """
    if isinstance(x, Tensor):
        return x
    if x is None or not (isinstance(x, (_SCALARS, list, tuple, np.ndarray))
                         or _foreign_array(x)):
        got = "null" if x is None else _type_name(x)
        raise ArgumentError(f"Argument '{arg}' passed to '{fn}' must be a Tensor or "
                            f"TensorLike, but got '{got}'")
    return E.make_tensor(E.from_host(to_array(x, dtype,
                                              where=f"Argument '{arg}' passed to '{fn}'")))


def _dlpack_array(a):
    # a rank-0 tensor on NumPy holds a NumPy scalar (engine.from_host), which has no DLPack
    # form: the 0-d array of its value
    return np.asarray(a) if isinstance(a, np.generic) else a


E.set_tensor_class(Tensor)
