"""Array-API extensions used by the kernels of creation, reductions, scans, shapes and indexing (see ext.py)."""
from .ext import extension, override  # noqa: F401
