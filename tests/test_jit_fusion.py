"""tf.jit fusion (flowgrad/fusion.py): fused elementwise chains give eager's results to the
bit — every fusable op of the table, forward and backward, seeded random chains, sizes that
are not a multiple of the block, one or two threads — and small inputs are not fused."""
import os

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import engine as E
from flowgrad import fusion
from flowgrad.ops import PRIMITIVES
from oracle_cases import BINARY, DOMAINS, UNARY

BLOCK = 1000                  # small blocks (float32; 500 float64): fast tests
N = 7 * BLOCK + 13            # not a multiple of the block


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(fusion, "BLOCK_BYTES", 4 * BLOCK)
    monkeypatch.setattr(fusion, "FUSE_MIN_BYTES", 8 * BLOCK)
    monkeypatch.setattr(fusion, "THREAD_MIN", 2 * BLOCK)   # two threads do split N


def chains(jf):
    """The fused chains in jf's compiled programs."""
    return [v for p in jf.traces.values() for v in p.namespace.values()
            if isinstance(v, fusion.FusedChain)]


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    # the bytes: NaNs compare equal when their bits do, and -0.0 differs from 0.0
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def run_both(f, arrays, threads=1):
    """f's results eagerly, traced, and replayed (twice, new values the second time)."""
    jf = tf.jit(f, threads=threads)
    ts = [tf.tensor(a) for a in arrays]
    eager = _leaves(f(*ts))
    jf(*ts)
    replay = _leaves(jf(*ts))
    assert chains(jf), "nothing was fused"
    for e, r in zip(eager, replay):
        bits_equal(r, e)
    ts2 = [tf.tensor(a[::-1].copy()) for a in arrays]
    for e, r in zip(_leaves(f(*ts2)), _leaves(jf(*ts2))):
        bits_equal(r, e)
    return jf


def _leaves(out):
    if isinstance(out, tf.Tensor):
        return [out.numpy()]
    if hasattr(out, "_fields"):                      # value_and_grad's Result
        return [v for k in out._fields for v in _leaves(getattr(out, k))]
    if isinstance(out, dict):
        return [v for k in sorted(out, key=str) for v in _leaves(out[k])]
    if isinstance(out, (list, tuple)):
        return [v for o in out for v in _leaves(o)]
    return [out]


def sample(domain, shape, seed, dtype=np.float32):
    return np.asarray(DOMAINS[domain](np.random.default_rng(seed), shape), dtype=dtype)


FUSABLE_UNARY = [(n, f, d) for n, f, _, d in UNARY
                 if n in {"abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos",
                          "cosh", "exp", "expm1", "log", "log1p", "neg", "sin", "sinh",
                          "sqrt", "square", "tan", "tanh"}]
FUSABLE_BINARY = [(n, f, da, db) for n, f, _, da, db in BINARY
                  if n in {"add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum"}]


# gradient kernels that are one backend function taking out= (backends/ext_math.py): the
# backward passes of the unary table's sin, cos and tanh run them
FUSED_GRADIENTS = {"sin_grad": "sin", "cos_grad": "cos", "tanh_grad": "tanh",
                   "square_grad": "square"}


def test_the_lists_cover_every_ufunc_primitive():
    ufuncs = {p.ufunc for p in PRIMITIVES.values() if p.ufunc}
    assert len(FUSABLE_UNARY) + len(FUSABLE_BINARY) + len(FUSED_GRADIENTS) == len(ufuncs) == 32
    assert set(FUSED_GRADIENTS) <= ufuncs
    assert set(FUSED_GRADIENTS.values()) <= {n for n, _, _ in FUSABLE_UNARY}


@pytest.mark.parametrize("name", ["sin", "cos", "tanh", "square"])
def test_gradient_kernels_join_the_fused_chain(name):
    x = sample("real", (N,), 4)
    op = getattr(tf, name)
    jf = run_both(tf.grad(lambda t: (op(t) * t).sum()), [x])
    kernel = {"sin": "SinGrad", "cos": "CosGrad", "tanh": "TanhGrad", "square": "SquareGrad"}[name]
    assert any(kernel in c.names for c in chains(jf))
    # written inline as their ufunc steps: each block calls NumPy's ufuncs only
    for c in chains(jf):
        called = {k: v for k, v in c.run.__globals__.items() if k.startswith("u")}
        assert called and all(isinstance(v, np.ufunc) for v in called.values())


