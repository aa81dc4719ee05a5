"""TF.js's engine-level API: tf.engine() with start_scope/end_scope (tf.engine still reads as
the module flowgrad.engine), tf.get_gradient(kernel_name), tf.backend().epsilon(); their
camelCase spellings and error messages."""
import re
import threading
import types

import numpy as np
import pytest

import flowgrad as tf
from opcheck import numeric_grad
from flowgrad.errors import ArgumentError, FlowgradError


# ---------------------------------------------------------------- tf.engine()

def test_engine_is_callable_and_is_the_engine_module_itself():
    import flowgrad.engine
    from flowgrad import engine as E
    import sys
    real = sys.modules["flowgrad.engine"]
    assert isinstance(tf.engine(), tf.Engine) and tf.engine() is tf.engine()
    # one object: no proxy between the package attribute and the submodule
    assert E is real and tf.engine is real and flowgrad.engine is real
    assert isinstance(tf.engine, types.ModuleType)
    assert "run_kernel" in vars(real) and "call it" in repr(tf.engine)
    from flowgrad.ops import _core
    assert _core.E is real


def test_monkeypatching_the_engine_module_is_undone_exactly(monkeypatch):
    # pytest >= 9.2 undoes setattr by the target's own __dict__ entry (and deletes the
    # attribute when the target had none): through a proxy module that forwarded writes,
    # undo deleted the engine's run_kernel and every later test failed
    from flowgrad import engine as E
    original = E.run_kernel
    monkeypatch.setattr(E, "run_kernel", lambda *a, **k: None)
    assert vars(E)["run_kernel"] is not original
    monkeypatch.undo()
    assert vars(E)["run_kernel"] is original
    assert tf.scalar(3.0).square().item() == 9.0


def test_start_and_end_scope_dispose_like_tidy():
    before = tf.memory().num_tensors
    eng = tf.engine()
    eng.start_scope()
    a = tf.scalar(2)
    b = a.square()
    c = tf.keep(a.add(1))
    eng.end_scope({"b": b})
    assert a.is_disposed and not b.is_disposed and not c.is_disposed
    assert tf.memory().num_tensors - before == 2
    with pytest.raises(tf.DisposedError, match="Tensor is disposed"):
        a.square()
    tf.dispose([b, c])
    assert tf.memory().num_tensors == before


def test_scopes_nest_with_tidy_and_camel_case():
    eng = tf.engine()
    eng.startScope("outer")
    inner = []

    def f():
        eng.start_scope("inner")
        t = tf.scalar(1).add(1)
        inner.append(tf.scalar(5))
        eng.end_scope(t)          # t moves to tidy's scope, which returns it
        return t
    kept = tf.tidy(f)
    assert inner[0].is_disposed and not kept.is_disposed
    eng.endScope()                # kept was created in 'outer' (moved there by tidy)
    assert kept.is_disposed


def test_end_scope_without_start_scope():
    with pytest.raises(FlowgradError, match=re.escape(
            "engine().end_scope() was called without a matching engine().start_scope() in "
            "this thread")):
        tf.engine().end_scope()
    with pytest.raises(ArgumentError, match=re.escape(
            "engine().start_scope(name): name must be a string or None, got int")):
        tf.engine().start_scope(3)
    with pytest.raises(AttributeError, match="'Engine' object has no attribute 'startScop'"):
        tf.engine().startScop


def test_scopes_belong_to_their_thread():
    errors = []

    def worker():
        try:
            tf.engine().end_scope()
        except FlowgradError as e:
            errors.append(e)
    tf.engine().start_scope()
    try:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    finally:
        tf.engine().end_scope()
    assert len(errors) == 1


# ---------------------------------------------------------------- tf.get_gradient

