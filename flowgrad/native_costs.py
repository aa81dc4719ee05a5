"""tf.jit native's cost model: what a kernel costs on NumPy and compiled, per call and per
element, what compiling and loading cost, and the rule that decides which segments are
worth compiling (jit_native.py plans with it). NumPy's side of the libm functions is
measured on the running machine (numpy_ns), because its loops differ between CPUs more than
anything else in the model; the rest are constants measured on the development machine.
"""
from __future__ import annotations

import math
import re
import time

import numpy as np

# Measured on the development machine (one core of an AVX-512 Xeon, taskset -c 0; NumPy 2.4,
# numba 0.68) with two scripts kept outside the repository: chains of 20 arithmetic kernels
# (x * c + c) and of 20 transcendental ones (sin, exp, tanh) jitted with backend="numpy"
# and "native" (forced) at 0-d and 1 to 2**20 elements, best of 7 (the per-call and
# arithmetic constants); one loop of each libm function over 65536 values in numba against
# NumPy's ufunc, best of 5 (LIBM_NS). Microseconds per call, nanoseconds per element.
NUMPY_CALL_US = 0.38            # a NumPy step on arrays (one ufunc call and its output)
NUMPY_SCALAR_US = (0.035, 0.12)  # one on 0-d values: an operator (expr=), a ufunc
NATIVE_CALL_US = 0.2            # a compiled segment of scalars (float() per input...)
NATIVE_ARRAYS_US = 0.15         # more for one of arrays, per output array
ARITH_NS = (0.05, 0.02)         # an arithmetic kernel (float32; float64 twice): NumPy, numba
# per libm function: (numba, NumPy) ns per float32 element, then per float64 element
LIBM_NS = {"exp": (1.9, 0.39, 3.4, 0.64), "log": (2.0, 0.29, 3.4, 0.6),
           "sin": (4.8, 0.45, 8.5, 8.5), "cos": (4.9, 0.47, 8.4, 8.3),
           "tanh": (11.5, 0.2, 11.5, 0.9), "expm1": (7.6, 0.31, 7.1, 0.81),
           "log1p": (7.9, 0.34, 7.2, 0.69), "atan": (11.1, 0.41, 8.2, 0.77),
           "sqrt": (0.09, 0.33, 0.27, 1.03), "pow": (5.7, 1.2, 9.4, 1.6)}
# (measured the same way on 2026-12-02, one loop of 65536 values in (0.1, 0.9), acosh's
# in (1.1, 1.9), against the kernel's own NumPy forward: flowgrad's erf is a polynomial of
# several ufunc passes, so compiled it is ~10x faster)
LIBM_NS.update({"erf": (3.4, 40.9, 3.5, 37.6), "asin": (5.7, 0.38, 10.4, 1.54),
                "acos": (8.5, 0.53, 10.7, 1.4), "asinh": (19.1, 0.93, 20.6, 2.11),
                "acosh": (21.1, 0.8, 20.7, 2.8), "atanh": (19.9, 1.46, 20.6, 1.63)})
LIBM_OTHER_NS = (12.0, 0.5, 12.0, 1.0)      # the functions not measured
# NumPy's side is measured on the machine that runs the program (numpy_ns), the table's
# NumPy column is only the fallback; NumPy's functions by ufunc
MEASURED_UFUNCS = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh",
                   "expm1": "expm1", "log1p": "log1p", "atan": "arctan", "asin": "arcsin",
                   "acos": "arccos", "asinh": "arcsinh", "acosh": "arccosh",
                   "atanh": "arctanh"}
# numba's ns per float32 element for the functions a float32 loop computes inline
# (flowgrad/native_math.py), measured on an AVX2 EPYC (one loop of each over 1e6 values:
# exp 2.0, sin 1.9; sin and cos of one argument share their reduction)
INLINE_NS = {"exp": 2.0, "sin": 1.9, "cos": 1.9, "tanh": 2.6}
# NOTE: only in loops over arrays of FUSE_MIN_BYTES or more, and at most INLINE_MAX calls in
# one: each costs LLVM ~0.1 s to compile (W1's 160 in one loop of 360 kernels took 214 s,
# against 1.5 s with libm's calls), and a chain of them through one element is bound by
# their latency, not their throughput (W1 on 1,000 values in loops of 8: 1.16 ms, NumPy's
# replay 1.09); W3's wide, shallow loop on 1e6-1e7 values is where they pay
INLINE_MAX = 8
INLINE_COMPILE_S = 0.1          # compiling each (W3's loop: 0.71 s with 3, 0.38 s without)
# compiling: seconds per segment and per kernel in it (0.07 + 1.7 ms a kernel on scalars,
# 2.8 ms on arrays: 0.67 s and 1.1 s for W1's 360), and numba's import (0.12-0.33 s)
COMPILE_S = (0.07, 0.0025)
IMPORT_S = 0.3
# loading a segment from the disk cache instead (flowgrad/jit_native_cache.py): seconds per
# segment and per kernel (measured 4-20 ms a segment, 9-16 ms for W1's 360 kernels), and
# compiling one with parallel=True (numba's parfor passes: 0.31 s for 4 kernels on arrays,
# 0.72 s for 40, 2.5 s for 160) against a serial one
LOAD_S = (0.005, 0.00003)
PARALLEL_COMPILE = 2.8
# threads: a segment runs its loop on t threads (numba.prange) when its estimated time (the
# model's native microseconds) gives each PARALLEL_US or more; else on the calling thread.
# Measured with /tmp scripts (arithmetic chains of 4 and 12 kernels, 2^16 to 2^24 float32,
# serial against 2 threads, the second core idle): a parallel call costs 30-100 us more
# than a serial one (numba's workqueue waking its threads), and on the development machine's
# two vCPUs a second thread did not pay for arithmetic at any size (1e7: 2.0 ms against 2.1;
# libm-bound loops: 0.64x at 2^20), so threads start where the launch is under ~10%: 4
# arithmetic kernels on 1e7 float32 (modelled 0.8 ms) run on 2 threads
PARALLEL_US = 400.0
# a segment is compiled where what it saves per call pays for compiling it (COMPILE_S)
# within this many calls (a training run's steps): W2's single kernels on 1,280 elements
# save 0.07 us a call (a million calls to pay for 0.07 s), its Adam updates 5-140 us; one
# compile fewer is 0.1-0.2 s off a first call (0.5 s more for the first one in a process)
PAYBACK_CALLS = 100_000

