"""One optimizer update: the gradient forms accepted, the checks, and the step itself.

Whole updates or none: a step computes everything first, then commits.

The compute phase changes nothing anyone else can see: each new value of a variable or a
slot is an array that only a private tensor of the step (its *carrier*) holds, slots made
for a variable's first update are not yet in the optimizer's table, the step is not yet
counted. An error or an interrupt there leaves the optimizer and its variables as they
were; what the phase made is disposed (or garbage-collected, after an interrupt).

The commit then makes every change with plain attribute and dict stores of values
computed beforehand. CPython raises ``KeyboardInterrupt`` (or whatever a signal handler
raises) only where it checks for pending signals: on entering a Python function, on a
loop's back-edge and after a call into C — never between two stores. So the commit can
only be interrupted between whole items, and since running it again stores the same
values, the interrupted commit is simply run again to its end before the interrupt goes
on: once it started, the step is applied fully.

Accounting: a target (variable or slot) and its carrier *trade* arrays and buffer records
(``_data`` and ``_buf``). Both have the same shape and dtype, so no counter changes; the
carrier, disposed when the step's tidy ends, then releases the target's old array exactly
as disposing the target's old value would. Under ``tf.jit`` the commit is a kernel
(``ApplyUpdateCommit``) so that a replay commits too; there the targets take the kernel
outputs' arrays (no tensors exist in a replay) and the counts follow ``tf.jit``'s rule for
assignments.
"""
import threading
import weakref

from ..after_fork import renew_after_fork
from .. import buffer_pool as _pool
from .. import dtypes
from .. import engine as E
from .. import recording
from .. import interceptors
from ..errors import (ArgumentError, DisposedError, DtypeError, JitError, ShapeError,
                      VariableError)
from ..camel_case import Result
from ..ops import OPS
from ..batching import loop
from ..ops._core import primitive
from ..tensor import Variable, convert, find_variable, slot_variable
from . import fused


# Held while an optimizer commits a step and while a checkpoint reads or restores the
# state, so that a checkpoint saved from another thread (to keep writing off the training
# loop) never holds variables of one step beside slots or a step count of another: without
# it, 6-22 of 60 checkpoints written beside a training thread were torn
# (tests/test_engine_state.py)
STATE_LOCK = threading.RLock()
renew_after_fork(globals(), "STATE_LOCK", threading.RLock)     # (flowgrad/after_fork.py)


def step(opt, pairs, skip_nonfinite, loss, rule):
    """One update of ``opt`` (inside a tidy): compute every new value, changing nothing,
    then commit them all. ``rule`` is its fused kernel's rule (None: op by op). Returns
    the warning's text when skip_nonfinite skips the step."""
    pairs = [(v, _grad_for(v, g)) for v, g in pairs]
    pairs = opt.clip_pairs(pairs)
    if opt.monitor is not None:
        opt.monitor.on_apply(opt, pairs, loss)
    if skip_nonfinite:
        bad = [(v, g) for v, g in pairs if g is not None and not bool(g.is_finite().all())]
        if bad:
            opt.skipped_steps += 1
            names = ", ".join(f"'{v.name}'" for v, _ in bad)
            return (f"{opt.class_name}: update {opt.iterations + 1} skipped: the "
                    f"gradient of {names} has NaN or Inf values ({opt.skipped_steps} "
                    f"skipped so far).")
    # one fused kernel per variable unless the update itself is being differentiated,
    # or the backend's functions take no out= buffers (the standard has none)
    if recording.is_recording() or not E.B.supports_out:
        rule = None
    if rule is None and interceptors.tracer is not None:
        # the op-by-op rule reads the step count and learning rate in Python: a replay
        # would repeat this step's bias corrections forever
        raise JitError(f"tf.jit cannot replay this {opt.class_name} update: on backend "
                       f"'{E.B.name}' (no out= buffers) or inside a gradient function it "
                       f"is computed op by op, with the step count as a Python number "
                       f"a replay would freeze. Call minimize() outside tf.jit here.")
    # (the fused kernels read the learning rate when they run: see fused._update)
    lr = opt.current_learning_rate() if rule is None else None
    plan = Plan(opt, opt.iterations + 1)
    try:
        for var, g in pairs:
            if var._disposed:
                continue                    # (and no gradient: see check_targets)
            slots = plan.slots(var)
            if g is None:
                continue
            if rule is not None:
                new = fused.run(rule, opt, var, g, slots or {})
            else:
                value, new_slots = opt.update_rule(var, g, slots, lr)
                # clones: private tensors over the new values, to trade arrays with
                new = [OPS["clone"](value)] + [OPS["clone"](new_slots[k])
                                               for k in slots or ()]
            plan.put(var, new[0])
            if slots:
                for s, v in zip(slots.values(), new[1:]):
                    plan.put(s, v)
    except BaseException:
        plan.abandon()
        raise
    plan.commit()
    if opt.monitor is not None:
        opt.monitor.on_applied(opt, pairs)
    return None


