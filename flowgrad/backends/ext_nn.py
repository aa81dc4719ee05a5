"""Array-API extensions used by the kernels of linear algebra, nn, losses, images and spatial ops (see ext.py)."""
from .ext import extension, override  # noqa: F401
