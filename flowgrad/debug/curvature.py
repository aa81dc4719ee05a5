"""The curvature of the loss at the current weights, from Hessian-vector products only (the
Hessian itself is never formed): its largest eigenvalues (``hessian_eigenvalues``), its
trace (``hessian_trace``, Hutchinson) and the density of its spectrum (``hessian_spectrum``,
stochastic Lanczos quadrature), as PyHessian (Yao et al., 2020) and Cockpit report them.

λ_max decides stability: plain gradient descent with learning rate lr diverges along the
top eigenvector once lr·λ_max > 2. Negative eigenvalues say the point is not a minimum.

Each function records ``loss_fn()`` and its gradient once (a persistent tape), then runs one
backward pass through that recording per product ``H·v``: ``∂⟨∇L, v⟩/∂θ``. Nothing here
assigns a variable or touches an optimizer. The iterations run in float64 NumPy on the
flattened variables; the products run in the variables' own dtype.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from .. import scopes
from ..arg_checks import as_int, as_number, check_arity, describe, flag
from ..errors import ArgumentError, GradientError
from ..tensor import Tensor, Variable
from .plots import figure, save_figure



# ---------------------------------------------------------------- the Hessian as an operator

def check_loss_fn(loss_fn, api):
    if not callable(loss_fn):
        raise ArgumentError(f"{api}: loss_fn must be a function of no arguments that returns "
                            f"the loss (as minimize's), got {describe(loss_fn)}")
    check_arity(loss_fn, 0, api)


def count(v, what, api, minimum, limit):
    """An int argument in [minimum, limit] (a count that sizes arrays or loops)."""
    v = as_int(v, what, api, minimum=minimum)
    if v > limit:
        raise ArgumentError(f"{api}: {what} must be at most {limit}, got {v}")
    return v


def rng_of(seed, api):
    """A NumPy generator from ``seed`` (None: fresh entropy; an int: reproducible)."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(as_int(seed, "seed", api, minimum=0))


class HessianOperator:
    """``H·v`` for the Hessian of ``loss_fn()`` with respect to ``variables``, on flat
    float64 vectors (the variables' values end to end, in order). Records the loss and its
    gradient once; use inside a ``tidy`` and ``close()`` it (it holds the recording).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 2.0]), name="w_hop_doc")
    >>> def products(op):
    ...     try:
    ...         return op.matvec(np.array([1.0, 1.0])).tolist()
    ...     finally:
    ...         op.close()
    >>> tf.tidy(lambda: products(HessianOperator(lambda: (w ** 3).sum(), None, "doc")))
    [6.0, 12.0]
    >>> w.dispose()
    """

    def __init__(self, loss_fn: Callable[[], Tensor], var_list: Sequence[Variable] | None,
                 api: str) -> None:
        from ..gradients import GradientTape, check_var_list
        from ..ops import OPS
        from ..tensor import all_variables
        check_loss_fn(loss_fn, api)
        check_var_list(var_list, api)
        explicit = var_list is not None
        cands = list(var_list) if explicit else [v for v in all_variables() if v.trainable]
        tape = GradientTape(persistent=True, watch_accessed_variables=not explicit)
        self._tape = tape
        try:
            with tape:
                with GradientTape(watch_accessed_variables=not explicit) as inner:
                    if explicit:
                        tape.watch(cands)
                        inner.watch(cands)
                    loss = loss_fn()
                if not isinstance(loss, Tensor) or loss.size != 1:
                    raise GradientError(f"{api}: loss_fn must return the loss, a scalar "
                                        f"tensor, got {getattr(loss, 'shape', describe(loss))}")
                if not cands:
                    raise GradientError(f"{api}: there is no trainable variable: create the "
                                        f"parameters with tf.variable(...)")
                grads = inner.gradient(loss, cands)
                pairs = [(v, g) for v, g in zip(cands, grads) if g is not None or explicit]
                if not pairs or all(g is None for _, g in pairs):
                    raise GradientError(f"{api}: the loss reaches none of the variables "
                                        f"{[v.name for v in cands][:8]}: compute it from them "
                                        f"inside loss_fn")
                wide = len({v.dtype for v, _ in pairs}) > 1
                parts = []
                for v, g in pairs:
                    if g is None:
                        g = OPS["fill"](v.shape, 0, v.dtype)
                    g = g.reshape([-1])
                    parts.append(g.cast("float64") if wide else g)
                flat = parts[0] if len(parts) == 1 else OPS["concat"](parts, 0)
        except BaseException:
            tape.reset()
            raise
        self.variables = [v for v, _ in pairs]
        self.names = [v.name for v in self.variables]
        self.shapes = [tuple(v.shape) for v in self.variables]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.size = int(sum(self.sizes))
        self.loss = float(loss.item())
        self._flat = flat
        self.products = 0

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """H·v (float64, flat)."""
        from ..ops import OPS

        def run():
            vt = OPS["tensor"](np.asarray(v, dtype=np.float64), None, self._flat.dtype)
            hs = self._tape.gradient(self._flat, self.variables, output_gradients=vt,
                                     unconnected_gradients="zero")
            return np.concatenate([np.asarray(h.numpy(), dtype=np.float64).reshape(-1)
                                   for h in hs])
        self.products += 1
        return scopes.tidy(run)

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """A flat vector as one array per variable (each of its variable's shape)."""
        out, at = [], 0
        for shape, n in zip(self.shapes, self.sizes):
            out.append(np.asarray(flat[at:at + n]).reshape(shape))
            at += n
        return out

    def close(self) -> None:
        self._tape.reset()


