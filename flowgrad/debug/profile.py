"""``tf.profile(f)`` and ``tf.time(f)``: what f allocated and which kernels it ran, as TF.js
reports them (``new_bytes``, ``new_tensors``, ``peak_bytes``, ``kernels``, ``kernel_names``,
``result``), and how long its kernels took.

Synchronous in Python (TF.js's are async); the result is also awaitable, so a translated
``await tf.profile(f)`` works in async code. Off, nothing is instrumented: the kernel entry
is timed only while a profile runs, by wrapping the plain kernel entry that ``sites`` calls.
"""
import inspect
import threading
import time as _time

from ..after_fork import renew_after_fork
from .. import engine as E
from .. import interceptors
from ..arg_checks import check_arity
from ..errors import ArgumentError
from ..camel_case import Result
from ..thread_state import memory_counts, total_bytes
from . import leaks, sites


class ProfileInfo(Result):
    """``tf.profile``'s answer: attributes, ``info["new_bytes"]``, camelCase keys
    (``info.newBytes``), and ``await info`` (it is its own result). Printed, a table of
    its kernels by name (calls, time, bytes added, output shapes); in Jupyter, the same
    table in HTML."""

    def __await__(self):
        return self
        yield  # noqa: unreachable - makes this a generator

    def __str__(self):
        from .display import profile_text
        return profile_text(self)

    __repr__ = __str__

    def _repr_html_(self):
        from .display import profile_html
        return profile_html(self)


class KernelInfo(Result):
    """One kernel run, as in TF.js's profile: name, bytes_added, total_bytes_snapshot,
    tensors_added, total_tensors_snapshot, input_shapes, output_shapes, kernel_time_ms,
    extra_info (the kernel's attributes)."""


class TimingInfo(ProfileInfo):
    """``tf.time``'s answer: kernel_ms (time inside kernels) and wall_ms (all of f)."""

    def __str__(self):
        return f"TimingInfo(kernel_ms={self.kernel_ms:.3f}, wall_ms={self.wall_ms:.3f})"

    __repr__ = __str__
    _repr_html_ = None          # (Jupyter: no HTML form, the repr is enough)


_active = []            # open profiles (innermost last); each gets every kernel
# Threads: a profile reports the kernels of the thread that runs it (another thread's, a data
# loader's say, ran beside f, not in it); each thread times its own kernel (``_last``); the
# memory figures are tf.memory()'s, which counts every thread.
_last = threading.local()   # .dt: duration (s) of the kernel this thread just ran
_below = None           # what lies under the profile layer (interceptors: _link)
_lock = threading.Lock()    # starting and stopping profiles, from any thread
renew_after_fork(globals(), "_lock", threading.Lock)     # (flowgrad/after_fork.py)


def _timed(prim, inputs, attrs=None):
    t0 = _time.perf_counter()
    out = _below(prim, inputs, attrs)
    _last.dt = _time.perf_counter() - t0
    return out


def _on_kernel(prim, inputs, attrs, out):
    dt = getattr(_last, "dt", 0.0)
    me = threading.get_ident()
    for p in list(_active):
        if p.thread == me:
            p.kernel(prim, inputs, attrs, out, dt)


def _on_replay(name, dt, inputs, outputs, kernels):
    me = threading.get_ident()
    for p in list(_active):
        if p.thread == me:
            p.replay(name, dt, inputs, outputs, kernels)


def _on_tensor(t, kind):
    for p in list(_active):
        p.peak = max(p.peak, total_bytes())


def _link(run, make):
    global _below
    _below = run


def _start(p):
    with _lock:
        if not _active:
            # timed under the debug layer: its checkers (ours included) run after the clock
            interceptors.set_layer("profile", _timed, link=_link)
            sites.add_checker(_on_kernel)
            leaks.add_listener(_on_tensor)
            interceptors.set_replay_hook(_on_replay)
        _active.append(p)


def _stop(p):
    with _lock:
        _active.remove(p)
        if not _active:
            interceptors.set_replay_hook(None)
            leaks.remove_listener(_on_tensor)
            sites.remove_checker(_on_kernel)
            interceptors.set_layer("profile", None)


def _attrs_text(attrs):
    if not attrs:
        return ""
    return ", ".join(f"{k}={v!r}" for k, v in attrs.items()
                     if not hasattr(v, "__array__") or getattr(v, "size", 2) < 2)


