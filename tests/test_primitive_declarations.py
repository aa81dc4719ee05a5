"""A primitive declares itself whole (issue 28): its tf.vmap rule, its purity and its fusion
forms are flags of the primitive, set in its family file beside its kernel and its vjp, and
no module keeps a table of them by kernel name.

Walks every primitive flowgrad declares (the op table's, tf.vmap's entry and exit, the
optimizers' update kernels: whatever is alive after ``import flowgrad``)."""
import gc
import sys
import typing
import warnings

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import batching, engine, user_frames
from flowgrad.batching import VmapFallbackWarning
from flowgrad.ops import _core
from flowgrad.ops._core import PRIMITIVES


def _declared():
    """Every primitive flowgrad's modules declared (tests' own are left out)."""
    found = {}
    for o in gc.get_objects():
        if type(o) is engine.Primitive and (
                o.fwd is None or getattr(o.fwd, "__module__", "").startswith("flowgrad.")):
            found[id(o)] = o
    return list(found.values())


ALL = _declared()


def test_the_walk_sees_every_primitive():
    names = {p.name for p in ALL}
    assert set(PRIMITIVES) <= names
    # declared outside the op table: tf.vmap's boundary; in train/: the fused updates
    assert {"VmapIn", "VmapOut", "ApplyUpdate", "ApplyUpdateSlots",
            "ApplyUpdateCommit"} <= names


@pytest.mark.parametrize("prim", ALL, ids=[p.name for p in ALL])
def test_every_kernel_declares_its_vmap_rule(prim):
    """A rule, or the explicit ``vmap=loop`` (once per example) or ``takes_no_tensors``:
    a new kernel cannot fall back to a loop without saying so."""
    if prim.fwd is None:
        return          # (CustomGradient: recorded by custom_grad, never run as a kernel)
    assert callable(prim.vmap_rule), (
        f"{prim.name} declares no tf.vmap rule: give its declaration vmap=<a rule of "
        f"flowgrad/batching.py>, a rule of its own (@{prim.name}.def_vmap), or vmap=loop")


def test_the_kernels_that_loop_per_example_are_the_declared_ones():
    loops = {p.name for p in ALL if p.vmap_rule is batching.loop}
    assert loops == {
        "ScatterAdd", "GatherOrZero", "GatherNd", "ScatterNd", "TensorScatterUpdate",
        "Dilation2D", "Dilation2DBackpropInput", "Dilation2DBackpropFilter",
        "Dilation2DBackpropInputGrad", "Dilation2DBackpropFilterGrad", "Bincount",
        "DenseBincount", "SearchSorted", "SpaceToBatchND", "BatchToSpaceND", "Diag",
        "DiagPart", "ApplyUpdate", "ApplyUpdateSlots", "ApplyUpdateCommit"}


def test_the_impure_kernels():
    assert {p.name for p in ALL if p.impure} == {
        "RandomNormal", "RandomUniform", "ApplyUpdate", "ApplyUpdateSlots",
        "ApplyUpdateCommit"}


@pytest.mark.parametrize("prim", [p for p in ALL if p.ufunc or p.expr],
                         ids=[p.name for p in ALL if p.ufunc or p.expr])
def test_fusion_forms_name_what_exists(prim):
    if prim.ufunc is not None:
        assert callable(getattr(engine.B, prim.ufunc, None)), prim.ufunc
    if prim.expr is not None:
        assert prim.ufunc is not None     # (a Python operator on floats is a ufunc too)
        operands = [f"a{i}" for i in range(len(prim.arg_names))]
        compile(prim.expr.format(*operands), "<expr>", "eval")


def _kernel_names(items, names):
    """The strings among ``items`` that are kernel names or prefixes of kernel names
    (``"Random"``), other than names of flowgrad's or typing's own objects."""
    out = []
    for x in items:
        if (isinstance(x, str) and len(x) >= 3 and x[:1].isupper()
                and any(n.startswith(x) for n in names)
                and not hasattr(tf, x) and not hasattr(typing, x)):
            out.append(x)
    return out


