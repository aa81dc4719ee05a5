"""tf.jit's native backend (flowgrad/jit_native.py): every kernel with a native form,
forward, backward and second order, float32 and float64, at random inputs with NaN, inf and
-0.0, under backend="native" against backend="numpy" (a few ulp; arithmetic to the bit) and
against eager; random chains of them; float32 staying float32; the exact peepholes; the cost
model; the fallback warning; explain(); threads; optimizer steps; and the errors of
backend= (numba missing: simulated). Tests that compile need numba (the extra
``pip install -e '.[jit]'``) and skip, naming it, without it."""
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import engine as E
from flowgrad import jit_native, native_costs
from flowgrad.ops import PRIMITIVES

needs_numba = pytest.mark.extra("numba", "jit")

NATIVE = sorted((p for p in PRIMITIVES.values() if p.native is not None), key=lambda p: p.name)
IDS = [p.name for p in NATIVE]
DTYPES = ["float32", "float64"]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 3.0]
# the attributes the table tests give kernels that take some
ATTRS = {"LeakyRelu": {"alpha": 0.2}, "ClipByValue": {"lo": -0.5, "hi": 0.7},
         "Step": {"alpha": 0.3}}


@pytest.fixture
def always_native(monkeypatch):
    """Every segment compiled, whatever the cost model says (the tests check results):
    compiled calls cost nothing, and no libm kernel splits a run."""
    monkeypatch.setattr(native_costs, "NATIVE_CALL_US", -1e9)
    monkeypatch.setattr(jit_native, "_numpy_alone", lambda st, c, meta: False)


@pytest.fixture
def table_costs(monkeypatch):
    """NumPy's libm costs from the model's table (measured on the development machine's
    AVX-512 Xeon) instead of this machine's: the cost model's decisions as written."""
    monkeypatch.setattr(native_costs, "numpy_ns", lambda f, dtype, default: default)


def native_segments(jf):
    return [s for p in jf.traces.values() if p.lowering for s in p.lowering.segments]


def _arity(prim):
    # (the kernel's parameters after its arrays are its attributes)
    return len(prim.arg_names) - len(ATTRS.get(prim.name, ()))


def _exact(prim):
    """True when the kernel's native form calls no transcendental function (its results
    are NumPy's bits); Pow's form depends on its exponent (libm's pow otherwise)."""
    n = _arity(prim)        # (no constants: Pow's form is then libm's pow)
    expr = jit_native.native_expr(prim, list("ab"[:n]), [None] * n, ATTRS.get(prim.name))
    return not native_costs.transcendental(expr)


def sample(rng, n, dtype, specials=True):
    x = rng.normal(0, 2, n)
    if specials:
        x[:len(SPECIAL)] = SPECIAL
        rng.shuffle(x)
    return x.astype(dtype)


def ulp_distance(a, b):
    """Elementwise distance in units in the last place (0 where both are NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    it = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    top = np.int64(np.iinfo(it).min)
    # ordered integers: negative floats count down from -0 (== +0 here)
    ia = np.where(ia < 0, top - ia, ia)
    ib = np.where(ib < 0, top - ib, ib)
    d = np.abs(ia - ib)
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def assert_ulps(got, want, bound, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, what)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    if bound == 0:      # the bits, -0.0 included (NaNs: any payload)
        u = np.uint32 if got.dtype == np.float32 else np.uint64
        g = np.ascontiguousarray(got).reshape(-1).view(u)
        w = np.ascontiguousarray(want).reshape(-1).view(u)
        bad = (g != w) & ~np.isnan(got).reshape(-1)
        assert not bad.any(), f"{what}: {got.reshape(-1)[bad][:5]} vs {want.reshape(-1)[bad][:5]}"
        return
    # NOTE: a few ulp of the libm function's result: relative to 1 where the kernel's own
    # arithmetic subtracts it down to a small number (sigmoid at x << 0: 0.5 + 0.5 tanh)
    with np.errstate(invalid="ignore"):
        near = np.abs(got.astype(np.float64) - want) <= \
            bound * np.finfo(got.dtype).eps * np.maximum(1, np.abs(want))
    d = np.where(near, 0, ulp_distance(got, want))
    assert d.max(initial=0) <= bound, f"{what}: {d.max()} ulp at {np.argmax(d)} " \
        f"({got.reshape(-1)[np.argmax(d)]} vs {want.reshape(-1)[np.argmax(d)]})"


def close(got, want, dtype, what=""):
    """Values computed through several transcendental kernels: a relative bound."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.dtype(dtype), what
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * (1 + np.abs(want).max()),
                               err_msg=what)


