"""Creating tensors: from values, filled, ranges, identity matrices, random, one-hot.

Values become float32 unless told otherwise (Python numbers are JS numbers here); NumPy
arrays keep their dtype (float64 stays float64). Random ops take a ``seed`` for
reproducible draws.
"""
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from ..errors import ArgumentError, BackendError, DtypeError, ShapeError
from ..arg_checks import check_alloc
from ..strings import STRING, string_array, wants_strings
from ..tensor import Tensor, convert, to_array
from ._core import as_int, as_number, as_tensor, export, primitive

_builtin_range = range


def string_tensor(values, shape=None, dtype=None, where="tensor()", rank=None):
    """A string tensor from a str, nested lists of str, a NumPy array of strings or a string
    tensor (strings.string_array says what is accepted)."""
    if isinstance(values, Tensor):
        values.throw_if_disposed()
        if values.dtype != STRING:
            raise DtypeError(f"{where}: dtype 'string' needs string values, got a "
                             f"{values.dtype} tensor (flowgrad does not cast numbers to "
                             f"strings)")
        values = values._data.values
    return E.make_tensor(string_array(values, shape, dtype, where, rank))


def _shape(shape, fn):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)):
        raise ArgumentError(f"{fn}: shape must be a list or tuple of ints, got "
                            f"{type(shape).__name__}")
    out = []
    for s in shape:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ArgumentError(f"{fn}: shape {list(shape)} must contain non-negative ints")
        out.append(int(s))
    return tuple(out)


def _dtype(dtype, default=dtypes.float32, fn=None):
    return dtypes.canonical(dtype, fn=fn) if dtype is not None else default


def _seed(seed, fn):
    return seed if seed is None else as_int(seed, "seed", fn, 0)


# ---------------------------------------------------------------- from values

@export(method=False)
def tensor(values, shape=None, dtype=None):
    """A tensor from a number, bool, string, nested list or NumPy array.

    Strings make a tensor of dtype 'string' (see ``flowgrad.strings`` for what works on
    them: printing, reading, clone, reshape, dispose; ``memory()`` counts their UTF-8 bytes).

    >>> import flowgrad as tf
    >>> tf.tensor([1, 2, 3, 4], shape=[2, 2]).print()
    Tensor
        [[1, 2],
         [3, 4]]
    >>> tf.tensor(["a", "b"]).print()
    Tensor
        ['a', 'b']
    """
    if isinstance(values, Tensor):
        values.throw_if_disposed()
        if values.dtype == STRING:
            return string_tensor(values, shape, dtype, "tensor()")
    if wants_strings(values, dtype):
        return string_tensor(values, shape, dtype, "tensor()")
    arr = to_array(values, _dtype(dtype, None, "tensor()"), where="tensor()")
    if shape is not None:
        shape = _shape(shape, "tensor()")
        n = 1
        for s in shape:
            n *= s
        if arr.size != n:
            raise ShapeError(f"Based on the provided shape, {list(shape)}, the tensor should "
                             f"have {n} values but has {arr.size}")
        arr = arr.reshape(shape)
    elif isinstance(values, np.ndarray) and arr is values:
        arr = arr.copy()
    return E.make_tensor(E.from_host(arr))


