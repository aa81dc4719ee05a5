"""Memory management and variables: tidy / keep / dispose / memory(), disposed tensors,
tidy inside gradient functions, and the variable registry.

Spec: reference/tfjs-semantics.md §1, §2.4, §6, §7; DESIGN.md "Semantics". memory() is
exact (a garbage-collected tensor stops counting), so tests hold references to the tensors
they account for and compare deltas, never absolute numbers.
"""
import asyncio
import copy
import dataclasses
import gc
import pickle
import re
import types

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import ArgumentError, DisposedError, VariableError

DISPOSED = r"^Tensor is disposed\."


@pytest.fixture(autouse=True)
def _deterministic_gc():
    # cyclic garbage from earlier tests must not be collected in the middle of a delta
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def mem():
    m = tf.memory()
    return (m.num_tensors, m.num_data_buffers, m.num_bytes)


def delta(before):
    return tuple(a - b for a, b in zip(mem(), before))


# ---------------------------------------------------------------- memory() accounting

def test_verified_deltas_of_section_7():
    m = tf.memory()
    assert m.unreliable is False and list(m.reasons) == []
    assert (m.numTensors, m.numDataBuffers, m.numBytes) == (
        m.num_tensors, m.num_data_buffers, m.num_bytes)
    before = mem()
    a = tf.tensor1d([1, 2, 3])
    assert delta(before) == (1, 1, 12)
    i = tf.tensor1d([1, 2, 3], "int32")
    assert delta(before) == (2, 2, 24)
    b = tf.tensor1d([True, False, True], "bool")
    assert delta(before) == (3, 3, 27)
    c = a.clone()
    assert delta(before) == (4, 3, 39)
    r = a.reshape([3, 1])
    assert delta(before) == (5, 3, 51)
    f64 = tf.tensor([1, 2, 3], dtype="float64")      # beyond TF.js: 8 bytes per element
    assert f64.dtype == "float64" and delta(before) == (6, 4, 75)
    tf.dispose([a, i, b, c, r, f64])
    assert delta(before) == (0, 0, 0)


def test_garbage_collected_tensor_stops_counting():
    before = mem()
    t = tf.tensor([1.0, 2.0])
    assert delta(before) == (1, 1, 8)
    del t
    gc.collect()
    assert delta(before) == (0, 0, 0)
    t = tf.tensor([1.0, 2.0])
    t.dispose()
    del t                                   # disposed, then collected: not counted twice
    gc.collect()
    assert delta(before) == (0, 0, 0)


def test_dispose_frees_bytes_and_a_shared_buffer_with_its_last_tensor():
    big = tf.ones([10, 10])
    before = mem()
    big.dispose()
    assert delta(before) == (-1, -1, -400)
    a = tf.tensor([1.0, 2.0, 3.0])
    c = a.clone()
    before = mem()
    a.dispose()
    assert delta(before) == (-1, 0, -12)      # the clone still holds the buffer
    np.testing.assert_array_equal(c.data_sync(), [1, 2, 3])
    y = tf.log_sum_exp(c)                     # a composite op leaves only its result
    assert delta(before) == (0, 1, -8)
    tf.dispose([c, y])
    assert delta(before) == (-2, -1, -24)


LITERAL_OPS = {"x*2": lambda x: x * 2, "add(2,3)": lambda x: tf.add(2, 3),
               "maximum": lambda x: tf.maximum(x, 0),
               "where": lambda x: tf.where(x.greater(0), 1, 0)}


@pytest.mark.parametrize("take", [
    lambda x: x.slice([998, 0], [2, 500]),
    lambda x: x[7],
    lambda x: x[10:20, ::2],
    lambda x: tf.unstack(x)[3],
    lambda x: tf.split(x, 4)[1],
], ids=["slice", "index", "strided", "unstack", "split"])
def test_a_small_slice_does_not_keep_its_source_s_memory(take):
    """memory() counts a slice by its own size: once the source is disposed, no hidden view
    may hold the source's whole array alive (a kept time step of a sequence would)."""
    import weakref
    a = np.arange(1_000_000, dtype=np.float32).reshape(1000, 1000)
    x = tf.tensor(a)
    src = weakref.ref(x._data)
    part = take(x)
    want = take(tf.tensor(a)).numpy()
    x.dispose()
    gc.collect()
    assert src() is None, "the slice still holds its source's array"
    np.testing.assert_array_equal(part.numpy(), want)
    part.dispose()