def three_ways(f, *arrays):
    """f eagerly, under backend="numpy" and under backend="native" (traced, then replayed
    twice): the results as NumPy arrays."""
    ts = [tf.tensor(a) for a in arrays]
    out = {"eager": f(*ts).numpy()}
    for be in ("numpy", "native"):
        jf = tf.jit(f, backend=be)
        jf(*ts)
        jf(*ts)
        out[be] = jf(*ts).numpy()
        out[be + "_fn"] = jf
    return out


def kernel_fn(prim, consts=None, attrs=None):
    """The kernel as a function of its tensor inputs (``consts``: position -> a number
    given as a constant of the trace instead), with its attributes (``attrs``, else those
    of ATTRS)."""
    consts = consts or {}
    attrs = attrs if attrs is not None else ATTRS.get(prim.name)

    def f(*xs):
        it = iter(xs)
        args = []
        for i in range(_arity(prim)):
            if i in consts:
                args.append(tf.scalar(consts[i], dtype=xs[0].dtype))
            else:
                args.append(next(it))
        return E.run_kernel(prim, tuple(args), attrs)
    return f


# ---------------------------------------------------------------- every kernel, forward

@pytest.mark.parametrize("prim", NATIVE, ids=IDS)
def test_native_forms_are_expressions_of_the_operands(prim):
    # (no numba needed: a form is Python source, with T(c), math.f(...) and np.f(...) only)
    args = [f"a{i}" for i in range(_arity(prim))]
    for c in (None, 0.0, 1.0, 2.0, 3.0, 0.5, -1.0, 2.5):
        expr = jit_native.native_expr(prim, args, [c] * len(args), ATTRS.get(prim.name))
        code = compile(expr, "<native>", "eval")
        assert set(code.co_names) <= {"T", "math", "np", "abs", *args} | \
            set(native_costs.libm_calls(expr)) | set(re.findall(r"np\.(\w+)\(", expr)), \
            (prim.name, expr)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("prim", NATIVE, ids=IDS)
def test_forward_of_every_native_kernel(prim, dtype, always_native):
    rng = np.random.default_rng(abs(hash(prim.name)) % 2**32)
    n = 301
    arrays = [sample(rng, n, dtype) for _ in range(_arity(prim))]
    if _arity(prim) == 2:               # ties, and the same special on both sides
        arrays[1][:40] = arrays[0][:40]
    for shapes in ([(n,)] * len(arrays), [(n,)] + [()] * (len(arrays) - 1)):
        args = [a.reshape(s) if s else a[3].copy().reshape(()) for a, s in zip(arrays, shapes)]
        r = three_ways(kernel_fn(prim), *args)
        bound = 0 if _exact(prim) else jit_native.ULP_BOUND
        assert_ulps(r["native"], r["numpy"], bound, f"{prim.name} native vs numpy")
        assert_ulps(r["native"], r["eager"], bound, f"{prim.name} native vs eager")
        assert native_segments(r["native_fn"])[0].names == [prim.name]
    # 0-d: a function of scalars
    for k in range(12):
        args = [np.asarray(a[k]) for a in arrays]
        r = three_ways(kernel_fn(prim), *args)
        assert_ulps(r["native"], r["numpy"], 0 if _exact(prim) else jit_native.ULP_BOUND,
                    f"{prim.name} 0-d at {[float(a) for a in args]}")


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c", [0, 1, 2, 3, 4, -1, 0.5, -0.5, -2, -3, 2.5, 1.5])
def test_pow_by_a_constant(c, dtype, always_native):
    rng = np.random.default_rng(7)
    x = sample(rng, 257, dtype)
    x[:5] = [1e-30, -1e-30, 1e30, -1e30, 7.0]
    r = three_ways(kernel_fn(PRIMITIVES["Pow"], {1: c}), x)
    # multiplied out as fast_pow does (the same bits), or libm's pow (a few ulp)
    bound = 0 if c in (0, 1, 2, 3, 4, -1, 0.5) else jit_native.ULP_BOUND
    assert_ulps(r["native"], r["numpy"], bound, f"x ** {c}")
    seg = native_segments(r["native_fn"])
    if c != 1:              # (x ** 1 is x: no kernel left)
        assert ("math.pow" in seg[0].source) == (bound != 0), seg[0].source


