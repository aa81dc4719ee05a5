"""Median timing of several callables, interleaved round by round so that they share the
machine's state (caches, frequency, the other core's load)."""
import statistics
import time


def measure(fns, reps=7, inner=1, warmup=2):
    """{name: median seconds per call} for a dict of zero-argument callables."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - t0) / inner)
    return {name: statistics.median(v) for name, v in samples.items()}
