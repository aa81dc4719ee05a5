"""Backends: the array library that kernels run on.

A backend is an array namespace with the Python array API standard's functions, by their
standard names (``B.concat``, ``B.permute_dims``, ``B.astype``), plus flowgrad's
*extensions* (``backends/ext.py``): the few things the standard lacks (``erf``, ``pad``,
``einsum``...) or that a backend does faster its own way (``out=`` buffers, stride tricks).
Each extension has a generic implementation written with the standard alone, and a backend
may override it. Kernels receive the active namespace as their first argument and call only
what it provides, so a second backend is a namespace and its overrides, not a copy of the
kernels; the array-API-strict backend in the tests proves that no kernel reaches past it.

NOTE: the NumPy backend is the ``numpy`` module itself (NumPy >= 2.1's main namespace
follows the standard): array-api-compat's NumPy wrapper adds a Python call per function,
which the per-op cost of an eager engine cannot afford.

Besides the functions, a namespace carries what the engine needs to know about it:
``name``, ``dtypes`` (flowgrad dtype name -> the backend's dtype), ``array_types`` (the
types of its arrays), ``to_numpy(a)`` / ``from_numpy(a)`` (host transfers), ``supports_out``
(ufuncs take ``out=``: fused optimizer updates and ``tf.jit`` buffers use it) and
``device_bytes()`` (None for host memory).
"""
import importlib
import sys
import types

from ..errors import ArgumentError, BackendError

# name -> "module:function" making the namespace; imported only when selected
_FACTORIES = {"numpy": "flowgrad.backends.numpy_backend:make_numpy_backend",
              "cupy": "flowgrad.backends.cupy_backend:make_cupy_backend"}
_made = {}                 # name -> namespace
_active = None             # the active namespace
_listeners = []            # callables(namespace) told when the active backend changes


def register_backend(name, factory):
    """Register a backend: ``factory()`` returns its namespace (see the module docstring).
    The tests register ``array_api_strict`` this way.

    >>> import flowgrad as tf
    >>> register_backend("numpy_again", lambda: namespace("numpy"))
    >>> "numpy_again" in tf.backends()
    True
    >>> unregister_backend("numpy_again")
    """
    if not isinstance(name, str) or not callable(factory):
        raise ArgumentError("register_backend(name, factory): a name and a function that "
                            "returns the backend's namespace")
    _FACTORIES[name] = factory
    _made.pop(name, None)


def unregister_backend(name):
    """Forget a registered backend (it must not be the active one)."""
    if _active is not None and _active.name == name:
        raise BackendError(f"backend '{name}' is active: set_backend() another one first")
    _FACTORIES.pop(name, None)
    _made.pop(name, None)


def backends():
    """Names of the backends that can be selected (TF.js: the registered backends).

    >>> import flowgrad as tf
    >>> "numpy" in tf.backends() and "cupy" in tf.backends()
    True
    """
    return sorted(_FACTORIES)


def namespace(name):
    """The namespace of backend ``name``, made on first use."""
    ns = _made.get(name)
    if ns is not None:
        return ns
    factory = _FACTORIES.get(name)
    if factory is None:
        raise BackendError(f"Backend '{name}' not found: the backends are "
                           f"{', '.join(backends())}.")
    if isinstance(factory, str):
        mod, fn = factory.split(":")
        factory = getattr(importlib.import_module(mod), fn)
    ns = factory()
    if getattr(ns, "name", name) != name:      # a registered alias of another namespace
        _made[name] = ns
        return ns
    from .ext import complete
    complete(ns, name)
    _made[name] = ns
    return ns


def active():
    """The active backend's namespace (what kernels receive as ``B``)."""
    global _active
    if _active is None:
        _active = namespace("numpy")
    return _active


def get_backend():
    """The name of the active backend (TF.js ``tf.getBackend()``).

    >>> import flowgrad as tf
    >>> tf.get_backend()
    'numpy'
    """
    return active().name


def set_backend(name):
    """Make ``name`` the backend new tensors and kernels use (TF.js ``tf.setBackend``,
    synchronous). Returns the previous backend's name. Tensors made before keep their
    arrays on their backend: using them with another backend's tensors is a BackendError
    (``tf.from_dlpack(x)`` or ``tf.tensor(x.numpy())`` brings one over).

    >>> import flowgrad as tf
    >>> tf.set_backend("numpy")
    'numpy'
    """
    global _active
    if not isinstance(name, str):
        raise ArgumentError(f"set_backend(name): name must be a string, got "
                            f"{type(name).__name__}")
    try:
        ns = namespace(name)
    except BackendError as e:
        raise BackendError(f"set_backend(name): {e}") from None
    previous = active().name
    _active = ns
    for fn in _listeners:
        fn(ns)
    return previous


def on_change(fn):
    """Call ``fn(namespace)`` whenever the active backend changes (the engine listens)."""
    _listeners.append(fn)


def backend_of(array):
    """The namespace whose arrays have ``array``'s type, or None."""
    t = type(array)
    for ns in _made.values():
        if t in ns.array_types:
            return ns
    return None


class _CallableModule(types.ModuleType):
    """``tf.backends`` is this package and, called, the list of backend names (the
    backends issue's ``tf.backends()``), so the public name and the layer's name agree."""

    def __call__(self):
        return backends()


sys.modules[__name__].__class__ = _CallableModule
