"""exp, sin, cos and tanh computed inline in tf.jit's native float32 loops
(flowgrad/native_math.py): correctly rounded or one ulp from it, against float64 NumPy;
arguments out of the inline range (and NaN, inf) rerun the loop with libm's functions; and
in tf.jit, the kernels that call them within jit_native.ULP_BOUND of the NumPy replay, on
one thread and two."""
import math

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import fusion, jit_native, native_costs, native_math
from test_jit_native import (NATIVE, _arity, always_native, assert_ulps,  # noqa: F401
                             close, kernel_fn, native_segments, ulp_distance)

needs_numba = pytest.mark.extra("numba", "jit")
BIG = fusion.FUSE_MIN_BYTES // 4          # float32 values: a loop that inlines them


def _compiled(fn_name):
    """A numba loop o[j] = fn(x[j]) built from native_math's lines, returning its count of
    arguments out of the inline range (the segment's own ``bad``)."""
    numba = pytest.importorskip("numba")
    lines, expr = native_math.inline(f"math.{fn_name}(x0)", "t0")
    body = "\n".join(f"        {x}" for x in ["x0 = i0[j]"] + lines + [f"o0[j] = T({expr})"])
    src = f"def seg(i0, o0):\n    bad = 0\n    for j in range(i0.shape[0]):\n{body}\n" \
          f"    return bad\n"
    ns = {"math": math, "np": np, "T": np.float32, "F": np.float64}
    exec(src, ns)
    return numba.njit(fastmath=False, error_model="numpy")(ns["seg"])