_LIBM = re.compile(r"math\.(\w+)\(")


def libm_calls(expr):
    """The libm functions a native expression calls ("exp", "sin"...)."""
    return _LIBM.findall(expr)


def transcendental(expr):
    """True when a native expression calls a transcendental function of libm (where its
    result may differ from NumPy's by a few ulp; sqrt is exact)."""
    return any(f != "sqrt" for f in libm_calls(expr))


def work(prim, expr, dtype, scalar, inline=False):
    """(NumPy's microseconds per call, its ns per element, numba's ns per element) of one
    kernel of a segment: the cost model's terms (``inline``: a float32 loop, which computes
    native_math's functions inline)."""
    wide = dtype.itemsize == 8
    call = NUMPY_SCALAR_US[prim.expr is None] if scalar else NUMPY_CALL_US
    numpy, native = ARITH_NS[0] * (1 + wide), ARITH_NS[1] * (1 + wide)
    for f in libm_calls(expr):
        cost = LIBM_NS.get(f, LIBM_OTHER_NS)
        native += INLINE_NS[f] if inline and f in INLINE_NS else cost[2 * wide]
        numpy += cost[2 * wide + 1] if scalar else numpy_ns(f, dtype, cost[2 * wide + 1])
    return call, numpy, native


_measured: dict | None = None     # "exp <f4" -> ns, from the cache folder's file first


def numpy_ns(f, dtype, default):
    """NumPy's nanoseconds per element for the libm function ``f`` on arrays of ``dtype``,
    measured on this machine: its SIMD loops differ between CPUs by more than the model's
    other terms (float32 exp: 0.39 ns on an AVX-512 Xeon, 5.5 ns on an AVX2 EPYC, where
    NumPy 2.4 calls the C library's). Measured once per machine and kept in the jit cache
    folder (jit_native_cache.costs_path; per process where the cache is off), so that
    every process plans a program alike. ``default`` where NumPy has no such ufunc."""
    global _measured
    if MEASURED_UFUNCS.get(f) is None:
        return default
    from . import jit_native_cache as cache
    if _measured is None:
        _measured = cache.load_costs()
    key = f"{f} {dtype.str}"
    ns = _measured.get(key)
    if ns is None:
        ns = _measured[key] = _measure(getattr(np, MEASURED_UFUNCS[f]), f, dtype)
        cache.save_costs(dict(_measured))
    return ns


def _measure(ufunc, f, dtype):
    """NumPy's ns per element for ``ufunc`` on 4096 values of its usual domain, the best of
    9 calls (~0.1 ms)."""
    lo = 1.1 if f == "acosh" else 0.1
    x = np.linspace(lo, lo + 0.8, 4096).astype(dtype)
    out = np.empty_like(x)
    best = math.inf
    for _ in range(9):
        t0 = time.perf_counter()
        ufunc(x, out=out)
        best = min(best, time.perf_counter() - t0)
    return best * 1e9 / x.size


def worth_compiling(candidates):
    """The segments to compile: each faster compiled than on NumPy, and whose loop (one
    compile for every segment of the same source: W2's six Adam updates) saves, over
    PAYBACK_CALLS calls, what compiling it costs."""
    saved = {}
    for seg in candidates:
        numpy, native = seg.costs()
        if native < numpy:
            k = (seg.source, seg.dtype.str)
            saved[k] = saved.get(k, 0.0) + (numpy - native)
    return {seg for seg in candidates
            if saved.get((seg.source, seg.dtype.str), 0.0) * 1e-6 * PAYBACK_CALLS
            >= seg.compile_estimate()}
