"""Backends: the array library that kernels run on.

A backend is an array namespace (NumPy's functions, by their NumPy names) plus a few named
overrides for what the namespace lacks (``erf``) or does slowly. Kernels receive the active
backend as their first argument and call only what it provides, so a second backend (CuPy)
is a namespace and its overrides, not a copy of the kernels.
"""
from .numpy_backend import make_numpy_backend

_BACKENDS = {"numpy": make_numpy_backend}
_active = None


def get_backend():
    """The active backend namespace (NumPy unless changed).

    >>> get_backend().name
    'numpy'
    """
    global _active
    if _active is None:
        _active = _BACKENDS["numpy"]()
    return _active


def backends():
    """Names of the backends that can be selected.

    >>> backends()
    ['numpy']
    """
    return sorted(_BACKENDS)
