"""How ops are declared: the op table and the helpers every family file uses.

A primitive is declared once, its forward kernel beside its gradient rule::

    @unary("Exp", save_y=True)
    def exp(B, x):                  # the kernel, on backend arrays
        return B.exp(x)

    @exp.vjp
    def _(dy, x, y):                # the rule, in flowgrad ops: higher order for free
        return dy * y

``unary``/``binary`` build the public function (``tf.exp``), the Tensor method
(``x.exp()``) and the table entry the tests walk, and declare the op elementwise: its
tf.vmap rule broadcasts over the batch axes. Ops with attributes declare the kernel with
``@primitive`` and write the public function by hand, right after it; the declaration says
everything else about the kernel (flags of ``engine.Primitive``)::

    @primitive("Sum", batched_vjp=True, vmap=V.reduce)      # V: flowgrad/batching.py
    @primitive("RandomNormal", impure=True, vmap=V.takes_no_tensors)
    @primitive("Diag", vmap=V.loop)         # no rule batches it: once per example, declared

and a rule of its own with ``@_kernel.def_vmap`` beside ``@_kernel.def_vjp``.
"""
import math

import numpy as np

from .. import batching as V
from .. import dtypes
from .. import engine as E
from .. import recording
from .. import user_frames
from ..arg_checks import (alive, as_int, as_ints, as_number, flag, norm_axes,  # noqa: F401
                    norm_axis)  # (re-exported: the family files import them from here)
from ..errors import DtypeError
from ..strings import OPS_HINT as _STRINGS_HINT, STRING
from ..camel_case import add_camel_aliases
from ..tensor import Tensor, convert

OPS = {}         # public name -> function: everything exported as tf.<name>
NAMESPACES = {"losses": {}, "image": {}, "linalg": {}}   # tf.losses.<name>, ...
PRIMITIVES = {}  # kernel name -> Primitive
# TF.js kernel name -> the public op that flowgrad composes of several kernels for it
# (ExpandDims is a Reshape here): tf.get_gradient answers for it by differentiating the op
COMPOSITES = {}
FLOATS = frozenset(dtypes.FLOATS)
_BOOL = frozenset((dtypes.bool_,))     # (set lookups hit DType keys on identity: fast)
f32 = dtypes.float32


# NumPy/PyTorch spellings of TF.js keywords: an op whose signature has the TF.js parameter
# also takes these (keyword only). One place, applied by export to every op.
KEYWORD_ALIASES = {"keep_dims": ("keepdims", "keepdim"), "axis": ("dim",), "dim": ("axis",)}


class _Unset:
    __slots__ = ()

    def __repr__(self):
        return "<unset>"


_U = _Unset()


def _pick(fn, canonical, value, aliases):
    """The value of ``canonical`` given under at most one of its spellings."""
    given = [(canonical, value)] if value is not _U else []
    given += [(a, v) for a, v in aliases if v is not _U]
    if len(given) > 1:
        from ..errors import ArgumentError
        names = " and ".join(f"'{a}'" for a, _ in given)
        raise ArgumentError(f"{fn}(): {names} are the same argument (TF.js and NumPy/PyTorch "
                            f"spellings); pass only one of them.")
    return given[0][1] if given else _U


