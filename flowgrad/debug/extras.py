"""Small helpers the debug modules share without importing each other: optional
dependencies, the bin edges of the monitor's stored histograms, numbers and escaped text for
the report and the notebook displays."""
import html
import importlib
import math
import os

import numpy as np

from ..arg_checks import describe
from ..errors import ArgumentError, MissingDependencyError


def require(module, extra, what):
    """Import an optional module, or raise MissingDependencyError naming the extra.

    >>> require("numpy", "viz", "arrays").__name__
    'numpy'
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"{what} need{'s' if not what.endswith('s') else ''} {module.split('.')[0]}: "
            f"pip install 'flowgrad[{extra}]'") from None


def check_path(path, what, api, folder=False):
    """A path argument as a string (str or os.PathLike, not empty): a ``folder``'s may not
    be an existing file, a file's may not be an existing folder."""
    try:
        s = os.fspath(path)
    except TypeError:
        s = None
    kind = "folder" if folder else "file"
    if not isinstance(s, str) or not s:
        raise ArgumentError(f"{api}: {what} must be a {kind} path (a non-empty string or a "
                            f"pathlib.Path), got {describe(path)}")
    if os.path.isfile(s) if folder else os.path.isdir(s):
        raise ArgumentError(f"{api}: {what} {s!r} is a {'file' if folder else 'folder'}; "
                            f"give a {kind} path")
    return s


def hist_edges(hist):
    """The bin edges of a stored histogram (np.histogram's edges are this linspace)."""
    return np.linspace(hist[0][0], hist[0][1], len(hist[1]) + 1)


def output_path(path):
    """``path`` as a Path whose folder exists (reports and plots create it)."""
    from pathlib import Path
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


# ---------------------------------------------------------------- text for reports and displays

def e(s):
    """``s`` escaped for HTML and XML text and attributes."""
    return html.escape(str(s), quote=True)


def is_nan(x):
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x):
    """A number for people, 4 digits ('-' for None/NaN)."""
    return "-" if is_nan(x) else f"{float(x):.4g}"


def count(x):
    return "-" if is_nan(x) else str(int(x))
