"""The CuPy backend: the same kernels on a CUDA GPU (``tf.set_backend("cupy")``).

Imported only when selected. Its namespace is CuPy's, with array-api-compat's CuPy
namespace on top for the standard names CuPy spells otherwise; extensions CuPy has natively
are registered as overrides in the ``ext_*`` modules. Needs the extra ``flowgrad[cuda]``
(cupy-cuda12x and array-api-compat) and a visible GPU.

Memory: a disposed tensor drops its array, and CuPy returns the block to its memory pool at
once, so ``tf.memory().num_bytes_in_gpu`` (the pool's bytes in use) falls with it; the pool
keeps the block for the next array rather than freeing it on the device, as TF.js's WebGL
backend keeps its textures.
"""
import types

from ..errors import BackendError, MissingDependencyError

HINT = "pip install 'flowgrad[cuda]' (cupy-cuda12x and array-api-compat; CUDA 12)"


def make_cupy_backend():
    """The CuPy namespace, or a clear error when CuPy or a GPU is missing."""
    try:
        import cupy
    except ImportError as e:
        raise MissingDependencyError(f"backend 'cupy' needs CuPy: {HINT} ({e})") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:          # CUDARuntimeError, or a driver that cannot load
        raise BackendError(f"backend 'cupy': no usable CUDA GPU here ({e}). Use "
                           f"tf.set_backend('numpy'), or run on a machine with a GPU.") from None
    if count == 0:
        raise BackendError("backend 'cupy': CUDA reports no GPU here. Use "
                           "tf.set_backend('numpy'), or run on a machine with a GPU.")
    try:
        from array_api_compat import cupy as compat
    except ImportError as e:
        raise MissingDependencyError(f"backend 'cupy' needs array-api-compat: {HINT} "
                                     f"({e})") from None
    ns = types.SimpleNamespace(**{k: v for k, v in vars(cupy).items() if not k.startswith("_")})
    for k, v in vars(compat).items():
        if not k.startswith("_"):
            setattr(ns, k, v)       # the standard's semantics where the spellings differ
    ns.name = "cupy"
    ns.dtypes = {"float32": cupy.dtype(cupy.float32), "float64": cupy.dtype(cupy.float64),
                 "int32": cupy.dtype(cupy.int32), "bool": cupy.dtype(cupy.bool_)}
    ns.array_types = (cupy.ndarray,)
    ns.to_numpy = cupy.asnumpy
    ns.from_numpy = cupy.asarray
    ns.supports_out = True
    pool = cupy.get_default_memory_pool()
    ns.device_bytes = pool.used_bytes
    ns.synchronize = cupy.cuda.runtime.deviceSynchronize     # for timing: kernels are async
    return ns