@pytest.mark.parametrize("fn", sorted(FUSED_GRADIENTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_kernels_write_over_either_input(fn, dtype):
    # tf.jit gives an input that dies at the kernel as its out=: the result must not change
    B = E.B
    f = getattr(B, fn)
    dy, x = sample("real", (N,), 5, dtype), sample("real", (N,), 6, dtype)
    want = f(dy, x)
    assert want.dtype == dtype and want.shape == (N,)
    for which in (0, 1):
        ins = [dy.copy(), x.copy()]
        got = f(*ins, out=ins[which])
        assert got is ins[which]
        bits_equal(got, want)
    bits_equal(f(dy, x, out=np.empty_like(dy)), want)
    # and the same bits as the op-by-op rule it replaces
    by_ops = {"sin_grad": lambda: dy * np.cos(x), "cos_grad": lambda: -dy * np.sin(x),
              "tanh_grad": lambda: dy * (1 - x * x), "square_grad": lambda: dy * (x * 2)}[fn]()
    np.testing.assert_array_equal(want, by_ops)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, op, dom", FUSABLE_UNARY, ids=[c[0] for c in FUSABLE_UNARY])
def test_unary_forward_and_backward_bitwise(name, op, dom, dtype):
    x = sample(dom, (N,), 1, dtype)

    def f(t):
        y = op(t)
        return y * t + y          # the op, then a chain on its result

    run_both(f, [x])
    run_both(tf.value_and_grad(lambda t: f(t).sum()), [x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, op, da, db", FUSABLE_BINARY,
                         ids=[c[0] for c in FUSABLE_BINARY])
def test_binary_forward_and_backward_bitwise(name, op, da, db, dtype):
    a, b = sample(da, (N,), 2, dtype), sample(db, (N,), 3, dtype)

    def f(s, t):
        y = op(s, t)
        return (y * s - t) * 0.5 + op(s, 1.5) if name != "pow" else (y * s - t) * 0.5

    run_both(f, [a, b])
    vg = tf.value_and_grads(lambda s, t: f(s, t).sum())
    run_both(lambda s, t: vg([s, t]), [a, b])


UN = ["sin", "cos", "exp", "tanh", "atan", "square", "neg", "abs", "sinh"]
BIN = ["add", "sub", "mul", "maximum", "minimum", "div"]


def random_chain(seed, length=12):
    """A seeded random elementwise program of two inputs: unary and binary ops on earlier
    values (shared intermediates), Python and size-1 scalars, a second output."""
    rng = np.random.default_rng(seed)
    scale = tf.tensor(np.float32([0.75]))          # size 1: broadcast whole

    def f(x, y):
        vals = [x, y]
        for _ in range(length):
            kind = rng.integers(3)
            a = vals[rng.integers(len(vals))]
            if kind == 0:
                v = getattr(tf, UN[rng.integers(len(UN))])(a.mul(0.25))
            elif kind == 1:
                v = getattr(tf, BIN[rng.integers(len(BIN))])(a, vals[rng.integers(len(vals))])
            else:
                v = a * scale + float(rng.normal())
            vals.append(v.tanh() if kind == 1 else v)    # (tanh: keeps values bounded)
        return vals[-1] + vals[-2], vals[-3]
    state = rng.bit_generator.state

    def fresh(x, y):          # the same program at every call (trace, replay, eager)
        rng.bit_generator.state = state
        return f(x, y)
    return fresh


@pytest.mark.parametrize("seed", range(8))
def test_random_chains_forward_and_backward_bitwise(seed):
    f = random_chain(seed)
    x, y = sample("real", (N,), 10 + seed), sample("real", (N,), 20 + seed)
    run_both(f, [x, y])
    g = tf.grads(lambda a, b: (f(a, b)[0] * f(a, b)[1] + a * b).sum())
    run_both(lambda a, b: g([a, b]), [x, y])


@pytest.mark.parametrize("seed", range(3))
def test_two_threads_give_the_numbers_of_one(seed):
    g = tf.grads(lambda a, b: (random_chain(seed)(a, b)[0].exp() * b).sum())

    def f(a, b):
        return g([a, b])
    x, y = sample("real", (N,), seed), sample("real", (N,), seed + 5)
    one = run_both(f, [x, y], threads=1)
    two = run_both(f, [x, y], threads=2)
    xs = [tf.tensor(x), tf.tensor(y)]
    for a, b in zip(_leaves(one(*xs)), _leaves(two(*xs))):
        bits_equal(a, b)


def test_threads_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLOWGRAD_JIT_THREADS", "2")
    assert fusion._env_threads() == 2
    for bad in ("many", "0", "-2"):
        monkeypatch.setenv("FLOWGRAD_JIT_THREADS", bad)
        with pytest.warns(RuntimeWarning, match=f"FLOWGRAD_JIT_THREADS='{bad}'.*1 thread"):
            assert fusion._env_threads() == 1
    monkeypatch.delenv("FLOWGRAD_JIT_THREADS")
    assert fusion._env_threads() == fusion._cores() >= 1
    if hasattr(os, "sched_getaffinity"):
        assert fusion._cores() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(fusion, "THREADS", 2)        # what threads=None uses
    x = sample("real", (N,), 4)
    run_both(lambda t: t.sin() * t.cos() + t, [x], threads=None)


def test_default_block_size_and_shapes_that_broadcast_equal_sizes(monkeypatch):
    monkeypatch.setattr(fusion, "BLOCK_BYTES", 1 << 17)
    monkeypatch.setattr(fusion, "FUSE_MIN_BYTES", 1 << 20)
    n = 9 * 32768 + 77
    x = sample("real", (1, n), 5)
    y = sample("real", (n,), 6)
    jf = run_both(lambda a, b: ((a * b).exp() - b.sin()) * a, [x, y])
    assert chains(jf)[0].n == n
    g = tf.grads(lambda a, b: ((a * b).exp() - b.sin()).sum())
    run_both(lambda a, b: g([a, b]), [x, y])


def test_tiny_inputs_are_not_fused():
    f = tf.jit(tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum()))
    for n in (1, 10, 2 * BLOCK - 1):
        x = tf.tensor(sample("real", (n,), n))
        f(x)
        bits_equal(f(x).numpy(), tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())(x).numpy())
    assert not chains(f)


def test_intermediates_used_outside_the_chain_and_unrelated_kernels_between():
    m = tf.tensor(np.eye(3, dtype=np.float32))

    def f(x):
        a = x.exp()
        b = a * x                          # a and b: read after the chain too
        w = m.mat_mul(m)                   # unrelated: moved before the chain
        c = (b + 1.0).sin() * a
        return c, b.reshape([-1]).sum(), a.max(), w

    jf = run_both(f, [sample("real", (N,), 7)])
    (chain,) = chains(jf)
    assert len(chain.names) == 5 and len(chain.outs) == 3


def test_results_of_earlier_calls_are_not_overwritten():
    jf = tf.jit(lambda t: t.sin() * t + t.cos())
    x1, x2 = sample("real", (N,), 8), sample("real", (N,), 9)
    jf(tf.tensor(x1))
    r1 = jf(tf.tensor(x1))
    kept = r1.numpy().copy()
    r2 = jf(tf.tensor(x2))
    assert chains(jf)
    bits_equal(r1.numpy(), kept)
    assert not np.array_equal(r2.numpy(), kept)


def test_jit_training_step_with_fused_update():
    w0 = sample("real", (N,), 11)
    results = []
    for jit in (False, True):
        w = tf.variable(tf.tensor(w0))
        opt = tf.train.sgd(0.1)

        def step():
            return opt.minimize(lambda: ((w.sin() * w).exp() * 0.01).sum(), return_cost=True)
        fn = tf.jit(step) if jit else step
        costs = [fn().numpy() for _ in range(3)]
        results.append((costs, w.numpy().copy()))
        tf.dispose(w)
    bits_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(results[0][0], results[1][0])


def test_nan_and_inf_stay_silent_in_worker_threads():
    import warnings
    x = np.linspace(-1, 1, N).astype(np.float32)      # log < 0 -> NaN, log(0) = -Inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jf = run_both(lambda t: (t.log() * t).sqrt() + t / t, [x], threads=2)
        assert np.isnan(_leaves(jf(tf.tensor(x)))[0]).any()


def test_reduced_values_broadcast_into_a_chain():
    # a 0-d slot (the mean) and a (1,)-shaped one are inputs of one element: broadcast whole
    def f(x):
        m = x.mean()
        return (x.sin() * m + x).exp() - x.max(keepdims=True) * x

    jf = run_both(f, [sample("real", (N,), 12)])
    assert not all(chains(jf)[0].full)
    run_both(tf.grad(lambda x: f(x).sum()), [sample("real", (N,), 13)])


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"),
                    reason="timer interrupts use signal.setitimer (Unix)")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupted_threaded_replay_leaves_no_worker_writing(monkeypatch):
    """A Ctrl-C can end a call while its second thread still writes into the replay's
    buffers: the next call (other inputs) waits for it, and a worker not yet started does
    nothing, so every completed call has eager's bits."""
    from test_engine_state import _interrupted
    monkeypatch.setattr(fusion, "BLOCK_BYTES", 1 << 12)         # many blocks a worker
    n = 40 * (1 << 10) + 7
    g = tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())
    jg = tf.jit(g, threads=2, backend="numpy")     # (fused chains; native: a few ulp off)
    xs = [tf.tensor(np.linspace(-1, 1, n).astype(np.float32) * (1 + k / 8))
          for k in range(4)]
    want = [g(x).numpy() for x in xs]
    jg(xs[0])
    assert chains(jg) and all(c.threads == 2 for c in chains(jg))
    bad = []
    state = {"k": 0}

    def step():
        k = state["k"] = (state["k"] + 1) % 4
        out = jg(xs[k]).numpy()
        if not np.array_equal(out, want[k]):
            bad.append(k)
    import time
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    per = (time.perf_counter() - t0) / 5
    hits = _interrupted(200, step, per)
    assert hits >= 20
    for _ in range(8):                     # and after the last interrupt
        step()
    assert not bad, f"{len(bad)} replays returned wrong values"


