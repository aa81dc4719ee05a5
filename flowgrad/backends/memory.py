"""The memory policy: whether freed big arrays' memory is kept for the next ones (glibc).

NumPy allocates every result with ``malloc``. glibc serves blocks above its mmap threshold
(128 KiB at first, rising to at most 32 MiB as big blocks are freed) with fresh pages from
the OS and gives them back on ``free``. A step that makes a dozen 4–40 MB temporaries and
frees them then page-faults on every 4 KiB page of every new one, which costs more than the
arithmetic that fills them (``bench`` W3, the gradient of a 1e6-element function: ~28 ms a
call, against ~12 ms with the memory kept).

Importing flowgrad changes nothing: the policy is ``"system"`` (malloc as the process has
it). ``set_memory_policy("reuse")``, or ``FLOWGRAD_MEMORY_POLICY=reuse`` in the environment
(read when the NumPy backend is made), asks glibc to serve blocks up to ``MMAP_THRESHOLD``
from its heap and to keep up to ``TRIM_THRESHOLD`` of free memory: the next big arrays reuse
it instead of faulting. The cost is process-wide: resident memory stays near its peak,
the user's own NumPy arrays included. ``tf.jit`` needs none of this (its replays reuse
their own buffers). Other C libraries (musl, macOS, Windows) are left as they are.
"""
import ctypes
import os

from ..errors import ArgumentError

POLICIES = ("system", "reuse")
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
_policy = "system"


def get_memory_policy():
    """The memory policy in force: ``"system"`` (the default) or ``"reuse"``.

    >>> import flowgrad as tf
    >>> tf.get_memory_policy() in ("system", "reuse")
    True
    """
    return _policy


def set_memory_policy(policy):
    """Choose what happens to the memory of freed big arrays; returns the previous policy.

    ``"system"`` (the default): malloc as the process has it, big blocks go back to the OS
    when freed. ``"reuse"``: glibc keeps freed memory (up to 1 GiB) for the next arrays, so
    eager steps with many big temporaries do not page-fault (2–3x faster at 1e6+ elements)
    — process-wide, the resident memory stays near its peak. Only glibc (Linux) has the
    knobs; elsewhere the policy is recorded and malloc left alone. Setting ``"system"``
    after ``"reuse"`` gives the kept memory back (``malloc_trim``).
    ``FLOWGRAD_MEMORY_POLICY=reuse`` in the environment sets it at import.

    >>> import flowgrad as tf
    >>> previous = tf.set_memory_policy("reuse")
    >>> tf.get_memory_policy()
    'reuse'
    >>> tf.set_memory_policy(previous)
    'reuse'
    """
    global _policy, state
    if policy not in POLICIES:
        raise ArgumentError(f"set_memory_policy(policy): policy must be one of {POLICIES}, "
                            f"got {policy!r} — 'reuse' keeps freed memory for the next big "
                            f"arrays, 'system' leaves malloc as it is")
    previous, _policy = _policy, policy
    if policy == previous or (policy == "system" and state != "glibc"):
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
