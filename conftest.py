# The package's docstring examples run as tests; the module entry point is not one.
collect_ignore = ["flowgrad/__main__.py"]