# ---------------------------------------------------------------- backward, second order

# kernels defined on less than (0.3, 1.7)
DOMAIN = {"Asin": (0.1, 0.9), "Acos": (0.1, 0.9), "Acosh": (1.1, 2.5)}


def _smooth_sample(rng, n, dtype, name=None):
    return rng.uniform(*DOMAIN.get(name, (0.3, 1.7)), n).astype(dtype)


@needs_numba
@pytest.mark.filterwarnings("ignore::flowgrad.jit_native.JitFallbackWarning")   # (abs': Step)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("prim", NATIVE, ids=IDS)
def test_gradients_of_every_native_kernel(prim, dtype, always_native):
    if prim.vjp is None:
        pytest.skip("not differentiable")
    rng = np.random.default_rng(abs(hash(prim.name)) % 2**31 + 1)
    arrays = [_smooth_sample(rng, 33, dtype, prim.name) for _ in range(_arity(prim))]
    # the first order: the gradient of sum(kernel) wrt every input
    g1 = tf.grads(lambda *xs: kernel_fn(prim)(*xs).sum())
    r = three_ways(lambda *xs: tf.stack(g1(list(xs))), *arrays)
    close(r["native"], r["numpy"], dtype, f"{prim.name}'")
    close(r["native"], r["eager"], dtype, f"{prim.name}' vs eager")
    # the second order, along the first input
    k = kernel_fn(prim)

    def g2(x, *rest):
        return tf.grad(lambda v: tf.grad(lambda u: k(u, *rest).sum())(v).sum(),
                       allow_unconnected=True)(x)
    r = three_ways(g2, *arrays)
    close(r["native"], r["numpy"], dtype, f"{prim.name}''")
    close(r["native"], r["eager"], dtype, f"{prim.name}'' vs eager")


# ---------------------------------------------------------------- random programs

UNARY_STEPS = [
    lambda x: x.sin(), lambda x: x.cos(), lambda x: x.tanh(), lambda x: x.sigmoid(),
    lambda x: x * 0.7 + 0.1, lambda x: x.square() * 0.3, lambda x: x.relu(),
    lambda x: x.abs().sqrt(), lambda x: (x.abs() + 1).log(), lambda x: (-x.abs()).exp(),
    lambda x: x.neg(), lambda x: x.pow(3) * 0.2, lambda x: x.softplus() - 0.5,
]
BINARY_STEPS = [
    lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y,
    lambda x, y: x / (y.square() + 1), lambda x, y: tf.maximum(x, y),
    lambda x, y: tf.minimum(x, y), lambda x, y: x.squared_difference(y) * 0.1,
]


def random_program(seed, length=12):
    """A chain of native ops on two inputs (bounded, so that ulps do not blow up)."""
    rng = np.random.default_rng(seed)
    plan = [(rng.integers(2), rng.integers(100)) for _ in range(length)]

    def f(x, y):
        vals = [x, y]
        for kind, k in plan:
            if kind == 0:
                vals.append(UNARY_STEPS[k % len(UNARY_STEPS)](vals[-1]))
            else:
                other = vals[k % len(vals)]
                vals.append(BINARY_STEPS[k % len(BINARY_STEPS)](vals[-1], other))
        return (vals[-1] * vals[-2]).sum()
    return f


