"""Array-API extensions used by the kernels of unary, activations, binary and logical ops (see ext.py)."""
from .ext import extension, override  # noqa: F401
