"""Leak reports: ``with tf.debug.track_leaks() as leaks:`` notes every tensor created inside
(by an op, a creation function, a gradient call, a variable, in the thread that entered it)
with the user's line that made it, and reports those still alive at exit -- neither
disposed nor garbage-collected -- grouped by that line, with counts and bytes.
``leaks.step()`` (or entering the same tracker again on each iteration) takes a snapshot;
``leaks.report()`` shows the sites whose live count grows from one iteration to the next:
the leak of a loop without ``tidy``.

Off, it costs nothing: the creation seams (``engine.make_tensor``, ``engine.account_new``
and the kernel checker of ``sites``) are swapped only while a tracker or a profile is active.
"""
import os
import threading
import weakref
from dataclasses import dataclass, field

from ..after_fork import renew_after_fork
from .. import engine as E
from .. import interceptors
from .. import user_frames
from . import sites

# ---------------------------------------------------------------- creation seam (shared)

_listeners = []            # fn(tensor, kind) for every tensor created while active
_orig = {}                 # what the swapped engine functions call
_lock = threading.Lock()   # adding and removing listeners, from any thread
renew_after_fork(globals(), "_lock", threading.Lock)     # (flowgrad/after_fork.py)


def _made(a):
    t = _orig["make_tensor"](a)
    for fn in _listeners:
        fn(t, None)
    return t


def _accounted(t, shares=None):
    _orig["account_new"](t, shares)
    for fn in _listeners:
        fn(t, "variable")


def _kernel(prim, inputs, attrs, out):
    if type(out) is tuple:
        return              # multi-output kernels make their tensors with make_tensor
    for fn in _listeners:
        fn(out, None)


def _link(run, make):
    _orig["make_tensor"] = make     # (what lies below: flowgrad/interceptors.py composes the layers)


def add_listener(fn):
    """Call ``fn(tensor, kind)`` for every tensor created from now on (kind 'variable' for
    variables, else None) until ``remove_listener(fn)``."""
    with _lock:
        if not _listeners:
            # make_tensor is wrapped as a layer (a tf.jit trace in another thread may wrap
            # it too); account_new has no other wrapper
            _orig["account_new"] = interceptors.ENGINE_ACCOUNT
            interceptors.set_layer("leaks", None, _made, _link)
            E.account_new = _accounted
            sites.add_checker(_kernel)
        _listeners.append(fn)


def remove_listener(fn):
    with _lock:
        if fn in _listeners:
            _listeners.remove(fn)
        if not _listeners and "account_new" in _orig:
            interceptors.set_layer("leaks", None)
            E.account_new = _orig.pop("account_new")
            sites.remove_checker(_kernel)


# ---------------------------------------------------------------- reports

def _where(filename):
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


@dataclass
class LeakSite:
    """Live tensors made at one line of the user's code: ``count`` and ``bytes`` at the last
    snapshot, ``ops`` (the flowgrad functions that made them), ``trend`` (the live count at
    each snapshot) and ``growth`` (tensors added per iteration, 0 if not growing)."""
    filename: str
    lineno: int
    line: str
    ops: tuple
    count: int
    bytes: int
    trend: list = field(default_factory=list)
    bytes_trend: list = field(default_factory=list)

    @property
    def growth(self):
        t = self.trend
        if len(t) < 2 or t[-1] <= t[0] or any(b < a for a, b in zip(t, t[1:])):
            return 0
        return (t[-1] - t[0]) / (len(t) - 1)

    @property
    def bytes_growth(self):
        t = self.bytes_trend
        return (t[-1] - t[0]) / (len(t) - 1) if self.growth and len(t) > 1 else 0

    def __str__(self):
        return f"{_where(self.filename)}:{self.lineno}"


class LeakReport:
    """``leaks.report()``: the live sites (``sites``), those growing per iteration
    (``growing``), totals; ``str()`` is the table."""

    def __init__(self, sites_, steps):
        self.sites, self.steps = sites_, steps
        self.growing = [s for s in sites_ if s.growth > 0]
        self.count = sum(s.count for s in sites_)
        self.bytes = sum(s.bytes for s in sites_)

    def __bool__(self):
        return bool(self.sites)

    def __str__(self):
        if not self.sites:
            return ("No leaked tensors: every tensor created inside track_leaks() was "
                    "disposed or garbage-collected.")
        it = f" after {self.steps} iteration(s)" if self.steps > 1 else ""
        rows = [f"{self.count} live tensor(s), {self.bytes} bytes, created at "
                f"{len(self.sites)} site(s){it}:",
                f"  {'count':>7} {'bytes':>10} {'per iter':>9}  site"]
        for s in self.sites:
            per = f"+{s.growth:g}" if s.growth else ""
            rows.append(f"  {s.count:>7} {s.bytes:>10} {per:>9}  {s}  {'/'.join(s.ops)}"
                        + (f"  {s.line}" if s.line else ""))
        if self.growing:
            rows.append("Growing every iteration (a leak: dispose these tensors, or run the "
                        "loop body in tf.tidy):")
            for s in self.growing:
                rows.append(f"  {s}: +{s.growth:g} tensor(s), +{s.bytes_growth:g} bytes per "
                            f"iteration ({' -> '.join(str(c) for c in s.trend)})")
        elif self.steps > 1:
            rows.append("No site grows from one iteration to the next.")
        return "\n".join(rows)

    __repr__ = __str__