def test_a_large_slice_stays_a_view():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = tf.tensor(a)
    top = x.slice([0, 0], [3, 3])              # 3/4 of x: no copy
    assert np.shares_memory(top._data, x._data)
    tf.dispose([x, top])


@pytest.mark.parametrize("op", LITERAL_OPS.values(), ids=LITERAL_OPS.keys())
def test_ops_with_number_literals_leave_one_disposable_tensor(op):
    x = tf.scalar(2.0)
    before = mem()
    y = op(x)
    assert delta(before) == (1, 1, 4)
    y.dispose()
    assert y.is_disposed and delta(before) == (0, 0, 0)


# ---------------------------------------------------------------- disposed tensors (§1)

USES = {  # chained methods, functional ops and operators all check first
    "add": lambda t: t.add(1), "data_sync": lambda t: t.data_sync(),
    "print": lambda t: t.print(), "clone": lambda t: t.clone(),
    "cast": lambda t: t.cast("int32"), "variable": lambda t: t.variable(),
    "numpy": lambda t: t.numpy(), "item": lambda t: t.item(),
    "data": lambda t: asyncio.run(t.data()), "tf.add": lambda t: tf.add(t, 1),
    "tf.add_rhs": lambda t: tf.add(1, t), "tf.square": lambda t: tf.square(t),
    "operator": lambda t: t + 1, "tf.variable": lambda t: tf.variable(t),
    "tf.print": lambda t: tf.print(t),
}


@pytest.mark.parametrize("use", USES.values(), ids=USES.keys())
def test_disposed_tensor_use_raises(use):
    t = tf.tensor([2.0])
    t.dispose()
    with pytest.raises(DisposedError, match=DISPOSED):
        use(t)


def test_disposed_metadata_double_dispose_and_containers():
    t = tf.tensor([[1, 2, 3]], dtype="int32")
    before = mem()
    t.dispose()
    after_first = mem()
    t.dispose()
    tf.dispose(t)
    assert mem() == after_first and delta(before) == (-1, -1, -12)
    assert t.is_disposed and t.isDisposed
    assert tuple(t.shape) == (1, 3) and t.dtype == "int32"
    repr(t)  # printing the object itself must not raise
    # tf.dispose walks nested containers and ignores non-tensors
    a, b, c = tf.scalar(1.0), tf.tensor([1.0, 2.0]), tf.scalar(3.0)
    before = mem()
    tf.dispose({"a": a, "rest": [b, (c, 5, None, "s")], "n": None})
    tf.dispose(None)
    tf.dispose(7)
    assert a.is_disposed and b.is_disposed and c.is_disposed
    assert delta(before) == (-3, -3, -16)


# ---------------------------------------------------------------- tidy (§7)

def test_tidy_disposes_intermediates_and_returns_result():
    seen = []

    def fn():
        seen.append(tf.tensor([1.0, 2.0, 3.0]))
        seen.append(seen[0].square())
        return seen[1].add(1)
    before = mem()
    c = tf.tidy(fn)
    assert delta(before) == (1, 1, 12)     # the intermediates' buffers are freed
    assert all(t.is_disposed for t in seen) and not c.is_disposed
    np.testing.assert_array_equal(c.data_sync(), [2, 5, 10])
    with pytest.raises(DisposedError, match=DISPOSED):
        seen[1].add(1)
    with pytest.raises(DisposedError, match=DISPOSED):
        tf.mul(seen[0], 2)
    # named form, and non-tensor results pass through
    before = mem()
    assert tf.tidy("my scope", lambda: tf.scalar(2.0).square()).item() == 4.0
    assert tf.tidy(lambda: 5) == 5 and tf.tidy(lambda: None) is None
    assert tf.tidy("s", lambda: "text") == "text"
    assert delta(before)[0] == 0   # the first result was dropped and garbage-collected


def test_tidy_returns_tensors_in_nested_containers():
    seen = []

    def fn():
        x = tf.tensor([1.0, 2.0])
        seen.extend([x, x.mul(2)])
        return {"a": x.add(1), "b": [x.sub(1), (x.neg(), 5)], "c": "label"}
    before = mem()
    out = tf.tidy(fn)
    assert delta(before) == (3, 3, 24) and all(t.is_disposed for t in seen)
    assert out["c"] == "label" and out["b"][1][1] == 5
    assert [t.array_sync() for t in (out["a"], out["b"][0], out["b"][1][0])] == [
        [2, 3], [0, 1], [-1, -2]]
    tf.dispose(out)
    assert delta(before) == (0, 0, 0)
    # a view result keeps its buffer; self-referencing containers are walked once
    r = tf.tidy(lambda: tf.tensor([1.0, 2.0, 3.0]).reshape([3, 1]))
    assert delta(before) == (1, 1, 12)
    box = tf.tidy(lambda: (lambda l: l.append(l) or l)([tf.scalar(1.0)]))
    assert box[1] is box and not box[0].is_disposed
    # flowgrad's result objects are walked too
    vg = tf.tidy(lambda: tf.value_and_grad(lambda x: x.square())(tf.scalar(3.0)))
    assert (vg.value.item(), vg.grad.item()) == (9.0, 6.0)
    assert delta(before) == (4, 4, 24)