def _with_operator(loss_fn, var_list, api, body):
    def run():
        op = HessianOperator(loss_fn, var_list, api)
        try:
            return body(op)
        finally:
            op.close()
    return scopes.tidy(run)


# ---------------------------------------------------------------- Lanczos

def lanczos(matvec: Callable[[np.ndarray], np.ndarray], q: np.ndarray, steps: int,
            rng: np.random.Generator | None = None,
            stop: Callable[[list, list], bool] | None = None):
    """``steps`` Lanczos steps from ``q`` with full reorthogonalisation (twice, against
    every earlier vector: in floating point Lanczos vectors lose orthogonality once a Ritz
    value converges, and ghost copies of it appear). Returns ``(alphas, betas, Q)``: the
    tridiagonal's diagonal and off-diagonal (``betas[-1]`` is the last residual's norm) and
    the vectors as rows. When the Krylov space closes (an invariant subspace) it restarts
    from a random vector orthogonal to all before if ``rng`` is given (its β is 0), else it
    stops. ``stop(alphas, betas)`` may end it early.

    >>> a, b, Q = lanczos(lambda v: np.array([2.0, 3.0]) * v, np.array([1.0, 1.0]), 2)
    >>> np.linalg.eigvalsh(np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1)).round(6)
    array([2., 3.])
    """
    n = q.size
    steps = min(steps, n)
    Q = np.zeros((steps, n))
    alphas, betas = [], []
    q = q / np.linalg.norm(q)
    for j in range(steps):
        Q[j] = q
        w = matvec(q)
        a = float(q @ w)
        w = w - a * q
        if j:
            w = w - betas[-1] * Q[j - 1]
        for _ in range(2):
            w = w - Q[:j + 1].T @ (Q[:j + 1] @ w)
        b = float(np.linalg.norm(w))
        alphas.append(a)
        scale = max(abs(x) for x in alphas) + (max(betas) if betas else 0.0)
        closed = b <= 1e-10 * max(scale, 1e-300)
        betas.append(0.0 if closed else b)
        if j + 1 == steps or (stop is not None and stop(alphas, betas)):
            break
        if closed:
            if rng is None:
                break
            w = rng.standard_normal(n)
            for _ in range(2):
                w = w - Q[:j + 1].T @ (Q[:j + 1] @ w)
        q = w / np.linalg.norm(w)
    m = len(alphas)
    return np.array(alphas), np.array(betas), Q[:m]


def _tridiagonal(alphas, betas):
    off = np.asarray(betas[:len(alphas) - 1])
    return np.diag(alphas) + np.diag(off, 1) + np.diag(off, -1)


# ---------------------------------------------------------------- λ_max

