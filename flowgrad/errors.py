"""Every error flowgrad raises.

Messages say what was wrong, with the values involved, and how to fix it. Where TF.js has a
message for the same case its words are kept, so a search for the TF.js text finds ours too.
Each class also derives from the closest built-in exception, so ``except ValueError`` works.
"""
import numpy as np


class FlowgradError(Exception):
    """Base class of every flowgrad error."""


class DisposedError(FlowgradError, ValueError):
    """A tensor was used after ``dispose()`` or after the ``tidy`` that owned it ended."""


class ArgumentError(FlowgradError, TypeError):
    """An argument has the wrong type (not a Tensor or TensorLike, not a function...)."""


class DtypeError(FlowgradError, TypeError):
    """An argument has a dtype the operation does not accept."""


class ShapeError(FlowgradError, ValueError):
    """Shapes that do not fit together (broadcasting, reshape, matmul, dy...)."""


class AllocationError(FlowgradError, MemoryError):
    """A result too large to allocate (the message gives its elements, bytes and the limit)."""


class GradientError(FlowgradError):
    """A gradient could not be computed (bad gradient rule, bad custom gradient, ...)."""


class UnconnectedGradientError(GradientError):
    """An input of a gradient function does not influence its output."""


class VariableError(FlowgradError, ValueError):
    """Variable registry problems: duplicate names, bad assign."""


class KernelError(FlowgradError, ValueError):
    """A backend kernel failed on arguments that passed the op's checks (names the op)."""


class LinAlgError(KernelError, np.linalg.LinAlgError):
    """A matrix function met a singular matrix, or Cholesky one that is not positive
    definite. Also a ``numpy.linalg.LinAlgError``, as NumPy raises in the same cases, so
    ``except np.linalg.LinAlgError`` in code written for NumPy keeps working."""


class JitError(FlowgradError, RuntimeError):
    """A function cannot be traced by ``tf.jit`` (it reads values it computed, changes
    variables...)."""


class MissingDependencyError(FlowgradError, ImportError):
    """An optional dependency (an extra such as ``flowgrad[viz]``) is not installed."""


class GraphvizError(FlowgradError, RuntimeError):
    """Graphviz's ``dot`` is missing or failed while rendering a graph picture."""


class DistributedError(FlowgradError, RuntimeError):
    """Ranks disagree (variables, shapes, arguments), or MPI is missing or misused."""


class MPIUnavailableError(DistributedError, ImportError):
    """Launched under MPI (or ``init(use_mpi=True)``) but mpi4py cannot be imported."""


class CheckpointError(FlowgradError, OSError):
    """A checkpoint cannot be written or restored: a damaged or truncated file, a missing
    object, or a shape, dtype or class that does not match (named, expected vs found)."""


class BackendError(FlowgradError, RuntimeError):
    """A backend that is missing or unusable here, or tensors of two backends in one op."""
