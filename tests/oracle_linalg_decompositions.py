"""The oracle's rows for tf.linalg's decompositions functions (see oracle_cases.py): each a flowgrad
function beside an independent torch one, joined to oracle_cases.CASES on import."""
from oracle_cases import T, case, fc, tt  # noqa: F401
