"""Optimizers (``tf.train.*``) with TF.js's update rules and defaults.

Every optimizer computes its update with flowgrad ops in the variable's dtype, in the order
TF.js does, so trajectories match TF.js to float32 rounding. Where TF.js is broken,
flowgrad is right: ``set_momentum`` takes effect, slot state follows each variable (not its
position in a list), Adam and Adamax create no trainable variables, Adamax has weights.
Beyond TF.js: AdamW, learning-rate schedules, gradient clipping on every optimizer, and
``skip_nonfinite`` so one NaN gradient does not poison every weight. An update is whole or
nothing (update.py): an error or Ctrl-C in ``minimize`` changes no variable, slot or count.
"""
from __future__ import annotations

import inspect
import math
import numbers
from collections import abc
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .. import scopes
from ..arg_checks import as_int, as_number, describe, flag
from ..errors import ArgumentError, FlowgradError
from ..gradients import check_var_list, variable_grads, variable_pairs_here
from ..camel_case import CamelCase, Result, add_camel_aliases, camel_to_snake
from ..ops import OPS
from ..tensor import find_variable
from .clipping import clip_by_global_norm, clip_by_norm

from . import fused, update
from .update import Plan, gradient_pairs, named_entry, own_copy
if TYPE_CHECKING:
    from typing import Self, Union

    # a number, or a schedule: a function of the step (tf.train.exponential_decay, ...)
    LearningRate = Union[float, Callable[[int], float]]

    from ..gradients import VariableGrads
    from ..tensor import Tensor, Variable
from .fused import EPSILON      # TF.js cpu backend's epsilon(): the default of every epsilon


class NonFiniteGradientWarning(UserWarning):
    """An update was skipped because a gradient held NaN or Inf (``skip_nonfinite=True``)."""


class ConfigDict(dict):
    """``get_config()``'s result: snake_case keys; TF.js camelCase keys resolve too."""

    def __missing__(self, key):
        snake = camel_to_snake(key) if isinstance(key, str) else key
        if snake != key and snake in self:
            return self[snake]
        raise KeyError(key)


