"""Fused optimizer updates: one kernel per variable and step, computing the variable's new
value and its slots' new values into fresh arrays.

The arithmetic is that of each optimizer's op-by-op rule (``update_rule`` in optimizers.py),
in the same order, so the results are the same to the bit; what changes is that a step
costs a handful of NumPy calls. Used when no gradient function is recording (an update
inside one is differentiated op by op).

A kernel changes nothing: it reads the variable and its slots and returns new arrays that
nobody else holds (never an input or a view of one), which update.py then hands to the
variable and its slots all at once, so a failed or interrupted step changes nothing.

NOTE: writing a slot's new value beside the old one costs more memory traffic than the
in-place updates that came before (about +12% for Adam on 1 MB weights, which then spill
L2). The fresh arrays of big variables come from the buffer pool (the values this step's
commit replaces go back to it): malloc hands back the memory just freed only while
glibc's threshold for mapped blocks is above their size, and otherwise every new array
page-faults on every page.
"""
import os
import sys
import threading
import time
import warnings
import weakref
from functools import partial

import numpy as np

from .. import buffer_pool as _pool
from .. import engine as E
from .. import jit_native, native_costs
from ..batching import loop
from ..errors import JitError
from ..ops import PRIMITIVES
from ..ops._core import primitive


EPSILON = 1e-7          # TF.js cpu backend's epsilon(): the default of every epsilon


def _update(B, w, g, slots, rule, opt):
    # the step and the learning rate are read when the kernel runs, so a tf.jit replay of
    # a training step sees them change (the step is counted only at the commit)
    if w.ndim == 0:
        t = opt.iterations + 1
        lr = opt.current_learning_rate()
        if B.name == "numpy":
            # NOTE: a 0-d variable's step on NumPy scalars: a ufunc on a 1-element array
            # costs ~0.5 us more than the same operator on scalars (a scalar model's
            # whole SGD step was 2.8 us), with the same IEEE operation and rounding; so
            # does an operator between a scalar and a 0-d array (~1 us against 0.07): the
            # operands are read as scalars ([()]), and the results stay scalars
            new = rule(_Scalars, opt, w[()], g[()],
                       tuple([s[()] for s in slots]) if slots else (), lr, t)
            return tuple([_Scalars.fresh(a, w.dtype) for a in new])
        # NOTE: ufuncs on 0-d arrays may return scalars, which cannot take out=: work on
        # 1-element views and give back 0-d views of the fresh results
        new = rule(B, opt, w.reshape(1), B.reshape(g, (1,)),
                   tuple([s.reshape(1) for s in slots]), lr, t)
        return tuple([a.reshape(()) for a in new])
    if B.name == "numpy" and NATIVE_UPDATES != "0" and w.size > 1 and \
            jit_native.numba_installed():
        for _ in range(2):      # (a setting changed since the rule was expanded: again)
            loop, numbers = _native_loop(w, g, slots, rule, opt)
            if loop is None:
                break
            if loop.segment.fn is None and not loop.due():
                t0 = time.perf_counter()
                new = rule(B, opt, w, g, slots, opt.current_learning_rate(),
                           opt.iterations + 1)
                loop.spent += time.perf_counter() - t0
                return new
            new = loop.run(numbers, opt, w, g, slots)
            if new is not None:
                return new
            _EXPANDED.pop(opt, None)     # (its settings changed: expanded anew)
    return rule(B, opt, w, g, slots, opt.current_learning_rate(), opt.iterations + 1)


class _Scalars:
    """The backend functions the rules call, for NumPy scalars and 0-d arrays: the same
    operations as NumPy's ufuncs (square is x * x, as np.square computes it), out=
    ignored (every result is a new scalar)."""
    name = "numpy-scalars"

    @staticmethod
    def multiply(a, b, out=None):
        return a * b

    @staticmethod
    def add(a, b, out=None):
        return a + b

    @staticmethod
    def subtract(a, b, out=None):
        return a - b

    @staticmethod
    def divide(a, b, out=None):
        return a / b

    @staticmethod
    def square(a, out=None):
        return a * a

    @staticmethod
    def sqrt(a, out=None):
        return np.sqrt(a)

    @staticmethod
    def abs(a, out=None):
        return np.absolute(a)

    @staticmethod
    def maximum(a, b, out=None):
        return np.maximum(a, b)       # (NaN-propagating, unlike Python's max)

    @staticmethod
    def fresh(a, dtype):
        """``a`` as a NumPy scalar of ``dtype``: immutable, so only its holder can change
        it (what a fresh array gives an update), and the next step's operators on it stay
        scalar arithmetic (a tensor of a 0-d kernel's result holds one too)."""
        return a if type(a) is dtype.type else dtype.type(a)