def test_nested_tidies_compose():
    seen = {}

    def outer():
        def inner():
            seen["tmp"] = tf.scalar(1.0)
            return seen["tmp"].add(1)
        seen["inner"] = tf.tidy(inner)
        assert not seen["inner"].is_disposed and seen["tmp"].is_disposed
        return tf.tidy(lambda: seen["inner"].add(10))
    before = mem()
    out = tf.tidy(outer)
    assert delta(before) == (1, 1, 4) and out.item() == 12.0
    assert seen["inner"].is_disposed   # moved to the outer scope, not returned again
    survivor = tf.tidy(lambda: tf.tidy(lambda: tf.tidy(lambda: tf.scalar(5.0).add(1))))
    assert not survivor.is_disposed and survivor.item() == 6.0


def test_keep_survives_every_scope_until_disposed():
    kept = []

    def inner():
        t = tf.scalar(7.0).square()
        assert tf.keep(t) is t
        kept.append(t)
    before = mem()
    tf.tidy(lambda: tf.tidy(inner))
    t = kept[0]
    assert t.kept and not t.is_disposed and t.item() == 49.0 and delta(before) == (1, 1, 4)
    t.dispose()
    assert t.is_disposed and delta(before) == (0, 0, 0)


def test_exception_inside_tidy_still_disposes():
    seen = []

    def fn():
        seen.append(tf.tensor([1.0, 2.0]).square())
        raise RuntimeError("boom")
    before = mem()
    with pytest.raises(RuntimeError, match="boom"):
        tf.tidy(fn)
    assert seen[0].is_disposed and delta(before) == (0, 0, 0)
    # the scope was closed: a tensor made now belongs to no scope and outlives a later tidy
    t = tf.scalar(1.0)
    tf.tidy(lambda: None)
    assert not t.is_disposed

    def outer():    # an inner tidy that raises, caught inside the outer one
        a = tf.scalar(2.0)
        with pytest.raises(RuntimeError):
            tf.tidy(fn)
        return a.mul(3)
    before = mem()
    out = tf.tidy(outer)
    assert seen[1].is_disposed and out.item() == 6.0 and delta(before) == (1, 1, 4)


def test_returning_outside_tensor_leaves_it_untouched():
    x = tf.tensor([1.0, 2.0])
    before = mem()
    assert tf.tidy(lambda: x) is x
    assert not x.is_disposed and delta(before) == (0, 0, 0)
    seen = []

    def outer():    # made in the outer tidy, returned by an inner one: the outer owns it
        a = tf.scalar(1.0)
        seen.append(tf.tidy(lambda: a))
        return tf.scalar(2.0)
    tf.tidy(outer)
    assert seen[0].is_disposed


@pytest.mark.parametrize("args, message", [
    ((5,), "Please provide a function to tidy()"),
    ((None,), "Please provide a function to tidy()"),
    (("name",), "tidy()"),   # TF.js: 'Please provide...'; flowgrad: '...2nd argument...'
    ((5, lambda: None), "When calling with two arguments, the first argument to tidy() "
                        "must be a string"),
    (("name", 5), "When calling with two arguments, the 2nd argument to tidy() must be "
                  "a function"),
])
def test_tidy_argument_errors(args, message):
    with pytest.raises(ArgumentError, match=re.escape(message)):
        tf.tidy(*args)


def test_tidy_around_many_small_grad_computations_leaks_nothing():
    x = tf.tensor([1.0, 2.0, 3.0])
    g = tf.grad(lambda x: x.square().mul(x).sum())
    before = mem()
    for _ in range(10_000):
        tf.tidy(lambda: g(x).add(1).sum())
    assert delta(before) == (0, 0, 0)

    def loop():     # one tidy around a whole loop, results dropped inside it
        for _ in range(1000):
            g(x).add(1)
    tf.tidy(loop)
    assert delta(before) == (0, 0, 0)