@export(method=False)
def from_dlpack(x):
    """A tensor over any DLPack array (NumPy, CuPy, PyTorch, JAX, another flowgrad tensor)
    on the active backend, sharing its memory when the devices allow: no copy is made when
    the dtype is one of flowgrad's and the array can be read where the backend computes.
    Otherwise (another dtype, another device, a read-only array from a producer too old to
    say so over DLPack) the values are copied. Do not modify a shared array afterwards.

    >>> import numpy as np, flowgrad as tf
    >>> a = np.arange(3.0)
    >>> t = tf.from_dlpack(a)
    >>> t.dtype, np.shares_memory(t._data, a)
    ('float64', True)
    """
    if not hasattr(x, "__dlpack__"):
        raise ArgumentError(f"from_dlpack(x): x must support DLPack (have __dlpack__), got "
                            f"{type(x).__name__}")
    B = E.B
    try:
        arr = B.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError, ValueError) as first:
        try:
            arr = B.from_dlpack(x, copy=True)
        except Exception:
            raise BackendError(f"from_dlpack(x): backend '{B.name}' cannot read a "
                               f"{type(x).__name__} ({first}); copy it to the host first "
                               f"(e.g. x.cpu() or np.asarray(x)) and call tf.tensor()") \
                from first
    name = E.dtype_name(arr.dtype)
    if name is None:
        # NOTE: not one of flowgrad's dtypes: convert on the host (int64 -> int32...)
        return E.make_tensor(E.from_host(to_array(np.asarray(E.to_host(arr)),
                                                  where="from_dlpack()")))
    if name not in B.dtypes or B.dtypes[name] != arr.dtype:
        raise BackendError(f"from_dlpack(x): backend '{B.name}' returned a "
                           f"{type(arr).__name__} of another backend")
    return E.make_tensor(arr)


@export(method=False)
def from_numpy(array):
    """A tensor over a NumPy array, keeping its dtype (int64 becomes int32). No copy is made
    when the dtype is already one of flowgrad's: do not modify the array afterwards.

    >>> import numpy as np, flowgrad as tf
    >>> tf.from_numpy(np.arange(3.0)).dtype
    'float64'
    """
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"from_numpy() takes a NumPy array, got {type(array).__name__}")
    return E.make_tensor(E.from_host(to_array(array, where="from_numpy()")))


@export(method=False)
def scalar(value, dtype=None):
    """A rank-0 tensor.

    >>> import flowgrad as tf
    >>> tf.scalar(3.5).print()
    Tensor
        3.5
    """
    if isinstance(value, (list, tuple)) or (isinstance(value, (np.ndarray, Tensor))
                                            and getattr(value, "ndim", len(value.shape)) != 0):
        raise ArgumentError("Error creating a new Scalar: value must be a primitive "
                            "(number|boolean)")
    return tensor(value, None, dtype)


def _tensor_nd(rank):
    name = f"tensor{rank}d"

    def make(values, shape=None, dtype=None):
        if wants_strings(values, dtype):
            return string_tensor(values, shape, dtype, f"{name}()", rank)
        if shape is not None and len(_shape(shape, f"{name}()")) != rank:
            raise ShapeError(f"{name}() requires shape to have {_words[rank]} numbers")
        arr = to_array(values, _dtype(dtype, None, f"{name}()"), where=f"{name}()")
        if arr.ndim != rank and arr.ndim != 1:
            raise ShapeError(f"{name}() requires values to be number{'[]' * rank} or "
                             f"flat/TypedArray")
        if arr.ndim == 1 and shape is None:
            raise ShapeError(f"{name}() requires shape to be provided when `values` are a "
                             f"flat/TypedArray")
        return tensor(arr, shape, dtype)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"""A rank-{rank} tensor (nested lists, or flat values and a shape).

    >>> import flowgrad as tf
    >>> tf.{name}({[1] * (2 ** rank)}, {[2] * rank}).shape
    {tuple([2] * rank)}
    """
    return export(make, method=False)


@export(method=False)
def tensor1d(values, dtype=None):
    """A rank-1 tensor.

    >>> import flowgrad as tf
    >>> tf.tensor1d([1, 2, 3]).shape
    (3,)
    """
    if wants_strings(values, dtype):
        return string_tensor(values, None, dtype, "tensor1d()", 1)
    arr = to_array(values, _dtype(dtype, None, "tensor1d()"), where="tensor1d()")
    if arr.ndim != 1:
        raise ShapeError("tensor1d() requires values to be a flat/TypedArray")
    return E.make_tensor(E.from_host(arr.copy() if arr is values else arr))


_words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
tensor2d, tensor3d, tensor4d, tensor5d, tensor6d = (_tensor_nd(r) for r in _builtin_range(2, 7))


# ---------------------------------------------------------------- filled

@primitive("Fill", vmap=V.takes_no_tensors)
def _fill(B, shape, value, dtype):
    return B.full(shape, value, dtype=B.dtypes[dtype])


