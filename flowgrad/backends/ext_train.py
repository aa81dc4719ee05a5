"""Array-API extensions used by the kernels of fused optimizer updates and tf.jit (see ext.py)."""
from .ext import extension, override  # noqa: F401