# ---------------------------------------------------------------- the update, compiled
# tf.jit's native backend (flowgrad/jit_native.py) compiles an update with the gradient
# kernels before it: ``expand`` runs the rule once on symbols, which turns it into
# elementwise kernels of the op table (Multiply, Add, Sqrt...) over the variable, its
# gradient and slots, and its Python numbers (the learning rate, bias corrections...) into
# one Python function of the optimizer that a replay calls at every step, so they follow
# the step count and the schedule as the kernel's own reads do.
#
# NOTE: the same bits as the kernel: NumPy turns a Python number an array meets into the
# array's dtype before the operation (NEP 50), and the compiled code gets each number so
# converted; the numbers are computed by the same Python expressions in the same order.
# A setting of another type than at the trace (np.float64 would make NumPy compute in
# float64) or a flag that changed is a JitError naming it, never another result.

class _Unlowerable(Exception):
    """The rule does something the expansion does not know: the kernel stays a NumPy step."""


class _Elt:
    """One element of an array the rule computes with (a ref of the expansion)."""
    __slots__ = ("ref",)
    size = 0                    # (_out gives no pooled buffer)

    def __init__(self, ref):
        self.ref = ref


def _text(x):
    if type(x) is _Num:
        return x.text
    if type(x) in (int, float):
        return repr(x)
    raise _Unlowerable(f"a {type(x).__name__} in the rule's arithmetic")