def test_get_gradient_returns_the_registered_rule():
    cfg = tf.getGradient("Square")
    assert cfg.kernel_name == "Square" and cfg.kernelName == "Square"
    assert cfg["save_all_inputs"] is True and cfg.save_outputs is False
    x = tf.scalar(3.0)
    assert cfg.gradFunc(tf.scalar(2.0), x).item() == 12.0
    # a rule that reads its output, and a two-input rule (one gradient per input)
    assert tf.get_gradient("Exp").save_outputs is True
    ga, gb = tf.get_gradient("Multiply").grad_func(tf.scalar(1.0), tf.scalar(2.0),
                                                  tf.scalar(5.0))
    assert (ga.item(), gb.item()) == (5.0, 2.0)
    # a rule that takes needs= works when called by hand, with attributes as keywords
    conv = tf.get_gradient("Conv2D")
    assert conv is not None
    x4, w = tf.ones([1, 3, 3, 1]), tf.ones([2, 2, 1, 1])
    y = tf.conv2d(x4, w, 1, "valid")
    geo = None
    from flowgrad.ops import conv as C
    geo = C.geometry("conv2d", (3, 3), (2, 2), (1, 1), (1, 1), "valid")
    dx, dw = conv.grad_func(tf.ones_like(y), x4, w, geo=geo)
    np.testing.assert_array_equal(dx.numpy().ravel(), [1, 2, 1, 2, 4, 2, 1, 2, 1])
    np.testing.assert_array_equal(dw.numpy().ravel(), [4, 4, 4, 4])
    # the rule is written in flowgrad ops: it is differentiable
    g2 = tf.grad(lambda v: cfg.grad_func(tf.scalar(1.0), v))(x)
    assert g2.item() == 2.0


def test_get_gradient_of_kernels_without_one():
    assert tf.get_gradient("Greater") is None          # non-differentiable: zero gradient
    assert tf.get_gradient("NoSuchKernel") is None
    assert tf.get_gradient("square") is None           # kernel names are TF.js's
    with pytest.raises(ArgumentError, match=re.escape(
            "get_gradient(kernel_name): kernel_name must be a string (a TF.js kernel name "
            "such as 'Square'), got Tensor")):
        tf.get_gradient(tf.scalar(1))


def test_get_gradient_covers_new_kernels():
    assert tf.get_gradient("Dilation2D").kernel_name == "Dilation2D"


# the kernels with a registered gradient in TF.js (tfjs-core 4.22's register_all_gradients,
# 101 distinct names); flowgrad has no complex dtype, so no ComplexAbs
TFJS_GRADIENTS = """Abs Acos Acosh Add AddN ArgMax ArgMin Asin Asinh Atan Atan2 Atanh AvgPool
AvgPool3D BatchMatMul BatchToSpaceND BroadcastTo Cast Ceil ClipByValue ComplexAbs Concat Conv2D
Conv2DBackpropInput Conv3D Cos Cosh Cumsum DepthwiseConv2dNative Dilation2D Elu Erf Exp
ExpandDims Expm1 Floor FloorDiv FusedBatchNorm GatherV2 GreaterEqual Identity IsFinite IsInf
IsNan LRN LeakyRelu Log Log1p LogSoftmax Max MaxPool MaxPool3D Maximum Mean Min Minimum
MirrorPad Mod Multiply Neg OneHot OnesLike Pack PadV2 Pow Prelu Prod RealDiv Reciprocal Relu
Relu6 Reshape ResizeBilinear ResizeNearestNeighbor Reverse Round Rsqrt Select Selu Sigmoid
Sign Sin Sinh Slice Softmax Softplus SpaceToBatchND SplitV Sqrt Square SquaredDifference Step
Sub Sum Tan Tanh Tile Transpose Unpack UnsortedSegmentSum ZerosLike""".split()


def test_get_gradient_answers_for_every_tfjs_kernel_flowgrad_implements():
    assert len(TFJS_GRADIENTS) == 101
    missing = [k for k in TFJS_GRADIENTS if tf.get_gradient(k) is None]
    assert missing == ["ComplexAbs"]


@pytest.mark.parametrize("kernel,inputs", [
    ("Floor", [tf.tensor([1.5, -2.5])]), ("Ceil", [tf.tensor([1.5])]),
    ("Round", [tf.tensor([0.5])]), ("Sign", [tf.tensor([-3.0, 2.0])]),
    ("Step", [tf.tensor([-1.0, 1.0])]), ("IsNan", [tf.tensor([1.0])]),
    ("IsInf", [tf.tensor([1.0])]), ("IsFinite", [tf.tensor([1.0])]),
    ("ArgMax", [tf.tensor([[1.0, 3.0]])]), ("ArgMin", [tf.tensor([[1.0, 3.0]])]),
    ("OnesLike", [tf.tensor([1.0, 2.0])]), ("ZerosLike", [tf.tensor([1.0, 2.0])]),
    ("OneHot", [tf.tensor([0, 2], dtype="int32")]),
    ("GreaterEqual", [tf.tensor([1.0, 2.0]), tf.tensor([2.0, 1.0])])])
