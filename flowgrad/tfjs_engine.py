"""TF.js's engine-level API: ``tf.engine()``, ``tf.get_gradient(kernel_name)`` and
``tf.backend()``.

``tf.engine`` is both things its name has meant: it is the module ``flowgrad.engine``
itself (``tf.engine.run_kernel``, ``from flowgrad import engine``), and calling it returns
TF.js's engine object (:class:`Engine`: ``start_scope`` / ``end_scope``, the closure-free
form of ``tidy``). No proxy stands between: the module's class is made callable.

>>> import flowgrad as tf
>>> tf.engine().start_scope()
>>> y = tf.scalar(2).square()
>>> tf.engine().end_scope(y)
>>> y.item()
4.0
"""
import functools
import threading
import types

from . import scopes as _scopes
from .errors import ArgumentError, FlowgradError
from .camel_case import Result, camel_attribute


class _CamelCase:
    """TF.js's camelCase method names (``startScope``) resolve to the snake_case ones."""

    __getattr__ = camel_attribute


_open = threading.local()       # scopes this thread opened with start_scope, not yet ended


class Engine(_CamelCase):
    """What ``tf.engine()`` returns (TF.js's ``ENGINE``): scopes without a closure.

    ``start_scope(name=None)`` opens a scope; ``end_scope(result=None)`` closes the
    innermost one, disposing every tensor created in it except kept ones and those found
    in ``result`` (nested lists, tuples and dicts), which move to the enclosing scope. The
    pair does what ``tf.tidy(fn)`` does around ``fn``; scopes belong to the thread that
    opened them. TF.js's ``startScope`` / ``endScope`` spellings work too.

    >>> import flowgrad as tf
    >>> before = tf.memory().num_tensors
    >>> tf.engine().startScope("step")
    >>> a = tf.scalar(3)
    >>> b = a.square()
    >>> tf.engine().endScope([b])
    >>> a.is_disposed, b.is_disposed, tf.memory().num_tensors - before
    (True, False, 1)
    """

    def start_scope(self, name=None):
        """Open a scope (TF.js ``engine().startScope(name?)``); ``name`` is a string or
        None. Close it with :meth:`end_scope`."""
        if name is not None and not isinstance(name, str):
            raise ArgumentError(f"engine().start_scope(name): name must be a string or None, "
                                f"got {type(name).__name__}")
        _scopes.begin_scope(name)
        _open.depth = getattr(_open, "depth", 0) + 1

    def end_scope(self, result=None):
        """Close the innermost scope opened by :meth:`start_scope` (TF.js
        ``engine().endScope(result?)``): its tensors are disposed, except kept ones and
        those in ``result``, which move to the enclosing scope. Returns None."""
        depth = getattr(_open, "depth", 0)
        if depth == 0:
            raise FlowgradError("engine().end_scope() was called without a matching "
                                "engine().start_scope() in this thread: every end_scope "
                                "closes one scope that start_scope opened (tf.tidy(fn) pairs "
                                "them for you)")
        _open.depth = depth - 1
        _scopes.end_scope(result)

    def __repr__(self):
        return "<flowgrad engine: start_scope(name=None), end_scope(result=None)>"


ENGINE = Engine()


class EngineModule(types.ModuleType):
    """The class of the module flowgrad.engine once the package is imported: the module
    itself, made callable. ``tf.engine()`` is TF.js's engine object (:class:`Engine`);
    ``tf.engine``, ``from flowgrad import engine`` and ``sys.modules["flowgrad.engine"]``
    are one object, the real module, so reads, writes and deletions of its attributes
    (``monkeypatch.setattr(engine, ...)``) act on it and on nothing else."""

    def __call__(self):
        return ENGINE

    def __repr__(self):
        return (f"<module 'flowgrad.engine' (call it: tf.engine() is TF.js's engine object) "
                f"from {self.__file__!r}>")


# NOTE: documentation tools that inspect modules (griffe) read a module object's members
# through the module its class was defined in: left as flowgrad.tfjs_engine, this module's
# page listed the engine's names and lost its own (tf.Engine could not be resolved)
EngineModule.__module__ = "flowgrad.engine"


def make_engine_callable(module):
    """Give the module flowgrad.engine the class :class:`EngineModule` (a module's class
    may be a ModuleType subclass). Called once, by flowgrad/__init__.py."""
    module.__class__ = EngineModule


# ---------------------------------------------------------------- get_gradient

class GradConfig(Result):
    """A kernel's registered gradient (TF.js's ``GradConfig``); see :func:`get_gradient`."""


def _callable_rule(prim):
    rule = prim.vjp
    if not prim.vjp_needs:
        return rule

    # rules that skip unwanted gradients take ``needs``: called by hand, every input wants one
    @functools.wraps(rule)
    def grad_func(dy, *args, needs=None, **attrs):
        if needs is None:
            needs = (True,) * max(len(args), len(prim.arg_names))
        return rule(dy, *args, needs=needs, **attrs)
    return grad_func


def _zero_rule(name):
    """The gradient TF.js registers for a non-differentiable kernel: zeros for each input."""
    def grad_func(dy, *inputs, **attrs):
        from .ops import OPS
        zeros = [OPS["zeros_like"](x) for x in inputs]
        return zeros[0] if len(zeros) == 1 else tuple(zeros)
    grad_func.__name__ = grad_func.__qualname__ = f"{name}_grad"
    grad_func.__doc__ = (f"{name} is not differentiable: zeros of each input's shape and "
                         f"dtype (TF.js registers this gradient).")
    return grad_func