def with_keyword_aliases(f, opname):
    """``f`` itself, or (when its signature has a parameter of KEYWORD_ALIASES) a wrapper
    with the same parameters plus the alias keywords (listed in its ``keyword_aliases``).
    Generated code, one frame and a few identity tests per call: ``sum(x, keepdims=True)``
    is ``sum(x, keep_dims=True)``.

    >>> import flowgrad as tf
    >>> tf.ones([2, 3]).sum(dim=1, keepdims=True).shape
    (2, 1)
    """
    import inspect
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return f
    params = list(sig.parameters.values())
    names = {p.name for p in params}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return f
    canon = {p.name: tuple(a for a in KEYWORD_ALIASES[p.name] if a not in names)
             for p in params if p.name in KEYWORD_ALIASES}
    canon = {k: v for k, v in canon.items() if v}
    if not canon:
        return f
    env = {"_f": f, "_U": _U, "_pick": _pick}
    head, call, star = [], [], False
    for i, p in enumerate(params):
        d = f"_d{i}"
        env[d] = p.default
        if p.kind is p.VAR_POSITIONAL:
            head.append(f"*{p.name}")
            call.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            head.append("*")
            star = True
        if p.name in canon:
            head.append(f"{p.name}=_U")
            val = (f"({d} if {p.name} is _U else {p.name})" if p.default is not p.empty
                   else p.name)
        else:
            head.append(p.name if p.default is p.empty else f"{p.name}={d}")
            val = p.name
        call.append(f"{p.name}={val}" if p.kind is p.KEYWORD_ONLY else val)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params)
                                            or params[i + 1].kind is not p.POSITIONAL_ONLY):
            head.append("/")
    aliases = [a for v in canon.values() for a in v]
    if not star:
        head.append("*")
    head += [f"{a}=_U" for a in aliases]
    body = [f"def {opname}({', '.join(head)}):",
            f"    if {' or '.join(f'{a} is not _U' for a in aliases)}:"]
    for c, al in canon.items():
        pairs = ", ".join(f"({a!r}, {a})" for a in al)
        body.append(f"        {c} = _pick({opname!r}, {c!r}, {c}, ({pairs},))")
    for c in canon:       # a required parameter given by none of its spellings
        if sig.parameters[c].default is sig.parameters[c].empty:
            body.append(f"    if {c} is _U:\n        raise TypeError(\"{opname}() missing "
                        f"required argument '{c}'\")")
    body.append(f"    return _f({', '.join(call)})")
    # compiled under f's file name: frames stay flowgrad's own (debug sites skip them)
    exec(compile("\n".join(body), f.__code__.co_filename, "exec"), env)
    w = env[opname]
    w.__dict__.update(f.__dict__)
    for attr in ("__doc__", "__module__", "__qualname__"):
        setattr(w, attr, getattr(f, attr))
    # inspect.signature shows the TF.js parameters only (API pages, the fuzz test); the
    # spellings it also takes are listed here, e.g. for type stubs: {"keepdims": "keep_dims"}
    w.__wrapped__ = f
    w.keyword_aliases = {a: c for c, al in canon.items() for a in al}
    return w


def export(fn=None, *, method=True, name=None, alias=(), namespace=None, kernel=None):
    """Register a public op: ``tf.<name>`` and (``method=True``) ``Tensor.<name>``; with
    ``namespace="losses"`` it is ``tf.losses.<name>`` instead (and no method); ``kernel``:
    the TF.js kernel it stands for, when flowgrad composes it (COMPOSITES). Returns the
    registered function: ``f`` itself, or ``f`` taking NumPy's keyword spellings too."""
    def deco(f):
        n = name or f.__name__.rstrip("_")
        f = with_keyword_aliases(f, f.__name__)
        if kernel is not None:
            COMPOSITES[kernel] = f
        if namespace is not None:
            NAMESPACES[namespace][n] = f
            return f
        OPS[n] = f
        user_frames.add_op_name(n)      # (the user's line names the op: user_frames.py)
        for a in alias:
            OPS[a] = f
            user_frames.add_op_name(a)
        if method:
            setattr(Tensor, n, f)
            for a in alias:
                setattr(Tensor, a, f)
            add_camel_aliases(Tensor, (n,) + tuple(alias))
        return f
    return deco(fn) if fn is not None else deco