@export(method=False)
def fill(shape, value, dtype=None):
    """A tensor of ``shape`` filled with ``value`` (float32 unless value is a bool).

    >>> import flowgrad as tf
    >>> tf.fill([2], 7).print()
    Tensor
        [7, 7]
    """
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise DtypeError(f"fill(): value must be a number or a bool, got {value!r}")
    if type(value) is int and not -2 ** 63 <= value < 2 ** 63:
        as_number(value, "value", "fill()")        # refuses an int no float holds (10**400)
    default = dtypes.bool_ if isinstance(value, (bool, np.bool_)) else dtypes.float32
    dt = _dtype(dtype, default, "fill()")
    shape = _shape(shape, "fill()")
    check_alloc(shape, dt, "fill()")
    return E.run_kernel(_fill, (), {"shape": shape, "value": _py_scalar(value, dt),
                                    "dtype": dt})


def _py_scalar(v, dtype):
    """v as the Python scalar of ``dtype`` (the array API takes no NumPy scalars, nor a
    bool for a number array); an int32 fill truncates, as NumPy's cast does."""
    t = type(v)
    if dtype in dtypes.FLOATS:
        return v if t is float else float(v)
    if dtype == dtypes.bool_:
        return v if t is bool else bool(v)
    if t is int or isinstance(v, np.integer):
        return int(v)
    v = float(v)
    return int(v) if math.isfinite(v) else -2 ** 31     # NumPy's int32 of inf and NaN


@export(method=False)
def zeros(shape, dtype="float32"):
    """A tensor of zeros.

    >>> import flowgrad as tf
    >>> tf.zeros([2, 2]).print()
    Tensor
        [[0, 0],
         [0, 0]]
    """
    return fill(shape, 0, _dtype(dtype, fn="zeros()"))


@export(method=False)
def ones(shape, dtype="float32"):
    """A tensor of ones.

    >>> import flowgrad as tf
    >>> tf.ones([3]).print()
    Tensor
        [1, 1, 1]
    """
    return fill(shape, 1, _dtype(dtype, fn="ones()"))


@primitive("ZerosLike", zero_grad=True, vmap=V.elementwise)
def _zeros_like(B, x):
    return B.zeros_like(x)


@primitive("OnesLike", zero_grad=True, vmap=V.elementwise)
def _ones_like(B, x):
    return B.ones_like(x)


@export
def zeros_like(x):
    """Zeros with x's shape and dtype.

    >>> import flowgrad as tf
    >>> tf.zeros_like(tf.tensor([1, 2])).print()
    Tensor
        [0, 0]
    """
    return E.run_kernel(_zeros_like, (as_tensor(x, "zeros_like"),))


@export
def ones_like(x):
    """Ones with x's shape and dtype.

    >>> import flowgrad as tf
    >>> tf.ones_like(tf.tensor([1, 2])).print()
    Tensor
        [1, 1]
    """
    return E.run_kernel(_ones_like, (as_tensor(x, "ones_like"),))


# ---------------------------------------------------------------- ranges

@primitive("Range", vmap=V.takes_no_tensors)
def _range(B, start, stop, step, dtype):
    # float bounds: the default float dtype (float64), then cast, as NumPy does
    return B.astype(B.arange(start, stop, step), B.dtypes[dtype])


@export(method=False)
def range(start, stop=None, step=1, dtype="float32"):  # noqa: A001 - the TF.js name
    """Numbers from start (inclusive) to stop (exclusive) by step; ``range(n)`` is 0..n-1.

    >>> import flowgrad as tf
    >>> tf.range(0, 5, 2).print()
    Tensor
        [0, 2, 4]
    """
    if stop is None:
        start, stop = 0, start
    start = as_number(start, "start", "range()")
    stop = as_number(stop, "stop", "range()")
    step = as_number(step, "step", "range()")
    if step == 0:
        raise ArgumentError("Cannot have a step of zero")
    dt = _dtype(dtype, fn="range()")
    n = (stop - start) / step
    if not math.isfinite(n):
        raise ArgumentError(f"range(): start {start}, stop {stop} and step {step} give "
                            f"{n} values: give finite numbers")
    check_alloc((max(0, math.ceil(n)),), dt, "range()")
    return E.run_kernel(_range, (), {"start": start, "stop": stop, "step": step,
                                     "dtype": dt})