def test_a_worker_lets_go_of_a_call_s_arrays():
    """After a threaded call, nothing but the caller refers to the arrays it was given: a
    worker that kept its last job made tf.jit's reuse of its outputs fail on every call."""
    import gc
    import weakref
    x = tf.tensor(sample("real", (N,), 0))
    jf = tf.jit(lambda t: (t.exp() * t.sin() + t).sqrt(), threads=2)
    jf(x)
    fc = chains(jf)[0]
    ins = [np.linspace(0, 1, N).astype(np.float32)]
    outs = [np.empty(N, np.float32)]
    refs = [weakref.ref(a) for a in ins + outs]
    fc(ins, outs)
    del ins, outs
    gc.collect()
    assert all(r() is None for r in refs), "a worker still holds the call's arrays"


def test_set_jit_threads_is_the_default_of_every_jitted_function(monkeypatch):
    monkeypatch.setattr(fusion, "THREADS", fusion.THREADS)     # (restored afterwards)
    previous = tf.set_jit_threads(2)
    assert tf.get_jit_threads() == 2 and fusion.THREADS == 2
    x = sample("real", (N,), 5)
    jf = run_both(lambda t: t.sin() * t.cos() + t, [x], threads=None)
    assert chains(jf)[0].threads is None            # (so it follows the setting)
    assert tf.set_jit_threads(None) == 2
    assert tf.get_jit_threads() == fusion._env_threads()
    assert tf.set_jit_threads(previous) == fusion._env_threads()


@pytest.mark.parametrize("bad, why", [(0, ">= 1, got 0"), (-1, ">= 1, got -1"),
                                      ("2", "an integer, got '2'"),
                                      (2.5, "an integer, got 2.5"),
                                      (True, "an integer, got True")])
def test_thread_counts_are_checked(bad, why):
    with pytest.raises(tf.errors.ArgumentError, match=f"tf.jit: threads must be {why}"):
        tf.jit(lambda t: t * 2, threads=bad)
    with pytest.raises(tf.errors.ArgumentError,
                       match=f"set_jit_threads: threads must be {why}"):
        tf.set_jit_threads(bad)
