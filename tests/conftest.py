"""Test-wide set-up: the array-API-strict backend is registered (tests only, as the backends
issue asks), when its package is installed."""
import importlib.util

if importlib.util.find_spec("array_api_strict") is not None:
    import strict_backend
    strict_backend.register()