def primitive(name, **flags):
    """Decorator: make a forward kernel ``fwd(B, *arrays, **attrs)`` a Primitive (``flags``:
    those of ``engine.Primitive``: ``vmap=`` its tf.vmap rule, ``impure=True`` for random or
    stateful kernels, ``ufunc=`` / ``expr=`` its fusion forms, ``native=`` its form in
    tf.jit's compiled segments (a numba expression of the operands ``{0}``, ``{1}`` and of
    number attributes by name, ``{alpha}``: the literal ``T(0.2)`` in the operands' dtype;
    or a function ``(operands, constants, **attrs)`` returning one), ``batched_vjp=True``...).
    ``unary`` and ``binary`` pass these flags on."""
    def deco(fwd):
        p = E.Primitive(name, fwd, **flags)
        PRIMITIVES[name] = p
        return p
    return deco


def own_buffer(B, out, x):
    """``out``, a view into ``x``'s array, as an array of its own when it is less than half
    of ``x``: kept after ``x`` is gone, a small view would hold all of ``x``'s memory alive
    while memory() counts only the view (TF.js copies slices). Larger views stay views."""
    if out.size * 2 < x.size and B.may_share_memory(out, x):
        return B.asarray(out, copy=True)
    return out


def run(prim, *inputs, **attrs):
    """Run a primitive on tensors (attrs as keywords)."""
    return E.run_kernel(prim, inputs, attrs or None)


def _finish(public, prim, kernel, opname, method):
    public.__name__ = public.__qualname__ = opname
    # frames then show the op's name (debug reports name the public op from the stack)
    public.__code__ = public.__code__.replace(co_name=opname, co_qualname=opname)
    public.__doc__ = kernel.__doc__
    public.__module__ = kernel.__module__
    public.prim = prim
    public.vjp = prim.def_vjp
    public.vmap = prim.def_vmap
    return export(public, method=method, name=opname)


def no_strings(x, opname, arg="x"):
    """Refuse a string tensor where numbers are needed, in TF.js's words."""
    if x.dtype == STRING:
        raise DtypeError(f"Argument '{arg}' passed to '{opname}' must be numeric tensor, but "
                         f"got string tensor ({_STRINGS_HINT})")


def without_dtype(x):
    """True for a value with no dtype of its own: a Python number (not a bool), or a list or
    tuple (TF.js's number and number[]). NumPy arrays and scalars, and tensors, have one."""
    t = type(x)
    return t is float or t is int or t is list or t is tuple


def met_float(*values):
    """The dtype a value without a dtype of its own takes among ``values``: the widest float
    dtype of the tensors there, or None when none is a float tensor (the value then converts
    as it would alone: float32 for a fraction, as TF.js)."""
    found = None
    for v in values:
        if isinstance(v, Tensor) and v.dtype in FLOATS and found is not dtypes.float64:
            found = v.dtype
    return found


def _dtype_for(x, like):
    return like if like is not None and without_dtype(x) else None


# NOTE: every helper below takes ``like``, the float dtype of the tensors that x meets in
# the op (met_float). A Python number or list converted without it is a float32 tensor; next
# to float64 tensors it is then promoted, with its value already rounded to float32 (0.1 ->
# 0.10000000149). So an op converts its dtype-less arguments *with* ``like``, never alone.

def as_float(x, opname, arg="x", like=None):
    """x as a float tensor: int32 and bool become float32 (TF.js does so for exp and erf,
    and flowgrad does it for every op that is only defined on reals). A value without a
    dtype of its own (a Python number or list) takes ``like`` when given."""
    if not isinstance(x, Tensor):
        x = convert(x, arg, opname, _dtype_for(x, like))
    if x.dtype not in FLOATS:
        no_strings(x, opname, arg)
        x = cast(x, f32)
    return x


def as_numeric(x, opname, arg="x", like=None):
    """x as a number tensor: bool becomes int32, everything else is kept. A value without a
    dtype of its own takes ``like`` when given."""
    if not isinstance(x, Tensor):
        x = convert(x, arg, opname, _dtype_for(x, like))
    if x.dtype == dtypes.bool_:
        x = cast(x, dtypes.int32)
    elif x.dtype == STRING:
        no_strings(x, opname, arg)
    return x