class Plan:
    """What one step (or ``set_weights``) will change, built before anything changes."""
    __slots__ = ("opt", "it", "counts", "swaps", "regs", "made")

    def __init__(self, opt, iterations, counts=True):
        self.opt = opt
        self.it = iterations       # the step count after the commit
        self.counts = counts       # a step (one more), not set_weights (this count)
        # (target, carrier, new array, new record, old array, old record)
        self.swaps = []
        self.regs = []             # (key, entry): slot tables of first-time variables
        self.made = []             # slot variables made for this plan

    def slots(self, var):
        """``{slot name: slot variable}`` of ``var``: the optimizer's, or new ones (entered
        in its table at the commit). None for an optimizer without slots."""
        opt = self.opt
        if not opt.slot_names:
            return None
        entry = opt.slot_table.get(id(var))
        if entry is not None and entry[0]() is var:
            return entry[1]
        for key, entry in self.regs:
            if key == id(var):
                return entry[1]
        slots = {}
        for name, init in opt.slot_init(var).items():
            s = slot_variable(init, f"{var.name}/{name}")
            self.made.append(s)
            slots[name] = s
        self.regs.append((id(var), (weakref.ref(var), slots)))
        return slots

    def put(self, target, carrier):
        """At the commit, ``target`` takes ``carrier``'s array (a tensor of the step that
        nobody else holds; it gets the target's old array, freed when it is disposed). Each
        target once: two trades would hand both carriers the same old array."""
        # (dtype names are interned: `is` decides the usual case without DType.__ne__)
        if (carrier.dtype is not target.dtype and carrier.dtype != target.dtype) or \
                carrier.shape != target.shape:
            raise VariableError(
                f"{self.opt.class_name}: the new value of '{target.name}' is {carrier.dtype} "
                f"{carrier.shape}, but the variable is {target.dtype} {target.shape}")
        self.swaps.append((target, carrier, carrier._data, carrier._buf, target._data,
                           target._buf))

    def commit(self):
        """Apply the whole plan (see the module doc: it cannot be left half done)."""
        opt = self.opt
        if interceptors.tracer is not None:
            # tf.jit is tracing: the commit is a kernel, so that every replay commits
            E.run_kernel(_commit_kernel, tuple(s[1] for s in self.swaps),
                         {"targets": tuple(s[0] for s in self.swaps), "regs": self.regs,
                          "opt": opt, "count": None if self.counts else self.it})
            return
        with STATE_LOCK:
            commit_fully(_store, (self.swaps, self.regs, opt.slot_table, opt, self.it))

    def store(self):
        """The plan's stores alone (no lock, no rerun): for a caller that commits several
        plans and more as one (train.checkpoint's restore), from its own store function run
        under STATE_LOCK by commit_fully."""
        _store(self.swaps, self.regs, self.opt.slot_table, self.opt, self.it)

    def abandon(self):
        """The step failed before its commit: free the slot variables made for it."""
        for s in self.made:
            s.dispose()


def _store(swaps, regs, table, opt, it):
    # NOTE: no calls here, only stores of precomputed values (see the module doc); the
    # swaps still hold every value replaced, so no store frees one and runs a finalizer
    for target, carrier, new, new_buf, old, old_buf in swaps:
        target._data = new
        target._buf = new_buf
        carrier._data = old
        carrier._buf = old_buf
    for key, entry in regs:
        table[key] = entry
    opt.iterations = it


def commit_fully(store, args):
    """``store(*args)`` run to its end even when an interrupt lands in it, the interrupt
    then going on. ``store`` must make only stores of values computed beforehand, so that
    running it again gives the same result (see the module doc): a step's commit, the commit
    kernel under tf.jit and train.checkpoint's restore all end this way."""
    try:
        store(*args)
    except BaseException:
        _finish(store, args)
        raise


def _finish(store, args):
    """Run an interrupted commit to its end (again, if another interrupt cuts it; a few
    times only, so that a commit that cannot complete raises instead of hanging)."""
    for _ in range(4):
        try:
            store(*args)
            return
        except BaseException:
            pass


# ---------------------------------------------------------------- the commit under tf.jit

@primitive("ApplyUpdateCommit", impure=True, vmap=loop)     # (stateful: kept by tf.jit)
def _commit_kernel(B, *arrays, targets, regs, opt, count):
    # the step count is read when the kernel runs: a replay counts on from the last step
    it = opt.iterations + 1 if count is None else count
    replaced = []
    with STATE_LOCK:
        commit_fully(_adopt, (targets, arrays, regs, opt.slot_table, opt, it, replaced))
    # the values replaced, to the buffer pool where nothing else holds them: the next
    # step's new values are written there (a fresh MB array page-faults on every page)
    while replaced:
        old = replaced.pop()
        _pool.offer(old)
        del old
    # (its result is read by no one: one array per backend, not a new one per step)
    done = _DONE.get(B.name)
    if done is None:
        done = _DONE[B.name] = B.asarray(0, dtype=B.int32)
    return done


_DONE: dict = {}