@needs_numba
@pytest.mark.filterwarnings("ignore::flowgrad.jit_native.JitFallbackWarning")   # (abs': Step)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(8))
def test_random_programs(seed, dtype, always_native):
    f = random_program(seed)
    rng = np.random.default_rng(seed)
    for n in (1, 64):
        x, y = (rng.uniform(-1.5, 1.5, n).astype(dtype) for _ in range(2))
        r = three_ways(f, x, y)
        close(r["native"], r["numpy"], dtype, f"program {seed} (n={n})")
        g = tf.grads(f, allow_unconnected=True)
        r = three_ways(lambda a, b: tf.stack(g([a, b])), x, y)
        close(r["native"], r["numpy"], dtype, f"gradient of program {seed} (n={n})")
        close(r["native"], r["eager"], dtype, f"gradient of program {seed} (n={n}) vs eager")
        assert native_segments(r["native_fn"])


# ---------------------------------------------------------------- dtypes and constants

@needs_numba
def test_float32_stays_float32(always_native):
    # 0.1 in float32 is not 0.1: computed in float64 and rounded, many products would
    # differ from NumPy's float32 ones in the last bit. Arithmetic: the same bits.
    x = np.random.default_rng(1).uniform(-100, 100, 5000).astype(np.float32)
    f = lambda x: (x * 0.1 + 0.3) / 0.7 - x * x * 1e-3     # noqa: E731
    r = three_ways(f, x)
    assert r["native"].dtype == np.float32
    assert_ulps(r["native"], r["numpy"], 0, "float32 arithmetic")
    s = three_ways(f, np.float32(0.1))
    assert s["native"].dtype == np.float32 and s["native"].shape == ()
    assert_ulps(s["native"], s["numpy"], 0, "a float32 scalar")


@needs_numba
def test_exact_peepholes(always_native):
    x = np.array([1.5, -0.0, 0.0, np.nan, -np.inf, 3.25], np.float32)
    neg0 = tf.scalar(-0.0)      # (a literal -0.0 would be the cached constant 0.0)
    f = lambda x: ((x * 1.0) ** 1 / 1.0 - 0.0 + neg0).sin() + (x ** 2 + 0.0)   # noqa
    r = three_ways(f, x)
    assert_ulps(r["native"], r["numpy"], jit_native.ULP_BOUND)
    seg = native_segments(r["native_fn"])
    # one Sin, one Multiply (x ** 2), one Add (x + 0.0 stays: -0.0 + 0.0 is 0.0), one Add
    assert sorted(seg[0].names) == ["Add", "Add", "Multiply", "Sin"], seg[0].names
    y = three_ways(lambda x: x + 0.0, np.array([-0.0], np.float32))["native"]
    assert not np.signbit(y[0])


# ---------------------------------------------------------------- broadcast inputs

@needs_numba
@pytest.mark.parametrize("shapes, one_loop", [
    ([(5, 4), (4,), (5, 1)], True),             # a bias row and a column: both m = 4
    ([(100, 100), (100,), (100, 1)], True),     # square: a row and a column of one size
    ([(2, 3, 4), (3, 4), (2, 1, 1)], True),     # m = 12 both
    ([(2, 3, 4), (1, 4), (2, 3, 1)], True),     # m = 4 both
    ([(2, 3, 4), (4,), (2, 1, 1)], False),      # m = 4 and 12: the Multiply stays NumPy
    ([(2, 3, 4), (2, 1, 4), (1,)], False),      # along a middle axis: NumPy
], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inputs_broadcast_along_rows_or_columns(shapes, one_loop, dtype, always_native):
    rng = np.random.default_rng(7)
    x, b, c = (rng.normal(size=s).astype(dtype) for s in shapes)
    f = lambda x, b, c: ((x + b).relu() * c - b).square()       # noqa: E731
    r = three_ways(f, x, b, c)
    assert_ulps(r["native"], r["numpy"], 0, f"broadcast {shapes}")   # arithmetic: bits
    assert_ulps(r["native"], r["eager"], 0, f"broadcast {shapes} vs eager")
    segs = native_segments(r["native_fn"])
    assert (len(segs) == 1 and len(segs[0].names) == 5) == one_loop, segs
    g = tf.grads(lambda x, b, c: f(x, b, c).sum())
    r = three_ways(lambda x, b, c: tf.concat([t.reshape([-1]) for t in g([x, b, c])], 0),
                   x, b, c)
    assert_ulps(r["native"], r["numpy"], 0, f"gradient, broadcast {shapes}")


# ---------------------------------------------------------------- plan, explain, warnings

@needs_numba
def test_explain_names_what_runs_native_and_why_the_rest_does_not(always_native):
    w = tf.tensor(np.ones((4, 3), np.float32))
    f = tf.jit(lambda x: (x.mat_mul(w).sin() * 2 + 1).floor_div(3).sum(), backend="native")
    assert "call it once" in f.explain()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jit_native.JitFallbackWarning)
        f(tf.ones([2, 4]))
    text = f.explain()
    assert "backend 'native'" in text and "signature (float32[2, 4])" in text
    assert "native  3 kernels in one loop over 6 float32 elements: Sin, Multiply, Add" in text
    assert "BatchMatMul: not elementwise" in text or "MatMul" in text
    assert "FloorDiv: no native form" in text


