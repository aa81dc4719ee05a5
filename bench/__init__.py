"""flowgrad's benchmarks: each workload against the same maths written by hand in NumPy
(the floor), timed in the same process and round, reported as ratios. Single-threaded BLAS
by default, set here before NumPy is imported.

    python -m bench            # every workload
    python -m bench --quick    # few repetitions: checks results, not a measurement
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
