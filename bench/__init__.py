"""flowgrad's benchmarks: each workload against the same maths written by hand in NumPy
(the floor), timed in the same process and round, reported as ratios. Single-threaded BLAS
by default, set here before NumPy is imported.

    python -m bench            # every workload
    python -m bench --quick    # few repetitions: checks results, not a measurement
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")


def _settle_malloc():
    """Put glibc's malloc in the state of any NumPy program that has freed one big array.

    glibc maps blocks above a threshold fresh from the OS (and page-faults on every page of
    each), and raises that threshold, up to 32 MiB, when a mapped block is freed. Where it
    stands depends on what the process freed before, so a floor measured after flowgrad's
    rounds page-faulted or not according to how flowgrad had freed its arrays (W2's floor:
    0 or 960 faults a step). One freed 24 MiB array here raises it for the whole run (to
    24 MiB; 48 MiB of free heap is then kept): every side runs as a long-lived NumPy
    program does.
    """
    import numpy as np
    a = np.ones(6 << 20, dtype=np.float32)
    del a


_settle_malloc()
