"""The NumPy backend: NumPy's namespace and the backend's metadata (its extensions
are in the ext_* modules)."""
import types

import numpy as np

from .. import buffer_pool as _pool
from ..strings import StringArray
from .memory import apply_env


def make_numpy_backend():
    """The ``numpy`` module's namespace (array-API names included, NumPy >= 2.1) and the
    backend's metadata (see backends/__init__.py). Making it applies an opt-in memory
    policy from the environment (FLOWGRAD_MEMORY_POLICY, see backends/memory.py)."""
    apply_env()
    ns = types.SimpleNamespace(**{k: v for k, v in vars(np).items() if not k.startswith("_")})
    ns.name = "numpy"
    ns.np = np
    # NOTE: NumPy's functions of these names are Python wrappers around the array methods,
    # 0.3-1.5 us a call: on every gradient's path (unbroadcast sums and reshapes), so call
    # the methods (kernels only give them arrays, or the NumPy scalars of 0-d results)
    ns.astype = _astype
    ns.reshape = _reshape
    ns.sum = _sum
    ns.max = _max
    ns.min = _min
    ns.mean = _mean
    ns.permute_dims = _permute_dims
    ns.full = _full
    ns.matmul = _matmul
    ns.broadcast_to = _broadcast_to
    ns.dtypes = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
                 "int32": np.dtype(np.int32), "bool": np.dtype(np.bool_)}
    # NOTE: ufuncs on 0-d arrays return NumPy scalars: those are this backend's arrays too;
    # string tensors hold host StringArrays (flowgrad/strings.py)
    ns.array_types = (np.ndarray, np.float32, np.float64, np.int32, np.bool_, StringArray)
    ns.to_numpy = _same
    ns.from_numpy = _same
    ns.supports_out = True
    ns.device_bytes = _no_device
    return ns


def _astype(x, dtype, /, *, copy=True, device=None):
    # NOTE: np.astype is a Python wrapper that checks its argument: 0.5 us a call, twice
    # the cast of a small array; kernels only give it arrays
    return x.astype(dtype, copy=copy)


def _reshape(x, /, shape, *, copy=None):
    return x.reshape(shape) if copy is None else np.reshape(x, shape, copy=copy)


def _full(shape, fill_value, *, dtype=None, device=None):
    # NOTE: np.full is Python (empty, then copyto with casting checks): ~1.5 us, and every
    # gradient's default seed of ones is one; a scalar value fills the same way
    if not isinstance(fill_value, (int, float, bool, np.generic)):
        return np.full(shape, fill_value, dtype=dtype)
    a = np.empty(shape, dtype=dtype if dtype is not None else np.result_type(fill_value))
    a.fill(fill_value)
    return a


def _sum(x, /, *, axis=None, dtype=None, keepdims=False):
    return x.sum(axis=axis, dtype=dtype, keepdims=keepdims)


def _max(x, /, *, axis=None, keepdims=False):
    return x.max(axis=axis, keepdims=keepdims)


def _min(x, /, *, axis=None, keepdims=False):
    return x.min(axis=axis, keepdims=keepdims)


def _mean(x, /, *, axis=None, keepdims=False):
    # NOTE: ndarray.mean is Python code around the sum and a division in float64 (5-8 us
    # a call, the price of a loss's mean): a float sum divided by its count in its own
    # dtype rounds the same (a float64 quotient rounded to float32 is float32's quotient,
    # 53 >= 2*24 + 2 bits) while the count is exact in the dtype (up to 2**24 in float32)
    n = x.size
    if axis is not None:
        n = 1
        for a in axis:
            n *= x.shape[a]
    if x.dtype.kind != "f" or not 0 < n <= _EXACT_COUNT:
        return x.mean(axis=axis, keepdims=keepdims)
    return x.sum(axis=axis, keepdims=keepdims) / x.dtype.type(n)


_EXACT_COUNT = 1 << 24


def _permute_dims(x, /, axes):
    return x.transpose(axes)


def _matmul(a, b, /):
    # NOTE: a big product's output from malloc is mapped fresh, and page-faults on every
    # page, whenever glibc's threshold for mapped blocks has not grown past its size: that
    # depends on what the process freed before (a loop of per-example gradients: 25,000
    # faults a batch, 40% of its time, or none). So a float product of 256 KB or more
    # writes into a buffer its shape's tensors gave back (flowgrad/buffer_pool.py), as
    # elementwise kernels do; BLAS computes the same product, into other memory.
    if a.ndim == 2 and b.ndim == 2 and a.dtype is b.dtype and a.dtype.kind == "f":
        shape = (a.shape[0], b.shape[1])
        if shape[0] * shape[1] >= _pool.MIN_ELEMENTS and a.shape[1] == b.shape[0]:
            out = _pool.take(shape, a.dtype)
            if out is not None:
                return np.matmul(a, b, out=out)
    return np.matmul(a, b)


def _broadcast_to(x, /, shape):
    # NOTE: np.broadcast_to builds an nditer in Python (~6 us, and several times that right
    # after a big product has pushed NumPy's code out of the caches); a NumPy scalar, a
    # rank-0 tensor's value (a loss's gradient spread by mean or sum), is spread by a
    # view of stride 0 over its own read-only buffer, as np.broadcast_to makes it
    if isinstance(x, np.generic):
        return np.ndarray(shape, x.dtype, buffer=x, strides=(0,) * len(shape))
    return np.broadcast_to(x, shape)


def _same(a):
    return a


def _no_device():
    return None