def _adopt(targets, arrays, regs, table, opt, it, replaced):
    # each target takes a fresh array that only it will hold (the kernels' outputs): one
    # buffer more, and its old one less unless others still share it
    for target, arr in zip(targets, arrays):
        if target._data is not arr:         # (not yet done: a rerun skips it)
            b = target._buf
            if b is not None and b[0] > 1:
                # NOTE: the only call, before any store: an interrupt at it changes nothing
                E.count_buffers(1)
                b[0] -= 1
            # (an interrupt at this append loses the old value's reuse, nothing else)
            replaced.append(target._data)
            target._buf = None
            target._data = arr
    for key, entry in regs:
        table[key] = entry
    opt.iterations = it


# ---------------------------------------------------------------- checks and slot tables

def check_targets(opt, pairs):
    """Refuse, before anything is computed, updates that cannot be applied."""
    sess = recording.current_session()
    seen = set()
    for var, g in pairs:
        if g is None:
            continue
        if id(var) in seen:
            raise ArgumentError(f"{opt.class_name}: '{var.name}' has two gradients in one "
                                f"step: give each variable one (nothing was updated).")
        seen.add(id(var))
        if var._disposed:
            raise disposed(opt, var)
        if not dtypes.is_float(var.dtype):
            raise DtypeError(f"{opt.class_name}: variable '{var.name}' is {var.dtype}; "
                             f"optimizers update float variables only. Make it float32, "
                             f"or trainable=False to leave it out of minimize() "
                             f"(nothing was updated).")
        if sess is not None and any(t is var for n in sess.nodes for t in n.inputs):
            # (Variable.assign's check, made before anything changes)
            raise VariableError(
                f"Variable '{var.name}' is assigned inside a gradient function after "
                f"an op used it, so its gradient would be computed from the new "
                f"value. Compute the new value inside, and assign() after the "
                f"gradient call returns.")


def disposed(opt, var):
    return DisposedError(f"{opt.class_name}: variable '{var.name}' is disposed and cannot be "
                         f"updated. Leave it out of var_list and of the gradients (nothing "
                         f"was updated).")


def prune(opt):
    """Drop the slots of variables disposed or garbage-collected since they were made."""
    table = opt.slot_table
    if not table:
        return
    dead = [k for k, (ref, _) in table.items() if (v := ref()) is None or v._disposed]
    for k in dead:
        entry = table.pop(k, None)
        if entry is not None:
            for s in entry[1].values():
                s.dispose()


# ---------------------------------------------------------------- gradient forms

def named_entry(w):
    """``(name, tensor)`` of one entry of set_weights' list: a ``{"name", "tensor"}`` result
    or dict, or a ``(name, tensor)`` pair; ``(None, w)`` for anything else."""
    if isinstance(w, Result) or isinstance(w, dict):
        return w["name"], w["tensor"]
    if isinstance(w, (tuple, list)) and len(w) == 2 and isinstance(w[0], str):
        return w[0], w[1]
    return None, w


def gradient_pairs(grads):
    """``[(variable, gradient)]`` from any form apply_gradients accepts: a mapping of
    variable (or its name) to gradient, ``(gradient, variable)`` pairs, or TF.js's
    ``{"name": ..., "tensor": ...}`` list. tf.distributed's optimizer reads its argument
    the same way before averaging."""
    if isinstance(grads, dict):
        items = list(grads.items())
        return [(_lookup(k), g) for k, g in items]
    if isinstance(grads, (list, tuple)):
        out = []
        for item in grads:
            if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1],
                                                                                 Variable):
                out.append((item[1], item[0]))          # TF-Python's (grad, var)
            elif isinstance(item, (dict, Result)):
                out.append((_lookup(item["name"]), item["tensor"]))
            else:
                raise ArgumentError(
                    f"apply_gradients(): list entries must be (gradient, variable) pairs or "
                    f"{{'name': ..., 'tensor': ...}}, got {type(item).__name__}")
        return out
    raise ArgumentError(f"apply_gradients() takes a mapping of variable (or name) to gradient, "
                        f"or a list of (gradient, variable) pairs; got {type(grads).__name__}")


def _lookup(key):
    if isinstance(key, Variable):
        return key
    var = find_variable(key)
    if var is None:
        raise ArgumentError(f"apply_gradients(): no variable named {key!r} is registered (was "
                            f"it disposed, or renamed?)")
    return var


def _grad_for(var, g):
    if g is None:
        return None
    g = convert(g, "gradient", "apply_gradients")
    if g.shape != var.shape:
        try:
            g = OPS["broadcast_to"](g, var.shape)
        except ShapeError:
            raise ShapeError(f"apply_gradients(): the gradient of '{var.name}' has shape "
                             f"{g.shape}, which does not fit the variable's shape "
                             f"{var.shape}") from None
    if g.dtype != var.dtype:
        g = g.cast(var.dtype if dtypes.is_float(var.dtype) else dtypes.float32)
    return g


def own_copy(t, name, var):
    """A private copy of t in var's dtype: set_weights puts it in a Plan, and the slot
    trades arrays with it at the commit (a tensor the caller still holds must not be
    traded). ``name`` names t in a conversion error."""
    t = convert(t, name, "set_weights", dtype=var.dtype)
    arr = t.numpy()
    if arr.dtype != dtypes.NP[var.dtype]:
        arr = arr.astype(dtypes.NP[var.dtype])
    return OPS["tensor"](arr)
