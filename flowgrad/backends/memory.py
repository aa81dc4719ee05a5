"""Freed arrays' memory kept for the next arrays of the same sizes (glibc malloc tunables).

NumPy allocates every result with ``malloc``. glibc serves blocks above its mmap threshold
(128 KiB at first, rising to at most 32 MiB as big blocks are freed) with fresh pages from
the OS and gives them back on ``free``, and it trims free memory at the top of its heap
past twice that threshold. A step that makes a dozen 4–40 MB temporaries and frees them
then page-faults on every 4 KiB page of every new one, which costs more than the arithmetic
that fills them: measured on ``bench`` W3 (gradient of a 1e6-element function), 14,600
faults and 24 ms per call, against 0 faults and 6.9 ms with the memory kept.

So, once, when the NumPy backend is made, flowgrad asks glibc to serve blocks up to
``MMAP_THRESHOLD`` from its heap and to keep up to ``TRIM_THRESHOLD`` of free memory for
reuse. The cost: the process's resident memory stays near its peak instead of shrinking
after a large computation (the memory is reused by later arrays, not leaked).
``FLOWGRAD_MALLOC=system`` in the environment leaves malloc as it is. Other C libraries
(musl, macOS, Windows) are left as they are: ``tune_malloc()`` says what it did.
"""
import ctypes
import os

MMAP_THRESHOLD = 256 << 20         # blocks up to this size come from the heap
TRIM_THRESHOLD = 1 << 30           # free memory kept at the heap's top
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameter numbers

state = "untouched"


def tune_malloc():
    """Apply the tunables (once per process); returns what was done: 'glibc', 'system'
    (FLOWGRAD_MALLOC=system), or 'unsupported' (not glibc).

    >>> tune_malloc() in ("glibc", "system", "unsupported")
    True
    """
    global state
    if state != "untouched":
        return state
    if os.environ.get("FLOWGRAD_MALLOC", "").strip().lower() == "system":
        state = "system"
        return state
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version          # only glibc has it, and only glibc has these knobs
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        state = "unsupported"
        return state
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # NOTE: older glibc refuses mmap thresholds above 32 MiB (HEAP_MAX_SIZE / 2)
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    state = "glibc"
    return state
