"""flowgrad: the automatic differentiation of TensorFlow.js, in Python, on NumPy.

>>> import flowgrad as tf
>>> tf.grad(lambda x: x.square().add(x))(tf.scalar(3.0)).item()
7.0

Every public name is snake_case; the TF.js camelCase spelling (``tf.valueAndGrads``,
``x.matMul``) resolves to the same object.
"""
from . import dtypes
from .scopes import dispose, keep, memory, tidy
from . import backends
from .backends import get_backend, set_backend
from .backends.memory import get_memory_policy, set_memory_policy
from .errors import (AllocationError, ArgumentError, BackendError, CheckpointError,
                     DisposedError, DistributedError, DtypeError, FlowgradError, GradientError,
                     GraphvizError, JitError, KernelError, LinAlgError,
                     MissingDependencyError, MPIUnavailableError, ShapeError,
                     UnconnectedGradientError, VariableError)
from .ops import OPS as _OPS
from . import numpy_interop  # noqa: F401 - NumPy's ufuncs and functions on tensors
from .tensor import Tensor, Variable, dispose_variables, variable
from .gradients import (GradMap, GradientTape, grad, grads, value_and_grad, value_and_grads,
                        variable_grads)
from .custom import custom_grad
from .jacobians import hessian, hvp, jacobian, jvp, vjp
from .fusion import get_jit_threads, set_jit_threads
from .jit import jit
from .vmap import vmap
from . import debug
from .debug import disable_debug_mode, enable_debug_mode
from .debug import profile, time  # noqa: A004 - TF.js's tf.profile and tf.time
from .camel_case import camel_to_snake as _camel_to_snake
from . import train
from .train import (AdadeltaOptimizer, AdagradOptimizer, AdamaxOptimizer, AdamOptimizer,
                    AdamWOptimizer, MomentumOptimizer, Optimizer, RMSPropOptimizer,
                    SGDOptimizer, clip_by_global_norm, clip_by_norm, global_norm)
from . import distributed
from .tfjs_engine import Engine, KernelBackend, backend, get_gradient
from .tfjs_engine import make_engine_callable as _make_engine_callable
from . import engine
# tf.engine is the module flowgrad.engine itself; called, it is TF.js's engine object
_make_engine_callable(engine)

__version__ = "0.1.0"


globals().update(_OPS)
from .ops import NAMESPACES as _NAMESPACES  # noqa: E402
from .camel_case import Namespace as _Namespace  # noqa: E402
losses = _Namespace("losses", _NAMESPACES["losses"])
image = _Namespace("image", _NAMESPACES["image"])
linalg = _Namespace("linalg", _NAMESPACES["linalg"])
float32, float64, int32, bool_ = dtypes.float32, dtypes.float64, dtypes.int32, dtypes.bool_


def print(x, verbose=False):  # noqa: A001 - the TF.js name
    """Print a tensor as TF.js does (anything else is printed as is).

    >>> import flowgrad as tf
    >>> tf.print(tf.tensor([1, 2]))
    Tensor
        [1, 2]
    """
    import builtins
    if isinstance(x, Tensor):
        builtins.print(x.to_string(verbose))
    else:
        builtins.print(x)


async def next_frame():
    """Yield once to the asyncio event loop (TF.js ``tf.nextFrame()``)."""
    import asyncio
    await asyncio.sleep(0)


def __getattr__(name):
    snake = _camel_to_snake(name)
    if snake != name and snake in globals():
        return globals()[snake]
    raise AttributeError(f"module 'flowgrad' has no attribute '{name}'")


# the TF.js spellings of what the op modules and numpy_interop set on the tensor classes
# (ops exported later get theirs from export)
from .camel_case import add_camel_aliases as _add_camel_aliases  # noqa: E402
_add_camel_aliases(Tensor)
_add_camel_aliases(Variable)

__all__ = sorted(n for n in globals() if not n.startswith("_"))
