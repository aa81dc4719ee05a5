"""``DistributedOptimizer``: any ``tf.train`` optimizer, with gradients averaged over the
ranks before every update (the Horovod pattern, on MPI's buffer interface).

Design: averaging happens in ``apply_gradients`` (and so in ``minimize``), the one place
every update goes through, so ``compute_gradients`` -> (clip, inspect) -> ``apply_gradients``
averages exactly once and a hand-made ``variable_grads`` result is averaged too.
"""
import time

import numpy as np

from .. import dtypes
from .. import engine as E
from .. import scopes
from ..errors import ArgumentError, ShapeError
from ..gradients import check_var_list
from ..camel_case import camel_to_snake
from ..tensor import convert, registered_variables
from ..train import update
from ..train.optimizers import Optimizer
from ..train.update import gradient_pairs
from .collectives import Bucket, check_agreement, signature
from ..errors import DistributedError
from . import sync
from .runtime import current_job

_SAME_VARS = ("Every rank must train the same variables: build the same model on every rank "
              "(same names, shapes, dtypes; create variables in the same order or name "
              "them), and give minimize() the same var_list everywhere.")


class DistributedOptimizer:
    """Wrap a ``tf.train`` optimizer so each update uses the gradient averaged over all
    ranks: with a loss that is a mean over the rank's shard of a global batch (equal shards),
    every rank takes exactly the step one process would take on the whole batch, and
    ``minimize(return_cost=True)`` returns the whole batch's loss on every rank.

    All gradients (and the loss) travel in one reused flat buffer per dtype: one
    ``Allreduce`` per step. At the first step the ranks check that they train the same
    variables (names, shapes, dtypes) and raise a DistributedError naming the difference.
    A variable with no gradient on a rank counts as a zero gradient there; one with no
    gradient on any rank is skipped, as in one process. Everything else (``get_weights``,
    ``set_weights``, ``iterations``, ``learning_rate``, ``monitor``, ``dispose``...) is the
    wrapped optimizer's. ``comm_seconds`` adds up the time spent packing, reducing and
    unpacking gradients. Size 1: exactly the wrapped optimizer.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.scalar(3.0), name="w_dist_doc")
    >>> opt = tf.distributed.DistributedOptimizer(tf.train.sgd(0.1))
    >>> opt.minimize(lambda: w.square(), return_cost=True).item()
    9.0
    >>> round(w.item(), 6), opt.iterations
    (2.4, 1)
    >>> w.dispose(); opt.dispose()
    """

    def __init__(self, optimizer):
        if isinstance(optimizer, DistributedOptimizer):
            raise ArgumentError("DistributedOptimizer(opt): opt is already distributed; "
                                "wrapping it twice would average twice")
        if not isinstance(optimizer, Optimizer):
            raise ArgumentError(f"DistributedOptimizer(opt): opt must be a tf.train "
                                f"optimizer (tf.train.adam(...), ...), got "
                                f"{type(optimizer).__name__}")
        d = self.__dict__
        d["optimizer"] = optimizer
        d["comm_seconds"] = 0.0
        d["_order"] = None        # variable names agreed at the first step, rank 0's order
        d["_bucket"] = None

    # ------------------------------------------------------------- the optimizer API
    def minimize(self, f, return_cost=False, var_list=None, skip_nonfinite=False):
        """One step: local gradients of ``f()`` (the loss on this rank's shard), averaged
        over the ranks with the loss, then the wrapped optimizer's update. Returns the
        averaged loss if ``return_cost`` (the same value on every rank)."""
        opt = self.optimizer
        opt.check_alive()
        check_var_list(var_list, "DistributedOptimizer.minimize(f, var_list)")
        for v in var_list or ():
            if getattr(v, "_disposed", False):
                raise update.disposed(opt, v)
        value, grads = opt.compute_gradients(f, var_list)
        pairs = avg_pairs = ()
        avg_value = value
        try:
            if var_list is not None:
                pairs = [(v, grads.get(v.name)) for v in var_list]
            else:
                live = registered_variables()
                pairs = [(live[n], g) for n, g in grads.items() if n in live]
            avg_pairs, avg_value = self._average(pairs, value)
            opt.apply_pairs(avg_pairs, skip_nonfinite, avg_value)
        except BaseException:
            scopes.dispose([value, avg_value])
            raise
        finally:
            # the gradients, local and averaged, are this step's own: freed on any exit
            scopes.dispose(list(grads.values()))
            scopes.dispose([g for _, g in avg_pairs if g is not None])
        if avg_value is not value:
            value.dispose()
        if return_cost:
            return avg_value
        avg_value.dispose()
        return None

    def compute_gradients(self, f, var_list=None):
        """This rank's own ``(value, grads)`` (not averaged: ``apply_gradients`` averages;
        use ``tf.distributed.all_reduce(value)`` for the global loss)."""
        return self.optimizer.compute_gradients(f, var_list)

    def apply_gradients(self, grads, skip_nonfinite=False):
        """Average ``grads`` (any form the wrapped optimizer accepts) over the ranks, then
        apply them. Returns True if the update was applied."""
        local = gradient_pairs(grads)
        for v, g in local:
            if g is not None and getattr(v, "_disposed", False):
                raise update.disposed(self.optimizer, v)     # before any rank averages
        pairs, _ = self._average(local, None)
        try:
            return self.optimizer.apply_pairs(pairs, skip_nonfinite)
        finally:
            scopes.dispose([g for _, g in pairs if g is not None])

    # ------------------------------------------------------------- averaging
    def _average(self, pairs, loss):
        s = current_job()
        if s.size == 1:
            return pairs, loss
        t0 = time.perf_counter()
        if self._order is None:
            self._agree([v for v, _ in pairs])
        order, bucket, known = self._order, self._bucket, self._known
        local = {}
        for v, g in pairs:
            if v.name not in known:
                raise DistributedError(
                    f"variable '{v.name}' {tuple(v.shape)} has a gradient at step "
                    f"{self.optimizer.iterations + 1} but was not among the "
                    f"{len(order)} variables the ranks agreed on at the first step. "
                    f"Create every variable before the first step, or pass the same "
                    f"var_list to every minimize() call.")
            if g is not None:
                a = E.to_host(convert(g, "gradient", "apply_gradients")._array())
                if a.shape != tuple(v.shape):
                    try:
                        a = np.broadcast_to(a, v.shape)
                    except ValueError:
                        raise ShapeError(f"apply_gradients(): the gradient of '{v.name}' has "
                                         f"shape {a.shape}, which does not fit the "
                                         f"variable's shape {tuple(v.shape)}") from None
                local[v.name] = a
        n = len(order)
        flags = np.array([1.0 if name in local else 0.0 for name in order])
        arrays = [local.get(name) for name in order] + [flags]
        arrays.append(np.asarray(E.to_host(loss._array())) if loss is not None else np.zeros(()))
        step = self.optimizer.iterations + 1
        sync.enter(sync.GRADIENTS, lambda: f"the gradient all-reduce of DistributedOptimizer "
                   f"step {step} ({n} variables, {bucket.values - n - 1} values)",
                   values=bucket.values, layout=bucket.code, step=step)
        bucket.pack(arrays)
        bucket.reduce(s, s.MPI.SUM)
        out = bucket.unpack(1.0 / s.size)
        present = out[n] > 0
        avg = []
        for i, name in enumerate(order):
            var = self._vars[i]
            avg.append((var, E.make_tensor(E.from_host(out[i])) if present[i] else None))
        if loss is not None:
            avg_loss = E.make_tensor(E.from_host(np.asarray(out[n + 1],
                                                             dtype=dtypes.NP[loss.dtype])))
        else:
            avg_loss = None
        self.__dict__["comm_seconds"] += time.perf_counter() - t0
        return avg, avg_loss

    def _agree(self, variables):
        order = check_agreement(signature(variables), "the variables to train "
                                "(checked at the first step)", _SAME_VARS)
        by_name = {v.name: v for v in variables}
        vars_ = [by_name[n] for n in order]
        layout = [(v.shape, _grad_dtype(v)) for v in vars_]
        main = layout[0][1] if layout else np.dtype(np.float32)
        layout += [((len(vars_),), main), ((), main)]      # presence flags, then the loss
        d = self.__dict__
        d["_order"], d["_vars"], d["_bucket"] = order, vars_, Bucket(layout)
        d["_known"] = set(order)

    # ------------------------------------------------------------- delegation
    def __getattr__(self, name):
        if "optimizer" not in self.__dict__ or name.startswith("__"):
            raise AttributeError(name)           # copy/pickle probing a bare instance
        snake = camel_to_snake(name)
        if snake != name and hasattr(type(self), snake):
            return getattr(self, snake)          # applyGradients -> ours, not the inner one
        return getattr(self.__dict__["optimizer"], name)

    def __setattr__(self, name, value):
        if name in self.__dict__ or name in type(self).__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.optimizer, name, value)     # monitor, iterations, clip_norm...

    def __repr__(self):
        return f"DistributedOptimizer({self.optimizer!r})"


def _grad_dtype(v):
    return np.dtype(dtypes.NP[v.dtype if dtypes.is_float(v.dtype) else dtypes.float32])