# ---------------------------------------------------------------- tidy and gradients (§2.4)

def test_tidy_inside_gradient_function_does_not_break_backprop():
    x = tf.tensor([1.0, -2.0, 3.0])
    g = tf.grad(lambda x: tf.tidy(lambda: x.square().sum()))(x)
    np.testing.assert_allclose(g.data_sync(), [2, -4, 6])
    # an intermediate the backward pass needs (sin x) is disposed by the inner tidy
    g = tf.grad(lambda x: tf.tidy(lambda: x.sin().mul(x).sum()))(x)
    xs = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(g.data_sync(), np.cos(xs) * xs + np.sin(xs), rtol=1e-5)

    def f(x):       # inside f, what an inner tidy disposed stops counting at once
        before = mem()
        tf.tidy(lambda: [x.square().add(1)] and None)
        assert delta(before) == (0, 0, 0)
        return x.sum()
    tf.grad(f)(x)
    g2 = tf.grad(tf.grad(lambda x: tf.tidy(lambda: x.mul(x).mul(x))))(tf.scalar(2.0))
    assert g2.item() == pytest.approx(12.0)


def test_after_grad_only_the_gradient_is_new():
    x = tf.tensor([1.0, 2.0, 3.0])
    seen = []

    def f(x):
        seen.append(x.square())
        seen.append(seen[-1].exp().log())
        return seen[-1].sum()
    before = mem()
    g = tf.grad(f)(x)
    assert delta(before) == (1, 1, 12)
    assert all(t.is_disposed for t in seen) and not x.is_disposed
    np.testing.assert_allclose(g.data_sync(), [2, 4, 6], rtol=1e-5)
    before = mem()
    g2 = tf.grad(tf.grad(lambda x: x.mul(x).mul(x)))(x)
    assert delta(before) == (1, 1, 12)
    np.testing.assert_allclose(g2.data_sync(), [6, 12, 18], rtol=1e-5)
    before = mem()
    r = tf.value_and_grad(f)(x)
    assert delta(before)[0] == 2 and r.value.item() == pytest.approx(14.0)
    w = tf.variable(tf.tensor([1.0, 2.0]), name="mem_vg_w")
    try:
        before = mem()
        value, grads = tf.variable_grads(lambda: w.square().sum())
        assert delta(before)[0] == 2 and value.item() == 5.0 and not w.is_disposed
        np.testing.assert_array_equal(grads["mem_vg_w"].data_sync(), [2, 4])
    finally:
        w.dispose()


def test_keep_inside_f_survives_grad():
    x = tf.tensor([1.0, 2.0])
    kept = []

    def f(x):
        kept.append(tf.keep(x.square()))
        return kept[0].sum()
    before = mem()
    g = tf.grad(f)(x)
    assert delta(before) == (2, 2, 16) and not kept[0].is_disposed
    np.testing.assert_array_equal(kept[0].data_sync(), [1, 4])
    np.testing.assert_array_equal(g.data_sync(), [2, 4])
    kept[0].dispose()
    assert delta(before) == (1, 1, 8)


# ---------------------------------------------------------------- variables (§6)

def test_variable_shares_initial_buffer_and_outlives_tidy():
    a = tf.tensor([1.0, 2.0, 3.0])
    before = mem()
    v = tf.variable(a)
    try:
        assert delta(before) == (1, 0, 12)
        a.dispose()                          # the initial tensor is independent
        assert delta(before) == (0, 0, 0)
        np.testing.assert_array_equal(v.data_sync(), [1, 2, 3])
    finally:
        v.dispose()
    made = []
    before = mem()
    tf.tidy(lambda: made.append(tf.variable(tf.tensor([1.0, 2.0, 3.0]).mul(2), name="mem_t")))
    v = made[0]
    try:
        assert not v.is_disposed
        assert delta(before) == (1, 1, 12)   # intermediates gone, the variable holds its buffer
        np.testing.assert_array_equal(v.data_sync(), [2, 4, 6])
        assert tf.tidy(lambda: v) is v and not v.is_disposed
    finally:
        v.dispose()
    assert delta(before) == (0, 0, 0)