class _Num:
    """A Python number of the rule: the expression that computes it from the step ``t``,
    the learning rate ``lr`` and the optimizer's settings (``a0``, ``a1``...)."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def _op(sym, reflected=False):
        def op(self, o):
            a, b = (_text(o), self.text) if reflected else (self.text, _text(o))
            return _Num(f"({a} {sym} {b})")
        return op

    __add__, __radd__ = _op("+"), _op("+", True)
    __sub__, __rsub__ = _op("-"), _op("-", True)
    __mul__, __rmul__ = _op("*"), _op("*", True)
    __truediv__, __rtruediv__ = _op("/"), _op("/", True)
    __pow__, __rpow__ = _op("**"), _op("**", True)
    del _op

    def __neg__(self):
        return _Num(f"(-{self.text})")

    def __bool__(self):
        raise _Unlowerable("a branch on a computed number")


class _Settings:
    """The optimizer as the rule sees it in the symbolic run: a number setting is a
    symbol read at every step (its type checked), a flag is its value now (checked)."""

    def __init__(self, opt):
        self._opt, self.reads, self.flags = opt, {}, {}

    def __getattr__(self, name):
        v = getattr(self._opt, name)
        if type(v) is bool:
            self.flags[name] = v
            return v
        if type(v) not in (int, float):
            raise _Unlowerable(f"the setting {name} is a {type(v).__name__}")
        if name not in self.reads:
            self.reads[name] = (f"a{len(self.reads)}", type(v))
        return _Num(self.reads[name][0])


class _Symbolic:
    """The backend functions the rules call, recording elementwise kernels."""
    name = "symbolic"
    _KERNELS = {"multiply": "Multiply", "add": "Add", "subtract": "Sub",
                "divide": "RealDiv", "square": "Square", "sqrt": "Sqrt", "abs": "Abs",
                "maximum": "Maximum"}

    def __init__(self):
        self.steps, self.numbers = [], []

    def __getattr__(self, fn):
        prim = PRIMITIVES[self._KERNELS[fn]] if fn in self._KERNELS else None
        if prim is None:
            raise _Unlowerable(f"B.{fn}")

        def kernel(*xs, out=None):
            refs = []
            for x in xs:
                if type(x) is _Elt:
                    refs.append(x.ref)
                else:
                    self.numbers.append(_text(x))
                    refs.append(("p", len(self.numbers) - 1))
            self.steps.append((prim, tuple(refs)))
            return _Elt(("t", len(self.steps) - 1))
        return kernel


_SCALARS: dict = {}             # source -> the compiled function of the optimizer


def expand(attrs, n_in):
    """The update kernel as elementwise kernels (see above): ``(numbers, steps, results)``
    where ``numbers()`` gives the Python numbers the kernels read at this step, ``steps``
    are ``(primitive, operands)`` with operands ``("in", i)`` (the kernel's input i: the
    variable, its gradient, its slots), ``("p", j)`` (number j) or ``("t", k)`` (step k's
    result), and ``results`` the steps giving the kernel's outputs in order; None where
    the rule cannot be expanded (it stays the NumPy kernel)."""
    rule, opt = attrs["rule"], attrs["opt"]
    B, settings = _Symbolic(), _Settings(opt)
    n_slots = n_in - 2
    try:
        new = rule(B, settings, _Elt(("in", 0)), _Elt(("in", 1)),
                   tuple([_Elt(("in", 2 + i)) for i in range(n_slots)]), _Num("lr"), _Num("t"))
    except (_Unlowerable, KeyError, AttributeError):
        return None
    results = [x.ref[1] for x in new if type(x) is _Elt and x.ref[0] == "t"]
    if len(results) != len(new) or len(set(results)) != len(results):
        return None                 # (an input or a number returned as is)
    return partial(_numbers_of(settings, B.numbers), opt), B.steps, results


def _numbers_of(settings, numbers):
    reads = [f"    {sym} = opt.{name}" for name, (sym, _) in settings.reads.items()]
    checks = ["type(t) is not int", "type(lr) is not float"]
    checks += [f"type({sym}) is not {tp.__name__}" for sym, tp in settings.reads.values()]
    checks += [f"opt.{name} is not {v}" for name, v in settings.flags.items()]
    src = "\n".join(["def numbers(opt):", "    t = opt.iterations + 1",
                     "    lr = opt.current_learning_rate()"] + reads +
                    [f"    if {' or '.join(checks)}:", "        _changed(opt, t, lr)",
                     f"    return ({''.join(n + ', ' for n in numbers)})"])
    fn = _SCALARS.get((src, tuple(settings.reads), tuple(settings.flags.items())))
    if fn is None:
        ns = {"_changed": partial(_changed, dict(settings.reads), settings.flags)}
        exec(compile(src, "<flowgrad.train.fused>", "exec"), ns)
        fn = _SCALARS[(src, tuple(settings.reads), tuple(settings.flags.items()))] = \
            ns["numbers"]
    return fn


def _changed(reads, flags, opt, t, lr):
    now = [("iterations", type(t - 1), int), ("learning rate", type(lr), float)]
    now += [(name, type(getattr(opt, name)), tp) for name, (_, tp) in reads.items()]
    for name, tp, was in now:
        if tp is not was:
            what = f"{opt.class_name}.{name} is a {tp.__name__}, a {was.__name__} when"
            break
    else:
        name = next(k for k, v in flags.items() if getattr(opt, k) is not v)
        what = f"{opt.class_name}.{name} is {getattr(opt, name)}, {flags[name]} when"
    raise JitError(f"tf.jit: {what} this step was compiled (backend 'native', which "
                   f"compiles the update with those settings): set it as it was (a Python "
                   f"number), or call tf.jit on the step again, or use backend='numpy'")


# ---------------------------------------------------------------- the update, native (eager)
# Where numba is installed (flowgrad[jit]), an update of arrays on the NumPy backend runs as
# one compiled loop: the expansion above, compiled by jit_native, one pass over the arrays
# instead of one NumPy call (and one trip through memory) per operation: W2's Adam update
# is 0.70-0.76x its in-place NumPy floor compiled, 1.31-1.35x as NumPy steps (python -m
# bench W2, "W2 update"), the same bits (tests/test_native_updates.py). As tf.jit's "auto"
# backend it compiles a loop only once the NumPy updates it would replace have taken as long
# as compiling it is estimated to take (native_costs: ~1 s the first time, a few ms from
# the disk cache): a script of a few steps never pays for it. FLOWGRAD_NATIVE_UPDATES=0
# turns it off; "always" compiles at the first update (tests, benchmarks).
#
# NOTE: the same bits because each element goes through the rule's operations in its order,
# each an IEEE operation of the dtype (numba contracts nothing into fused multiply-adds
# without fastmath), and the numbers are converted to the dtype as NumPy converts a Python
# number an array meets (NEP 50): see expand().


def _mode(value):
    """FLOWGRAD_NATIVE_UPDATES as "0" (off), "auto" or "always"; another value warns."""
    v = value.strip().lower()
    if v in ("0", "off"):
        return "0"
    if v not in ("", "1", "auto", "always"):
        warnings.warn(f"FLOWGRAD_NATIVE_UPDATES={value!r} is none of 0, off, auto, always: "
                      f"'auto' it is", RuntimeWarning, stacklevel=2)
    return "always" if v == "always" else "auto"


NATIVE_UPDATES = _mode(os.environ.get("FLOWGRAD_NATIVE_UPDATES", "auto"))

# optimizer -> {(rule, inputs): (numbers, loop key) or None: the rule does not expand}
_EXPANDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOOPS: dict = {}               # (kernels, results, inputs, dtype, n) -> _Loop
_MAX_LOOPS = 256
_compiling = threading.Lock()


class _Loop:
    """A compiled update on arrays of one dtype and size, and the seconds its NumPy steps
    have taken so far (until it is compiled)."""
    __slots__ = ("segment", "spent", "cost", "failed")

    def __init__(self, segment):
        self.segment, self.spent, self.cost, self.failed = segment, 0.0, None, False

    def due(self):
        """True when compiling now pays (the auto policy, see above), and it compiled."""
        if self.failed:
            return False
        if NATIVE_UPDATES != "always" and not self.segment.in_process():
            if self.cost is None:       # (estimated once: it looks at the disk cache)
                self.cost = self.segment.build_seconds() + \
                    (0.0 if "numba" in sys.modules else native_costs.IMPORT_S)
            if self.spent < self.cost:
                return False
        if not _compiling.acquire(blocking=False):
            return False                # (another thread compiles: NumPy meanwhile)
        try:
            self.segment.compile()
        except Exception:               # (numba refused it: NumPy steps from now on)
            self.failed = True
            return False
        finally:
            _compiling.release()
        return True

    def run(self, numbers, opt, w, g, slots):
        """The new values of the variable and its slots, in fresh (pooled) arrays; None
        when the optimizer's settings changed since ``numbers`` was made (it raises
        JitError, naming them): then the NumPy steps, this time."""
        try:
            numbers = numbers(opt)
        except JitError:
            return None
        t = w.dtype.type
        outs = []
        for _ in range(1 + len(slots)):
            o = _pool.take(w.shape, w.dtype) if w.size >= E.POOL_MIN else None
            outs.append(o if o is not None else np.empty(w.shape, w.dtype))
        # (ravel: a view of a contiguous array, a contiguous copy of a gradient that is a
        # broadcast or strided view)
        self.segment.run(w.ravel(), g.ravel(), *[s.ravel() for s in slots],
                         *[t(x) for x in numbers], *[o.ravel() for o in outs])
        return tuple(outs)


def _native_loop(w, g, slots, rule, opt):
    """``(loop, numbers)``: the _Loop of this update (made on first use) and the function
    giving the optimizer's numbers now (``numbers(opt)``); ``(None, None)`` where the rule
    does not expand or the arrays are not all of the variable's float dtype and shape."""
    dt, shape = w.dtype, w.shape
    if dt.kind != "f" or g.dtype != dt or g.shape != shape:
        return None, None
    for s in slots:
        if s.dtype != dt or s.shape != shape:
            return None, None
    try:
        known = _EXPANDED[opt]
    except KeyError:
        known = _EXPANDED.setdefault(opt, {})
    n_in = 2 + len(slots)
    # (found by what a step has at hand: the loop's own key is a tuple of the rule's steps,
    # slow to hash a variable a step)
    found = known.get((rule, n_in, dt, w.size))
    if found is not None:
        return found
    entry = known.get((rule, n_in), False)
    if entry is False:
        x = expand({"rule": rule, "opt": opt}, n_in)
        # (the numbers' function without the optimizer: held here, it would keep it alive)
        entry = known[(rule, n_in)] = None if x is None else \
            (x[0].func, (tuple(x[1]), tuple(x[2]), n_in))
    if entry is None:
        return None, None
    numbers, key = entry
    key = key + (dt.str, w.size)
    loop = _LOOPS.get(key)
    if loop is None:
        if len(_LOOPS) >= _MAX_LOOPS:
            _LOOPS.clear()
        loop = _LOOPS[key] = _Loop(jit_native.expanded_loop(key[0], key[1], n_in, w.size, dt))
    known[(rule, n_in, dt, w.size)] = loop, numbers
    return loop, numbers