@dataclass
class HessianEigen:
    """``hessian_eigenvalues``' answer: ``values`` (largest magnitude first), ``vectors``
    (for each value, one array per variable, of its shape; unit norm over all of them),
    ``variables`` (their names), ``residuals`` (‖H x − λ x‖ of each), ``iterations`` (the
    Hessian-vector products used), ``converged``."""
    values: np.ndarray
    vectors: list
    variables: list
    residuals: np.ndarray
    iterations: int
    converged: bool

    def __str__(self):
        vals = ", ".join(f"{v:.6g}" for v in self.values)
        return (f"HessianEigen([{vals}], {self.iterations} Hessian-vector products"
                f"{'' if self.converged else ', NOT converged'})")


def hessian_eigenvalues(loss_fn: Callable[[], Tensor],
                        var_list: Sequence[Variable] | None = None, k: int = 1,
                        max_iter: int = 100, tol: float = 1e-3,
                        seed: int | None = None) -> HessianEigen:
    """The ``k`` eigenvalues of largest magnitude of the Hessian of ``loss_fn()`` (no
    arguments, as minimize's) with respect to ``var_list`` (default: the trainable
    variables the loss reaches), and their eigenvectors: Lanczos with full
    reorthogonalisation on Hessian-vector products, stopped when each of the k has a
    residual ‖H x − λ x‖ below ``tol``·|λ| (or after ``max_iter`` products; ``converged``
    says which). Exact once the iterations reach the number of parameters.

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 1.0, 1.0]), name="w_he_doc")
    >>> e = tf.debug.hessian_eigenvalues(lambda: (tf.tensor([1.0, -5.0, 2.0]) * w * w).sum(),
    ...                                  k=2, seed=0)
    >>> e.values.round(6).tolist()                    # 2·diag: largest magnitude first
    [-10.0, 4.0]
    >>> np.abs(e.vectors[0][0]).round(6).tolist()
    [0.0, 1.0, 0.0]
    >>> w.dispose()
    """
    api = "hessian_eigenvalues(loss_fn)"
    k = as_int(k, "k", api, minimum=1)
    max_iter = as_int(max_iter, "max_iter", api, minimum=1)
    tol = as_number(tol, "tol", api, finite=True, minimum=0)
    rng = rng_of(seed, api)

    def body(op):
        n = op.size
        if k > n:
            raise ArgumentError(f"{api}: k={k} eigenvalues asked of a Hessian of {n} "
                                f"parameters; k can be at most {n}")

        def top(alphas, betas):
            theta, y = np.linalg.eigh(_tridiagonal(alphas, betas))
            order = np.argsort(-np.abs(theta), kind="stable")[:k]
            res = np.abs(betas[-1] * y[-1, order])
            return theta, y, order, res

        def stop(alphas, betas):
            if len(alphas) < k:
                return False
            theta, _, order, res = top(alphas, betas)
            scale = np.maximum(np.abs(theta[order]), 1e-12 * max(np.abs(theta).max(), 1e-300))
            return bool(np.all(res <= tol * scale))

        alphas, betas, Q = lanczos(op.matvec, rng.standard_normal(n), max(max_iter, k), rng,
                                   stop)
        theta, y, order, res = top(alphas, betas)
        scale = np.maximum(np.abs(theta[order]), 1e-12 * max(np.abs(theta).max(), 1e-300))
        vecs = (Q.T @ y[:, order]).T
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return HessianEigen(values=theta[order].copy(), vectors=[op.split(v) for v in vecs],
                            variables=list(op.names), residuals=res,
                            iterations=op.products,
                            converged=bool(len(alphas) == n or np.all(res <= tol * scale)))
    return _with_operator(loss_fn, var_list, api, body)


# ---------------------------------------------------------------- the trace

@dataclass
class HessianTrace:
    """``hessian_trace``'s answer: ``value`` (the estimate of tr H), ``per_variable``
    (name -> the estimate of its diagonal block's trace), ``std_error`` (of the mean),
    ``samples`` (each probe's zᵀHz), ``iterations`` (probes), ``converged``."""
    value: float
    per_variable: dict
    std_error: float
    samples: np.ndarray
    iterations: int
    converged: bool

    def __str__(self):
        return (f"HessianTrace({self.value:.6g} ± {self.std_error:.2g}, {self.iterations} "
                f"probes{'' if self.converged else ', NOT converged'})")