def _inside(fn_name, rng, n=200_000):
    """float32 arguments spread over the inline range: magnitudes from 1e-40 (subnormal)
    up, either sign, plus values at its edges."""
    hi = {"exp": 88.5, "sin": 65536.0, "cos": 65536.0, "tanh": 1e30}[fn_name]
    mag = 10.0 ** rng.uniform(-40, math.log10(hi), n)
    x = (mag * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    x[:8] = [0.0, -0.0, 1.0, -1.0, np.float32(math.pi / 4), np.float32(math.pi / 2),
             np.float32(math.pi), np.float32(-3 * math.pi / 2)]
    if fn_name == "exp":
        x = np.clip(x, -103.0, 88.5).astype(np.float32)
        x[8:12] = [-103.0, 88.5, -87.3, -0.5]
    if fn_name in ("sin", "cos"):
        x[8:12] = [65536.0, -65536.0, np.float32(12345.678), np.float32(-51471.85)]
    if fn_name == "tanh":
        x[8:12] = [0.0625, np.nextafter(np.float32(0.0625), np.float32(0)), 20.0, 9.01]
    return x


@needs_numba
@pytest.mark.parametrize("fn_name", native_math.FUNCTIONS)
def test_inline_function_is_correctly_rounded_within_one_ulp(fn_name):
    fn = _compiled(fn_name)
    x = _inside(fn_name, np.random.default_rng(len(fn_name)))
    out = np.empty_like(x)
    assert fn(x, out) == 0                      # all of them inside: the inline code ran
    ref = getattr(np, fn_name)(x.astype(np.float64)).astype(np.float32)
    d = ulp_distance(out, ref)
    assert d.max() <= 1, f"{d.max()} ulp at {x[np.argmax(d)]!r}: {out[np.argmax(d)]!r} " \
        f"vs {ref[np.argmax(d)]!r}"
    assert (d == 0).mean() > 0.999              # (one ulp only near a rounding boundary)
    assert np.array_equal(np.signbit(out), np.signbit(ref))       # -0.0 kept
    # and NumPy's own float32 function within the native bound
    assert_ulps(out, getattr(np, fn_name)(x), jit_native.ULP_BOUND, fn_name)


@needs_numba
@pytest.mark.parametrize("fn_name", native_math.FUNCTIONS)
def test_arguments_out_of_range_are_counted(fn_name):
    fn = _compiled(fn_name)
    outside = {"exp": [89.0, -104.0, np.inf, -np.inf, np.nan],
               "sin": [65537.0, -1e30, np.inf, np.nan], "cos": [7e4, 1e38, -np.inf, np.nan],
               "tanh": [np.nan]}[fn_name]
    x = np.array([0.5] * 10 + outside, np.float32)
    assert fn(x, np.empty_like(x)) == len(outside)


def _jitted(f, x, threads=None):
    jf = tf.jit(f, backend="native", threads=threads)
    jf(x)
    return jf(x).numpy(), jf


def _kernels_inlined():
    """The kernels whose float32 native form calls a function computed inline."""
    out = []
    for prim in NATIVE:
        n = _arity(prim)
        attrs = {"LeakyRelu": {"alpha": 0.2}, "ClipByValue": {"lo": -0.5, "hi": 0.7},
                 "Step": {"alpha": 0.3}}.get(prim.name)
        expr = jit_native.native_expr(prim, list("ab"[:n]), [None] * n, attrs)
        if native_math.calls(expr):
            out.append(prim)
    return out


INLINED = _kernels_inlined()


def test_the_kernels_of_w3_and_of_activations_are_inlined():
    names = {p.name for p in INLINED}
    assert {"Exp", "Sin", "Cos", "Tanh", "SinGrad"} <= names, names


@needs_numba
@pytest.mark.parametrize("prim", INLINED, ids=[p.name for p in INLINED])
@pytest.mark.usefixtures("always_native")
def test_every_kernel_that_inlines_them_against_the_numpy_replay(prim):
    rng = np.random.default_rng(abs(hash(prim.name)) % 2**32)
    arrays = [rng.normal(0, 3, BIG).astype(np.float32) for _ in range(_arity(prim))]
    f = kernel_fn(prim)
    ts = [tf.tensor(a) for a in arrays]
    want = tf.jit(f, backend="numpy")(*ts).numpy()
    jf = tf.jit(f, backend="native")
    jf(*ts)
    got = jf(*ts).numpy()
    seg = native_segments(jf)[0]
    assert seg.inlined > 0 and "bad = 0" in seg.source
    assert_ulps(got, want, jit_native.ULP_BOUND, f"{prim.name}, inline")
    # one special value anywhere: the whole call takes libm's functions (the plain loop)
    arrays[0][BIG // 2] = np.nan
    ts = [tf.tensor(a) for a in arrays]
    got = jf(*ts).numpy()
    assert_ulps(got, tf.jit(f, backend="numpy")(*ts).numpy(), jit_native.ULP_BOUND,
                f"{prim.name}, libm")


@needs_numba
@pytest.mark.usefixtures("always_native")
def test_w3s_gradient_inline_on_one_thread_and_two_and_with_specials():
    g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
    xs = np.linspace(-3, 3, BIG).astype(np.float32)
    want = tf.jit(g, backend="numpy")(tf.tensor(xs)).numpy()
    one, jf = _jitted(g, tf.tensor(xs))
    assert [s.inlined for s in native_segments(jf)] == [3]      # exp, sin, sin's cos
    # (a sum of terms up to e^3: near its zeros, an ulp of a term is many of the result)
    close(one, want, "float32", "one thread")
    two, _ = _jitted(g, tf.tensor(xs), threads=2)
    np.testing.assert_array_equal(two, one)         # elementwise: the same bits
    xs[[5, 77, BIG - 1]] = [np.inf, 1e6, np.nan]    # out of range: libm's loop
    got, _ = _jitted(g, tf.tensor(xs), threads=2)
    want = tf.jit(g, backend="numpy")(tf.tensor(xs)).numpy()
    finite = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and \
        np.array_equal(got[~finite], want[~finite], equal_nan=True)
    close(got[finite], want[finite], "float32", "libm's loop")


@needs_numba
@pytest.mark.usefixtures("always_native")
def test_small_loops_and_float64_call_libm():
    small, jf = _jitted(lambda t: t.sin() * 2, tf.tensor(np.ones(1000, np.float32)))
    assert native_segments(jf)[0].inlined == 0 and "math.sin(" in \
        native_segments(jf)[0].source
    wide, jf = _jitted(lambda t: t.sin() * 2, tf.tensor(np.ones(BIG)))
    assert native_segments(jf)[0].inlined == 0


def test_numpys_costs_are_measured_once_per_machine(monkeypatch, tmp_path):
    from flowgrad import jit_native_cache
    monkeypatch.setenv("FLOWGRAD_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(native_costs, "_measured", None)
    f32 = np.dtype(np.float32)
    ns = native_costs.numpy_ns("exp", f32, 123.0)
    assert 0 < ns < 1000 and ns != 123.0
    assert jit_native_cache.load_costs() == {"exp <f4": ns}
    assert native_costs.numpy_ns("erf", f32, 40.9) == 40.9           # (no such ufunc)

    # another process on this machine: the same number, not measured again
    def measure(*args):
        raise AssertionError("measured again")
    monkeypatch.setattr(native_costs, "_measured", None)
    monkeypatch.setattr(native_costs, "_measure", measure)
    assert native_costs.numpy_ns("exp", f32, 123.0) == ns
    # a garbled file is measured again; a cache turned off measures per process
    path = jit_native_cache.costs_path()
    with open(path, "w") as f:
        f.write('{"exp <f4": "fast", ')
    monkeypatch.undo()
    monkeypatch.setenv("FLOWGRAD_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(native_costs, "_measured", None)
    assert native_costs.numpy_ns("exp", f32, 123.0) > 0
    assert "exp <f4" in jit_native_cache.load_costs()
    monkeypatch.setenv("FLOWGRAD_JIT_CACHE", "0")
    monkeypatch.setattr(native_costs, "_measured", None)
    assert native_costs.numpy_ns("sin", f32, 123.0) > 0 and jit_native_cache.costs_path() is None


@needs_numba
def test_where_numpys_functions_are_slow_the_block_compiles_inline(monkeypatch):
    # the AVX2 EPYC: NumPy's float32 exp 5.5 ns a value, sin 2.0, tanh 2.9
    slow = {"exp": 5.5, "sin": 2.0, "tanh": 2.9}
    monkeypatch.setattr(native_costs, "numpy_ns", lambda f, dtype, default: slow.get(f, default))
    big = tf.tensor(np.linspace(-1, 1, BIG, dtype=np.float32))
    f = tf.jit(lambda x: x.sin().exp().tanh(), backend="native")
    f(big)
    assert "native  3 kernels in one loop" in f.explain(), f.explain()
    # the Xeon's (0.45, 0.39, 0.2 ns): NumPy's loops
    monkeypatch.setattr(native_costs, "numpy_ns", lambda f, dtype, default: default)
    g = tf.jit(lambda x: x.sin().exp().tanh(), backend="native")
    g(big)
    assert "native  " not in g.explain(), g.explain()
