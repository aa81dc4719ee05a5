"""Machinery of the op table tests: inputs per domain, central finite differences in
float64, gradients of any order, leak accounting. Independent of flowgrad's internals: it
only uses the public API (grads, add_n, memory).

A family's table is a list of ``Case`` rows and one test::

    @pytest.mark.parametrize("case", CASES, ids=repr)
    def test_op(case):
        run_case(case)
"""
import gc
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import flowgrad as tf

DOMAINS = {
    "real": lambda r, s: r.uniform(-2, 2, s),
    "pos": lambda r, s: r.uniform(0.5, 2, s),
    "unit": lambda r, s: r.uniform(-0.9, 0.9, s),
    "gt1": lambda r, s: r.uniform(1.2, 3, s),
    # away from the kink at 0 (and from each other, so no ties)
    "nonzero": lambda r, s: r.choice([-1, 1], s) * r.uniform(0.2, 2, s),
    "small": lambda r, s: r.uniform(-1, 1, s),
}


@dataclass
class Case:
    """One row of the table: ``fn`` (flowgrad) against ``ref`` (NumPy, float64).

    inputs: one (shape, domain) per differentiable input, or a fixed NumPy array.
    order: highest derivative order checked against finite differences; 0 means the op is
    not differentiable and its gradient must be zero (and backprop must not fail).
    """
    name: str
    fn: Callable
    ref: Callable
    inputs: list
    order: int = 2
    exact: bool = False          # integer/bool output: compare exactly
    f32_rtol: float = 2e-5
    tags: tuple = field(default_factory=tuple)

    def __repr__(self):
        return self.name


def make_inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in case.inputs:
        if isinstance(spec, np.ndarray):
            out.append(spec.astype(np.float64))
        else:
            shape, dom = spec
            out.append(np.asarray(DOMAINS[dom](rng, shape), dtype=np.float64))
    return out


def as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def scalarize(fn, dys):
    """F(*xs) = sum_k <fn(*xs)[k], dys[k]>, a flowgrad scalar function."""
    def F(*xs):
        outs = as_list(fn(*xs))
        terms = [(o.cast("float64") * d).sum() for o, d in zip(outs, dys)]
        return tf.add_n(terms) if len(terms) > 1 else terms[0]
    return F


def lift(F, vs):
    """The next order: G(*xs) = sum_i <dF/dx_i, v_i>."""
    def G(*xs):
        gs = tf.grads(F, allow_unconnected=True)(list(xs))
        terms = [(g * v).sum() for g, v in zip(gs, vs)]
        return tf.add_n(terms) if len(terms) > 1 else terms[0]
    return G


def value(F, arrays):
    return float(F(*[tf.tensor(a, dtype="float64") for a in arrays]).item())


def central_differences(f, arrays, h=1e-5):
    """Central differences of ``f`` (float64 NumPy arrays -> a number) at ``arrays``,
    element by element."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i][j] += h
            minus[i][j] -= h
            g[j] = (f(*plus) - f(*minus)) / (2 * h)
        grads.append(g)
    return grads


def numeric_grad(F, arrays, h=1e-5):
    """Central differences of the flowgrad function F at arrays, element by element."""
    return central_differences(lambda *xs: value(F, xs), arrays, h)


def analytic_grad(F, arrays, dtype="float64"):
    ts = [tf.tensor(a, dtype=dtype) for a in arrays]
    return [g.numpy().astype(np.float64)
            for g in tf.grads(F, allow_unconnected=True)(ts)]


def live_tensors():
    gc.collect()
    return tf.memory().num_tensors


def _check_forward(case):
    arrays = make_inputs(case)
    want = as_list(case.ref(*arrays))
    got = as_list(case.fn(*[tf.tensor(a, dtype="float64") for a in arrays]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == np.shape(w), case.name
        if case.exact:
            np.testing.assert_array_equal(g.numpy(), w, err_msg=case.name)
        else:
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12, err_msg=case.name)
    # float32: the reference on the float32-rounded inputs
    a32 = [a.astype(np.float32) for a in arrays]
    want32 = as_list(case.ref(*[a.astype(np.float64) for a in a32]))
    got32 = as_list(case.fn(*[tf.tensor(a) for a in a32]))
    for g, w in zip(got32, want32):
        assert g.dtype in ("float32", "int32", "bool"), (case.name, g.dtype)
        if case.exact:
            np.testing.assert_array_equal(g.numpy(), w, err_msg=case.name)
        else:
            np.testing.assert_allclose(g.numpy(), w, rtol=case.f32_rtol, atol=2e-6,
                                       err_msg=case.name)


# the backends every table runs on: NumPy, and array-api-strict (registered by conftest.py
# when installed), which fails any kernel that calls past the array API standard
# (FLOWGRAD_TEST_BACKENDS=numpy,cupy picks others: bench/gpu.py runs the tables on CuPy)
BACKEND_NAMES = os.environ.get("FLOWGRAD_TEST_BACKENDS", "").split(",") if \
    os.environ.get("FLOWGRAD_TEST_BACKENDS") else \
    ["numpy"] + (["array_api_strict"] if "array_api_strict" in tf.backends() else [])
# the tables' parameters: array-api-strict's second pass over every table (half their time,
# ~100 s of the README's test command) is a slow case, run by .ci/run (pytest -m slow); the
# backends named in FLOWGRAD_TEST_BACKENDS run in the default run
BACKENDS = BACKEND_NAMES if os.environ.get("FLOWGRAD_TEST_BACKENDS") else \
    [b if b == "numpy" else pytest.param(b, marks=pytest.mark.slow) for b in BACKEND_NAMES]


def run_case(case, backend="numpy"):
    """Check one row on ``backend``: forward in float64 and float32, gradients to
    ``case.order`` against finite differences, float32 gradients against float64 ones, and
    no leaked tensor."""
    prev = tf.set_backend(backend)
    try:
        _run_case(case)
    finally:
        tf.set_backend(prev)


def _run_case(case):
    arrays = make_inputs(case)
    before = live_tensors()
    _check_forward(case)
    rng = np.random.default_rng(1)
    outs = as_list(case.fn(*[tf.tensor(a, dtype="float64") for a in arrays]))
    dys = [rng.uniform(0.5, 1.5, o.shape) for o in outs]
    del outs
    F = scalarize(case.fn, dys)
    if case.order == -1:
        return
    if case.order == 0:
        # not differentiable (or cut by stop_gradient): a zero gradient where connected
        grads = analytic_grad(F, arrays)
        if "stop" not in case.tags:
            for g in grads:
                np.testing.assert_array_equal(g, 0, err_msg=case.name)
    for k in range(case.order):
        analytic = analytic_grad(F, arrays)
        numeric = numeric_grad(F, arrays)
        for i, (a, n) in enumerate(zip(analytic, numeric)):
            np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case.name}: order {k + 1}, input {i}")
        if k == 0:
            # float32 gradients agree with float64 ones within float32 accuracy
            g32 = analytic_grad(F, [a.astype(np.float32) for a in arrays], "float32")
            for a, g in zip(analytic, g32):
                np.testing.assert_allclose(g, a, rtol=1e-3, atol=1e-4, err_msg=case.name)
        F = lift(F, [rng.uniform(0.5, 1.5, a.shape) for a in arrays])
    del F
    assert live_tensors() == before, f"{case.name} leaked tensors"