def test_variable_auto_names_and_duplicates():
    x = tf.scalar(1.0)
    made = []
    try:
        made.append(tf.variable(x))
        first = int(made[0].name)
        made.append(tf.variable(x, name="mem_named"))      # an explicit name uses no number
        made.append(tf.variable(x, name=""))               # an empty name is auto
        assert made[2].name == str(first + 1)
        made.append(tf.variable(x, name=str(first + 2)))   # takes the next auto name...
        with pytest.raises(VariableError, match=re.escape(
                f"Variable with name {first + 2} was already registered")):
            tf.variable(x)                                  # ...so the auto name clashes
        with pytest.raises(VariableError, match=re.escape(
                "Variable with name mem_named was already registered")):
            tf.variable(x, name="mem_named")
        made[1].dispose()
        made[1] = tf.variable(tf.scalar(2.0), name="mem_named")   # reusable after dispose
        assert made[1].item() == 2.0
        tf.dispose(made[1])
        made[1] = tf.variable(x, name="mem_named")                # tf.dispose unregisters too
    finally:
        tf.dispose(made)


def test_variable_attributes_dtype_cast_and_disposal():
    v = tf.variable(tf.tensor([1.5, 2.7, -3.2]), trainable=False, name="mem_cast",
                    dtype="int32")
    try:
        assert (v.name, v.trainable, v.dtype) == ("mem_cast", False, "int32")
        assert v.array_sync() == [1, 2, -3]
        v.trainable = True
        assert v.trainable
    finally:
        v.dispose()
    assert v.is_disposed
    for use in (lambda: v.add(1), lambda: tf.add(v, 1),
                lambda: v.assign(tf.tensor([1], dtype="int32"))):  # TF.js: silent for assign
        with pytest.raises(DisposedError, match=DISPOSED):
            use()


def test_assign_errors_and_buffer_sharing():
    a = tf.tensor([1.0, 2.0, 3.0])
    v = tf.variable(a, name="mem_assign")
    try:
        with pytest.raises(VariableError, match=re.escape(
                "dtype of the new value (int32) and previous value (float32) must match")):
            v.assign(tf.tensor([1, 2, 3], dtype="int32"))
        with pytest.raises(VariableError, match="shape of the new value"):
            v.assign(tf.tensor([1.0, 2.0]))
        np.testing.assert_array_equal(v.data_sync(), [1, 2, 3])
        b = tf.tensor([4.0, 5.0, 6.0])
        before = mem()
        assert v.assign(b) is v                # flowgrad returns v (TF.js: undefined)
        assert delta(before) == (0, 0, 0)      # v leaves a's buffer and shares b's
        assert v.name == "mem_assign"
        b.dispose()
        np.testing.assert_array_equal(v.data_sync(), [4, 5, 6])
        # inside tidy: the new value's tensor is disposed, the variable keeps the data
        before = mem()
        tf.tidy(lambda: v.assign(tf.tensor([7.0, 8.0, 9.0]).mul(1)))
        assert delta(before) == (0, 0, 0) and not v.is_disposed
        np.testing.assert_array_equal(v.data_sync(), [7, 8, 9])
    finally:
        v.dispose()


def test_dispose_variables():
    vs = [tf.variable(tf.scalar(float(i)), name=f"mem_dv_{i}") for i in range(3)]
    before = mem()
    tf.dispose_variables()
    assert all(v.is_disposed for v in vs)        # TF.js leaves isDisposed false (a quirk)
    assert delta(before) == (-3, -3, -12)
    with pytest.raises(DisposedError, match=DISPOSED):
        vs[0].data_sync()
    again = tf.variable(tf.scalar(1.0), name="mem_dv_0")   # names are free again
    again.dispose()


@pytest.mark.parametrize("op", [
    lambda v: v.cast("float32"), lambda v: v.reshape([3]), lambda v: v.squeeze(),
    lambda v: v.to_float(), lambda v: v.transpose(), lambda v: tf.broadcast_to(v, [3]),
    lambda v: v.slice([0], [3]), lambda v: v.reverse([]), lambda v: v.tile([1]),
], ids=["cast", "reshape", "squeeze", "to_float", "transpose", "broadcast_to", "slice",
        "reverse", "tile"])
def test_an_op_that_changes_nothing_returns_a_new_tensor(op):
    # it returned its input: a variable's "snapshot" followed later assigns, and disposing
    # the result disposed the input (TF.js: every op returns a new tensor)
    v = tf.variable(tf.tensor1d([1.0, 2.0, 3.0]))
    before = tf.memory()
    snap = op(v)
    assert type(snap) is tf.Tensor and snap is not v
    after = tf.memory()
    assert after.num_tensors == before.num_tensors + 1
    v.assign(tf.tensor1d([4.0, 5.0, 6.0]))
    assert snap.array_sync() == [1.0, 2.0, 3.0]
    snap.dispose()
    assert not v.is_disposed and v.array_sync() == [4.0, 5.0, 6.0]
    g = tf.grad(lambda x: op(x).mul(tf.tensor1d([1.0, 2.0, 3.0])).sum())(tf.tensor1d([0.0] * 3))
    assert g.array_sync() == [1.0, 2.0, 3.0]
    v.dispose()