# impure: a tf.jit replay keeps them even when their results look unused; under tf.vmap
# (an update of per-example copies, rare): once per example
@primitive("ApplyUpdate", impure=True, vmap=loop, expand=expand)
def _apply_update(B, w, g, rule, opt):
    return _update(B, w, g, (), rule, opt)[0]


@primitive("ApplyUpdateSlots", multi=True, impure=True, vmap=loop, expand=expand)
def _apply_update_slots(B, w, g, *slots, rule, opt):
    return _update(B, w, g, slots, rule, opt)


def run(rule, opt, var, g, slots):
    """``(new value, new slot values...)`` of ``var`` as tensors over arrays only they
    hold, in the order of ``slots`` (a dict of slot variables); nothing is changed."""
    if not slots:
        return (E.run_kernel(_apply_update, (var, g), {"rule": rule, "opt": opt}),)
    return E.run_kernel(_apply_update_slots, (var, g) + tuple(slots.values()),
                        {"rule": rule, "opt": opt})


# ---------------------------------------------------------------- the rules
# rule(B, opt, w, g, slots, lr, t) -> (new w, new slot values in the order of slot_names)
#
# NOTE: each fresh array is written into a buffer that arrays of its shape gave back
# (buffer_pool: the replaced values and gradients of earlier steps) where there is one:
# from malloc, big ones are mapped fresh and page-fault on every page unless glibc's
# threshold has grown past their size (W2's Adam steps: ~100 faults a step, or 500 once
# the products' outputs came from the pool). Temporaries go back to the pool at the end,
# offered directly: the pool's reference count test allows the caller's local only.