@primitive("LinSpace", vmap=V.takes_no_tensors)
def _linspace(B, start, stop, num, dtype):
    return B.astype(B.linspace(start, stop, num, dtype=B.dtypes["float64"]), B.dtypes[dtype])


@export(method=False)
def linspace(start, stop, num):
    """``num`` evenly spaced float32 numbers from start to stop, both included.

    >>> import flowgrad as tf
    >>> tf.linspace(0, 1, 3).print()
    Tensor
        [0, 0.5, 1]
    """
    num = as_int(num, "the number of values", "linspace()")
    if num <= 0:
        raise ArgumentError(f"The number of values should be positive, got {num}.")
    check_alloc((num,), dtypes.float32, "linspace()")
    return E.run_kernel(_linspace, (), {"start": as_number(start, "start", "linspace()"),
                                        "stop": as_number(stop, "stop", "linspace()"),
                                        "num": num, "dtype": dtypes.float32})


@primitive("Eye", vmap=V.takes_no_tensors)
def _eye(B, n, m, batch_shape, dtype):
    e = B.eye(n, m, dtype=B.dtypes[dtype])
    return B.asarray(B.broadcast_to(e, batch_shape + (n, m)), copy=True) if batch_shape else e


@export(method=False)
def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32"):
    """An identity matrix (or a batch of them).

    >>> import flowgrad as tf
    >>> tf.eye(2).print()
    Tensor
        [[1, 0],
         [0, 1]]
    """
    n = as_int(num_rows, "num_rows", "eye()", 0)
    m = n if num_columns is None else as_int(num_columns, "num_columns", "eye()", 0)
    batch = _shape(batch_shape, "eye()") if batch_shape is not None else ()
    dt = _dtype(dtype, fn="eye()")
    check_alloc(batch + (n, m), dt, "eye()")
    return E.run_kernel(_eye, (), {"n": n, "m": m, "batch_shape": batch, "dtype": dt})


# ---------------------------------------------------------------- random

_rng = np.random.default_rng()


def random_generator():
    """The NumPy generator that random ops without a seed draw from (one per process).
    Public for train.checkpoint, which saves and restores its state so that a resumed run
    draws the numbers the uninterrupted run would have."""
    return _rng


def _gen(seed):
    return _rng if seed is None else np.random.default_rng(seed)


@primitive("RandomNormal", impure=True, vmap=V.takes_no_tensors)
def _random_normal(B, shape, mean, stddev, dtype, seed, truncated):
    g = _gen(seed)
    v = g.standard_normal(shape)
    if truncated:
        # redraw values further than two standard deviations from the mean
        bad = np.abs(v) > 2
        while bad.any():
            v[bad] = g.standard_normal(int(bad.sum()))
            bad = np.abs(v) > 2
    # drawn on the host (NumPy's generator: the same values on every backend)
    return B.from_numpy((v * stddev + mean).astype(dtypes.NP[dtype]))


def _normal(shape, mean, stddev, dtype, seed, truncated, fn):
    dt = _dtype(dtype, fn=fn)
    if dt not in dtypes.FLOATS:
        raise DtypeError(f"{fn}: dtype must be float32 or float64, got {dt}")
    shape = _shape(shape, fn)
    mean, stddev = as_number(mean, "mean", fn), as_number(stddev, "stddev", fn)
    check_alloc(shape, dt, fn)
    return E.run_kernel(_random_normal, (), {
        "shape": shape, "mean": mean, "stddev": stddev, "dtype": dt,
        "seed": _seed(seed, fn), "truncated": truncated})


@export(method=False)
def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Samples from a normal distribution; ``seed`` makes them reproducible.

    >>> import flowgrad as tf
    >>> tf.random_normal([2, 3], seed=1).shape
    (2, 3)
    """
    return _normal(shape, mean, stddev, dtype, seed, False, "random_normal()")


@export(method=False)
def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal samples redrawn until they lie within two standard deviations of the mean.

    >>> import flowgrad as tf
    >>> bool((tf.truncated_normal([1000], seed=2).abs() <= 2).all())
    True
    """
    return _normal(shape, mean, stddev, dtype, seed, True, "truncated_normal()")


