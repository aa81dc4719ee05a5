"""Argument checks, one place per kind: ints and int lists (sizes, shapes), axes and perms,
numbers, bool options, string options, result sizes, functions' parameter counts and
disposed inputs. (dtypes are checked by ``dtypes.canonical``.)

Every check raises a flowgrad error naming the op, the argument and what was expected, with
the value it got; none truncates (``sum(x, 1.7)`` and ``sum(x, tf.scalar(1.7))`` both
raise). An int32 tensor of rank 0 counts as an int wherever an int is expected; any other
tensor, a NumPy array, a float with a fraction, NaN or inf does not. Plain ints, bools and
strings are tested first, so a correct call costs one type check.
"""
import inspect
import math
import os

import numpy as np

from . import dtypes
from . import engine as E
from .errors import AllocationError, ArgumentError, ShapeError

_INT_TYPES = (int, np.integer)


def describe(v):
    """A bad value as messages show it: its repr (shortened) and type, or a tensor's
    dtype and shape."""
    if isinstance(v, E.tensor_class()):
        return f"a {v.dtype} tensor of shape {list(v.shape)}"
    if isinstance(v, np.ndarray):
        return f"a NumPy array of shape {list(v.shape)}"
    if isinstance(v, str):
        return repr(v)
    r = repr(v)
    return f"{r if len(r) <= 60 else r[:57] + '...'} ({type(v).__name__})"


def _scalar_int(v):
    """v as an int when it is an int32 tensor of rank 0, else v unchanged."""
    if isinstance(v, E.tensor_class()) and v.rank == 0 and v.dtype == dtypes.int32:
        return int(v.item())
    return v


# ---------------------------------------------------------------- ints and sizes

def as_int(v, what, opname, minimum=None):
    """An int argument (NumPy ints and int32 scalar tensors too). A float is accepted only
    when it is a whole number (a JS number); fractions, NaN and inf are refused."""
    if type(v) is not int:
        v = _scalar_int(v)
        if isinstance(v, bool) or not isinstance(v, _INT_TYPES):
            if isinstance(v, (float, np.floating)) and float(v).is_integer():
                v = int(v)
            else:
                got = repr(float(v)) if isinstance(v, (float, np.floating)) else describe(v)
                raise ArgumentError(f"{opname}: {what} must be an integer, got {got}")
        v = int(v)
    if minimum is not None and v < minimum:
        raise ArgumentError(f"{opname}: {what} must be >= {minimum}, got {v}")
    return v


def as_ints(seq, what, opname, minimum=None):
    """A tuple of ints from a list or tuple (an int32 tensor or NumPy array of rank 1
    too); each entry as in ``as_int``."""
    if isinstance(seq, (E.tensor_class(), np.ndarray)):
        if seq.ndim if isinstance(seq, np.ndarray) else seq.rank:
            seq = seq.tolist() if isinstance(seq, np.ndarray) else seq.array_sync()
    if not isinstance(seq, (list, tuple)):
        got = describe(seq) if isinstance(seq, (E.tensor_class(), np.ndarray)) else type(seq).__name__
        raise ArgumentError(f"{opname}: {what} must be a list of integers, got {got}")
    return tuple(as_int(v, f"{what}[{i}]", opname, minimum) for i, v in enumerate(seq))


def as_shape(shape, opname, what="shape"):
    """A shape: an int or a list of non-negative ints."""
    if isinstance(shape, _INT_TYPES) and not isinstance(shape, bool):
        shape = (shape,)
    return as_ints(shape, what, opname, 0)


# ---------------------------------------------------------------- axes and perms

