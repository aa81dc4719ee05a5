"""The user's line: the first stack frame outside the flowgrad package, the public op called
there, and warnings issued at it.

Low layers need these too (tf.vmap refuses a read of a batched tensor unless an op makes it;
a warning of tf.vmap or of an optimizer points at the user's line, not at flowgrad's), so
they live here, below everything, and import nothing of flowgrad's. The debug features that
record sites on recorded nodes are flowgrad/debug/sites.py. Plain runs never walk the stack.

The public ops are known by name: ``flowgrad.ops`` registers every name it exports
(``add_op_name``), so this module never imports the op table.
"""
import linecache
import os
import sys
import warnings
from dataclasses import dataclass

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep


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
    """True for a file of flowgrad's own (except the code that acts as a user: the demo)."""
    return filename.startswith(_PKG) and filename not in _USER_FILES


_OP_NAMES = set()   # the names of the public ops (tf.<name>): what export() registered


def add_op_name(name):
    """Register ``name`` as a public op's (called by ``flowgrad.ops._core.export``)."""
    _OP_NAMES.add(name)


def is_op_name(name):
    """True when ``name`` is a public op's (tf.<name>, not a namespace's)."""
    return name in _OP_NAMES


_OPERATOR_OPS = {"_getitem": "strided_slice"}      # operators that run a kernel directly

# entry frames that are protocols, not ops (NumPy's __array_ufunc__ / __array_function__):
# code name -> fn(frame) -> the name of what the user called (np.log), registered by the
# module that defines them
FRAME_NAMERS = {}


def _private(name):
    """A helper's name rather than an op's: `_matmul_op`, a closure `op`, a `<lambda>`."""
    return name in ("op", "<lambda>") or (name.startswith("_") and not name.endswith("__"))


def capture(depth=1):
    """The Site of the user's call that is running now (None if flowgrad called itself)."""
    f = sys._getframe(depth)
    outer, public = None, None
    ops = _OP_NAMES
    while f is not None and internal(f.f_code.co_filename):
        outer = f
        if f.f_code.co_name in ops:
            public = f.f_code.co_name
        f = f.f_back
    if f is None:
        return None
    name = outer.f_code.co_name if outer is not None else "?"
    namer = FRAME_NAMERS.get(name)
    if namer is not None:
        try:
            name = namer(outer)
        except Exception:       # (a name for a report: never worth failing the op)
            pass
    elif _private(name):          # an operator (x @ w, p > 0, 2 + x, x[0]): the op it runs
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