def as_tensor(x, opname, arg="x", like=None):
    """x as a tensor; a value without a dtype of its own takes ``like`` when given."""
    return x if isinstance(x, Tensor) else convert(x, arg, opname, _dtype_for(x, like))


def as_floats(opname, **args):
    """The arguments as float tensors, each of its own dtype, except that the values without
    a dtype of their own take the widest float dtype of the tensors among them (float32 when
    there are none). Returns a list in the order given."""
    like = met_float(*args.values())
    return [as_float(v, opname, k, like) for k, v in args.items()]


def unary(name, *, policy="float", method=True, **flags):
    """Declare an elementwise one-input op.

    policy: "float" (int/bool inputs become float32), "numeric" (bool becomes int32),
    "any" (every dtype as is).
    """
    flags.setdefault("batched_vjp", True)   # elementwise rules broadcast over batch axes
    flags.setdefault("vmap", V.elementwise)
    def deco(kernel):
        prim = primitive(name, **flags)(kernel)
        opname = kernel.__name__
        if policy == "float":
            def public(x):
                if type(x) is not Tensor or x.dtype not in FLOATS:
                    x = as_float(x, opname)
                return E.run_kernel(prim, (x,))
        elif policy == "numeric":
            def public(x):
                if type(x) is not Tensor or x.dtype in _BOOL:
                    x = as_numeric(x, opname)
                return E.run_kernel(prim, (x,))
        else:
            def public(x):
                if type(x) is not Tensor:
                    x = as_tensor(x, opname)
                return E.run_kernel(prim, (x,))
        return _finish(public, prim, kernel, opname, method)
    return deco


def batch_axes_broadcast(ba, bb):
    """True when two stacks' batch shapes (the axes before their matrices) broadcast."""
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(ba), reversed(bb)))


def binary_args(a, b, opname):
    """Both operands as tensors of one dtype (TF.js promotion, extended with float64).

    A Python number (or list of them) takes a float tensor's dtype; next to an int32 or bool
    tensor it is a float32 (a JS number) and the tensor is promoted.
    """
    ta = isinstance(a, Tensor)
    tb = isinstance(b, Tensor)
    if ta and tb:
        da, db = a.dtype, b.dtype
        if da is db or da == db:       # (identity first: DType.__eq__ is a Python call)
            return a, b
    elif ta:
        if type(b) in (int, float):
            dt = a.dtype
            if dt not in FLOATS:
                no_strings(a, opname, "a")
                dt = f32
            return (a if a.dtype is dt or a.dtype == dt else cast(a, dt)), scalar_of(b, dt, opname)
        b = convert(b, "b", opname, _dtype_for(b, met_float(a)))
        da, db = a.dtype, b.dtype
    elif tb:
        if type(a) in (int, float):
            dt = b.dtype
            if dt not in FLOATS:
                no_strings(b, opname, "b")
                dt = f32
            return scalar_of(a, dt, opname), (b if b.dtype is dt or b.dtype == dt else cast(b, dt))
        a = convert(a, "a", opname, _dtype_for(a, met_float(b)))
        da, db = a.dtype, b.dtype
    else:
        a = convert(a, "a", opname)
        b = convert(b, "b", opname)
        da, db = a.dtype, b.dtype
    if da == db:
        return a, b
    no_strings(a, opname, "a")
    no_strings(b, opname, "b")
    dt = dtypes.promote(da, db, opname)
    return (a if da == dt else cast(a, dt)), (b if db == dt else cast(b, dt))


_CONSTANTS = {}