def norm_axis(axis, rank, opname="op", what="axis"):
    """One axis in [0, rank), negative counted from the end."""
    if type(axis) is not int:
        axis = _scalar_int(axis)
        if not isinstance(axis, _INT_TYPES) or isinstance(axis, bool):
            got = describe(axis) if isinstance(axis, (E.tensor_class(), np.ndarray)) else (
                f"{type(axis).__name__} {axis!r}" if isinstance(axis, float)
                else type(axis).__name__)
            raise ArgumentError(f"{opname}: {what} must be an int, got {got}")
        axis = int(axis)
    if not -rank <= axis < rank:
        valid = f"valid: {-rank} to {rank - 1}" if rank else "a scalar has no axis"
        raise ArgumentError(f"{opname}: {what} {axis} is out of range for a tensor of rank "
                            f"{rank} ({valid})")
    return axis % rank


def norm_axes(axis, rank, opname="op", what="axis"):
    """A sorted tuple of axes from None (all), an int or a list of ints."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (list, tuple)):
        axes = tuple(sorted({norm_axis(a, rank, opname, what) for a in axis}))
        if len(axes) != len(axis):
            raise ArgumentError(f"{opname}: {what} {list(axis)} repeats an axis")
        return axes
    return (norm_axis(axis, rank, opname, what),)


def norm_perm(perm, rank, opname="transpose"):
    """A permutation of range(rank): None reverses the axes."""
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    if not isinstance(perm, (list, tuple)):
        if isinstance(perm, (E.tensor_class(), np.ndarray)) and np.ndim(perm) == 1:
            perm = perm.tolist() if isinstance(perm, np.ndarray) else perm.array_sync()
        else:
            raise ArgumentError(f"{opname}: perm must be a list of the {rank} axes in their "
                                f"new order, got {describe(perm)}")
    out = tuple(norm_axis(p, rank, opname) for p in perm)
    if sorted(out) != list(range(rank)):
        raise ShapeError(f"Error in {opname}: rank of input {rank} must match length of "
                            f"perm {list(perm)}, which must list every axis once.")
    return out


# ---------------------------------------------------------------- numbers and options

def as_number(v, what, opname, finite=False, minimum=None, positive=False):
    """A real-number argument, as a Python float (a tensor of one element too).
    ``finite`` refuses NaN and inf; ``minimum`` / ``positive`` bound it."""
    if type(v) is not float:
        if isinstance(v, E.tensor_class()) and v.size == 1 and v.dtype != dtypes.bool_:
            v = v.item()
        if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, np.integer, np.floating)):
            got = describe(v) if isinstance(v, (E.tensor_class(), np.ndarray)) else repr(v)
            raise ArgumentError(f"{opname}: {what} must be a number, got {got}")
        try:
            v = float(v)
        except OverflowError:       # an int beyond a float's range (10**400)
            raise ArgumentError(f"{opname}: {what} must be a number a float can hold (up "
                                f"to about 1.8e308), got an integer of {len(str(v))} "
                                f"digits") from None
    if (finite or positive or minimum is not None) and not math.isfinite(v):
        if not (v == math.inf and not finite):
            raise ArgumentError(f"{opname}: {what} must be a finite number, got {v}")
    if positive and not v > 0:
        raise ArgumentError(f"{opname}: {what} must be positive, got {v}")
    if minimum is not None and v < minimum:
        raise ArgumentError(f"{opname}: {what} must be >= {minimum}, got {v}")
    return v


def flag(v, what, opname):
    """A bool option: True, False or a NumPy bool (never an array, a tensor or a number)."""
    if v is True or v is False:
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    raise ArgumentError(f"{opname}: {what} must be True or False, got {describe(v)}")


def choice(v, what, opname, allowed, message=None):
    """A string option among ``allowed`` (``message``: the op's own words otherwise)."""
    if type(v) is str and v in allowed:
        return v
    names = ", ".join(repr(a) for a in allowed)
    raise ArgumentError(message or f"{opname}: {what} must be one of {names}, got "
                        f"{describe(v)}")


def text(v, what, opname):
    """A string argument (its values are checked by the op, with its own message)."""
    if type(v) is str:
        return v
    raise ArgumentError(f"{opname}: {what} must be a string, got {describe(v)}")


# ---------------------------------------------------------------- result sizes

MAX_BYTES = None        # the largest result allowed, in bytes; None: this machine's memory
_memory = []


def memory_limit():
    """The most bytes one result may take: ``MAX_BYTES`` if set, else the physical memory
    of this machine (a larger array cannot be held here at all)."""
    if MAX_BYTES is not None:
        return MAX_BYTES
    if not _memory:
        try:
            _memory.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (AttributeError, ValueError, OSError):
            _memory.append(1 << 40)     # no sysconf (Windows): 1 TiB
    return _memory[0]


def _human(n):
    if n >= 1 << 100:       # (a float cannot hold every such int: 10**400 bytes)
        return f"about 1e{len(str(n)) - 1} bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.4g} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024


def check_alloc(shape, dtype, opname, what="the result"):
    """Refuse a result of ``shape`` that could not be allocated: an AllocationError saying
    how many elements and bytes it would take and the limit it passes."""
    n = 1
    for s in shape:
        n *= int(s)
    # (a string tensor's result: 8 bytes a reference; the kernel refuses strings anyway)
    nbytes = n * (dtypes.NP[dtype].itemsize if dtype in dtypes.NP else 8)
    if nbytes <= 1 << 26:      # 64 MiB: always fine, no system call
        return
    limit = memory_limit()
    if nbytes > limit:
        src = "MAX_BYTES (flowgrad.arg_checks)" if MAX_BYTES is not None else \
            "the physical memory of this machine"
        raise AllocationError(
            f"{opname}: {what} would have shape {list(shape)}: {n:,} elements of {dtype}, "
            f"{_human(nbytes)}, more than {src} ({_human(limit)}); it cannot be allocated. "
            f"Check the sizes given to {opname}.")


def check_count(n, dtype, opname, what="the result"):
    """check_alloc for a result of n elements."""
    check_alloc((n,), dtype, opname, what)


# ---------------------------------------------------------------- tensors and functions

def alive(x, prim):
    """x itself, after the check every kernel makes: an op that returns its input unchanged
    (reshape to the same shape, cast to the same dtype...) must refuse a disposed tensor
    too, with run_kernel's message."""
    if x._disposed:
        E.disposed_input(x, prim)
    return x


def check_arity(f, n, api, fewer_ok=False):
    """f can take n positional arguments; ``fewer_ok``: f may take fewer (it is then given
    only as many as it takes). An ArgumentError saying what f takes otherwise."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return
    required = at_most = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            at_most = None
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if at_most is not None:
                at_most += 1
            if p.default is p.empty:
                required += 1
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            raise ArgumentError(f"{api}: f has a keyword-only parameter '{p.name}' without a "
                                f"default; {api} passes arguments by position only")
    too_many = not fewer_ok and at_most is not None and at_most < n
    if required > n or too_many:
        takes = (f"{required}" if at_most == required else
                 f"{required} to {at_most}" if at_most is not None else f"at least {required}")
        name = getattr(f, "__name__", "f")
        raise ArgumentError(f"{api}: f ({name}) takes {takes} positional argument(s) but is "
                            f"given {n}: give f one parameter per argument passed")


def argnums(nums, n, api):
    """(single, tuple of argument indices) from an int or a tuple/list of ints, checked
    against the n arguments given."""
    single = isinstance(nums, _INT_TYPES) and not isinstance(nums, bool)
    if single:
        seq = (nums,)
    elif isinstance(nums, (tuple, list)) and nums:
        seq = tuple(nums)
    else:
        raise ArgumentError(f"{api}: argnums must be an int or a non-empty tuple of ints, "
                            f"got {describe(nums)}")
    out = []
    for a in seq:
        if isinstance(a, bool) or not isinstance(a, _INT_TYPES) or not -n <= a < n:
            raise ArgumentError(f"{api}: argnums {nums!r} does not fit the {n} argument(s) "
                                f"given (each must be an int in {-n}..{n - 1})")
        out.append(int(a) % n)
    return single, tuple(out)