def _composite_rule(name, op):
    """The gradient of a TF.js kernel that flowgrad composes of several (``op``): the
    vector-Jacobian product of ``op`` by flowgrad's own backprop, differentiable again;
    float tensor inputs get a gradient, every other argument is passed to ``op`` as is."""
    def grad_func(dy, *inputs, **attrs):
        from .dtypes import FLOATS
        from .gradients import grads
        from .tensor import Tensor
        args = list(inputs)                  # (numbers stay numbers: they may be attributes)
        diff = [i for i, x in enumerate(args) if isinstance(x, Tensor) and x.dtype in FLOATS]

        def f(*ts):
            full = list(args)
            for i, t in zip(diff, ts):
                full[i] = t
            return op(*full, **attrs)
        got = grads(f, allow_unconnected=True)([args[i] for i in diff], dy)
        out = [None] * len(args)
        for i, g in zip(diff, got):
            out[i] = g
        return out[0] if len(out) == 1 else tuple(out)
    grad_func.__name__ = grad_func.__qualname__ = f"{name}_grad"
    grad_func.__doc__ = (f"The gradient of TF.js's {name}, which flowgrad computes as "
                         f"tf.{op.__name__}: one gradient per input (None for an integer "
                         f"input), by differentiating it.")
    return grad_func


def get_gradient(kernel_name):
    """The gradient registered for kernel ``kernel_name`` (TF.js ``tf.getGradient``), or
    None for an unknown kernel or one without a gradient (TF.js: ``undefined``).

    Kernel names are TF.js's (``"Square"``, ``"BatchMatMul"``, ``"Conv2D"``). The result
    has ``kernel_name``; ``grad_func``, the rule: ``grad_func(dy, *inputs, [*outputs],
    **attrs)`` returns one gradient per input (a bare tensor for one input, None for no
    contribution), written with flowgrad ops, so it is differentiable itself;
    ``save_all_inputs`` (always True: every rule receives all its kernel's inputs); and
    ``save_outputs`` (the rule also receives the outputs). camelCase keys (``gradFunc``,
    ``kernelName``) work too.

    It answers for every TF.js kernel name that flowgrad implements. The non-differentiable
    kernels for which TF.js registers a zero gradient (``Floor``, ``Sign``, ``ArgMax``,
    ``GreaterEqual``, ``OnesLike``...) give zeros of each input's shape; the others
    (``Greater``, ``Equal``...) have none, as in TF.js. A TF.js kernel that flowgrad
    computes with several of its own (``ExpandDims``, a reshape; ``FusedBatchNorm``,
    ``LRN``, ``UnsortedSegmentSum``) answers with the gradient of that op, taking its
    arguments as the op does (``grad_func(dy, x, axis=1)`` for ExpandDims).

    >>> import flowgrad as tf
    >>> cfg = tf.get_gradient("Square")
    >>> cfg.kernel_name, cfg.save_outputs
    ('Square', False)
    >>> cfg.grad_func(tf.scalar(1), tf.scalar(3)).item()
    6.0
    >>> tf.get_gradient("Floor").grad_func(tf.scalar(1), tf.scalar(2.5)).item()
    0.0
    >>> tf.get_gradient("ExpandDims").grad_func(tf.ones([2, 1]), tf.tensor([3.0, 4.0]),
    ...                                         axis=1).shape
    (2,)
    >>> tf.get_gradient("Greater") is None, tf.get_gradient("NoSuchKernel") is None
    (True, True)
    """
    if not isinstance(kernel_name, str):
        raise ArgumentError(f"get_gradient(kernel_name): kernel_name must be a string (a TF.js "
                            f"kernel name such as 'Square'), got {type(kernel_name).__name__}")
    from .ops import COMPOSITES, PRIMITIVES
    prim = PRIMITIVES.get(kernel_name)
    if prim is not None and prim.vjp is not None:
        return GradConfig(kernel_name=kernel_name, grad_func=_callable_rule(prim),
                          save_all_inputs=True, save_outputs=bool(prim.save_y))
    if prim is not None and prim.zero_grad:
        return GradConfig(kernel_name=kernel_name, grad_func=_zero_rule(kernel_name),
                          save_all_inputs=True, save_outputs=False)
    op = COMPOSITES.get(kernel_name)
    if op is not None:
        return GradConfig(kernel_name=kernel_name, grad_func=_composite_rule(kernel_name, op),
                          save_all_inputs=True, save_outputs=False)
    return None


# ---------------------------------------------------------------- backend()

class KernelBackend(_CamelCase):
    """The active backend, as ``tf.backend()`` gives it (TF.js's ``KernelBackend``): its
    ``name``, ``float_precision()`` and ``epsilon()``.

    >>> import flowgrad as tf
    >>> b = tf.backend()
    >>> b.name, b.float_precision(), b.epsilon(), b.floatPrecision()
    ('numpy', 32, 1e-07, 32)
    """

    def __init__(self, name):
        self.name = name

    def float_precision(self):
        """32: float32 is every backend's default dtype (TF.js: 32 on cpu, 16 on some
        WebGL devices). float64 tensors work too; they do not change this."""
        return 32

    def epsilon(self):
        """The small constant numerical guards use: 1e-7, TF.js's epsilon for float32
        backends (TF.js gives 1e-4 at float precision 16). The optimizers' default epsilon
        is this value."""
        from .train.fused import EPSILON
        return EPSILON

    def __repr__(self):
        return f"<flowgrad backend '{self.name}': float_precision 32, epsilon 1e-07>"


def backend():
    """The active backend (TF.js ``tf.backend()``): a :class:`KernelBackend` with its
    ``name``, ``float_precision()`` (32) and ``epsilon()`` (1e-7, TF.js's cpu value, which
    the optimizers use as their default epsilon). ``tf.get_backend()`` gives the name alone.

    >>> import flowgrad as tf
    >>> tf.backend().epsilon()
    1e-07
    """
    from .backends import get_backend
    return KernelBackend(get_backend())