def test_the_zero_gradients_tfjs_registers(kernel, inputs):
    cfg = tf.get_gradient(kernel)
    assert cfg.kernel_name == kernel and cfg.save_outputs is False
    got = cfg.grad_func(tf.ones([2]), *inputs)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(inputs)
    for g, x in zip(got, inputs):
        assert g.shape == x.shape and g.dtype == x.dtype
        assert not g.numpy().any()


def test_the_gradients_of_kernels_flowgrad_composes():
    rng = np.random.default_rng(3)
    x = tf.tensor(rng.uniform(0.5, 1.5, (2, 3)), dtype="float64")
    dy = tf.tensor(rng.uniform(-1, 1, (2, 1, 3)), dtype="float64")
    # ExpandDims: the gradient is dy reshaped to x's shape
    g = tf.get_gradient("ExpandDims").grad_func(dy, x, axis=1)
    np.testing.assert_array_equal(g.numpy(), dy.numpy().reshape(2, 3))
    # UnsortedSegmentSum: x's row i receives dy's row segment_ids[i]; ids get none
    ids = tf.tensor([1, 0], dtype="int32")
    dys = tf.tensor(rng.uniform(-1, 1, (2, 3)), dtype="float64")
    gx, gids, gnum = tf.get_gradient("UnsortedSegmentSum").grad_func(dys, x, ids, 2)
    np.testing.assert_array_equal(gx.numpy(), dys.numpy()[[1, 0]])
    assert gids is None and gnum is None
    # FusedBatchNorm and LRN against central finite differences of <dy, op(x)> in float64
    mean, var = tf.tensor([0.1, 0.2, 0.3], dtype="float64"), tf.tensor([1.0, 2.0, 0.5],
                                                                      dtype="float64")
    dyb = tf.tensor(rng.uniform(-1, 1, (2, 3)), dtype="float64")
    got = tf.get_gradient("FusedBatchNorm").grad_func(dyb, x, mean, var)
    want = numeric_grad(lambda *a: (tf.batch_norm(*a) * dyb).sum(),
                        [x.numpy(), mean.numpy(), var.numpy()])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-7, atol=1e-9)
    img = tf.tensor(rng.uniform(0.5, 1.5, (1, 2, 2, 3)), dtype="float64")
    dyl = tf.tensor(rng.uniform(-1, 1, (1, 2, 2, 3)), dtype="float64")
    g = tf.get_gradient("LRN").grad_func(dyl, img, depth_radius=1, bias=2.0, alpha=0.5,
                                         beta=0.75)       # (attributes as keywords)
    (num,) = numeric_grad(lambda a: (tf.local_response_normalization(a, 1, 2.0, 0.5, 0.75)
                                     * dyl).sum(), [img.numpy()])
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-7, atol=1e-9)
    # and the rule is differentiable again: its gradient of dy * v (expanded) is dy * v,
    # whose sum has the derivative dy with respect to v
    h = tf.grad(lambda v: tf.get_gradient("ExpandDims").grad_func(
        dy * v.expand_dims(1), v, axis=1).sum())(x)
    np.testing.assert_allclose(h.numpy(), dy.numpy().reshape(2, 3), rtol=1e-12)


# ---------------------------------------------------------------- tf.backend()

def test_backend_epsilon_and_precision():
    b = tf.backend()
    assert b.epsilon() == 1e-7 and b.float_precision() == 32
    assert b.floatPrecision() == 32 and b.name == tf.get_backend() == "numpy"
    assert isinstance(b, tf.KernelBackend) and "epsilon 1e-07" in repr(b)
    # the optimizers' default epsilon is the backend's
    assert tf.train.adam(0.1).epsilon == tf.backend().epsilon()
    with pytest.raises(AttributeError, match="'KernelBackend' object has no attribute"):
        b.floatPrecisio


def test_public_names_and_camel_case():
    for name in ("engine", "get_gradient", "backend", "Engine", "KernelBackend"):
        assert name in tf.__all__
    assert tf.getGradient is tf.get_gradient
    assert tf.engine().startScope == tf.engine().start_scope
