"""Array-API extensions used by the kernels of convolutions and pooling (see ext.py)."""
from .ext import extension, override  # noqa: F401