class Optimizer(CamelCase):
    """Base class of the optimizers. A subclass names its slots (``slot_names``) and
    implements two hooks: ``slot_init(var)``, each slot's initial value, and
    ``update_rule(var, g, slots, lr)``, the new value and new slots, written with flowgrad
    ops. minimize, apply_gradients, clipping, skip_nonfinite, checkpoints, monitors and
    tf.distributed then work as for the built-in ones, whole-or-nothing updates included.

    >>> import flowgrad as tf
    >>> class SignSGD(tf.train.Optimizer):          # steps of size lr, by the gradient's sign
    ...     class_name = "SignSGD"
    ...     def update_rule(self, var, g, slots, lr):
    ...         return var - g.sign() * lr, {}
    >>> w = tf.variable(tf.tensor([1.0, -2.0]), name="w_sign_doc")
    >>> opt = SignSGD(0.25)
    >>> opt.minimize(lambda: (w * w).sum())
    >>> w.array_sync()
    [0.75, -1.75]
    >>> w.dispose(); opt.dispose()
    """
    class_name = "Optimizer"
    slot_names: tuple[str, ...] = ()
    _config_keys: tuple[str, ...] = ("learning_rate",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # TF.js spellings of each class's settings (opt.useNesterov): instance attributes,
        # which CamelCase cannot see on the class
        super().__init_subclass__(**kwargs)
        add_camel_aliases(cls, set(cls._config_keys))

    def __init__(self, learning_rate: LearningRate | None, clip_value: float | None = None,
                 clip_norm: float | None = None, global_clip_norm: float | None = None,
                 **unknown: Any) -> None:
        if unknown:
            raise _unknown_options(type(self), unknown)
        if learning_rate is None:
            raise ArgumentError(f"learning_rate for {self.class_name}Optimizer must be defined.")
        self._learning_rate = _check_lr(learning_rate, self.class_name)
        for name, v in (("clip_value", clip_value), ("clip_norm", clip_norm),
                        ("global_clip_norm", global_clip_norm)):
            if v is not None and not as_number(v, name, f"{self.class_name}Optimizer") > 0:
                raise ArgumentError(f"{name} must be positive, got {v}")
        self.clip_value = clip_value
        self.clip_norm = clip_norm
        self.global_clip_norm = global_clip_norm
        self.iterations = 0
        self.skipped_steps = 0
        # id(variable) -> (weakref to it, {slot name: slot variable}): the slots of a
        # variable disposed or garbage-collected are dropped at the next update
        self.slot_table: dict[int, Any] = {}
        self._disposed = False
        # an observer (tf.debug.GradientMonitor): on_apply(opt, pairs, loss) before each
        # update, on_applied(opt, pairs) after it; None costs nothing
        self.monitor = None

    # ------------------------------------------------------------- learning rate
    @property
    def learning_rate(self) -> LearningRate:
        """The learning rate as given (a number, or a schedule)."""
        return self._learning_rate

    def set_learning_rate(self, learning_rate: LearningRate) -> None:
        """Change the learning rate (a number or a schedule) from the next step on."""
        self._learning_rate = _check_lr(learning_rate, self.class_name)

    def current_learning_rate(self) -> float:
        """The learning rate the next update will use (a schedule evaluated at
        ``iterations``)."""
        lr = self._learning_rate
        return float(lr(self.iterations)) if callable(lr) else lr

    # ------------------------------------------------------------- the TF.js API
    def minimize(self, f: Callable[[], Tensor], return_cost: bool = False,
                 var_list: Sequence[Variable] | None = None, skip_nonfinite: bool = False
                 ) -> Tensor | None:
        """One training step: the gradients of the scalar ``f()`` with respect to the
        trainable variables it uses (or ``var_list``), then an update.

        Returns the cost (before the update) if ``return_cost``, else None.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.scalar(3.0), name="w_min_doc")
        >>> opt = tf.train.sgd(0.1)
        >>> opt.minimize(lambda: w.square(), return_cost=True).item()
        9.0
        >>> round(w.item(), 6)    # 3 - 0.1 * 6
        2.4
        >>> w.dispose(); opt.dispose()
        """
        self.check_alive()
        return_cost = _option(return_cost, "return_cost", self)
        check_var_list(var_list, f"{self.class_name}Optimizer.minimize(f, var_list)")
        for v in var_list or ():
            if getattr(v, "_disposed", False):
                raise update.disposed(self, v)
        if type(self).compute_gradients is Optimizer.compute_gradients:
            # (the pairs directly: no map by name and back, and the gradients and the update
            # in one scope; a subclass's own compute_gradients is still called)
            api = f"{self.class_name}Optimizer.minimize"

            def step():
                value, pairs = variable_pairs_here(f, var_list, api)
                if var_list is not None:
                    got = {id(v): g for v, g in pairs}
                    pairs = [(v, got.get(id(v))) for v in var_list]
                skipped = self.apply_here(pairs, skip_nonfinite, value)
                return (value if return_cost else None), skipped
            value, skipped = scopes.tidy(step)
            if skipped:
                _warn_skipped(skipped)
            return value
        value, grads = self.compute_gradients(f, var_list)
        if var_list is not None:
            pairs = [(v, grads.get(v.name)) for v in var_list]
        else:
            pairs = [(find_variable(name), g) for name, g in grads.items()
                     if find_variable(name) is not None]
        try:
            self.apply_pairs(pairs, skip_nonfinite, value)
        except BaseException:
            value.dispose()
            raise
        finally:
            scopes.dispose([g for _, g in pairs if g is not None])
        if return_cost:
            return value
        value.dispose()
        return None

    def compute_gradients(self, f: Callable[[], Tensor],
                          var_list: Sequence[Variable] | None = None) -> VariableGrads:
        """``variable_grads(f, var_list)``: ``(value, grads)`` with grads keyed by name."""
        self.check_alive()
        check_var_list(var_list, f"{self.class_name}Optimizer.compute_gradients(f, var_list)")
        return variable_grads(f, var_list)

    def apply_gradients(self, grads: Any, skip_nonfinite: bool = False) -> bool:
        """Update variables from gradients given as a mapping (variable name or Variable ->
        gradient), a list of ``(gradient, variable)`` pairs, or TF.js's list of
        ``{"name": ..., "tensor": ...}``. A None gradient skips its variable.

        Returns True if the update was applied (False when ``skip_nonfinite`` skipped it).
        The update is whole or nothing: if it raises (or is interrupted), no variable, slot
        or step count changed. A disposed variable with a gradient is a ``DisposedError``.
        """
        self.check_alive()
        return self.apply_pairs(gradient_pairs(grads), skip_nonfinite)

    def get_weights(self) -> list[Any]:
        """``[("iter", int32 scalar), ("<var>/<slot>", tensor)...]`` as name/tensor
        results, in TF.js's order (slot by slot, variables in order of first update). The
        tensors are copies. Slots of variables disposed (or garbage-collected) since are
        dropped, not listed: the optimizer keeps no state for dead variables."""
        self.check_alive()
        update.prune(self)
        out = [Result(name="iter", tensor=OPS["scalar"](self.iterations, "int32"))]
        entries = [(v, slots) for v, slots in ((r(), sl) for r, sl in self.slot_table.values())
                   if v is not None]
        for slot in self.slot_names:
            for var, slots in entries:
                out.append(Result(name=f"{var.name}/{slot}",
                                  tensor=OPS["tensor"](slots[slot].numpy())))
        return out

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Restore what ``get_weights()`` returned: the first entry is the iteration count,
        the others are matched to slots by their ``<var>/<slot>`` names (of registered
        variables; slots not named keep their values). All or nothing: an entry that does
        not fit raises before anything changes."""
        self.check_alive()
        if not isinstance(weights, (list, tuple)):
            raise ArgumentError(f"{self.class_name}.set_weights() takes the list that "
                                f"get_weights() returns, got {describe(weights)}")
        entries = [named_entry(w) for w in weights]
        if not entries:
            raise ArgumentError("set_weights() needs at least the iteration count")
        name, it = entries[0]
        iterations = as_int(it, "the iteration count (the first entry)",
                            f"{self.class_name}.set_weights()", 0)
        update.prune(self)
        scopes.tidy(lambda: self._set_weights(iterations, entries[1:]))

    def _set_weights(self, iterations, entries):
        plan, values = Plan(self, iterations, counts=False), {}
        for name, t in entries:
            if name is None or "/" not in name:
                raise ArgumentError(f"{self.class_name}.set_weights(): entries after the first "
                                    f"need names '<variable>/<slot>', got {name!r}")
            vname, slot = name.rsplit("/", 1)
            if slot not in self.slot_names:
                raise ArgumentError(f"{self.class_name} has no slot '{slot}' (its slots: "
                                    f"{', '.join(self.slot_names) or 'none'})")
            var = find_variable(vname)
            if var is None:
                raise ArgumentError(f"set_weights(): no variable named '{vname}' is registered")
            # (by id: == on tensors is elementwise; a later entry wins)
            values[(id(var), slot)] = (var, slot, own_copy(t, name, var))
        try:
            for var, slot, value in values.values():
                plan.put(plan.slots(var)[slot], value)
        except BaseException:
            plan.abandon()
            raise
        plan.commit()

    def get_config(self) -> ConfigDict:
        """The constructor's arguments (snake_case keys; camelCase keys resolve too)."""
        cfg = ConfigDict((k, getattr(self, "_learning_rate" if k == "learning_rate" else k))
                         for k in self._config_keys)
        for k in ("clip_value", "clip_norm", "global_clip_norm"):
            if getattr(self, k) is not None:
                cfg[k] = getattr(self, k)
        return cfg

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """A new optimizer of this class from ``get_config()``'s result (TF.js's camelCase
        keys too)."""
        api = f"{cls.__name__}.from_config(config)"
        if not isinstance(config, abc.Mapping):
            raise ArgumentError(f"{api}: config must be a mapping of hyper-parameter names to "
                                f"values (what get_config() returns), got {describe(config)}")
        kwargs = {camel_to_snake(k) if isinstance(k, str) else k: v
                  for k, v in config.items()}
        known = [p.name for p in inspect.signature(cls).parameters.values()
                 if p.kind is not p.VAR_KEYWORD] + list(_CLIP)
        unknown = [k for k in kwargs if k not in known]
        if unknown:
            raise ArgumentError(f"{api}: unknown hyper-parameter(s) {unknown!r}; "
                                f"{cls.__name__} takes {', '.join(dict.fromkeys(known))}")
        return cls(**kwargs)

    def dispose(self) -> None:
        """Free the optimizer's slot variables (a variable's are also freed at the first
        update or get_weights() after that variable is disposed)."""
        for _, slots in self.slot_table.values():
            for s in slots.values():
                s.dispose()
        self.slot_table.clear()
        self._disposed = True

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{self.class_name}({args})"

    # ------------------------------------------------------------- the update protocol
    # What minimize, apply_gradients, tf.distributed's optimizer and checkpoints call, and
    # the two hooks a new optimizer implements (slot_init, update_rule): public, so that
    # the modules around the optimizers read no private names.
    def check_alive(self) -> None:
        """Raise FlowgradError if this optimizer was disposed.

        >>> import flowgrad as tf
        >>> opt = tf.train.sgd(0.1)
        >>> opt.check_alive()           # nothing: it is alive
        >>> opt.dispose()
        """
        if self._disposed:
            raise FlowgradError(f"This {self.class_name} optimizer was disposed.")

    def apply_pairs(self, pairs: Sequence[tuple[Variable, Tensor | None]],
                    skip_nonfinite: bool = False, loss: Tensor | None = None) -> bool:
        """The whole-or-nothing update from ``(variable, gradient)`` pairs, as
        ``update.gradient_pairs`` makes them from apply_gradients' forms (minimize and
        tf.distributed's optimizer hand theirs here); ``loss`` goes to a monitor. Returns
        False when ``skip_nonfinite`` skipped the step.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.scalar(1.0), name="w_pairs_doc")
        >>> opt = tf.train.sgd(0.5)
        >>> opt.apply_pairs([(w, tf.scalar(2.0))]), w.item()
        (True, 0.0)
        >>> w.dispose(); opt.dispose()
        """
        skipped = scopes.tidy(lambda: self.apply_here(pairs, skip_nonfinite, loss))
        if skipped:
            _warn_skipped(skipped)
            return False
        return True

    def apply_here(self, pairs: Sequence[tuple[Variable, Tensor | None]],
                   skip_nonfinite: bool = False, loss: Tensor | None = None) -> str | None:
        """apply_pairs, with the update's intermediates left in the caller's scope; returns
        the warning's text when ``skip_nonfinite`` skipped the step (the caller warns),
        else None.

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.scalar(1.0), name="w_here_doc")
        >>> opt = tf.train.sgd(0.5)
        >>> tf.tidy(lambda: opt.apply_here([(w, tf.scalar(2.0))])), w.item()
        (None, 0.0)
        >>> w.dispose(); opt.dispose()
        """
        skip_nonfinite = _option(skip_nonfinite, "skip_nonfinite", self)
        update.prune(self)
        update.check_targets(self, pairs)
        return update.step(self, pairs, skip_nonfinite, loss, _FUSED.get(type(self)))

    def clip_pairs(self, pairs: list[tuple[Variable, Tensor | None]]
                   ) -> list[tuple[Variable, Tensor | None]]:
        """The pairs with this optimizer's clipping applied (``clip_value``, then
        ``clip_norm`` per gradient, then ``global_clip_norm`` over all of them).

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.scalar(1.0), name="w_clip_doc")
        >>> tf.train.sgd(0.1, clip_value=0.5).clip_pairs([(w, tf.scalar(3.0))])[0][1].item()
        0.5
        >>> w.dispose()
        """
        if self.clip_value is not None:
            c = float(self.clip_value)
            pairs = [(v, g if g is None else g.clip_by_value(-c, c)) for v, g in pairs]
        if self.clip_norm is not None:
            pairs = [(v, g if g is None else clip_by_norm(g, self.clip_norm))
                     for v, g in pairs]
        if self.global_clip_norm is not None:
            gs = [g for _, g in pairs]
            if any(g is not None for g in gs):
                clipped, _ = clip_by_global_norm(gs, self.global_clip_norm)
                pairs = [(v, g) for (v, _), g in zip(pairs, clipped)]
        return pairs

    def slot_init(self, var: Variable) -> dict[str, Tensor]:
        """A new optimizer's hook: the initial value of each of its slots for ``var``
        (``{slot name: tensor}``; none for plain SGD).

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.zeros([2]), name="w_slot_doc")
        >>> sorted(tf.train.adam(0.1).slot_init(w))
        ['m', 'v']
        >>> w.dispose()
        """
        return {}

    def update_rule(self, var: Variable, g: Tensor, slots: dict[str, Tensor],
                    lr: float) -> tuple[Tensor, dict[str, Tensor]]:
        """A new optimizer's hook: ``(new value, {slot name: new value})`` of ``var`` for
        gradient ``g``, computed with flowgrad ops, nothing assigned (the update commits
        every variable and slot at once, or none).

        >>> import flowgrad as tf
        >>> w = tf.variable(tf.scalar(1.0), name="w_rule_doc")
        >>> new, slots = tf.train.sgd(0.5).update_rule(w, tf.scalar(2.0), {}, 0.5)
        >>> new.item(), slots
        (0.0, {})
        >>> w.dispose()
        """
        raise NotImplementedError


# the TF.js spellings of the base's instance attributes (opt.clipNorm, opt.skippedSteps)
add_camel_aliases(Optimizer, {"clip_value", "clip_norm", "global_clip_norm", "skipped_steps",
                              "slot_table", "learning_rate"})


def _warn_skipped(text):
    from .. import user_frames      # (the user's minimize line, at any depth)
    user_frames.warn(text, NonFiniteGradientWarning)


def _check_lr(lr, name):
    if callable(lr):
        return lr
    # (numbers.Real: NumPy's scalars too, np.float32(0.1) as well as 0.1)
    try:
        ok = not isinstance(lr, bool) and isinstance(lr, numbers.Real) and not math.isnan(lr)
    except OverflowError:       # an int no float holds (10**400)
        ok = False
    if not ok:
        raise ArgumentError(f"{name}: learning_rate must be a number or a schedule (a "
                            f"callable of the step), got {describe(lr)}")
    return float(lr)


# ---------------------------------------------------------------- the optimizers

def _eps(epsilon, opt):
    return EPSILON if epsilon is None else _hyper(epsilon, "epsilon", opt)


def _hyper(v, what, opt):
    """A hyperparameter of optimizer ``opt``: a finite number (a one-element tensor too)."""
    return as_number(v, what, f"{opt.class_name}Optimizer", finite=True)


_CLIP = ("clip_value", "clip_norm", "global_clip_norm")   # every optimizer's **clip


def _option(v, what, opt):
    """A bool option of optimizer ``opt``."""
    return flag(v, what, f"{opt.class_name}Optimizer")


class SGDOptimizer(Optimizer):
    """w ← w − lr·g."""
    class_name = "SGD"

    def update_rule(self, var, g, slots, lr):
        return g * -lr + var, {}


class MomentumOptimizer(Optimizer):
    """a ← m·a + g; w ← w − lr·a (Nesterov: w ← w − lr·(g + m·a))."""
    class_name = "Momentum"
    slot_names = ("momentum",)
    _config_keys = ("learning_rate", "momentum", "use_nesterov")

    def __init__(self, learning_rate: LearningRate | None, momentum: float,
                 use_nesterov: bool = False, **clip: float | None) -> None:
        super().__init__(learning_rate, **clip)
        self.momentum = _hyper(momentum, "momentum", self)
        self.use_nesterov = _option(use_nesterov, "use_nesterov", self)

    def set_momentum(self, momentum: float) -> None:
        """Change the momentum from the next step on (TF.js ignores this; flowgrad does
        not)."""
        self.momentum = _hyper(momentum, "momentum", self)

    def slot_init(self, var):
        return {"momentum": OPS["zeros_like"](var)}

    def update_rule(self, var, g, slots, lr):
        new_acc = slots["momentum"] * self.momentum + g
        if self.use_nesterov:
            return (g + new_acc * self.momentum) * -lr + var, {"momentum": new_acc}
        return new_acc * -lr + var, {"momentum": new_acc}


class AdagradOptimizer(Optimizer):
    """A ← A + g²; w ← w − lr·g/√(A + ε)."""
    class_name = "Adagrad"
    slot_names = ("accumulator",)
    _config_keys = ("learning_rate", "initial_accumulator_value")

    def __init__(self, learning_rate: LearningRate | None, initial_accumulator_value: float = 0.1,
                 **clip: float | None) -> None:
        super().__init__(learning_rate, **clip)
        self.initial_accumulator_value = _hyper(initial_accumulator_value,
                                                "initial_accumulator_value", self)

    def slot_init(self, var):
        return {"accumulator": OPS["fill"](var.shape, self.initial_accumulator_value,
                                           var.dtype)}

    def update_rule(self, var, g, slots, lr):
        new_acc = slots["accumulator"] + g.square()
        return (g / (new_acc + EPSILON).sqrt()) * -lr + var, {"accumulator": new_acc}


def _unknown_options(cls, unknown):
    """The error for keyword arguments no constructor of ``cls`` takes, naming the close
    ones it does take (a typo, or TF.js's camelCase spelling of a snake_case option)."""
    import difflib
    known = [p.name for p in inspect.signature(cls).parameters.values()
             if p.kind is not p.VAR_KEYWORD] + list(_CLIP)
    known = list(dict.fromkeys(known))
    hints = []
    for k in unknown:
        close = difflib.get_close_matches(camel_to_snake(k), known, n=1)
        hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ArgumentError(f"{cls.__name__}: unknown option(s) {', '.join(hints)}; it takes "
                         f"{', '.join(known)}")


class AdadeltaOptimizer(Optimizer):
    """TF.js's Adadelta: Δ = √(Ex + ε)/√(Eg + ε)·g with the accumulator Eg of the previous
    step (so the first step is Δ = g); ``use_updated_accumulator=True`` uses this step's Eg
    instead, as the paper (Zeiler 2012), TF-Python and PyTorch do."""
    class_name = "Adadelta"
    slot_names = ("accum_grad", "accum_var")
    _config_keys = ("learning_rate", "rho", "epsilon")

    def __init__(self, learning_rate: LearningRate = 0.001, rho: float = 0.95,
                 epsilon: float | None = None, use_updated_accumulator: bool = False,
                 **clip: float | None) -> None:
        super().__init__(learning_rate, **clip)
        self.rho = _hyper(rho, "rho", self)
        self.epsilon = _eps(epsilon, self)
        self.use_updated_accumulator = _option(use_updated_accumulator,
                                               "use_updated_accumulator", self)

    def get_config(self) -> ConfigDict:
        """TF.js's keys, and ``use_updated_accumulator`` when it is on (flowgrad's).

        >>> import flowgrad as tf
        >>> o = tf.train.adadelta(0.5, use_updated_accumulator=True)
        >>> type(o).from_config(o.get_config()).use_updated_accumulator
        True
        """
        cfg = super().get_config()
        if self.use_updated_accumulator:
            cfg["use_updated_accumulator"] = True
        return cfg

    def slot_init(self, var):
        return {"accum_grad": OPS["zeros_like"](var), "accum_var": OPS["zeros_like"](var)}

    def update_rule(self, var, g, slots, lr):
        eg, ex = slots["accum_grad"], slots["accum_var"]
        rho, eps = self.rho, self.epsilon
        new_eg = eg * rho + g.square() * (1 - rho)
        denom = new_eg if self.use_updated_accumulator else eg
        delta = (ex + eps).sqrt() / (denom + eps).sqrt() * g
        new_ex = ex * rho + delta.square() * (1 - rho)
        return delta * -lr + var, {"accum_grad": new_eg, "accum_var": new_ex}


class AdamOptimizer(Optimizer):
    """m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
    w ← w − lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)."""
    class_name = "Adam"
    slot_names = ("m", "v")
    _config_keys: tuple[str, ...] = ("learning_rate", "beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: LearningRate = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float | None = None, **clip: float | None
                 ) -> None:
        super().__init__(learning_rate, **clip)
        self.beta1 = _hyper(beta1, "beta1", self)
        self.beta2 = _hyper(beta2, "beta2", self)
        self.epsilon = _eps(epsilon, self)

    def slot_init(self, var):
        return {"m": OPS["zeros_like"](var), "v": OPS["zeros_like"](var)}

    def _moments(self, g, slots):
        m, v = slots["m"], slots["v"]
        b1, b2 = self.beta1, self.beta2
        t = self.iterations + 1
        new_m = m * b1 + g * (1 - b1)
        new_v = v * b2 + g.square() * (1 - b2)
        return new_m / (1 - b1 ** t), new_v / (1 - b2 ** t), {"m": new_m, "v": new_v}

    def update_rule(self, var, g, slots, lr):
        m_hat, v_hat, new = self._moments(g, slots)
        return (m_hat / (v_hat.sqrt() + self.epsilon)) * -lr + var, new


class AdamWOptimizer(AdamOptimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter):
    w ← w − lr·(adam step + weight_decay·w)."""
    class_name = "AdamW"
    _config_keys = ("learning_rate", "weight_decay", "beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: LearningRate = 0.001, weight_decay: float = 0.01,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float | None = None,
                 **clip: float | None) -> None:
        super().__init__(learning_rate, beta1, beta2, epsilon, **clip)
        self.weight_decay = _hyper(weight_decay, "weight_decay", self)

    def update_rule(self, var, g, slots, lr):
        m_hat, v_hat, new = self._moments(g, slots)
        step = m_hat / (v_hat.sqrt() + self.epsilon) + var * self.weight_decay
        return step * -lr + var, new


class AdamaxOptimizer(Optimizer):
    """m ← β1·m + (1−β1)·g; u ← max(β2·u, |g|);
    w ← w − lr/(1 + decay·(t−1)) / (1−β1ᵗ) · m/(u + ε)."""
    class_name = "Adamax"
    slot_names = ("m", "u")
    _config_keys = ("learning_rate", "beta1", "beta2", "epsilon", "decay")

    def __init__(self, learning_rate: LearningRate = 0.002, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float | None = None, decay: float = 0.0,
                 **clip: float | None) -> None:
        super().__init__(learning_rate, **clip)
        self.beta1 = _hyper(beta1, "beta1", self)
        self.beta2 = _hyper(beta2, "beta2", self)
        self.epsilon = _eps(epsilon, self)
        self.decay = _hyper(decay, "decay", self)

    def slot_init(self, var):
        return {"m": OPS["zeros_like"](var), "u": OPS["zeros_like"](var)}

    def update_rule(self, var, g, slots, lr):
        m, u = slots["m"], slots["u"]
        t = self.iterations + 1
        step_lr = -lr / (self.iterations * self.decay + 1)
        new_m = m * self.beta1 + g * (1 - self.beta1)
        new_u = (u * self.beta2).maximum(g.abs())
        return ((new_m / (new_u + self.epsilon)) * (step_lr / (1 - self.beta1 ** t)) + var,
                {"m": new_m, "u": new_u})


class RMSPropOptimizer(Optimizer):
    """ms ← ρ·ms + (1−ρ)·g²; mom ← μ·mom + lr·g/√(ms + ε); w ← w − mom.
    Centered: mg ← ρ·mg + (1−ρ)·g and the root is √(ms − (mg² + ε)) (TF.js)."""
    class_name = "RMSProp"
    _config_keys = ("learning_rate", "decay", "momentum", "epsilon", "centered")

    def __init__(self, learning_rate: LearningRate | None, decay: float = 0.9,
                 momentum: float = 0.0, epsilon: float | None = None, centered: bool = False,
                 **clip: float | None) -> None:
        super().__init__(learning_rate, **clip)
        self.decay = _hyper(decay, "decay", self)
        self.momentum = _hyper(momentum, "momentum", self)
        self.epsilon = _eps(epsilon, self)
        self.centered = _option(centered, "centered", self)

    @property
    def slot_names(self) -> tuple[str, ...]:  # type: ignore[override]  # (by centered)
        return ("rms", "momentum", "mg") if self.centered else ("rms", "momentum")

    def slot_init(self, var):
        return {k: OPS["zeros_like"](var) for k in self.slot_names}

    def update_rule(self, var, g, slots, lr):
        rho = self.decay
        ms, mom = slots["rms"], slots["momentum"]
        new_ms = ms * rho + g.square() * (1 - rho)
        new = {"rms": new_ms}
        if self.centered:
            new["mg"] = new_mg = slots["mg"] * rho + g * (1 - rho)
            denom = (new_ms - (new_mg.square() + self.epsilon)).sqrt()
        else:
            denom = (new_ms + self.epsilon).sqrt()
        new["momentum"] = new_mom = mom * self.momentum + (g * lr) / denom
        return var - new_mom, new


# ---------------------------------------------------------------- factories (tf.train.*)

def sgd(learning_rate: LearningRate | None = None, **clip: float | None) -> SGDOptimizer:
    """Plain gradient descent.

    >>> import flowgrad as tf
    >>> tf.train.sgd(0.1).get_config()
    {'learning_rate': 0.1}
    """
    return SGDOptimizer(learning_rate, **clip)


def momentum(learning_rate: LearningRate | None = None, momentum: float | None = None,
             use_nesterov: bool = False, **clip: float | None) -> MomentumOptimizer:
    """Gradient descent with momentum (optionally Nesterov).

    >>> import flowgrad as tf
    >>> tf.train.momentum(0.1, 0.9).get_config()["useNesterov"]
    False
    """
    if momentum is None:
        raise ArgumentError("momentum for MomentumOptimizer must be defined.")
    return MomentumOptimizer(learning_rate, momentum, use_nesterov, **clip)


def adagrad(learning_rate: LearningRate | None = None, initial_accumulator_value: float = 0.1,
            **clip: float | None) -> AdagradOptimizer:
    """Adagrad (ε = 1e-7 inside the root, as TF.js).

    >>> import flowgrad as tf
    >>> tf.train.adagrad(0.1).get_config()
    {'learning_rate': 0.1, 'initial_accumulator_value': 0.1}
    """
    return AdagradOptimizer(learning_rate, initial_accumulator_value, **clip)


def adadelta(learning_rate: LearningRate = 0.001, rho: float = 0.95, epsilon: float | None = None,
             use_updated_accumulator: bool = False, **clip: float | None
             ) -> AdadeltaOptimizer:
    """Adadelta with TF.js's order of updates (see AdadeltaOptimizer for the paper's variant).

    >>> import flowgrad as tf
    >>> tf.train.adadelta().get_config()
    {'learning_rate': 0.001, 'rho': 0.95, 'epsilon': 1e-07}
    """
    return AdadeltaOptimizer(learning_rate, rho, epsilon, use_updated_accumulator, **clip)


def adam(learning_rate: LearningRate = 0.001, beta1: float = 0.9, beta2: float = 0.999,
         epsilon: float | None = None, **clip: float | None) -> AdamOptimizer:
    """Adam with TF.js's bias correction and ε outside the root.

    >>> import flowgrad as tf
    >>> tf.train.adam(0.01).get_config()
    {'learning_rate': 0.01, 'beta1': 0.9, 'beta2': 0.999, 'epsilon': 1e-07}
    """
    return AdamOptimizer(learning_rate, beta1, beta2, epsilon, **clip)


def adamw(learning_rate: LearningRate = 0.001, weight_decay: float = 0.01, beta1: float = 0.9,
          beta2: float = 0.999, epsilon: float | None = None, **clip: float | None
          ) -> AdamWOptimizer:
    """Adam with decoupled weight decay (not in TF.js).

    >>> import flowgrad as tf
    >>> tf.train.adamw(0.01, weight_decay=0.1).get_config()["weight_decay"]
    0.1
    """
    return AdamWOptimizer(learning_rate, weight_decay, beta1, beta2, epsilon, **clip)


def adamax(learning_rate: LearningRate = 0.002, beta1: float = 0.9, beta2: float = 0.999,
           epsilon: float | None = None, decay: float = 0.0, **clip: float | None
           ) -> AdamaxOptimizer:
    """Adamax (Adam with the infinity norm).

    >>> import flowgrad as tf
    >>> tf.train.adamax().get_config()["decay"]
    0.0
    """
    return AdamaxOptimizer(learning_rate, beta1, beta2, epsilon, decay, **clip)


def rmsprop(learning_rate: LearningRate | None = None, decay: float = 0.9, momentum: float = 0.0,
            epsilon: float | None = None, centered: bool = False, **clip: float | None
            ) -> RMSPropOptimizer:
    """RMSProp, plain or centered, with momentum.

    >>> import flowgrad as tf
    >>> tf.train.rmsprop(0.01, centered=True).get_config()["centered"]
    True
    """
    return RMSPropOptimizer(learning_rate, decay, momentum, epsilon, centered, **clip)


_FUSED = {SGDOptimizer: fused.sgd, MomentumOptimizer: fused.momentum,
          AdagradOptimizer: fused.adagrad, AdadeltaOptimizer: fused.adadelta,
          AdamOptimizer: fused.adam, AdamWOptimizer: fused.adamw,
          AdamaxOptimizer: fused.adamax, RMSPropOptimizer: fused.rmsprop}
