"""Test-wide set-up: the array-API-strict backend is registered (tests only, as the backends
issue asks), when its package is installed."""
import importlib.util
import os
import tempfile

import pytest

# tf.jit's native code cache (flowgrad/jit_native_cache.py): a folder of this run's own,
# not the user's ~/.cache (tests that check the cache set their own)
os.environ.setdefault("FLOWGRAD_JIT_CACHE", tempfile.mkdtemp(prefix="flowgrad-jit-test-"))
# eager optimizer updates as NumPy steps (flowgrad/train/fused.py): under "auto" whether a
# test's update runs compiled would depend on what earlier tests compiled. The tests of
# compiled updates ask for them; FLOWGRAD_NATIVE_UPDATES=always runs the suite with them
os.environ.setdefault("FLOWGRAD_NATIVE_UPDATES", "0")

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


def extra_missing(module, extra):
    """The skip reason of a test that needs ``module``, which ``pip install -e '.[extra]'``
    installs and the test extra does not; None when it can be imported."""
    if importlib.util.find_spec(module.split(".")[0]) is not None:
        return None
    return f"needs {module}, which the test extra does not install: pip install -e '.[{extra}]'"


@pytest.hookimpl(tryfirst=True)     # before -m 'not slow' deselects
def pytest_collection_modifyitems(items):
    # @pytest.mark.extra(MODULE, EXTRA): skipped, naming the extra, where MODULE is missing;
    # .ci/run installs the extras after the README's test command and runs `pytest -m extra`
    for item in items:
        for m in item.iter_markers("extra"):
            reason = extra_missing(*m.args)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
    # every test that starts MPI jobs (the mpiexec fixture, tests/test_distributed.py) is
    # slow: ~1.5 s each, a rank's start-up; .ci/run runs them with -m slow
    for item in items:
        if "mpiexec" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
