"""The loss around the current weights: ``loss_landscape`` evaluates ``loss_fn()`` at
θ + α·d (and + β·e in 2-D) along random directions, scaled filter by filter to the weights
(Li et al., "Visualizing the Loss Landscape of Neural Nets", 2018), or along directions the
caller gives (the gradient, the top Hessian eigenvector, the last update...).

A sharp valley (the loss rising fast within a fraction of the weights' own size), a
non-convex slice, or a minimum off to one side are read at a glance on ``.plot()``.

The variables are assigned the perturbed values one point at a time and given back their
own values (bitwise) when it ends, however it ends; no optimizer is touched.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import scopes
from ..arg_checks import as_int, as_number, choice, describe
from ..errors import ArgumentError, GradientError, ShapeError
from ..tensor import Tensor, Variable
from .curvature import check_loss_fn, count, rng_of
from .plots import figure, save_figure


@dataclass
class LossLandscape:
    """``loss_landscape``'s answer: ``alphas`` (and ``betas`` in 2-D, else None), ``losses``
    (``[steps]``, or ``[steps, steps]`` with ``losses[i, j]`` at alphas[i], betas[j]),
    ``directions`` (each a list of arrays, one per variable of ``variables``), and
    ``origin`` (the loss at the current weights)."""
    alphas: np.ndarray
    betas: np.ndarray | None
    losses: np.ndarray
    directions: list
    variables: list
    origin: float
    normalize: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def dims(self) -> int:
        return 1 if self.betas is None else 2

    def plot(self, path=None, levels: int = 30):
        """The slice: a line in 1-D, filled contours (``levels`` of them) in 2-D, the
        current weights marked; a matplotlib Figure, saved when given a ``path`` (.png,
        .svg or .pdf)."""
        levels = count(levels, "levels", "LossLandscape.plot()", 2, 1_000)
        fig, ax = figure((6.0, 3.6) if self.dims == 1 else (5.6, 4.6), path,
                         "LossLandscape.plot(path)")
        how = {"filter": "filter-normalised", "layer": "layer-normalised"}.get(
            self.normalize, "given" if self.normalize == "given" else "unnormalised")
        if self.dims == 1:
            ax.plot(self.alphas, self.losses, color="C0", lw=1.5)
            ax.plot([0.0], [self.origin], "o", color="C3", ms=5)
            ax.set_xlabel(f"α ({how} direction)")
            ax.set_ylabel("loss")
        else:
            finite = np.where(np.isfinite(self.losses), self.losses, np.nan)
            cs = ax.contourf(self.alphas, self.betas, finite.T, levels=levels, cmap="viridis")
            fig.colorbar(cs, ax=ax, label="loss")
            ax.plot([0.0], [0.0], "x", color="white", ms=8)
            ax.set_xlabel("α")
            ax.set_ylabel("β")
        ax.set_title(f"Loss landscape ({how} directions)")
        ax.grid(True, alpha=0.3)
        return save_figure(fig, path)


def _variables(loss_fn, var_list, api):
    from ..gradients import check_var_list, variable_pairs
    check_var_list(var_list, api)
    if var_list is not None:
        if not var_list:
            raise ArgumentError(f"{api}: var_list is empty; give the variables to move, or "
                                f"None for the trainable variables the loss reaches")
        return list(var_list)
    return scopes.tidy(lambda: [v for v, g in variable_pairs(loss_fn, None, api)[1]
                                if g is not None])


def _random_direction(variables, normalize, rng):
    out = []
    for v in variables:
        theta = np.asarray(v.numpy(), dtype=np.float64)
        d = rng.standard_normal(theta.shape)
        if normalize is not None and theta.ndim <= 1:
            d = np.zeros_like(theta)        # biases and other vectors: Li et al. leave them
        elif normalize == "filter":
            # one filter per output unit: the last axis of a dense weight ([in, out]) or of
            # a conv filter ([h, w, in, out])
            axes = tuple(range(theta.ndim - 1))
            dn = np.sqrt(np.sum(d * d, axis=axes, keepdims=True))
            tn = np.sqrt(np.sum(theta * theta, axis=axes, keepdims=True))
            d = d * np.divide(tn, dn, out=np.zeros_like(tn), where=dn > 0)
        elif normalize == "layer":
            dn, tn = np.linalg.norm(d), np.linalg.norm(theta)
            d = d * (tn / dn if dn > 0 else 0.0)
        out.append(d)
    return out


def _given_direction(d, variables, i, api):
    names = [v.name for v in variables]
    if isinstance(d, dict):
        keyed = {(k.name if isinstance(k, Variable) else k): a for k, a in d.items()}
        unknown = sorted(set(keyed) - set(names), key=str)
        if unknown:
            raise ArgumentError(f"{api}: directions[{i}] names {unknown}, which are not among "
                                f"the variables moved ({names})")
        d = [keyed.get(n) for n in names]
    if not isinstance(d, (list, tuple)) or len(d) != len(variables):
        raise ArgumentError(f"{api}: directions[{i}] must be a list with one array per "
                            f"variable ({len(variables)}: {names}) or a dict by variable name, "
                            f"got {describe(d)}")
    out = []
    for v, a in zip(variables, d):
        if a is None:
            out.append(np.zeros(v.shape))
            continue
        a = np.asarray(a.numpy() if isinstance(a, Tensor) else a, dtype=np.float64)
        if a.shape != tuple(v.shape):
            raise ShapeError(f"{api}: directions[{i}] has shape {a.shape} for the variable "
                             f"'{v.name}' of shape {tuple(v.shape)}")
        if not np.all(np.isfinite(a)):
            raise ArgumentError(f"{api}: directions[{i}] for '{v.name}' has NaN or Inf")
        out.append(a)
    return out


def loss_landscape(loss_fn: Callable[[], Tensor], var_list: Sequence[Variable] | None = None,
                   dims: int = 1, steps: int = 51, span: float = 1.0,
                   normalize: str | None = "filter", directions: Sequence | None = None,
                   seed: int | None = None) -> LossLandscape:
    """``loss_fn()`` (no arguments, as minimize's) along a line or over a plane through the
    current weights of ``var_list`` (default: the trainable variables the loss reaches):
    at θ + α·d for ``steps`` values of α in [−span, span] (``dims=1``), or at θ + α·d + β·e
    on a ``steps`` × ``steps`` grid (``dims=2``).

    Directions: ``directions`` (``dims`` of them, each a list of arrays, one per variable,
    or a dict by variable name; used as given), else random Gaussian ones, scaled by
    ``normalize``: ``"filter"`` (Li et al. 2018: each filter, a slice along a weight's last
    axis, gets its weights' norm; 1-D variables such as biases do not move), ``"layer"``
    (each variable as a whole), or None (as drawn, every variable moving). ``seed`` makes
    them reproducible.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([[1.0], [2.0]]), name="w_ll_doc")
    >>> ls = tf.debug.loss_landscape(lambda: (w * w).sum(), steps=3,
    ...                              directions=[[np.array([[1.0], [0.0]])]])
    >>> ls.alphas.tolist(), ls.losses.tolist()          # (1 + α)² + 4
    ([-1.0, 0.0, 1.0], [4.0, 5.0, 8.0])
    >>> w.numpy().tolist()                              # the weights are as they were
    [[1.0], [2.0]]
    >>> w.dispose()
    """
    api = "loss_landscape(loss_fn)"
    check_loss_fn(loss_fn, api)
    dims = as_int(dims, "dims", api, minimum=1)
    if dims > 2:
        raise ArgumentError(f"{api}: dims must be 1 (a line) or 2 (a plane), got {dims}")
    steps = count(steps, "steps", api, 2, 100_000 if dims == 1 else 1_000)
    span = as_number(span, "span", api, finite=True, positive=True)
    if normalize is not None:
        choice(normalize, "normalize", api, ("filter", "layer"),
               f"{api}: normalize must be 'filter', 'layer' or None, got {describe(normalize)}")
    rng = rng_of(seed, api)
    variables = _variables(loss_fn, var_list, api)
    if directions is not None:
        if not isinstance(directions, (list, tuple)) or len(directions) != dims:
            raise ArgumentError(f"{api}: directions must be a list of {dims} direction"
                                f"{'s' if dims > 1 else ''} (each a list of arrays, one per "
                                f"variable), got {describe(directions)}")
        dirs = [_given_direction(d, variables, i, api) for i, d in enumerate(directions)]
    else:
        dirs = [_random_direction(variables, normalize, rng) for _ in range(dims)]
    alphas = np.linspace(-span, span, steps)
    betas = alphas.copy() if dims == 2 else None
    saved = [np.array(v.numpy(), copy=True) for v in variables]
    originals = [np.asarray(s, dtype=np.float64) for s in saved]

    def evaluate():
        y = loss_fn()
        if not isinstance(y, Tensor) or y.size != 1:
            raise GradientError(f"{api}: loss_fn must return the loss, a scalar tensor, got "
                                f"{getattr(y, 'shape', describe(y))}")
        return float(y.item())

    def at(coefs):
        for v, theta, *ds in zip(variables, originals, *dirs):
            new = theta.copy()
            for c, d in zip(coefs, ds):
                new += c * d
            v.assign(_tensor(new, v.dtype))
        return scopes.tidy(evaluate)

    try:
        origin = scopes.tidy(evaluate)
        if dims == 1:
            losses = np.array([at((a,)) for a in alphas])
        else:
            losses = np.array([[at((a, b)) for b in betas] for a in alphas])
    finally:
        for v, s in zip(variables, saved):
            v.assign(_tensor(s, v.dtype))
    return LossLandscape(alphas=alphas, betas=betas, losses=losses, directions=dirs,
                         variables=[v.name for v in variables], origin=origin,
                         normalize="given" if directions is not None else normalize)


def _tensor(a, dtype):
    from ..ops import OPS
    return OPS["tensor"](np.asarray(a).astype(str(dtype), copy=False), None, dtype)
