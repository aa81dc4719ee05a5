"""Test-wide set-up: the array-API-strict backend is registered (tests only, as the backends
issue asks), when its package is installed."""
import importlib.util

if importlib.util.find_spec("array_api_strict") is not None:
    import strict_backend
    strict_backend.register()


def pytest_collection_finish(session):
    # NOTE: what collection imported (PyTorch for the oracle among it) lives until the end:
    # freeze it, so that the memory tests' many gc.collect() calls do not scan it each time
    # (after torch, one collection costs ~70 ms instead of ~10 ms)
    import gc
    gc.collect()
    gc.freeze()
