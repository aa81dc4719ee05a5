"""The origin of every NaN and Inf: ``with tf.debug.check_numerics():`` checks the output of
every op in the forward pass and every gradient in the backward pass, and names the public
op, the pass, the user's line, whether the op created the value or passed it on, the input
ranges and the element.

Inside a gradient function a NaN created in the forward pass is held back until something
uses it: a ``where`` that does not select it makes it harmless for the value; the backward
pass then reports "the where trap" (0 × ∞ = NaN in the gradient of the op in the branch not
taken) with its fix.
"""
import os
import weakref

import numpy as np

from .. import engine as E
from .. import float_errors
from .. import recording
from .. import interceptors
from .. import tape
from ..arg_checks import describe, flag
from ..errors import ArgumentError, FlowgradError
from ..user_frames import capture, warn
from . import sites

_FLOAT_KINDS = "f"


class NumericsError(FlowgradError, FloatingPointError):
    """A NaN or Inf appeared; attributes describe where (see ``Finding``)."""

    def __init__(self, finding):
        super().__init__(str(finding))
        self.finding = finding
        for k in ("op", "kernel", "pass_", "wrt", "created", "site", "index", "value",
                  "where_trap", "kind"):
            setattr(self, k, getattr(finding, k))


class NumericsWarning(UserWarning):
    """A NaN or Inf found in ``mode="warn"``."""


def _bad(a):
    a = np.asarray(E.to_host(a))
    return a.dtype.kind in _FLOAT_KINDS and not np.isfinite(a).all()


def _kind(v):
    return "NaN" if np.isnan(v) else ("Inf" if v > 0 else "-Inf")


def _range(name, t):
    a = np.asarray(E.to_host(t._data if hasattr(t, "_data") else t))
    if a.size == 0:
        return f"{name}: empty"
    if a.dtype.kind == "b":
        return f"{name}: bool {a.shape}"
    finite = a[np.isfinite(a)] if a.dtype.kind in _FLOAT_KINDS else a
    lo_hi = f"[{finite.min():.6g}, {finite.max():.6g}]" if finite.size else "no finite value"
    extra = "" if finite.size == a.size else f" ({a.size - finite.size} non-finite)"
    return f"{name}: {a.dtype} {a.shape} range {lo_hi}{extra}"


class Finding:
    """One NaN/Inf event: op (public name), kernel, pass_ ('forward' or 'backward'), wrt (the
    input whose gradient went bad), created (True: the op made it from finite inputs),
    site (the user's line), index and value of the first bad element, where_trap."""

    def __init__(self, op, kernel, pass_, site, out, inputs, names, created, wrt=None,
                 where_trap=False, note=""):
        a = np.asarray(E.to_host(out))
        bad = ~np.isfinite(a)
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else ()
        self.op, self.kernel, self.pass_, self.site = op, kernel, pass_, site
        self.created, self.wrt, self.where_trap, self.note = created, wrt, where_trap, note
        self.index = idx
        self.value = float(a[idx]) if bad.any() else float("nan")
        self.kind = _kind(self.value)
        self.count = int(bad.sum())
        self.inputs = [_range(n, t) for n, t in zip(names, inputs)]
        self.at = []          # the inputs' values at the bad element, where shapes allow
        for name, t in zip(names, inputs):
            v = np.asarray(E.to_host(t._data))
            if idx and v.shape == a.shape:
                self.at.append(f"{name} = {v[idx]:.6g}")

    def __str__(self):
        verb = "created" if self.created else "propagated"
        where = (f"in the gradient of {self.op}, with respect to {self.wrt} (backward pass)"
                 if self.pass_ == "backward" else f"by {self.op} (forward pass)")
        head = f"{self.kind} {verb} {where}"
        if self.where_trap:
            head = "The where trap: " + head
        lines = [head]
        if self.site is not None:
            lines.append(f"  {'the op was called at' if self.pass_ == 'backward' else 'at'} "
                         f"{self.site}")
        at = f" where {', '.join(self.at)}" if self.at else ""
        lines.append(f"  kernel {self.kernel}; first bad element at index {self.index} = "
                     f"{self.value}{at} ({self.count} bad element(s))")
        lines += [f"  {r}" for r in self.inputs]
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


_WHERE_FIX = (
    "a where() did not select this op's result there, but its gradient is still computed "
    "and 0 × ∞ gives NaN. Fix: mask the input first (the safe-where pattern), e.g. "
    "tf.where(x > 0, tf.where(x > 0, x, 1).sqrt(), 0) instead of tf.where(x > 0, x.sqrt(), 0).")


class check_numerics:
    """Context manager: raise ``NumericsError`` (``mode="raise"``) or collect findings and
    warn (``mode="warn"``) when a NaN or Inf appears in the forward or backward pass.

    >>> import flowgrad as tf
    >>> with tf.debug.check_numerics():                       # doctest: +ELLIPSIS
    ...     tf.sqrt(tf.tensor([-1.0]))
    Traceback (most recent call last):
    ...
    flowgrad.debug.numerics.NumericsError: NaN created by sqrt (forward pass)
    ...
    """

    def __init__(self, mode="raise", forward=True, backward=True):
        self.mode = _mode(mode, "check_numerics")
        self.forward = flag(forward, "forward", "check_numerics")
        self.backward = flag(backward, "backward", "check_numerics")
        self.findings = []
        self._pending = {}        # id(tensor) -> (weakref, finding): created while recording
        self._masked = {}         # id(node) -> finding: a NaN that a where() did not select

    # ------------------------------------------------------------- on / off
    def __enter__(self):
        global _watch
        _stack.append(self)
        if len(_stack) == 1:
            sites.want_sites(True)
            sites.add_checker(_forward_check)
            _watch = interceptors.watch("numerics", dx=_backward_check, y=_y_check)
        return self

    def __exit__(self, *exc):
        _stack.remove(self)
        if not _stack:
            sites.remove_checker(_forward_check)
            sites.want_sites(False)
            interceptors.unwatch(_watch)
        return False

    # ------------------------------------------------------------- reporting
    def report(self, finding):
        self.findings.append(finding)
        if self.mode == "raise":
            raise NumericsError(finding)
        warn(str(finding), NumericsWarning)