def _out(B, like):
    """A pooled buffer of ``like``'s shape and dtype, or None (the ufunc allocates)."""
    if like.size >= E.POOL_MIN:      # (the pool's size on NumPy; "infinite" elsewhere)
        return _pool.take(like.shape, like.dtype)
    return None


def _step(B, u, lr, w):
    """u * -lr + w, in u (a fresh array the caller owns)."""
    u = B.multiply(u, -lr, out=u)
    return B.add(u, w, out=u)


# NOTE: every result is assigned, in-place ones too (x = B.f(..., out=x)): on arrays it is
# the out= buffer itself, and on a 0-d variable's NumPy scalars (_Scalars) it is the value


def sgd(B, opt, w, g, slots, lr, t):
    u = B.multiply(g, -lr, out=_out(B, g))
    return (B.add(u, w, out=u),)


def momentum(B, opt, w, g, slots, lr, t):
    (acc,) = slots
    m = opt.momentum
    new_acc = B.multiply(acc, m, out=_out(B, acc))
    new_acc = B.add(new_acc, g, out=new_acc)
    if opt.use_nesterov:
        u = B.multiply(new_acc, m, out=_out(B, new_acc))
        u = B.add(g, u, out=u)
    else:
        u = B.multiply(new_acc, -lr, out=_out(B, new_acc))
        return (B.add(u, w, out=u), new_acc)
    return (_step(B, u, lr, w), new_acc)


def adagrad(B, opt, w, g, slots, lr, t):
    (acc,) = slots
    new_acc = B.square(g, out=_out(B, g))
    new_acc = B.add(acc, new_acc, out=new_acc)
    u = B.add(new_acc, EPSILON, out=_out(B, new_acc))
    u = B.sqrt(u, out=u)
    u = B.divide(g, u, out=u)
    return (_step(B, u, lr, w), new_acc)


def adadelta(B, opt, w, g, slots, lr, t):
    eg, ex = slots
    rho, eps = opt.rho, opt.epsilon
    g2 = B.square(g, out=_out(B, g))
    g2 = B.multiply(g2, 1 - rho, out=g2)
    new_eg = B.multiply(eg, rho, out=_out(B, eg))
    new_eg = B.add(new_eg, g2, out=new_eg)
    acc = new_eg if opt.use_updated_accumulator else eg
    den = B.add(acc, eps, out=_out(B, acc))
    den = B.sqrt(den, out=den)
    delta = B.add(ex, eps, out=_out(B, ex))
    delta = B.sqrt(delta, out=delta)
    delta = B.divide(delta, den, out=delta)
    delta = B.multiply(delta, g, out=delta)
    new_ex = B.multiply(ex, rho, out=g2)          # (g2 is dead: a temporary no one holds)
    den = B.square(delta, out=den)
    den = B.multiply(den, 1 - rho, out=den)
    new_ex = B.add(new_ex, den, out=new_ex)
    _pool.offer(den)           # (a temporary: back to the pool)
    return (_step(B, delta, lr, w), new_eg, new_ex)


