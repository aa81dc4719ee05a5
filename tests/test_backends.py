"""The backend layer: selecting backends, tensors of two backends in one op, the CuPy backend
without a GPU, DLPack with NumPy (no copies where none is needed), device memory."""
import numpy as np
import pytest

import flowgrad as tf
import flowgrad.backends as bk
from flowgrad.errors import ArgumentError, BackendError, MissingDependencyError

strict = pytest.importorskip("array_api_strict", reason="the strict backend needs "
                             "array-api-strict (the test extra)")


@pytest.fixture
def on_strict():
    prev = tf.set_backend("array_api_strict")
    yield
    tf.set_backend(prev)


def test_select_and_list():
    assert tf.get_backend() == "numpy"
    assert {"numpy", "cupy", "array_api_strict"} <= set(tf.backends())
    assert tf.backends() == bk.backends()            # the package, called, lists them
    with pytest.raises(BackendError, match="Backend 'webgl' not found: the backends are"):
        tf.set_backend("webgl")
    with pytest.raises(ArgumentError, match="must be a string"):
        tf.set_backend(3)
    assert tf.get_backend() == "numpy"


def test_tensors_remember_their_backend(on_strict):
    before = tf.memory().num_bytes
    x = tf.tensor([1.0, 2.0])
    assert type(x._data) is type(strict.asarray(0.0)) and x.backend == "array_api_strict"
    assert tf.memory().num_bytes - before == 8               # two float32, counted alike
    np.testing.assert_allclose(x.exp().numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    tf.set_backend("numpy")
    y = tf.tensor([1.0, 2.0])
    with pytest.raises(BackendError) as e:
        y + x
    msg = str(e.value)
    assert "input 1 is a tensor of backend 'array_api_strict'" in msg
    assert "the active backend is 'numpy'" in msg and "tf.from_dlpack" in msg
    z = tf.from_dlpack(x)                            # brought over, without a copy
    assert z.backend == "numpy" and (y + z).numpy().tolist() == [2.0, 4.0]


def test_cupy_without_cupy_or_gpu_is_a_clear_error():
    try:
        import cupy  # noqa: F401
        has_cupy = True
    except ImportError:
        has_cupy = False
    if has_cupy:
        pytest.skip("CuPy is installed here: bench/gpu_check.py covers the GPU")
    with pytest.raises(MissingDependencyError, match=r"flowgrad\[cuda\]"):
        tf.set_backend("cupy")
    assert tf.get_backend() == "numpy"


def test_dlpack_round_trips_share_memory():
    a = np.arange(6.0).reshape(2, 3)
    t = tf.from_dlpack(a)
    assert t.dtype == "float64" and t.shape == (2, 3)
    assert np.shares_memory(t._data, a)                      # no copy in
    back = np.from_dlpack(t)
    assert np.shares_memory(back, t._data)                   # no copy out
    assert t.__dlpack_device__() == a.__dlpack_device__()
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert np.shares_memory(tf.from_dlpack(ro)._data, ro)    # DLPack 1.0 says read-only
    i64 = tf.from_dlpack(np.arange(3))                       # not a flowgrad dtype: copied
    assert i64.dtype == "int32" and i64.numpy().tolist() == [0, 1, 2]
    f = tf.from_dlpack(tf.tensor([1.5]))                     # another tensor
    assert f.item() == 1.5
    with pytest.raises(ArgumentError, match="must support DLPack"):
        tf.from_dlpack([1, 2])


def test_memory_reports_no_device_bytes_on_the_host():
    assert "num_bytes_in_gpu" not in tf.memory()


def test_training_on_strict_follows_numpy_to_the_bit():
    """An MLP with Adam: op-by-op updates on array-api-strict (no out= buffers there) give
    NumPy's fused updates' losses exactly; tf.jit works on strict, but refuses to replay an
    op-by-op optimizer update (it would freeze the step count)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    w0 = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in ((8, 16), (16, 3))]
    losses = {}
    for name in ("numpy", "array_api_strict"):
        prev = tf.set_backend(name)
        try:
            xs, ys = tf.tensor(x), tf.tensor(y)
            vs = [tf.variable(tf.tensor(w)) for w in w0]
            opt = tf.train.adam(0.01)
            loss = lambda: tf.losses.softmax_cross_entropy(         # noqa: E731
                ys, xs.mat_mul(vs[0]).relu().mat_mul(vs[1]))
            losses[name] = [opt.minimize(loss, return_cost=True).item() for _ in range(15)]
            if name != "numpy":
                g = tf.grad(lambda t: (t.exp() * t.sin()).sum())
                xt = tf.tensor(np.linspace(-1, 1, 5000).astype(np.float32))
                jg = tf.jit(g)
                jg(xt)
                np.testing.assert_array_equal(jg(xt).numpy(), g(xt).numpy())
                with pytest.raises(tf.JitError, match="cannot replay this Adam update"):
                    tf.jit(lambda: opt.minimize(loss))()
            tf.dispose(vs)
            opt.dispose()
        finally:
            tf.set_backend(prev)
    assert losses["numpy"][-1] < 0.5 * losses["numpy"][0]                 # it trains
    assert losses["array_api_strict"] == losses["numpy"]


def test_layer_error_paths():
    class Unreadable:                      # a DLPack producer whose export always fails
        def __dlpack__(self, **kw):
            raise BufferError("device memory not exportable")

        def __dlpack_device__(self):
            return (1, 0)
    with pytest.raises(BackendError, match="backend 'numpy' cannot read a Unreadable"):
        tf.from_dlpack(Unreadable())
    with pytest.raises(BackendError, match="backend 'numpy' is active"):
        bk.unregister_backend("numpy")
    from flowgrad.backends import ext, ext_shape

    def pad(B, x):
        return x
    with pytest.raises(ValueError, match="extension 'pad' is defined twice"):
        ext.collect((ext_shape.EXTENSIONS, {}), ((pad,), {}))
    with pytest.raises(ValueError, match="backend implementations of no extension: numpy.pda"):
        ext.collect((ext_shape.EXTENSIONS, {("numpy", "pda"): pad}))
    from flowgrad import engine
    with pytest.raises(BackendError, match="belongs to no backend"):
        engine.to_host(object())


def test_numpy_backends_own_mean_and_broadcast_to_match_numpys_to_the_bit():
    """The NumPy backend's mean (a sum divided by its count in the dtype) and broadcast_to
    (a stride-0 view of a NumPy scalar) give NumPy's own results: same bits, types and
    shapes, and read-only spread views."""
    B = bk.namespace("numpy")
    rng = np.random.default_rng(11)
    for k in range(400):
        dt = (np.float32, np.float64)[k % 2]
        shape = tuple(int(s) for s in rng.integers(1, 30, rng.integers(1, 4)))
        x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-8, 8)).astype(dt)
        pick = rng.integers(0, len(shape), rng.integers(1, len(shape) + 1))
        for axis in (None, tuple(sorted(set(int(a) for a in pick)))):
            for keep in (False, True):
                got, want = B.mean(x, axis=axis, keepdims=keep), x.mean(axis=axis, keepdims=keep)
                assert type(got) is type(want) and np.shape(got) == np.shape(want)
                assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (shape, axis)
    for v in (np.float32(0.1), np.float64(-2.5), np.int32(7), np.bool_(True)):
        got = B.broadcast_to(v, (3, 2))
        assert got.dtype == v.dtype and got.shape == (3, 2) and not got.flags.writeable
        np.testing.assert_array_equal(got, np.broadcast_to(v, (3, 2)))
    assert B.broadcast_to(np.float32(1), (0, 4)).shape == (0, 4)
