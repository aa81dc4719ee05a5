"""The op table (tests/test_ops_table.py) under tf.jit(backend="native"): every row's
function, its gradient and its second derivative (along random directions), traced and
replayed with every segment the rows allow compiled, against the same computed eagerly, in
float64 and float32. Exact kernels give eager's bits; libm's (exp, sin, erf...) may differ
by a few ulp per kernel (jit_native.ULP_BOUND), which a chain of them adds up: hence the
relative tolerances, ~100 ulp of each dtype."""
import numpy as np
import pytest

import flowgrad as tf
from opcheck import as_list, lift, make_inputs, scalarize
from test_jit_native import always_native    # noqa: F401 (a fixture)
from test_ops_table import CASES

pytestmark = [pytest.mark.extra("numba", "jit"), pytest.mark.usefixtures("always_native"),
              pytest.mark.filterwarnings("ignore::flowgrad.jit_native.JitFallbackWarning")]

TOL = {"float64": 1e-13, "float32": 1e-5}


def _same(got, want, case, what, dtype):
    got, want = as_list(got), as_list(want)
    assert len(got) == len(want), (case.name, what)
    for g, w in zip(got, want):
        g, w = g.numpy(), w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (case.name, what, g.dtype, w.dtype)
        if g.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=f"{case.name}: {what}")
        else:
            scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
            np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype] * scale,
                                       err_msg=f"{case.name}: {what} ({dtype})")


def _both(fn, ts):
    """fn eagerly, and jitted natively (traced, then replayed twice)."""
    eager = fn(*ts)
    jf = tf.jit(fn, backend="native")
    jf(*ts)
    return eager, jf(*ts)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_a_row_of_the_op_table_compiled(case, dtype):
    arrays = [a.astype(dtype) for a in make_inputs(case)]
    ts = [tf.tensor(a, dtype=dtype) for a in arrays]
    eager, jitted = _both(case.fn, ts)
    _same(jitted, eager, case, "forward", dtype)
    if case.order <= 0:
        return
    rng = np.random.default_rng(1)
    dys = [rng.uniform(0.5, 1.5, o.shape) for o in as_list(eager)]
    F = scalarize(case.fn, dys)
    for k in range(min(case.order, 2)):
        g = tf.grads(F, allow_unconnected=True)
        eager, jitted = _both(lambda *xs: g(list(xs)), ts)
        _same(jitted, eager, case, f"order {k + 1}", dtype)
        F = lift(F, [rng.uniform(0.5, 1.5, a.shape).astype(dtype) for a in arrays])
