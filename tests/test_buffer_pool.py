"""The buffer pool (memory policy "pool", the default): big arrays flowgrad's tensors let
go of are reused by its next elementwise kernels, matrix products and fused optimizer
updates — never an array anything else still refers to, never a shape no kernel asked
for, never more than the limit, and always the same bits as without it."""
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import buffer_pool
from flowgrad import engine as E

N = buffer_pool.MIN_ELEMENTS * 2          # big enough to be pooled


@pytest.fixture
def policy():
    """Run the test under a chosen policy, and put the previous one back."""
    previous = tf.get_memory_policy()
    yield tf.set_memory_policy
    tf.set_memory_policy(previous)


def _w3(x):
    return tf.grad(lambda t: (t.exp() * t.sin() + t * t).sum())(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooled_results_are_the_same_bits(policy, dtype):
    x = tf.tensor(np.linspace(-2, 2, N).astype(dtype))
    policy("system")
    want = [_w3(x).numpy() for _ in range(3)]
    ops = [lambda t: (t * 3 - 1).tanh() / (t.abs() + 1),
           lambda t: t.maximum(0.5).sqrt().exp() - t.square(),
           # the fused gradient kernels (CosGrad, TanhGrad; SinGrad in _w3) take out= too
           lambda t: tf.grad(lambda u: (u.cos() * u.tanh()).sum())(t)]
    want += [op(x).numpy() for op in ops]
    policy("pool")
    for _ in range(3):                     # later calls run in recycled buffers
        got = [_w3(x).numpy() for _ in range(3)] + [op(x).numpy() for op in ops]
    assert buffer_pool.pooled_bytes() > 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    # and the gradient is right: d/dx = e^x (sin x + cos x) + 2x
    xs = np.linspace(-2, 2, N)
    np.testing.assert_allclose(got[0], np.exp(xs) * (np.sin(xs) + np.cos(xs)) + 2 * xs,
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True)])
def test_pooled_matrix_products_are_the_same_bits(policy, ta, tb):
    """Big products write into pooled outputs (the NumPy backend's matmul): the same
    BLAS product, into other memory, and the same bits; so are their gradients."""
    rng = np.random.default_rng(7)
    m, k, n = 300, 77, buffer_pool.MIN_ELEMENTS // 300 + 3
    a = tf.tensor(rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32))
    b = tf.tensor(rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32))

    def run():
        y = tf.mat_mul(a, b, ta, tb)
        ga, gb = tf.grads(lambda a, b: tf.mat_mul(a, b, ta, tb).tanh().sum())([a, b])
        return [t.numpy() for t in (y, ga, gb)]
    policy("system")
    want = run()
    policy("pool")
    took, take = [], buffer_pool.take
    try:
        buffer_pool.take = lambda shape, dt: took.append(take(shape, dt)) or took[-1]
        for _ in range(3):                 # later calls write into recycled outputs
            got = run()
    finally:
        buffer_pool.take = take
    assert any(t is not None and t.shape == (m, n) for t in took)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(want[0], (a.numpy().T if ta else a.numpy()) @
                               (b.numpy().T if tb else b.numpy()), rtol=1e-4, atol=1e-4)


def test_an_array_the_user_holds_is_never_reused(policy):
    policy("pool")
    x = tf.tensor(np.full(N, 2.0, np.float32))
    y = x * 3                          # asks for (N,) float32 buffers from now on
    held = np.asarray(y, copy=False)   # the user keeps a view of y's memory ...
    dl = np.from_dlpack(x * 5)         # ... and another tensor's, through DLPack
    assert np.shares_memory(held, y._data)
    y.dispose()
    tf.dispose(x * 7)                  # (a free one, for the pool)
    for _ in range(5):
        z = x * 11
        z.dispose()
    assert np.all(held == 6.0) and np.all(dl == 10.0)
    x.dispose()


@pytest.mark.extra("torch", "oracle")
def test_an_exported_array_is_never_reused(policy):
    import torch
    policy("pool")
    x = tf.tensor(np.ones(N, np.float32))
    y = x + 1
    shared = torch.from_dlpack(y)           # torch now refers to y's memory
    y.dispose()
    for _ in range(5):
        tf.dispose(x * 9)
    assert float(shared.sum()) == 2.0 * N


def test_only_wanted_shapes_are_kept(policy):
    policy("system")
    policy("pool")                          # (an empty pool)
    a = tf.ones([300, 400])
    m = tf.concat([a, a], 0)                # (600, 400): made by concat, which asks none
    m.dispose()
    assert buffer_pool.pooled_bytes() == 0
    tf.dispose(a + 1)                       # (300, 400) float32 is now wanted
    assert buffer_pool.pooled_bytes() == 300 * 400 * 4
    a.dispose()


def test_the_pool_stays_under_its_limit(policy, monkeypatch):
    policy("system")
    policy("pool")
    monkeypatch.setattr(buffer_pool, "LIMIT_BYTES", 3 * N * 4)
    x = tf.tensor(np.ones(N, np.float32))
    ys = [x * i for i in range(8)]          # 8 live arrays, then all freed
    tf.dispose(ys)
    assert 0 < buffer_pool.pooled_bytes() <= 3 * N * 4
    x.dispose()


def test_other_policies_empty_the_pool_and_keep_nothing(policy):
    policy("pool")
    x = tf.tensor(np.ones(N, np.float32))
    for _ in range(3):
        tf.dispose(x * 2)
    assert buffer_pool.pooled_bytes() > 0
    for name in ("system", "reuse"):
        policy(name)
        assert buffer_pool.pooled_bytes() == 0
        for _ in range(3):
            tf.dispose(x * 2)
        assert buffer_pool.pooled_bytes() == 0
    x.dispose()


def test_pooled_arrays_are_not_tensors(policy):
    """memory() counts tensors only: what the pool keeps is not in it."""
    policy("pool")
    before = tf.memory()
    x = tf.tensor(np.ones(N, np.float32))
    for _ in range(3):
        tf.dispose(x.exp())
    x.dispose()
    after = tf.memory()
    assert (after.num_tensors, after.num_bytes) == (before.num_tensors, before.num_bytes)
    assert buffer_pool.pooled_bytes() >= N * 4


def test_threads_have_their_own_pools(policy):
    policy("pool")
    results, errors = {}, []

    def work(k):
        try:
            x = tf.tensor(np.full(N, float(k), np.float32))
            for _ in range(20):
                y = (x * 2 + 1).sqrt()
                results.setdefault(k, []).append(float(y.numpy()[-1]))
                y.dispose()
            x.dispose()
        except Exception as e:        # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, vals in results.items():
        assert vals == [np.sqrt(np.float32(2 * k + 1))] * 20


def test_off_the_numpy_backend_the_pool_is_not_used(policy):
    """Other backends' arrays never reach NumPy's ufuncs (nor the pool)."""
    policy("pool")
    assert E.POOL_MIN == buffer_pool.MIN_ELEMENTS
    prev = tf.set_backend("array_api_strict")
    try:
        assert E.POOL_MIN > 10 ** 12
        x = tf.tensor(np.linspace(0, 1, N).astype(np.float32))
        for _ in range(3):
            y = (x * 2).exp()
            np.testing.assert_allclose(y.numpy()[-1], np.exp(2.0), rtol=1e-6)
            y.dispose()
        x.dispose()
    finally:
        tf.set_backend(prev)
    assert E.POOL_MIN == buffer_pool.MIN_ELEMENTS
