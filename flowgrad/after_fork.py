"""What a forked child must renew. ``os.fork()`` (multiprocessing's default start method on
Linux before Python 3.14: data-loader pools) copies the process with only the thread that
forked: a lock another thread held at that moment stays held in the child forever, and
threads the parent started are not there to take queued work.

>>> import threading
>>> from flowgrad import after_fork
>>> state = {"lock": threading.Lock()}
>>> after_fork.renew_after_fork(state, "lock", threading.Lock)
"""
import os


def after_fork(fn):
    """Call ``fn()`` in every forked child, first thing (POSIX; elsewhere nothing forks)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=fn)


def renew_after_fork(namespace, name, factory):
    """In a forked child, replace ``namespace[name]`` (a module's lock: pass ``globals()``)
    with a fresh ``factory()``."""
    after_fork(lambda: namespace.__setitem__(name, factory()))