@needs_numba
def test_a_kernel_with_no_native_form_is_warned_once_naming_it_and_its_line():
    f = tf.jit(lambda x: (x * 2).floor_div(3) + 1, backend="native")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        f(tf.ones([3]))
        f(tf.ones([3]))
        f(tf.ones([3]))
    msgs = [str(w.message) for w in seen if w.category is jit_native.JitFallbackWarning]
    assert len(msgs) == 1, msgs
    assert "FloorDiv" in msgs[0] and "test_jit_native.py" in msgs[0] and \
        "(x * 2).floor_div(3) + 1" in msgs[0], msgs[0]
    assert seen[0].filename == __file__


@needs_numba
def test_no_warning_under_auto_nor_for_kernels_numpy_by_design():
    w = tf.tensor(np.ones((4, 3), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tf.jit(lambda x: x.mat_mul(w).sum() * x.cast("int32").cast("float32").max(),
               backend="native")(tf.ones([2, 4]))
        tf.jit(lambda x: (x * 2).erf(), backend="auto")(tf.ones([3]))


@needs_numba
def test_the_cost_model_keeps_large_transcendental_blocks_on_numpy(table_costs):
    big = tf.tensor(np.linspace(-1, 1, 1 << 20, dtype=np.float32))
    f = tf.jit(lambda x: x.sin().exp().tanh(), backend="native")
    f(big)
    assert "cost model" in f.explain() and "native  " not in f.explain()
    g = tf.jit(lambda x: x * 3 + x * x - 1, backend="native")
    g(big)
    assert "native  4 kernels" in g.explain(), g.explain()
    small = tf.jit(lambda x: (x.sin().exp().tanh() * 2 + 1).sin().exp().tanh(),
                   backend="native")
    small(tf.ones([8]))
    assert "native  8 kernels" in small.explain(), small.explain()
    # one kernel on a thousand values: compiled, it would save ~0.1 us a call, a million
    # calls to pay for compiling it
    one = tf.jit(lambda x: x * 3, backend="native")
    one(tf.ones([1000]))
    assert "native  " not in one.explain() and "within 100,000 calls" in one.explain()


@needs_numba
def test_a_libm_kernel_numpy_vectorises_splits_a_run_on_small_arrays(table_costs):
    # on a thousand values NumPy's sin/exp/tanh beat the C library's: they stay NumPy
    # steps and the arithmetic between them is compiled (one compile for the loops of one
    # source, which together pay for it), with the NumPy replay's bits
    def chain(x):
        for _ in range(4):
            x = (x * 1.01 + 0.1).sin().exp().tanh()
        return x.sum()
    x = np.linspace(0.1, 0.5, 1000).astype(np.float32)
    r = three_ways(tf.grad(chain), x)
    text = r["native_fn"].explain()
    assert "native  2 kernels in one loop over 1000 float32 elements: Multiply, Add" in text
    assert "numpy   Sin, Exp, Tanh: cost model: NumPy's vectorised loops" in text
    assert "native  3 kernels in one loop over 1000 float32 elements: Multiply x2, TanhGrad" \
        in text
    assert_ulps(r["native"], r["numpy"], 0, "arithmetic compiled, libm on NumPy")
    # above fusion's size the run stays one fused chain of cache-sized blocks: sin on
    # NumPy, the arithmetic on each side of it compiled and called on every block
    def f(x):
        return (x * 1.01 + 0.1).sin() * 2 + 1
    big, ref = tf.jit(f, backend="native"), tf.jit(f, backend="numpy")
    x = tf.tensor(np.linspace(-3, 3, 1 << 20).astype(np.float32))
    got, want = big(x).numpy(), ref(x).numpy()
    text = big.explain()
    assert text.count("native  2 kernels in one loop over 1048576 float32 elements, on the "
                      "blocks of a fused chain: Multiply, Add") == 2, text
    assert "numpy   Sin: cost model" in text
    assert_ulps(got, want, 0, "arithmetic compiled on the blocks, sin on NumPy")


@needs_numba
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_loops_on_a_chains_blocks_read_scalars_and_feed_numpy(table_costs, threads):
    # a loop on the blocks reads a scalar the program computed (the mean), and gives two
    # results: one that NumPy's exp reads in the chain, one that leaves it; on one thread
    # and on two (the chain's blocks split between workers): the NumPy replay's bits
    def f(x):
        s = x.mean()
        a = x * s + 0.5
        b = a * a - x
        return (a.exp() * b + b * 3, a)
    x = tf.tensor(np.linspace(-2, 2, 1 << 20).astype(np.float32))
    native = tf.jit(f, backend="native", threads=threads)
    ref = tf.jit(f, backend="numpy", threads=threads)
    for _ in range(2):
        got, want = native(x), ref(x)
        for g, w in zip(got, want):
            assert_ulps(g.numpy(), w.numpy(), 0, "compiled on blocks")
    text = native.explain()
    assert "on the blocks of a fused chain: Multiply x2, Add, Sub" in text, text
    assert "numpy   Exp" in text


@needs_numba
def test_a_loop_reading_a_variable_runs_whole_beside_a_chain(table_costs):
    # fused chains take no variable (they are made for the traced sizes): the arithmetic
    # that reads one is a loop over the whole array, the rest stays on the chain's blocks;
    # the NumPy replay's bits, before and after the variable is assigned
    v = tf.variable(tf.tensor(np.linspace(0, 1, 1 << 20).astype(np.float32)))
    try:
        def f(x):
            a = x * v + 0.5
            b = a * a - v
            return a.exp() * b + b * 3
        x = tf.tensor(np.linspace(-2, 2, 1 << 20).astype(np.float32))
        native, ref = tf.jit(f, backend="native"), tf.jit(f, backend="numpy")
        for value in (None, np.linspace(1, 2, 1 << 20).astype(np.float32)):
            if value is not None:
                v.assign(tf.tensor(value))
            assert_ulps(native(x).numpy(), ref(x).numpy(), 0, "a variable's loop")
        text = native.explain()
        assert "native  4 kernels in one loop over 1048576 float32 elements: Multiply x2, " \
            "Add, Sub" in text, text
        assert "1048576 float32 elements, on the blocks of a fused chain: Multiply x2, Add" \
            in text, text
    finally:
        v.dispose()


# ---------------------------------------------------------------- auto

@needs_numba
def test_auto_compiles_once_replays_have_cost_what_compiling_would(monkeypatch,
                                                                   always_native):
    f = tf.jit(lambda x: (x.sin() * x + 1).sum())
    x = tf.ones([16])
    f(x)
    prog = next(iter(f.traces.values()))
    assert prog.pending is not None and "NumPy replay for now" in f.explain()
    want = f(x).item()
    prog.pending = 0.0            # (as if its replays had taken that long)
    f(x)
    assert prog.pending is None and "native  " in f.explain()
    assert abs(f(x).item() - want) <= 1e-5 * abs(want)


def test_auto_without_numba_is_the_numpy_replay(monkeypatch):
    monkeypatch.setattr(jit_native, "numba_installed", lambda: False)
    f = tf.jit(lambda x: x.sin() * 2)
    f(tf.ones([3]))
    prog = next(iter(f.traces.values()))
    assert prog.lowering is None and prog.pending is None
    assert "backend 'auto'" in f.explain()
    assert "NumPy replay (numba is not installed: pip install 'flowgrad[jit]'" in f.explain()


def test_native_without_numba_names_the_extra(monkeypatch, always_native):
    monkeypatch.setattr(jit_native, "numba_installed", lambda: False)
    with pytest.raises(tf.MissingDependencyError, match=r"pip install 'flowgrad\[jit\]'"):
        tf.jit(lambda x: x * 2, backend="native")

    def broken():
        raise tf.MissingDependencyError("tf.jit(backend='native') compiles with numba, which "
                                        f"is not installed: {jit_native.HINT}")
    monkeypatch.setattr(jit_native, "numba_installed", lambda: True)
    monkeypatch.setattr(jit_native, "load_numba", broken)
    monkeypatch.setattr(jit_native, "_compiled", {})
    f = tf.jit(lambda x: x * 2 + 1, backend="native")
    with pytest.raises(tf.MissingDependencyError, match=r"flowgrad\[jit\]"):
        f(tf.ones([3]))


@pytest.mark.parametrize("bad", ["llvm", "NATIVE", None, 1])
def test_a_bad_backend_names_the_accepted_values(bad):
    with pytest.raises(tf.ArgumentError, match="backend must be one of 'auto', 'native', "
                                               "'numpy'"):
        tf.jit(lambda x: x, backend=bad)


def test_numba_is_not_imported_by_import_flowgrad_nor_by_a_numpy_replay():
    code = ("import sys, flowgrad as tf\n"
            "f = tf.jit(lambda x: (x.sin() * 2).sum())\n"
            "f(tf.ones([3])); f(tf.ones([3]))\n"
            "print(sys.modules.get('numba') is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


# ---------------------------------------------------------------- threads, optimizers

@needs_numba
def test_two_threads_call_one_native_function_at_once():
    f = tf.jit(lambda x, y: ((x * y).sin() + x).tanh() * 2, backend="native")
    xs = [tf.tensor(np.full(200, k / 10, np.float32)) for k in range(8)]
    y = tf.tensor(np.linspace(0, 1, 200, dtype=np.float32))
    want = [f(x, y).numpy() for x in xs]           # (traced; every replay compiled)
    errors = []

    def work(offset):
        try:
            for i in range(300):
                k = (i + offset) % len(xs)
                got = f(xs[k], y).numpy()
                if not np.array_equal(got, want[k]):
                    errors.append((offset, i, k))
        except BaseException as e:       # (handed to the test thread)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(o,)) for o in (0, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


@needs_numba
@pytest.mark.parametrize("make", [lambda: tf.train.sgd(0.1), lambda: tf.train.adam(0.05)],
                         ids=["sgd", "adam"])
def test_an_optimizer_step_gives_eagers_results(make, always_native):
    rng = np.random.default_rng(3)
    xs = tf.tensor(rng.normal(size=(8, 3)).astype(np.float32))
    ys = tf.tensor(rng.normal(size=(8, 1)).astype(np.float32))
    results = []
    for jitted in (False, True):
        w = tf.variable(tf.tensor(np.full((3, 1), 0.1, np.float32)))
        b = tf.variable(tf.scalar(0.0))
        opt = make()

        def step():
            return opt.minimize(lambda: (xs.mat_mul(w).add(b).tanh().sub(ys)).square().mean(),
                                return_cost=True)
        run = tf.jit(step, backend="native") if jitted else step
        losses = [tf.tidy(lambda: run().item()) for _ in range(20)]
        results.append((losses, w.numpy().copy(), b.numpy().copy()))
        if jitted:
            assert "native  " in run.explain()
        w.dispose()
        b.dispose()
    (l0, w0, b0), (l1, w1, b1) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    np.testing.assert_allclose(w1, w0, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(b1, b0, rtol=1e-5, atol=1e-7)


@needs_numba
def test_the_tiny_sgd_step_is_one_compiled_call_with_eagers_bits(always_native):
    results = []
    for be in (None, "native"):
        w = tf.variable(tf.scalar(0.5))
        x, y = tf.scalar(2.0), tf.scalar(5.0)

        def step():
            w.assign(w - tf.grad(lambda v: (v * x - y).square())(w) * 0.01)
        run = tf.jit(step, backend=be) if be else step
        for _ in range(50):
            tf.tidy(run)
        results.append(w.numpy())
        if be:          # every kernel in one compiled call; NumPy only assigns
            plan = run.explain().splitlines()[2:]
            assert plan == ["  native  6 kernels in one loop over 1 float32 element: "
                            "Multiply x3, Sub x2, SquareGrad",
                            "  numpy   assign: a variable assignment"], plan
        w.dispose()
    assert results[0].dtype == results[1].dtype == np.float32
    assert results[0] == results[1]          # arithmetic only: the same bits


# ---------------------------------------------------------------- attributes

@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_leaky_relu_clip_and_step_compile_into_one_segment(dtype, always_native):
    # kernels with number attributes: each a literal of the segment's source
    x = sample(np.random.default_rng(11), 257, dtype)

    def f(x):
        y = tf.clip_by_value(tf.leaky_relu(x, 0.2) * 1.5, -0.5, 0.7)
        return tf.step(y, 0.3) * x + tf.clip_by_value(x, -1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jit_native.JitFallbackWarning)
        r = three_ways(f, x)
    assert_ulps(r["native"], r["numpy"], 0, "native vs numpy")
    assert_ulps(r["native"], r["eager"], 0, "native vs eager")
    segs = native_segments(r["native_fn"])
    assert len(segs) == 1 and sorted(segs[0].names) == [
        "Add", "ClipByValue", "ClipByValue", "LeakyRelu", "Multiply", "Multiply",
        "Step"], segs
    assert "T(0.3)" in segs[0].source and "T(-0.5)" in segs[0].source


EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
         0.7, -0.7, 6.0, 7.0, 1e-45, -1e-45, 1e30, -1e30, 8388609.0, 4503599627370497.0]


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_kernels_give_numpys_bits_at_their_edges(dtype, always_native):
    # signed zeros, NaN and inf in inputs and in attributes (alpha -1e-50 is -0.0 in
    # float32, alpha -0.0 gives 0.0), bounds min > max or NaN, halves (round to even)
    x = np.array(EDGES, dtype)
    y = np.roll(x, 3)
    k = PRIMITIVES

    def f(x, y):
        outs = [E.run_kernel(k["ClipByValue"], (x,), {"lo": lo, "hi": hi}) for lo, hi in
                [(-0.5, 0.7), (np.nan, 1.0), (0.0, np.nan), (-0.0, 0.0), (0.0, -0.0),
                 (1.0, 1.0), (2.0, -1.0), (-np.inf, np.inf), (-1e-50, 1e-50)]]
        for a in (0.0, -0.0, -1e-50, np.nan, -np.inf, 2, np.float32(0.1)):
            outs.append(E.run_kernel(k["Step"], (x,), {"alpha": a}))
            outs.append(E.run_kernel(k["LeakyRelu"], (x,), {"alpha": a}))
        outs += [x.relu6(), x.sign(), x.floor(), x.ceil(), x.round(), tf.clone(x),
                 tf.stop_gradient(x), tf.div_no_nan(x, y)]
        return tf.stack(outs)
    r = three_ways(f, x, y)
    assert_ulps(r["native"], r["numpy"], 0, "native vs numpy")
    assert_ulps(r["native"], r["eager"], 0, "native vs eager")
    segs = native_segments(r["native_fn"])
    assert len(segs) == 1 and len(segs[0].names) == 31, segs


def test_a_step_whose_attributes_are_not_numbers_stays_numpy():
    # (no numba needed: the plan only)
    leaky = PRIMITIVES["LeakyRelu"]
    meta = [((3,), np.dtype("float32"))] * 2
    step = ("k", leaky, (("s", 0),), {"alpha": 0.2}, (1,))
    assert jit_native.classify(step, meta) == (3, np.dtype("float32"), None)
    for bad in (True, np.bool_(False), "0.2", np.array(0.2), [0.2], None, 10 ** 400):
        assert jit_native.classify(step[:3] + ({"alpha": bad},) + step[4:], meta) == \
            jit_native.NO_FORM, bad
    assert jit_native.native_expr(leaky, ["x"], [None], {"alpha": np.float32(0.5)}) == \
        "x if x > T(0) else x * T(0.5)"
    assert jit_native.native_expr(leaky, ["x"], [None], {"alpha": -np.inf}).endswith(
        "x * T(-math.inf)")