class _Run:
    def __init__(self, keep_kernels=True):
        self.thread = threading.get_ident()
        self.kernels = []
        self.kernel_s = 0.0
        self.keep = keep_kernels
        self.peak = total_bytes()

    def kernel(self, prim, inputs, attrs, out, dt):
        self.entry(prim.name, dt, inputs, out if isinstance(out, tuple) else (out,),
                   lambda: _attrs_text(attrs))

    def replay(self, name, dt, inputs, outputs, kernels):
        """A tf.jit replay: one entry for its kernels together (no entry times each)."""
        self.entry(name, dt, inputs, outputs, lambda: f"a tf.jit replay of {kernels} kernels")

    def entry(self, name, dt, inputs, outs, extra):
        """Count ``dt`` seconds of kernels, and keep their entry (``extra()``: its
        extra_info, made only when kept)."""
        self.kernel_s += dt
        self.peak = max(self.peak, total_bytes())
        if not self.keep:
            return
        self.kernels.append(KernelInfo(
            name=name,
            bytes_added=sum(E.nbytes(o) for o in outs),
            total_bytes_snapshot=total_bytes(),
            tensors_added=len(outs),
            total_tensors_snapshot=memory_counts()[0],
            input_shapes=[list(t.shape) for t in inputs],
            output_shapes=[list(o.shape) for o in outs],
            kernel_time_ms=dt * 1000.0,
            extra_info=extra()))


def _check(f, api):
    if not callable(f):
        raise ArgumentError(f"{api}(f): f must be a function (called with no arguments), "
                            f"got {type(f).__name__}")
    check_arity(f, 0, f"{api}(f)")


_ASYNC = ("profile(f): f is async (returns a coroutine), but flowgrad runs f synchronously: "
          "make f a plain function (every flowgrad op is synchronous, nothing needs await)")


def profile(f):
    """Run ``f()`` and report its memory and kernels as TF.js's ``tf.profile``: new_bytes and
    new_tensors (the change in ``tf.memory()``), peak_bytes (the highest ``num_bytes`` seen
    while f ran), kernels (one entry per kernel run), kernel_names (unique, in order) and
    result (what f returned). Unlike TF.js, a tensor f dropped (garbage-collected) is not
    counted as new: here only the sum outlives f. A ``tf.jit`` replay is one entry,
    ``jit(<function name>)``, its kernels together (they run with no entry of their own).

    >>> import flowgrad as tf
    >>> x = tf.tensor([1.0, 2.0, 3.0])
    >>> info = tf.profile(lambda: x.square().sum())
    >>> info.kernel_names, info.new_tensors, info.new_bytes, info.result.item()
    (['Square', 'Sum'], 1, 4, 14.0)
    >>> info.kernels[0].output_shapes, info.kernelNames == info.kernel_names
    ([[3]], True)
    """
    _check(f, "profile")
    if inspect.iscoroutinefunction(f):
        raise ArgumentError(_ASYNC)
    run = _Run()
    start_bytes, start_tensors = total_bytes(), memory_counts()[0]
    _start(run)
    try:
        result = f()
    finally:
        _stop(run)
    if hasattr(result, "__await__") and not isinstance(result, ProfileInfo):
        getattr(result, "close", lambda: None)()
        raise ArgumentError(_ASYNC)
    names = list(dict.fromkeys(k.name for k in run.kernels))
    return ProfileInfo(new_bytes=total_bytes() - start_bytes,
                       new_tensors=memory_counts()[0] - start_tensors,
                       peak_bytes=max(run.peak, total_bytes()), kernels=run.kernels,
                       result=result, kernel_names=names)


def time(f):  # noqa: A001 - the TF.js name
    """Run ``f()`` and return ``kernel_ms`` (time spent inside kernels) and ``wall_ms`` (the
    whole call), as TF.js's ``tf.time``.

    >>> import flowgrad as tf
    >>> t = tf.time(lambda: tf.ones([100, 100]).mat_mul(tf.ones([100, 100])))
    >>> sorted(t.keys()), 0 <= t.kernel_ms <= t.wall_ms
    (['kernel_ms', 'wall_ms'], True)
    """
    _check(f, "time")
    run = _Run(keep_kernels=False)
    _start(run)
    t0 = _time.perf_counter()
    try:
        f()
    finally:
        wall = _time.perf_counter() - t0
        _stop(run)
    return TimingInfo(kernel_ms=run.kernel_s * 1000.0, wall_ms=wall * 1000.0)