_UNKNOWN = ("<flowgrad>", 0, "")


class LeakTracker:
    """Tracks the tensors created while it is active (see ``track_leaks``)."""

    def __init__(self):
        self._entries = {}        # id(t) -> (weakref to t, site key, op name)
        self._lines = {}          # site key -> its line of code
        self._snapshots = []      # [{site key: (count, bytes, {op names})}] at each step / exit
        self._depth = 0
        self._stepped = False
        self._thread = None       # the thread whose tensors it notes (the one that entered)

    # ------------------------------------------------------------- on / off
    def __enter__(self):
        if self._depth == 0:
            self._thread = threading.get_ident()
            add_listener(self._seen)
            self._stepped = False
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            remove_listener(self._seen)
            if not self._stepped:
                self._snapshots.append(self._live())
        return False

    def _seen(self, t, kind):
        if threading.get_ident() != self._thread:
            return              # (made by another thread, a data loader's say: not inside)
        site = user_frames.capture(2)
        if site is None:
            key, line, op = _UNKNOWN, "", "?"
        else:
            key, line, op = (site.filename, site.lineno), site.line, site.op
        if kind == "variable":
            op = "variable"
        k = id(t)
        entries = self._entries
        ref = weakref.ref(t, lambda r, k=k: entries.get(k, (None,))[0] is r and entries.pop(k))
        entries[k] = (ref, key, op)
        if key not in self._lines:
            self._lines[key] = line

    # ------------------------------------------------------------- numbers
    def _live(self):
        live = {}
        for ref, key, op in list(self._entries.values()):
            t = ref()
            if t is None or t._disposed or t.kept == E.CONSTANT or t._data is None:
                continue
            c, b, ops = live.get(key, (0, 0, None))
            ops = ops or {}
            ops[op] = None
            live[key] = (c + 1, b + E.nbytes(t), ops)
        return live

    def step(self):
        """Mark the end of one iteration: snapshot the live tensors of each site.

        >>> import flowgrad as tf
        >>> kept = []
        >>> with tf.debug.track_leaks() as leaks:
        ...     for i in range(3):
        ...         kept.append(tf.scalar(1.0) + i)
        ...         leaks.step()
        >>> [s.trend for s in leaks.sites]
        [[1, 2, 3]]
        """
        self._snapshots.append(self._live())
        self._stepped = True

    def _sites(self):
        if self._depth:
            now = self._live()
            snaps = self._snapshots + [now]
        else:
            snaps = self._snapshots
            now = snaps[-1] if snaps else {}
        out = []
        for key, (count, nbytes, ops) in now.items():
            out.append(LeakSite(key[0], key[1], self._lines.get(key, ""), tuple(ops), count,
                                nbytes, [s.get(key, (0,))[0] for s in snaps],
                                [s.get(key, (0, 0))[1] for s in snaps]))
        out.sort(key=lambda s: (-s.bytes, -s.count, s.filename, s.lineno))
        return out

    @property
    def sites(self):
        """The sites with live tensors (at the last exit or step; now, inside the block),
        most bytes first."""
        return self._sites()

    @property
    def count(self):
        """How many tensors created inside are still alive (at the last exit or step)."""
        return sum(s.count for s in self._sites())

    @property
    def bytes(self):
        """Their bytes, summed per tensor as ``tf.memory()`` does."""
        return sum(s.bytes for s in self._sites())

    @property
    def steps(self):
        """How many snapshots (iterations) were taken."""
        return len(self._snapshots)

    def report(self):
        """The leak table: live tensors by site, and the sites that grow per iteration.

        >>> import flowgrad as tf
        >>> with tf.debug.track_leaks() as leaks:
        ...     y = tf.tidy(lambda: tf.scalar(2.0).square())
        ...     y.dispose()
        >>> print(leaks.report())
        No leaked tensors: every tensor created inside track_leaks() was disposed or garbage-collected.
        """
        return LeakReport(self._sites(), self.steps)


def track_leaks():
    """A context manager that finds tensors created inside it and still alive at its exit,
    grouped by the line of your code that created them. In a loop, call ``leaks.step()``
    once per iteration (or enter the same tracker on every iteration) to see which lines
    leak a little more each time.

    >>> import flowgrad as tf
    >>> history = []
    >>> with tf.debug.track_leaks() as leaks:
    ...     for i in range(4):
    ...         history.append(tf.scalar(1.0).square())        # kept alive: a leak
    ...         leaks.step()
    >>> leaks.count, leaks.bytes, [s.growth for s in leaks.report().growing]
    (4, 16, [1.0])
    """
    return LeakTracker()
