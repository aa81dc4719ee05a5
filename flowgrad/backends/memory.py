"""The memory policy: what happens to the memory of freed big arrays.

NumPy allocates every result with ``malloc``. glibc serves blocks above its mmap threshold
(128 KiB at first, rising to at most 32 MiB as big blocks are freed) with fresh pages from
the OS and gives them back on ``free``. A step that makes a dozen 4–40 MB temporaries and
frees them then page-faults on every 4 KiB page of every new one, which costs more than the
arithmetic that fills them (``bench`` W3, the gradient of a 1e6-element function: ~27 ms a
call with every page faulting, ~10 ms without).

- ``"pool"`` (the default): malloc as the process has it; flowgrad keeps the big arrays its
  own tensors let go of (up to 256 MiB per thread) and its next elementwise kernels write
  into them (flowgrad/buffer_pool.py). Nothing outside flowgrad changes: the user's own
  NumPy arrays go back to the OS as before.
- ``"system"``: nothing kept: every freed array goes back at once.
- ``"reuse"``: glibc itself serves blocks up to ``MMAP_THRESHOLD`` from its heap and keeps up
  to ``TRIM_THRESHOLD`` of free memory, for every array in the process (the user's too):
  resident memory stays near its peak. Only glibc has the knobs; elsewhere it is recorded
  and malloc left alone.

``FLOWGRAD_MEMORY_POLICY`` in the environment sets it when the NumPy backend is made.
``tf.jit`` needs none of this (its replays reuse their own buffers).
"""
import ctypes
import os

from ..errors import ArgumentError

POLICIES = ("pool", "system", "reuse")
MMAP_THRESHOLD = 256 << 20         # "reuse": blocks up to this size come from the heap
TRIM_THRESHOLD = 1 << 30           # "reuse": free memory kept at the heap's top
# back to "system": where glibc's own dynamic thresholds settle after big frees (their
# 64-bit ceiling; mallopt switched the dynamic adjustment off for good): bigger blocks are
# mapped and returned to the OS on free
SYSTEM_MMAP_THRESHOLD = 32 << 20
SYSTEM_TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameter numbers
ENV = "FLOWGRAD_MEMORY_POLICY"

# what was done to malloc: "untouched", "glibc" (reuse applied), "restored" (back to
# system after reuse), "unsupported" (reuse asked for, not glibc)
state = "untouched"
_policy = "pool"


def get_memory_policy():
    """The memory policy in force: ``"pool"`` (the default), ``"system"`` or ``"reuse"``.

    >>> import flowgrad as tf
    >>> tf.get_memory_policy() in ("pool", "system", "reuse")
    True
    """
    return _policy


def set_memory_policy(policy):
    """Choose what happens to the memory of freed big arrays; returns the previous policy.

    ``"pool"`` (the default): flowgrad reuses the big arrays (256 KB and more) its own
    tensors let go of for its next elementwise kernels, keeping at most 256 MiB per
    thread; malloc and the user's NumPy arrays are left as they are. ``"system"``: nothing
    is kept, every freed array goes back to the OS at once. ``"reuse"``: glibc keeps freed
    memory (up to 1 GiB) for every array in the process — resident memory stays near its
    peak; only glibc (Linux) has the knobs, elsewhere malloc is left alone. Leaving
    ``"reuse"`` gives glibc's kept memory back (``malloc_trim``); leaving ``"pool"`` empties
    the pool. ``FLOWGRAD_MEMORY_POLICY`` in the environment sets it at import.

    >>> import flowgrad as tf
    >>> previous = tf.set_memory_policy("system")
    >>> tf.get_memory_policy()
    'system'
    >>> tf.set_memory_policy(previous)
    'system'
    """
    global _policy, state
    if type(policy) is not str or policy not in POLICIES:
        raise ArgumentError(f"set_memory_policy(policy): policy must be one of {POLICIES}, "
                            f"got {policy!r} — 'pool' reuses flowgrad's own freed big "
                            f"arrays, 'reuse' keeps all freed memory (glibc), 'system' "
                            f"keeps nothing")
    previous, _policy = _policy, policy
    if policy == previous:
        return previous
    from .. import buffer_pool as pool
    pool.enabled = policy == "pool"
    if policy != "pool":
        pool.clear()
    if policy != "reuse" and state != "glibc":
        return previous
    libc = _glibc()
    if libc is None:
        state = "unsupported"
        return previous
    if policy == "reuse":
        # NOTE: older glibc refuses mmap thresholds above 32 MiB (HEAP_MAX_SIZE / 2)
        if not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
            libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        state = "glibc"
    else:
        libc.mallopt(_M_MMAP_THRESHOLD, SYSTEM_MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, SYSTEM_TRIM_THRESHOLD)
        libc.malloc_trim(0)
        state = "restored"
    return previous


def apply_env():
    """Apply ``FLOWGRAD_MEMORY_POLICY`` if set (when the NumPy backend is made); an unknown
    value raises naming the variable."""
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return
    if value not in POLICIES:
        raise ArgumentError(f"{ENV}={value!r} in the environment: expected one of "
                            f"{POLICIES} (or unset it)")
    set_memory_policy(value)


def _glibc():
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version          # only glibc has it, and only glibc has these knobs
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        return libc
    except (OSError, AttributeError):
        return None
