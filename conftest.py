"""The docstring examples of flowgrad/ (``--doctest-modules``) compare the numbers they
print with a tolerance, as the docs pages do: see tests/doctools.py."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tests"))
import doctools  # noqa: E402 - found through the line above, as pytest finds tests/ modules


def pytest_configure(config):
    doctools.install_in_pytest_doctest()