@primitive("RandomUniform", impure=True, vmap=V.takes_no_tensors)
def _random_uniform(B, shape, minval, maxval, dtype, seed):
    g = _gen(seed)
    if dtype == dtypes.int32:
        v = g.integers(int(minval), int(maxval), size=shape)
    else:
        v = g.uniform(minval, maxval, size=shape)
    return B.from_numpy(v.astype(dtypes.NP[dtype]))


@export(method=False)
def random_uniform(shape, minval=0.0, maxval=1.0, dtype="float32", seed=None):
    """Uniform samples in [minval, maxval) (integers for int32).

    >>> import flowgrad as tf
    >>> x = tf.random_uniform([100], 2, 3, seed=0)
    >>> bool(((x >= 2) & (x < 3)).all())
    True
    """
    dt = _dtype(dtype, fn="random_uniform()")
    if dt == dtypes.bool_:
        raise DtypeError("random_uniform(): dtype must be float32, float64 or int32")
    ints = dt == dtypes.int32          # int bounds must be finite
    lo = as_number(minval, "minval", "random_uniform()", finite=ints)
    hi = as_number(maxval, "maxval", "random_uniform()", finite=ints)
    if dt == dtypes.int32:          # the integers in [minval, maxval)
        lo, hi = math.ceil(lo), math.ceil(hi)
    if not lo < hi:
        raise ArgumentError(f"random_uniform(): minval ({minval}) must be less than maxval "
                            f"({maxval})" + (" (no integer lies between them)"
                                             if dt == dtypes.int32 else ""))
    minval, maxval = lo, hi
    shape = _shape(shape, "random_uniform()")
    check_alloc(shape, dt, "random_uniform()")
    return E.run_kernel(_random_uniform, (), {"shape": shape, "minval": minval,
                                              "maxval": maxval, "dtype": dt,
                                              "seed": _seed(seed, "random_uniform()")})


# ---------------------------------------------------------------- one-hot

@primitive("OneHot", zero_grad=True, vmap=V.leading)
def _one_hot(B, indices, depth, on_value, off_value, dtype):
    eq = indices[..., None] == B.arange(depth, dtype=indices.dtype)
    f64 = B.dtypes["float64"]
    on, off = B.asarray(on_value, dtype=f64), B.asarray(off_value, dtype=f64)
    return B.astype(B.where(eq, on, off), B.dtypes[dtype])


@export
def one_hot(indices, depth, on_value=1, off_value=0, dtype="int32"):
    """Rows of ``depth`` values: on_value at each index, off_value elsewhere (int32 by
    default, as TF.js). Indices outside [0, depth) give a row of off_value.

    >>> import flowgrad as tf
    >>> tf.one_hot(tf.tensor([0, 2], dtype="int32"), 3).print()
    Tensor
        [[1, 0, 0],
         [0, 0, 1]]
    """
    if not isinstance(indices, Tensor):     # a list of indices, as TF.js takes
        indices = convert(indices, "indices", "one_hot", dtypes.int32)
    if indices.dtype != dtypes.int32:
        raise DtypeError(f"Argument 'indices' passed to 'one_hot' must be int32 tensor, but got "
                         f"{indices.dtype} tensor")
    depth = as_int(depth, "depth", "Error in one_hot")
    if depth < 1:
        raise ArgumentError(f"Error in one_hot: depth must be >= 1, but it is {depth}")
    dt = _dtype(dtype, fn="one_hot()")
    check_alloc(indices.shape + (depth,), dt, "one_hot")
    check_alloc((depth,), dtypes.int32, "one_hot", "the range of indices it compares with")
    return E.run_kernel(_one_hot, (indices,), {"depth": depth,
                                               "on_value": as_number(on_value, "on_value",
                                                                     "one_hot"),
                                               "off_value": as_number(off_value, "off_value",
                                                                      "one_hot"),
                                               "dtype": dt})