def hessian_trace(loss_fn: Callable[[], Tensor], var_list: Sequence[Variable] | None = None,
                  max_iter: int = 100, tol: float = 1e-3,
                  seed: int | None = None) -> HessianTrace:
    """The trace of the Hessian of ``loss_fn()`` (as in hessian_eigenvalues), by
    Hutchinson's estimator: the mean of zᵀHz over Rademacher probes z (entries ±1), which
    is exact for a diagonal Hessian from one probe (each is Σ H_ii z_i² = tr H). Stops when
    the standard error of the mean falls below ``tol``·|mean| (at least 2 probes), or after
    ``max_iter``. ``per_variable`` estimates each variable's diagonal block with the same
    probes (they sum to ``value``).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 2.0]), name="w_ht_doc")
    >>> t = tf.debug.hessian_trace(lambda: (w ** 3).sum(), seed=0)
    >>> round(t.value, 6), t.iterations              # 6·1 + 6·2, diagonal: exact
    (18.0, 2)
    >>> w.dispose()
    """
    api = "hessian_trace(loss_fn)"
    max_iter = as_int(max_iter, "max_iter", api, minimum=1)
    tol = as_number(tol, "tol", api, finite=True, minimum=0)
    rng = rng_of(seed, api)

    def body(op):
        samples, blocks = [], []
        bounds = np.cumsum([0] + op.sizes)
        done = False
        for _ in range(max_iter):
            z = rng.integers(0, 2, op.size) * 2.0 - 1.0
            zhz = z * op.matvec(z)
            samples.append(float(zhz.sum()))
            blocks.append([float(zhz[a:b].sum()) for a, b in pairwise(bounds)])
            if len(samples) >= 2:
                se = np.std(samples, ddof=1) / math.sqrt(len(samples))
                if se <= tol * abs(np.mean(samples)):
                    done = True
                    break
        s = np.array(samples)
        se = float(np.std(s, ddof=1) / math.sqrt(s.size)) if s.size > 1 else math.nan
        per = dict(zip(op.names, np.mean(blocks, axis=0).tolist()))
        return HessianTrace(value=float(s.mean()), per_variable=per, std_error=se,
                            samples=s, iterations=int(s.size), converged=done)
    return _with_operator(loss_fn, var_list, api, body)


# ---------------------------------------------------------------- the spectral density

@dataclass
class HessianSpectrum:
    """``hessian_spectrum``'s answer: ``nodes`` and ``weights`` (``[runs, iters]``: each
    run's Ritz values and the squared first components of their eigenvectors, which sum to
    1; a run whose Krylov space closed early pads with weight 0), ``size`` (parameters),
    ``variables``. ``density()`` smooths them, ``moment(p)`` estimates tr(Hᵖ)/size,
    ``plot()`` draws the density."""
    nodes: np.ndarray
    weights: np.ndarray
    size: int
    variables: list = field(default_factory=list)

    def moment(self, p: int) -> float:
        """The mean over runs of Σ_j τ_j θ_jᵖ: an estimate of tr(Hᵖ) / size (exact in
        each run for p < 2·iters on vᵀHᵖv, v its start vector).

        >>> HessianSpectrum(np.array([[1.0, 3.0]]), np.array([[0.5, 0.5]]), 2).moment(2)
        5.0
        """
        p = count(p, "p", "HessianSpectrum.moment(p)", 0, 10_000)
        return float(np.mean(np.sum(self.weights * self.nodes ** p, axis=1)))

    def density(self, grid: np.ndarray | None = None, sigma: float | None = None,
                points: int = 512) -> tuple[np.ndarray, np.ndarray]:
        """``(grid, density)``: the spectrum smoothed by a Gaussian of width ``sigma``
        (default: 1% of the nodes' range), averaged over runs; it integrates to 1. The grid
        defaults to ``points`` values spanning the nodes ± 5σ.

        >>> s = HessianSpectrum(np.array([[0.0, 1.0]]), np.array([[0.5, 0.5]]), 2)
        >>> x, d = s.density(sigma=0.1)
        >>> round(float(np.sum(d) * (x[1] - x[0])), 3)
        1.0
        """
        used = self.nodes[self.weights > 0]
        lo, hi = (float(used.min()), float(used.max())) if used.size else (0.0, 0.0)
        if sigma is None:
            sigma = 0.01 * (hi - lo) if hi > lo else max(1e-3 * abs(hi), 1e-6)
        sigma = as_number(sigma, "sigma", "HessianSpectrum.density()", finite=True,
                          positive=True)
        if grid is None:
            points = count(points, "points", "HessianSpectrum.density()", 2, 10_000_000)
            grid = np.linspace(lo - 5 * sigma, hi + 5 * sigma, points)
        else:
            grid = _grid(grid)
        z = (grid[:, None, None] - self.nodes[None]) / sigma
        dens = np.sum(self.weights[None] * np.exp(-0.5 * z * z), axis=2).mean(axis=1)
        return grid, dens / (sigma * math.sqrt(2 * math.pi))

    def plot(self, path=None, log: bool = True):
        """The smoothed density (log scale unless ``log=False``) with the nodes as ticks; a
        matplotlib Figure, saved when given a ``path`` (.png, .svg or .pdf)."""
        log = flag(log, "log", "HessianSpectrum.plot()")
        fig, ax = figure((6.5, 3.6), path, "HessianSpectrum.plot(path)")
        x, d = self.density()
        ax.plot(x, np.maximum(d, 1e-12) if log else d, color="C0", lw=1.5)
        ax.plot(self.nodes[self.weights > 0], np.full(int((self.weights > 0).sum()),
                1e-12 if log else 0.0), "|", color="C3", ms=8)
        if log:
            ax.set_yscale("log")
            ax.set_ylim(max(1e-8, float(d.max()) * 1e-8), float(d.max()) * 3)
        ax.set_xlabel("eigenvalue")
        ax.set_ylabel("density")
        ax.set_title(f"Hessian spectrum ({self.size} parameters, {self.nodes.shape[0]} "
                     f"run{'s' if self.nodes.shape[0] != 1 else ''})")
        ax.grid(True, alpha=0.3)
        return save_figure(fig, path)


