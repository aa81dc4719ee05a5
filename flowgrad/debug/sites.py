"""Where the user called an op: the first stack frame outside the flowgrad package, and
the public op it called (the outermost flowgrad frame below it). Only debug features walk
the stack; plain runs never do."""
import linecache
import os
import sys
import warnings
from dataclasses import dataclass

from .. import engine as E
from .. import seams

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class Site:
    """A user source line and the public flowgrad function called there."""
    op: str
    filename: str
    lineno: int
    line: str

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.line}" if self.line else \
            f"{self.filename}:{self.lineno}"


_USER_FILES = (os.path.join(_PKG, "demo.py"),)       # flowgrad's own code that acts as a user


def internal(filename):
    return filename.startswith(_PKG) and filename not in _USER_FILES


_OPS = None


def _public_ops():
    global _OPS
    if _OPS is None:
        from ..ops import OPS
        _OPS = OPS
    return _OPS


_OPERATOR_OPS = {"_getitem": "strided_slice"}      # operators that run a kernel directly


def _private(name):
    """A helper's name rather than an op's: `_matmul_op`, a closure `op`, a `<lambda>`."""
    return name in ("op", "<lambda>") or (name.startswith("_") and not name.endswith("__"))


def capture(depth=1):
    """The Site of the user's call that is running now (None if flowgrad called itself)."""
    f = sys._getframe(depth)
    outer, public = None, None
    ops = _public_ops()
    while f is not None and internal(f.f_code.co_filename):
        outer = f
        if f.f_code.co_name in ops:
            public = f.f_code.co_name
        f = f.f_back
    if f is None:
        return None
    name = outer.f_code.co_name if outer is not None else "?"
    if _private(name):          # an operator (x @ w, p > 0, 2 + x, x[0]): the op it runs
        name = public if public is not None else _OPERATOR_OPS.get(name, name)
    fn = f.f_code.co_filename
    return Site(name, fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip())


def user_frame(depth=1):
    """The innermost stack frame outside flowgrad (None if there is none)."""
    f = sys._getframe(depth + 1)
    while f is not None and internal(f.f_code.co_filename):
        f = f.f_back
    return f


def warn(message, category):
    """Warn at the user's line, the first frame outside flowgrad, however many flowgrad
    frames lie between (a fixed ``stacklevel`` points at the wrong line as soon as a call
    goes through one frame more or less, e.g. a wrapped optimizer).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn("look here", UserWarning)
    >>> seen[0].filename == __file__ or seen[0].filename.startswith("<doctest")
    True
    """
    f = user_frame(1)
    if f is None:
        warnings.warn(message, category, stacklevel=2)
        return
    g = f.f_globals
    # (no module_globals: its loader lookup fails for `python -c`, REPL and notebook code;
    # the source line is read from the file name, as for any warning)
    warnings.warn_explicit(message, category, f.f_code.co_filename, f.f_lineno,
                           module=g.get("__name__"),
                           registry=g.setdefault("__warningregistry__", {}))


def node_site(node):
    return getattr(node, "site", None)


def op_name(node):
    """The public name of the op that recorded ``node`` (its kernel name if unknown)."""
    attrs = node.attrs or {}
    if node.prim.strict and attrs.get("name"):
        # a custom_grad op is its forward function, wherever it was called from (even
        # from inside flowgrad, as check_custom_grad does)
        return attrs["name"]
    site = node_site(node)
    if site is not None and site.op not in ("?", "run_kernel", "run"):
        return site.op
    return attrs.get("name") or node.prim.name


# ---------------------------------------------------------------- the instrumented entry

_plain = seams.ENGINE_RUN       # below the debug layer lies the engine's own entry
_checkers = []          # callables (prim, inputs, attrs, out) -> None, run after each kernel
_sites = 0              # > 0 while some feature wants sites recorded on nodes


def _instrumented(prim, inputs, attrs=None):
    out = _plain(prim, inputs, attrs)
    if _sites and inputs and E.is_recording():
        first = out[0] if isinstance(out, tuple) else out
        n = first._node
        if n is not None and getattr(n, "site", None) is None:
            n.site = capture(1)
    for check in _checkers:
        check(prim, inputs, attrs, out)
    return out


def _on_record(node):
    if getattr(node, "site", None) is None:
        node.site = capture(1)


def _install():
    # (the layers over the kernel entry are composed in one place: flowgrad/seams.py)
    seams.set_layer("debug", _instrumented if (_sites or _checkers) else None)
    E.on_record = _on_record if _sites else None


def want_sites(on):
    """Record user sites on nodes while ``on`` (nestable)."""
    global _sites
    _sites += 1 if on else -1
    _install()


def add_checker(fn):
    _checkers.append(fn)
    _install()


def remove_checker(fn):
    if fn in _checkers:
        _checkers.remove(fn)
    _install()