_stack = []
_watch = None       # the backward sweep's watch while a check_numerics is on


def _active():
    return _stack[-1] if _stack else None


def _forward_check(prim, inputs, attrs, out):
    chk = _active()
    if chk is None or not chk.forward or recording.in_backward():
        return
    outs = out if isinstance(out, tuple) else (out,)
    bad_out = any(_bad(o._data) for o in outs)
    # a held-back NaN reaching this op: masked (fine) or passed on (report its origin)
    for t in inputs:
        entry = chk._pending.get(id(t))
        if entry is None or entry[0]() is not t:
            continue
        if bad_out:
            chk._pending.pop(id(t), None)
            chk.report(entry[1])
            return
        if prim.name == "Select" and t._node is not None:
            chk._masked[id(t._node)] = entry[1]      # the op whose value where() dropped
    if not bad_out:
        return
    created = not any(_bad(t._data) for t in inputs)
    names = prim.arg_names if len(prim.arg_names) == len(inputs) else \
        [f"input {i}" for i in range(len(inputs))]
    site = capture(1)
    op = site.op if site is not None else prim.name
    bad = next(o for o in outs if _bad(o._data))
    finding = Finding(op, prim.name, "forward", site, bad._data, inputs, names, created)
    if created and recording.is_recording():
        # perhaps a where() will not select it: hold it back until something uses it
        chk._pending[id(bad)] = (weakref.ref(bad), finding)
        return
    chk.report(finding)


def _y_check(y):
    chk = _active()
    if chk is None or not chk.forward or not _bad(y._data):
        return
    entry = chk._pending.pop(id(y), None)
    if entry is not None and entry[0]() is y:
        chk.report(entry[1])


def _backward_check(n, i, t, dx, g):
    chk = _active()
    if chk is None or not chk.backward or not _bad(dx._data):
        return dx
    gs = g if isinstance(g, list) else [g]
    created = not any(_bad(gi._data) for gi in gs if gi is not None)
    prim = n.prim
    wrt = tape.input_name(prim, i)
    trap, note = False, ""
    masked = chk._masked.get(id(n))
    if masked is not None or (created and _zero_where_bad(n, gs, dx)):
        trap, note = True, _WHERE_FIX
    inputs = list(n.inputs) + list(gs)
    names = [tape.input_name(prim, k) for k in range(len(n.inputs))] + ["dy"] * len(gs)
    finding = Finding(sites.op_name(n), prim.name, "backward", sites.node_site(n), dx._data,
                      inputs, names, created, wrt=wrt, where_trap=trap, note=note)
    chk.report(finding)
    return dx


def _zero_where_bad(n, gs, dx):
    """True if the gradient went bad where the incoming gradient is 0 and the op's own value
    was not finite: the signature of a where() that did not select that value."""
    g = gs[0]
    if g is None or g.shape[-len(dx.shape) or None:] != dx.shape:
        return False
    q = float_errors.fpe_saved()
    try:
        float_errors.fpe_quiet()
        y = n.prim.fwd(E.B, *[x._data for x in n.inputs], **(n.attrs or {}))
    except Exception:
        return False
    finally:
        float_errors.fpe_restore(q)
    y = np.asarray(E.to_host(y[0] if isinstance(y, tuple) else y))
    bad = ~np.isfinite(np.asarray(E.to_host(dx._data)))
    if y.shape != bad.shape:
        return False
    gz = np.asarray(E.to_host(g._data))
    return bool(((gz == 0) & ~np.isfinite(y))[bad].all())


# ---------------------------------------------------------------- global debug mode

_global = None


def enable_debug_mode(mode="raise"):
    """Check numerics everywhere until ``disable_debug_mode()`` (also set by the environment
    variable ``FLOWGRAD_DEBUG=1``, or ``=warn``)."""
    global _global
    _mode(mode, "enable_debug_mode")
    if _global is None:
        _global = check_numerics(mode)
        _global.__enter__()
    return _global


def _mode(mode, api):
    if type(mode) is str and mode in ("raise", "warn"):
        return mode
    raise ArgumentError(f"{api}: mode must be 'raise' or 'warn', got {describe(mode)}")


def disable_debug_mode():
    """Undo ``enable_debug_mode``."""
    global _global
    if _global is not None:
        _global.__exit__(None, None, None)
        _global = None


def debug_mode_from_environment():
    """Turn debug mode on if the ``FLOWGRAD_DEBUG`` environment variable asks for it
    (``1``, ``true``, ``raise``, ``yes``, ``on``: raise; ``warn``: warn), so a program can be
    debugged without editing it. ``tf.debug`` calls it once, when it is imported."""
    flag = os.environ.get("FLOWGRAD_DEBUG", "").strip().lower()
    if flag in ("1", "true", "raise", "yes", "on"):
        enable_debug_mode("raise")
    elif flag == "warn":
        enable_debug_mode("warn")
