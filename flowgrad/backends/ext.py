"""flowgrad's extensions to the array API: what kernels need beyond the standard.

Each extension is a generic implementation written with the standard alone, taking the
namespace first (``def pad(B, x, widths): ...``); a backend may have a faster one of its own
(without the namespace argument). The families' extensions live in the ``ext_*`` modules:
each lists, at its end, its generic implementations (``EXTENSIONS``) and the backends' own
(``OVERRIDES``, keyed by ``(backend name, extension name)``). This module imports them and
builds one table from those lists (``collect``); they never import it back, so the tables
are filled by reading plain data, not by decorators run as a side effect of an import.
``complete(ns, name)`` puts on a backend's namespace, under each extension's name, its own
implementation or the generic one bound to it.

>>> import flowgrad.backends as bk
>>> bk.namespace("numpy").erf is not None
True
"""
import functools

import numpy as np

from . import ext_conv, ext_math, ext_nn, ext_shape

REQUIRED = ("name", "dtypes", "array_types", "to_numpy", "from_numpy", "supports_out",
            "device_bytes")


def may_share_memory(B, a, b):
    """Whether two arrays may share memory (buffer accounting of views); the standard
    cannot tell, so views count as new buffers there."""
    return False


def collect(*tables):
    """``(extensions, overrides)`` from ``(EXTENSIONS, OVERRIDES)`` pairs: the generic
    implementations by their names, and the backends' own by ``(backend, name)``. An
    extension defined twice, or a backend's own version of no extension, is a ValueError
    (one family would silently replace another's)."""
    extensions, overrides = {}, {}
    for generic, own in tables:
        for fn in generic:
            name = fn.__name__
            if name in extensions:
                raise ValueError(f"extension '{name}' is defined twice: "
                                 f"{extensions[name].__module__} and {fn.__module__}")
            extensions[name] = fn
        overrides.update(own)
    unknown = sorted(f"{b}.{n}" for b, n in overrides if n not in extensions)
    if unknown:
        raise ValueError(f"backend implementations of no extension: {', '.join(unknown)}")
    return extensions, overrides


# name -> generic implementation f(B, *args, **kw); (backend, name) -> f(*args, **kw)
EXTENSIONS, OVERRIDES = collect(
    ((may_share_memory,), {("numpy", "may_share_memory"): np.may_share_memory}),  # the engine's
    *((m.EXTENSIONS, m.OVERRIDES) for m in (ext_math, ext_shape, ext_nn, ext_conv)))


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