def test_a_variable_does_not_follow_the_numpy_array_it_was_made_or_assigned_from():
    a = np.array([1.0, 2.0], np.float32)
    v = tf.variable(a)
    a[0] = 9
    assert v.array_sync() == [1.0, 2.0]
    b = np.array([3.0, 4.0], np.float32)
    v.assign(b)
    b[1] = -1
    assert v.array_sync() == [3.0, 4.0]
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = tf.variable(c[:, 1])                 # a view of the caller's array, too
    c[:] = 0
    assert w.array_sync() == [1.0, 4.0]
    tf.dispose([v, w])


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy,
                                    lambda t: pickle.loads(pickle.dumps(t))],
                         ids=["copy", "deepcopy", "pickle"])
def test_copies_and_pickles_are_new_counted_tensors(copier):
    # copying the slots made a second tensor of the same id, never counted, uncounted when
    # freed: tf.memory() went negative
    x = tf.tensor([1.0, 2.0])
    base = tf.memory().num_tensors
    c = copier(x)
    assert c.id != x.id and tf.memory().num_tensors == base + 1
    c.dispose()
    assert tf.memory().num_tensors == base and not x.is_disposed
    assert copier(x).array_sync() == [1.0, 2.0]
    gc.collect()
    assert tf.memory().num_tensors == base
    x.dispose()
    with pytest.raises(tf.errors.DisposedError):
        copier(x)


@pytest.mark.parametrize("t", [
    lambda: tf.tensor(np.array([1.5, -2.0]), dtype="float64"), lambda: tf.tensor([True, False]),
    lambda: tf.tensor([[1, 2]], dtype="int32"), lambda: tf.tensor(["ab", "c"]),
    lambda: tf.scalar(3.0), lambda: tf.zeros([0, 3])])
def test_a_pickle_keeps_values_shape_and_dtype(t):
    t = t()
    q = pickle.loads(pickle.dumps(t))
    assert (q.dtype, q.shape) == (t.dtype, t.shape)
    assert q.numpy().tolist() == t.numpy().tolist()


def test_a_copy_is_differentiable_and_variables_refuse_copies():
    x = tf.tensor([1.0, 2.0])
    assert tf.grad(lambda t: copy.deepcopy(t).square().sum())(x).array_sync() == [2.0, 4.0]
    v = tf.variable(x)
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(tf.errors.VariableError, match="a variable is state registered"):
            f(v)
    v.dispose()


@dataclasses.dataclass
class _Out:
    loss: object
    extra: list


class _Box:
    def __init__(self):
        self.t = tf.ones([3])
        self.fn = len
        self.me = self                       # (a cycle: walked once)


@pytest.mark.parametrize("make, get", [
    (lambda: {tf.ones([1])}, lambda r: list(r)),
    (lambda: frozenset([tf.ones([1])]), lambda r: list(r)),
    (lambda: {tf.ones([1]): "key"}, lambda r: list(r)),
    (lambda: _Out(tf.ones([1]), [tf.ones([2])]), lambda r: [r.loss, r.extra[0]]),
    (lambda: _Box(), lambda r: [r.t]),
    (lambda: types.SimpleNamespace(x=tf.ones([1])), lambda r: [r.x]),
], ids=["set", "frozenset", "dict-key", "dataclass", "object", "namespace"])
def test_tidy_keeps_and_dispose_frees_tensors_in_any_container(make, get):
    # TF.js walks every object's keys; a tidy disposed the tensors of a returned set or
    # dataclass (and tf.dispose skipped them), silently
    r = tf.tidy(make)
    ts = get(r)
    assert ts and not any(t.is_disposed for t in ts)
    tf.dispose(r)
    assert all(t.is_disposed for t in ts)


def test_item_assignment_says_tensors_are_immutable():
    x = tf.tensor([1.0, 2.0])
    with pytest.raises(tf.errors.ArgumentError, match=r"Tensors are immutable .*tf\.where"):
        x[0] = 5.0
    assert x.array_sync() == [1.0, 2.0]
