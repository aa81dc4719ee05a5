"""Learning-rate schedules: callables ``schedule(step) -> float``, accepted wherever an
optimizer takes a learning rate. ``step`` is the optimizer's ``iterations`` (0 on the first
update)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..arg_checks import as_ints, as_number, describe, flag
from ..errors import ArgumentError


class Schedule:
    """Base class: a learning rate as a function of the step."""

    def __call__(self, step: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _positive(v, what, fn):
    return as_number(v, what, f"{fn}()", finite=True, positive=True)


def _rate(v, what, fn):
    return as_number(v, what, f"{fn}()", finite=True)


def _step(step, schedule):
    """The step a schedule is called with: a finite number (the optimizer's iterations)."""
    if type(step) is int and -2 ** 53 <= step <= 2 ** 53:
        return step
    return as_number(step, "step", f"{type(schedule).__name__}(step)", finite=True)


class ExponentialDecay(Schedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False) -> None:
        fn = "exponential_decay"
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", fn)
        self.decay_steps = _positive(decay_steps, "decay_steps", fn)
        self.decay_rate = _rate(decay_rate, "decay_rate", fn)
        self.staircase = flag(staircase, "staircase", f"{fn}()")

    def __call__(self, step: int) -> float:
        step = _step(step, self)
        p = step / self.decay_steps
        if self.staircase:
            p = math.floor(p)
        try:
            return self.initial_learning_rate * self.decay_rate ** p
        except OverflowError:       # (a step far below 0 with a rate under 1...)
            return self.initial_learning_rate * math.inf


class CosineDecay(Schedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0
                 ) -> None:
        fn = "cosine_decay"
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", fn)
        self.decay_steps = _positive(decay_steps, "decay_steps", fn)
        self.alpha = _rate(alpha, "alpha", fn)

    def __call__(self, step: int) -> float:
        step = _step(step, self)
        p = min(step, self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1 + math.cos(math.pi * p))
        return self.initial_learning_rate * ((1 - self.alpha) * cosine + self.alpha)


class PiecewiseConstant(Schedule):
    def __init__(self, boundaries: Sequence[int], values: Sequence[float]) -> None:
        self.boundaries = list(as_ints(boundaries, "boundaries", "piecewise_constant()"))
        if not isinstance(values, (list, tuple)):
            raise ArgumentError(f"piecewise_constant(): values must be a list of numbers, got "
                                f"{describe(values)}")
        self.values = [_rate(v, f"values[{i}]", "piecewise_constant")
                       for i, v in enumerate(values)]
        if len(self.values) != len(self.boundaries) + 1:
            raise ArgumentError(f"piecewise_constant(): values must have one more entry than "
                                f"boundaries ({len(self.boundaries)} boundaries, "
                                f"{len(self.values)} values)")
        if self.boundaries != sorted(self.boundaries):
            raise ArgumentError("piecewise_constant(): boundaries must be increasing")

    def __call__(self, step: int) -> float:
        step = _step(step, self)
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return v
        return self.values[-1]


class Warmup(Schedule):
    def __init__(self, schedule: float | Callable[[int], float], warmup_steps: int,
                 initial_learning_rate: float = 0.0) -> None:
        self.schedule = schedule if callable(schedule) else _rate(schedule, "schedule", "warmup")
        self.warmup_steps = _positive(warmup_steps, "warmup_steps", "warmup")
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate",
                                           "warmup")

    def __call__(self, step: int) -> float:
        step = _step(step, self)
        target = self.schedule(0) if callable(self.schedule) else float(self.schedule)
        if step < self.warmup_steps:
            frac = step / self.warmup_steps
            return self.initial_learning_rate + (target - self.initial_learning_rate) * frac
        if callable(self.schedule):
            return self.schedule(step - self.warmup_steps)
        return target


def exponential_decay(initial_learning_rate: float, decay_steps: int, decay_rate: float,
                      staircase: bool = False) -> ExponentialDecay:
    """lr · decay_rate^(step / decay_steps) (the exponent floored when ``staircase``).

    >>> import flowgrad as tf
    >>> s = tf.train.exponential_decay(0.1, 10, 0.5)
    >>> s(0), s(10), s(20)
    (0.1, 0.05, 0.025)
    """
    return ExponentialDecay(initial_learning_rate, decay_steps, decay_rate, staircase)


def cosine_decay(initial_learning_rate: float, decay_steps: int, alpha: float = 0.0
                 ) -> CosineDecay:
    """Half a cosine from lr down to alpha·lr over decay_steps, then constant.

    >>> import flowgrad as tf
    >>> s = tf.train.cosine_decay(1.0, 100)
    >>> s(0), s(50), round(s(100), 12)
    (1.0, 0.5, 0.0)
    """
    return CosineDecay(initial_learning_rate, decay_steps, alpha)


def piecewise_constant(boundaries: Sequence[int], values: Sequence[float]
                       ) -> PiecewiseConstant:
    """values[0] up to boundaries[0] (inclusive), values[1] up to boundaries[1], ...

    >>> import flowgrad as tf
    >>> s = tf.train.piecewise_constant([10, 20], [1.0, 0.5, 0.1])
    >>> s(10), s(11), s(99)
    (1.0, 0.5, 0.1)
    """
    return PiecewiseConstant(boundaries, values)


def warmup(schedule: float | Callable[[int], float], warmup_steps: int,
           initial_learning_rate: float = 0.0) -> Warmup:
    """A linear ramp from initial_learning_rate to ``schedule``'s first value over
    warmup_steps, then ``schedule`` (a number or a schedule) starting from its step 0.

    >>> import flowgrad as tf
    >>> s = tf.train.warmup(0.1, 4)
    >>> [round(s(k), 3) for k in range(6)]
    [0.0, 0.025, 0.05, 0.075, 0.1, 0.1]
    """
    return Warmup(schedule, warmup_steps, initial_learning_rate)
