"""``tf.train.progress``: a tqdm progress bar for training loops, with the loss and the
global gradient norm of the last update.

    for step in tf.train.progress(range(1000), opt):
        opt.minimize(loss)

The bar is ``tqdm.auto``'s: a widget in Jupyter (a text bar there without ipywidgets), text
in a terminal. It shows in a terminal and in a Jupyter kernel; it is off when its stream
is not a TTY (pipes, CI logs) and under pytest; ``FLOWGRAD_PROGRESS=1`` / ``=0`` or
``enable=`` decide instead. Under ``tf.distributed`` only rank 0 shows one, whatever they
say. Off, it is the bare loop: nothing is attached, nothing measured.
On, it puts a small observer in front of ``opt.monitor`` (a GradientMonitor already there
keeps receiving every update) and restores the previous monitor when the loop ends.
"""
import math
import os
import sys

import numpy as np

from .. import engine as E
from ..arg_checks import as_int, describe, flag
from ..errors import ArgumentError
from ..tensor import Tensor
from .ranks import is_root      # (not tf.distributed's: that layer is above train)


class _Observer:
    """The last loss and global gradient norm; forwards to the monitor it replaced."""

    def __init__(self, inner):
        self.inner = inner
        self.last_loss = math.nan
        self.last_global_norm = math.nan

    def on_apply(self, opt, pairs, loss):
        if isinstance(loss, Tensor) and not loss.is_disposed and loss.size == 1:
            self.last_loss = float(np.asarray(E.to_host(loss._array())).reshape(-1)[0])
        sq = 0.0
        for _, g in pairs:
            if g is not None:
                a = np.asarray(E.to_host(g._array()))
                sq += float(np.sum(np.square(a, dtype=np.float64)))
        self.last_global_norm = math.sqrt(sq)
        if self.inner is not None:
            self.inner.on_apply(opt, pairs, loss)

    def on_applied(self, opt, pairs):
        if self.inner is not None:
            self.inner.on_applied(opt, pairs)


class Progress:
    """What ``progress()`` returns: iterate over it. ``enabled`` says whether a bar is
    shown, ``bar`` is the tqdm bar while the loop runs."""

    def __init__(self, iterable, optimizer, monitor, enable, file, desc, total, options):
        if optimizer is not None and not hasattr(optimizer, "monitor"):
            raise ArgumentError(f"progress(iterable, optimizer): optimizer must be a "
                                f"tf.train optimizer, got {type(optimizer).__name__}")
        try:
            iter(iterable)
        except TypeError:
            raise ArgumentError(f"progress(iterable): iterable must be something to loop "
                                f"over (range(n), a list, a data loader...), got "
                                f"{describe(iterable)}") from None
        if monitor is not None and not hasattr(monitor, "last_global_norm"):
            raise ArgumentError(f"progress(monitor=...): monitor must be a "
                                f"tf.debug.GradientMonitor, got {describe(monitor)}")
        if file is not None and not callable(getattr(file, "write", None)):
            raise ArgumentError(f"progress(file=...): file must be a stream to write the bar "
                                f"to (sys.stderr, ...), got {describe(file)}")
        if desc is not None and not isinstance(desc, str):
            raise ArgumentError(f"progress(desc=...): desc must be a string, got "
                                f"{describe(desc)}")
        self.iterable = iterable
        self.optimizer = optimizer
        self.monitor = monitor
        self.file = sys.stderr if file is None else file
        if enable is not None:
            enable = flag(enable, "enable", "progress()")
        self.enabled = is_root() and (_enabled(self.file) if enable is None else enable)
        self.desc = desc
        if total is not None:
            total = as_int(total, "total", "progress()", 0)
        else:
            try:
                total = len(iterable)
            except TypeError:           # no length (a generator, a scalar tensor...)
                total = None
        self.total = total
        self.options = options
        self.bar = None

    def __len__(self):
        if self.total is None:
            raise TypeError("this progress loop has no length (give total=)")
        return self.total

    def __iter__(self):
        if not self.enabled:
            yield from self.iterable
            return
        try:
            from tqdm.auto import tqdm     # Jupyter: a widget; elsewhere tqdm's text bar
        except ImportError:
            raise ImportError("progress bars need tqdm: pip install tqdm") from None
        observer = None
        if self.optimizer is not None:
            observer = _Observer(self.optimizer.monitor)
            self.optimizer.monitor = observer
        source = observer if observer is not None else self.monitor
        self.bar = tqdm(total=self.total, file=self.file, desc=self.desc, unit="step",
                        dynamic_ncols=True, **self.options)
        try:
            for item in self.iterable:
                yield item
                if source is not None:
                    post = _postfix(source)
                    if post:
                        self.bar.set_postfix(post, refresh=False)
                self.bar.update(1)
        finally:
            if observer is not None and self.optimizer.monitor is observer:
                self.optimizer.monitor = observer.inner
            self.bar.close()


def progress(iterable, optimizer=None, monitor=None, enable=None, file=None, desc=None,
             total=None, **tqdm_options):
    """Iterate over ``iterable`` with a tqdm bar showing the last update's loss and global
    gradient norm: of ``optimizer``'s updates (``minimize`` / ``apply_gradients``), or of
    what a ``tf.debug.GradientMonitor`` given as ``monitor`` recorded. ``enable`` (default:
    the stream is a terminal or this is a Jupyter kernel, and pytest is not running;
    ``FLOWGRAD_PROGRESS=1``/``0`` overrides) turns the bar on or off; ``file`` is its stream
    (default stderr); other keyword arguments go to tqdm (``tqdm.auto``: a widget in
    Jupyter).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(2.0), name="w_progress_doc")
    >>> opt = tf.train.sgd(0.1)
    >>> for step in tf.train.progress(range(3), opt):      # no bar here: not a terminal
    ...     opt.minimize(lambda: w.square())
    >>> round(w.item(), 4)                                 # 2 * 0.8 ** 3
    1.024
    >>> w.dispose(); opt.dispose()
    """
    return Progress(iterable, optimizer, monitor, enable, file, desc, total, tqdm_options)


def _enabled(file):
    forced = os.environ.get("FLOWGRAD_PROGRESS")
    if forced is not None and forced.strip() != "":
        return forced.strip().lower() not in ("0", "false", "no", "off")
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    if _in_jupyter_kernel():
        return True                 # its stderr is no TTY, but tqdm.auto draws a widget
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):
        return False


def _in_jupyter_kernel():
    # IPython imported and running a kernel (a terminal IPython has no .kernel); never
    # imports IPython itself
    ipython = sys.modules.get("IPython")
    try:
        shell = ipython.get_ipython() if ipython is not None else None
    except Exception:       # a half-initialised or stub IPython: no notebook
        return False
    return getattr(shell, "kernel", None) is not None


def _postfix(source):
    out = {}
    loss = getattr(source, "last_loss", math.nan)
    norm = getattr(source, "last_global_norm", math.nan)
    if not math.isnan(loss):
        out["loss"] = f"{loss:.4g}"
    if not math.isnan(norm):
        out["grad_norm"] = f"{norm:.3g}"
    return out