def scalar_of(v, dtype, opname="op"):
    """The constant tensor of a Python number in ``dtype``. Cached: ops with literals
    (``x * 2``, ``where(m, dy, 0)``) would otherwise build one tensor per call."""
    key = (v, dtype)
    if not v and type(v) is float:
        # NOTE: -0.0 == 0.0 and hashes alike: one shared entry made x * -0.0 and
        # x + (-0.0) compute with +0.0 (the sign of a zero result lost) after a 0.0
        key = (v, dtype, math.copysign(1.0, v))
    t = _CONSTANTS.get(key)
    if t is None:
        if type(v) is int:
            dtypes.check_int(v, dtype, f"{opname}()")      # (10**400: no float holds it)
        if len(_CONSTANTS) >= 4096:
            _CONSTANTS.clear()
        t = _CONSTANTS[key] = E.constant_tensor(
            E.from_host(np.asarray(v, dtype=dtypes.NP[dtype])))
    return t


def _forget_constants(ns):
    _CONSTANTS.clear()        # they live on the previous backend


E.backends.on_change(_forget_constants)


def binary(name, *, policy="any", method=True, **flags):
    """Declare an elementwise two-input op with broadcasting and dtype promotion.

    policy: "any" (the promoted dtype), "float" (int/bool promote to float32),
    "numeric" (bool promotes to int32), "bool" (both must be bool).
    """
    flags.setdefault("batched_vjp", True)   # elementwise rules broadcast over batch axes
    flags.setdefault("vmap", V.elementwise)
    def deco(kernel):
        prim = primitive(name, **flags)(kernel)
        opname = kernel.__name__.rstrip("_")
        if policy == "bool":
            def public(a, b):
                a = as_tensor(a, opname, "a")
                b = as_tensor(b, opname, "b")
                for arg, t in (("a", a), ("b", b)):
                    if t.dtype != dtypes.bool_:
                        raise DtypeError(f"Argument '{arg}' passed to '{opname}' must be bool "
                                         f"tensor, but got {t.dtype} tensor")
                return E.run_kernel(prim, (a, b))
        else:
            fix = {"float": FLOATS, "numeric": None, "any": None}[policy]

            def public(a, b):
                if type(a) is Tensor and policy != "numeric":
                    if type(b) is Tensor:
                        if a.dtype is b.dtype and fix is None:
                            return E.run_kernel(prim, (a, b))
                    elif type(b) is float and a.dtype in FLOATS:
                        # (x * 1.01: binary_args's answer for a float tensor, directly)
                        return E.run_kernel(prim, (a, scalar_of(b, a.dtype)))
                a, b = binary_args(a, b, opname)
                if fix is not None and a.dtype not in fix:
                    a, b = cast(a, f32), cast(b, f32)
                elif policy == "numeric" and a.dtype == dtypes.bool_:
                    a, b = cast(a, dtypes.int32), cast(b, dtypes.int32)
                return E.run_kernel(prim, (a, b))
        return _finish(public, prim, kernel, opname, method)
    return deco


# Cast lives here because dtype promotion above needs it; it is an ordinary op otherwise.
@primitive("Cast", batched_vjp=True, vmap=V.elementwise)
def _cast(B, x, dtype):
    # dtype attributes are flowgrad names: each backend has its own dtype objects
    return B.astype(x, B.dtypes[dtype])


@_cast.def_vjp
def _(dy, x, dtype):
    return dy      # [conv] the gradient passes unchanged; the engine gives it x's float dtype


@export
def cast(x, dtype):
    """x converted to ``dtype`` ('float32', 'float64', 'int32', 'bool').

    Float to int32 truncates toward zero. The gradient passes through unchanged (TF.js).

    >>> import flowgrad as tf
    >>> tf.tensor([1.5, -2.7]).cast("int32").print()
    Tensor
        [1, -2]
    """
    x = as_tensor(x, "cast")
    if dtype is None:
        raise DtypeError("cast(): dtype None is not a dtype: give 'float32', 'float64', "
                         "'int32' or 'bool'")
    dt = dtypes.canonical(dtype, fn="cast()")
    if dt == x.dtype:
        # a new tensor (see shape.unchanged), except inside gradient rules
        alive(x, _cast)
        return x if recording.in_backward() else E.run_kernel(_cast, (x,), {"dtype": dt})
    return E.run_kernel(_cast, (x,), {"dtype": dt})