def test_no_module_keeps_a_table_by_kernel_name():
    """Rules, purity and fusion forms by kernel name (a central table of vmap rules, the
    prefixes of impure kernels, Python operator forms) drifted from the kernels: a random
    kernel not named Random* would have been removed by tf.jit when unused."""
    names = {p.name for p in ALL}
    found = []
    for mname, mod in sorted(sys.modules.items()):
        if not mname.startswith("flowgrad") or mod is None:
            continue
        for key, value in vars(mod).items():
            if value is PRIMITIVES:
                continue            # (the op table itself: kernel name -> Primitive)
            if not isinstance(value, (dict, tuple, list, set, frozenset)):
                continue
            hits = _kernel_names(list(value), names)      # (a dict: its keys)
            if hits:
                found.append(f"{mname}.{key}: {hits[:5]}")
    assert not found, found


# ---------------------------------------------------------------- elementwise: automatic

@pytest.fixture
def scratch_op(monkeypatch):
    """A one-off op declared with unary(), removed from every table afterwards."""
    monkeypatch.setattr(_core, "PRIMITIVES", dict(_core.PRIMITIVES))
    monkeypatch.setattr(_core, "OPS", dict(_core.OPS))
    monkeypatch.setattr(user_frames, "_OP_NAMES", set(user_frames._OP_NAMES))

    @_core.unary("ScratchCube")
    def scratch_cube(B, x):
        return x * x * x

    @scratch_cube.vjp
    def _(dy, x):
        return dy * 3 * x.square()
    try:
        yield scratch_cube
    finally:
        delattr(tf.Tensor, "scratch_cube")


def test_an_op_declared_by_unary_is_batched_elementwise_unlisted(scratch_op):
    assert scratch_op.prim.vmap_rule is batching.elementwise
    assert scratch_op.prim.batched_vjp and not scratch_op.prim.impure
    x = np.random.default_rng(0).normal(size=(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)     # (no loop)
        got = tf.vmap(scratch_op)(tf.tensor(x, dtype="float64"))
        g = tf.vmap(tf.grad(lambda v: scratch_op(v).sum()))(tf.tensor(x, dtype="float64"))
    np.testing.assert_allclose(got.numpy(), x ** 3, rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), 3 * x ** 2, rtol=1e-12)


# ---------------------------------------------------------------- purity, by behaviour

@pytest.fixture
def counted(monkeypatch):
    """counted(name): that kernel's forward calls, counted from now on."""
    calls = {}

    def count(name):
        prim = PRIMITIVES[name]
        fwd = prim.fwd
        calls[name] = 0

        def wrapped(*args, **kw):
            calls[name] += 1
            return fwd(*args, **kw)
        monkeypatch.setattr(prim, "fwd", wrapped)
        return calls
    return count


RANDOM = [("RandomNormal", lambda: tf.random_normal([3])),
          ("RandomUniform", lambda: tf.random_uniform([3])),
          ("RandomNormal", lambda: tf.truncated_normal([3], seed=1))]


@pytest.mark.parametrize("name, make", RANDOM, ids=["normal", "uniform", "seeded"])
def test_jit_keeps_an_unused_random_op(counted, name, make):
    """Its result unused and its inputs all constants (none), a random kernel is still run
    by every replay: neither folded into a constant nor removed as dead code."""
    calls = counted(name)
    f = tf.jit(lambda x: (make(), x * 2)[1])
    x = tf.tensor([1.0, 2.0])
    f(x)                                        # traced
    calls[name] = 0
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), [2.0, 4.0])    # replayed
    assert calls[name] == 3


def test_jit_removes_an_unused_pure_op(counted):
    """The other side: an unused pure kernel's result is dropped from the replay."""
    calls = counted("Erf")
    f = tf.jit(lambda x: (x.erf(), x * 2)[1])
    x = tf.tensor([1.0, 2.0])
    f(x)
    calls["Erf"] = 0
    f(x)
    assert calls["Erf"] == 0


def test_jit_keeps_an_optimizer_step_whose_results_look_unused():
    w = tf.variable(tf.tensor([1.0, 2.0]))
    opt = tf.train.sgd(0.5)
    step = tf.jit(lambda x: opt.minimize(lambda: (w * x).sum()))
    x = tf.tensor([1.0, 1.0])
    for i in range(1, 4):
        step(x)                                 # traced once, then replayed
        np.testing.assert_allclose(w.numpy(), [1.0 - 0.5 * i, 2.0 - 0.5 * i])
    opt.dispose()
    w.dispose()