def _grid(grid):
    try:
        g = np.asarray(grid.numpy() if isinstance(grid, Tensor) else grid, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        g = None
    if g is None or g.ndim != 1 or g.size == 0 or not np.all(np.isfinite(g)):
        raise ArgumentError(f"HessianSpectrum.density(grid): grid must be a non-empty 1-D "
                            f"array of finite numbers (the points to evaluate the density "
                            f"at), got {describe(grid)}")
    return g


def hessian_spectrum(loss_fn: Callable[[], Tensor],
                     var_list: Sequence[Variable] | None = None, iters: int = 100,
                     runs: int = 1, seed: int | None = None) -> HessianSpectrum:
    """The eigenvalue density of the Hessian of ``loss_fn()`` (as in hessian_eigenvalues),
    by stochastic Lanczos quadrature (Ghorbani et al. 2019; PyHessian): for each of
    ``runs`` Rademacher start vectors v (normalised), ``iters`` Lanczos steps with full
    reorthogonalisation give a tridiagonal T whose eigenvalues θ_j (the nodes) and squared
    first eigenvector components τ_j (the weights, summing to 1) make a quadrature of the
    spectral measure seen from v: Σ τ_j f(θ_j) ≈ vᵀ f(H) v. Memory: iters vectors of the
    parameters' size (float64).

    >>> import flowgrad as tf
    >>> w = tf.variable(tf.tensor([1.0, 2.0, 3.0]), name="w_hs_doc")
    >>> s = tf.debug.hessian_spectrum(lambda: (w ** 3).sum() / 6, iters=3, seed=0)
    >>> s.nodes.round(6).tolist(), round(float(s.weights.sum()), 6)    # the eigenvalues
    ([[1.0, 2.0, 3.0]], 1.0)
    >>> w.dispose()
    """
    api = "hessian_spectrum(loss_fn)"
    iters = as_int(iters, "iters", api, minimum=1)
    runs = count(runs, "runs", api, 1, 100_000)
    rng = rng_of(seed, api)

    def body(op):
        m = min(iters, op.size)
        nodes, weights = np.zeros((runs, m)), np.zeros((runs, m))
        for r in range(runs):
            v = rng.integers(0, 2, op.size) * 2.0 - 1.0
            alphas, betas, _ = lanczos(op.matvec, v, m)
            theta, y = np.linalg.eigh(_tridiagonal(alphas, betas))
            j = theta.size
            nodes[r, :j], weights[r, :j] = theta, y[0] ** 2
            nodes[r, j:] = theta[-1]
        return HessianSpectrum(nodes=nodes, weights=weights, size=op.size,
                               variables=list(op.names))
    return _with_operator(loss_fn, var_list, api, body)