def _moments(B, opt, g, m, v, t):
    b1, b2 = opt.beta1, opt.beta2
    new_m = B.multiply(m, b1, out=_out(B, m))
    tmp = B.multiply(g, 1 - b1, out=_out(B, g))
    new_m = B.add(new_m, tmp, out=new_m)
    tmp = B.square(g, out=tmp)
    tmp = B.multiply(tmp, 1 - b2, out=tmp)
    new_v = B.multiply(v, b2, out=_out(B, v))
    new_v = B.add(new_v, tmp, out=new_v)
    u = B.divide(new_m, 1 - b1 ** t, out=_out(B, new_m))
    tmp = B.divide(new_v, 1 - b2 ** t, out=tmp)
    tmp = B.sqrt(tmp, out=tmp)
    tmp = B.add(tmp, opt.epsilon, out=tmp)
    u = B.divide(u, tmp, out=u)
    return u, tmp, new_m, new_v


def adam(B, opt, w, g, slots, lr, t):
    m, v = slots
    u, tmp, new_m, new_v = _moments(B, opt, g, m, v, t)
    _pool.offer(tmp)           # (a temporary: back to the pool)
    return (_step(B, u, lr, w), new_m, new_v)


def adamw(B, opt, w, g, slots, lr, t):
    m, v = slots
    u, tmp, new_m, new_v = _moments(B, opt, g, m, v, t)
    tmp = B.multiply(w, opt.weight_decay, out=tmp)
    u = B.add(u, tmp, out=u)
    _pool.offer(tmp)           # (a temporary: back to the pool)
    return (_step(B, u, lr, w), new_m, new_v)


def adamax(B, opt, w, g, slots, lr, t):
    m, u = slots
    b1 = opt.beta1
    step_lr = -lr / ((t - 1) * opt.decay + 1)
    new_m = B.multiply(m, b1, out=_out(B, m))
    r = B.multiply(g, 1 - b1, out=_out(B, g))
    new_m = B.add(new_m, r, out=new_m)
    new_u = B.multiply(u, opt.beta2, out=_out(B, u))
    new_u = B.maximum(new_u, B.abs(g, out=r), out=new_u)
    r = B.add(new_u, opt.epsilon, out=r)
    r = B.divide(new_m, r, out=r)
    r = B.multiply(r, step_lr / (1 - b1 ** t), out=r)
    return (B.add(r, w, out=r), new_m, new_u)


def rmsprop(B, opt, w, g, slots, lr, t):
    rho = opt.decay
    ms, mom = slots[0], slots[1]
    tmp = B.square(g, out=_out(B, g))
    tmp = B.multiply(tmp, 1 - rho, out=tmp)
    new_ms = B.multiply(ms, rho, out=_out(B, ms))
    new_ms = B.add(new_ms, tmp, out=new_ms)
    extra = ()
    num = None
    if opt.centered:
        new_mg = B.multiply(slots[2], rho, out=_out(B, slots[2]))
        num = B.multiply(g, 1 - rho, out=_out(B, g))
        new_mg = B.add(new_mg, num, out=new_mg)
        extra = (new_mg,)
        tmp = B.square(new_mg, out=tmp)
        tmp = B.add(tmp, opt.epsilon, out=tmp)
        tmp = B.subtract(new_ms, tmp, out=tmp)
    else:
        tmp = B.add(new_ms, opt.epsilon, out=tmp)
    tmp = B.sqrt(tmp, out=tmp)
    num = B.multiply(g, lr, out=num if num is not None else _out(B, g))
    num = B.divide(num, tmp, out=num)
    new_mom = B.multiply(mom, opt.momentum, out=_out(B, mom))
    new_mom = B.add(new_mom, num, out=new_mom)
    _pool.offer(tmp)           # (a temporary: back to the pool)
    # slots in the order of slot_names: rms, momentum[, mg]
    return (B.subtract(w, new_mom, out=num), new_ms, new_mom) + extra
