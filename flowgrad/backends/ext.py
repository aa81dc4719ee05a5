"""flowgrad's extensions to the array API: what kernels need beyond the standard.

Each extension is a generic implementation written with the standard alone, taking the
namespace first (``def pad(B, x, widths): ...``), registered with ``@extension``; a backend
may register a faster one of its own with ``@override("numpy", "pad")`` (without the
namespace argument). ``complete(ns, name)`` puts on a backend's namespace, under each
extension's name, its override or the generic implementation bound to it. The families'
extensions live in the ``ext_*`` modules imported at the bottom.

>>> import flowgrad.backends as bk
>>> bk.namespace("numpy").erf is not None
True
"""
import functools

EXTENSIONS = {}            # name -> generic implementation f(B, *args, **kw)
OVERRIDES = {}             # (backend name, extension name) -> f(*args, **kw)
REQUIRED = ("name", "dtypes", "array_types", "to_numpy", "from_numpy", "supports_out",
            "device_bytes")


def extension(name=None):
    """Register ``fn(B, ...)`` as the generic implementation of an extension."""
    def deco(fn):
        key = name or fn.__name__
        if key in EXTENSIONS:
            raise ValueError(f"extension '{key}' is registered twice: "
                             f"{EXTENSIONS[key].__module__} and {fn.__module__}")
        EXTENSIONS[key] = fn
        return fn
    return deco


def override(backend, name=None):
    """Register ``fn(...)`` as backend ``backend``'s own implementation of an extension."""
    def deco(fn):
        OVERRIDES[(backend, name or fn.__name__)] = fn
        return fn
    return deco


def complete(ns, name):
    """Add the extensions to namespace ``ns`` of backend ``name``; check its metadata."""
    missing = [k for k in REQUIRED if not hasattr(ns, k)]
    if missing:
        raise TypeError(f"backend '{name}': its namespace lacks {', '.join(missing)}")
    # for dtype tests in kernels (the standard's dtypes have no NumPy ``kind``)
    ns.float_dtypes = frozenset((ns.dtypes["float32"], ns.dtypes["float64"]))
    for ext, generic in EXTENSIONS.items():
        f = OVERRIDES.get((name, ext))
        setattr(ns, ext, f if f is not None else functools.partial(generic, ns))
    return ns


# ---------------------------------------------------------------- the engine's own

@extension()
def may_share_memory(B, a, b):
    """Whether two arrays may share memory (buffer accounting of views); the standard
    cannot tell, so views count as new buffers there."""
    return False


override("numpy", "may_share_memory")(__import__("numpy").may_share_memory)


# the families' extensions (each module registers its own)
from . import ext_math, ext_shape, ext_nn, ext_conv, ext_train  # noqa: E402,F401
