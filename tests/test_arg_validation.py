"""Argument checking, one family per test (flowgrad/arg_checks.py and the dtype check in
dtypes.canonical): each bad value raises a flowgrad error naming the op, the argument and
what was expected — never a truncated value, a bare NumPy error or a silent pass."""
import re

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import arg_checks
from flowgrad.errors import (AllocationError, ArgumentError, DisposedError, DtypeError,
                             ShapeError)

X = tf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
IDX = tf.tensor([0, 1], dtype="int32")
IMG = tf.zeros([1, 4, 4, 2])
NAN = float("nan")


def raises(cls, *words):
    """pytest.raises(cls) whose message contains every word (literally)."""
    return pytest.raises(cls, match="(?s)" + "".join(f"(?=.*{re.escape(w)})" for w in words))


# ---------------------------------------------------------------- axes
AXIS_OPS = {
    "sum": lambda a: tf.sum(X, a), "mean": lambda a: tf.mean(X, a),
    "arg_max": lambda a: tf.arg_max(X, a), "gather": lambda a: tf.gather(X, IDX, a),
    "softmax": lambda a: tf.softmax(X, a), "concat": lambda a: tf.concat([X, X], a),
    "cumsum": lambda a: tf.cumsum(X, a), "reverse": lambda a: tf.reverse(X, a),
    "expand_dims": lambda a: tf.expand_dims(X, a), "unstack": lambda a: tf.unstack(X, a),
}
BAD_AXES = {"1.7": 1.7, "nan": NAN, "scalar 1.7": tf.scalar(1.7), "scalar nan": tf.scalar(NAN),
            "float scalar 1.0": tf.scalar(1.0), "int vector": tf.tensor([1], dtype="int32"),
            "ndarray": np.array([1, 0]), "str": "a", "bool": True}


@pytest.mark.parametrize("bad", BAD_AXES, ids=str)
@pytest.mark.parametrize("op", AXIS_OPS)
def test_axis_refuses_non_integers_and_tensors_other_than_int_scalars(op, bad):
    name = "topk" if op == "top_k" else op
    with raises(ArgumentError, f"{name}: axis must be an int, got"):
        AXIS_OPS[op](BAD_AXES[bad])


@pytest.mark.parametrize("op", AXIS_OPS)
def test_axis_accepts_an_int32_scalar_tensor_as_its_int(op):
    a = AXIS_OPS[op](tf.scalar(1, "int32"))
    b = AXIS_OPS[op](1)
    for u, v in zip(a if isinstance(a, (list, tuple)) else [a],
                    b if isinstance(b, (list, tuple)) else [b]):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


def test_a_float_tensor_axis_raises_as_the_float_does():
    with raises(ArgumentError, "sum: axis must be an int, got float 1.7"):
        tf.sum(X, 1.7)
    with raises(ArgumentError, "sum: axis must be an int, got a float32 tensor of shape []"):
        tf.sum(X, tf.scalar(1.7))


# ---------------------------------------------------------------- ints, sizes and shapes
INT_CASES = [
    (lambda v: tf.one_hot(IDX, v), "depth"), (lambda v: tf.eye(v), "num_rows"),
    (lambda v: tf.linspace(0, 1, v), "the number of values"), (lambda v: tf.top_k(X, v), "k"),
    (lambda v: tf.reshape(X, [v, 3]), "shape[0]"), (lambda v: tf.tile(X, [v, 1]), "reps[0]"),
    (lambda v: tf.slice(X, [0, v], [1, 1]), "begin[1]"),
    (lambda v: tf.space_to_depth(tf.zeros([1, 2, 2, 1]), v), "block_size"),
    (lambda v: tf.unsorted_segment_sum(X, IDX, v), "num_segments"),
]


@pytest.mark.parametrize("bad", [2.5, NAN, float("inf"), tf.scalar(2.5), tf.scalar(2.0),
                                 tf.tensor([2], dtype="int32"), np.array([2, 1]), "2", None],
                         ids=["2.5", "nan", "inf", "scalar 2.5", "float scalar", "int vector",
                              "ndarray", "str", "None"])
@pytest.mark.parametrize("case", INT_CASES, ids=[w for _, w in INT_CASES])
def test_ints_refuse_fractions_nan_and_tensors(case, bad):
    call, what = case
    with raises(ArgumentError, f"{what} must be an integer, got"):
        call(bad)


def test_ints_accept_whole_floats_and_int32_scalars():
    assert tf.one_hot(IDX, 3.0).shape == tf.one_hot(IDX, tf.scalar(3, "int32")).shape == (2, 3)
    assert tf.reshape(X, tf.tensor([3, 2], dtype="int32")).shape == (3, 2)


@pytest.mark.parametrize("call, cls, message", [
    (lambda: tf.tensor2d([1.0, 2, 3, 4], 4), ShapeError,
     "tensor2d() requires shape to have two numbers"),
    (lambda: tf.tensor3d([1.0], 1.5), ArgumentError,
     "tensor3d(): shape must be a list or tuple of ints, got float"),
    (lambda: tf.zeros([2, 1.5]), ArgumentError,
     "fill(): shape [2, 1.5] must contain non-negative ints"),
    (lambda: tf.tile(X, 2), ArgumentError, "tile: reps must be a list of integers, got int"),
    (lambda: tf.reshape(X, tf.scalar(6.0)), ArgumentError,
     "reshape: shape must be a list of integers, got a float32 tensor of shape []"),
], ids=["tensor2d-int", "tensor3d-float", "zeros-float", "tile-int", "reshape-scalar"])
def test_shapes_must_be_lists_of_ints(call, cls, message):
    with raises(cls, message):
        call()


# ---------------------------------------------------------------- perms
@pytest.mark.parametrize("perm, cls, words", [
    (1, ArgumentError, ["transpose: perm must be a list of the 2 axes", "got 1 (int)"]),
    (NAN, ArgumentError, ["transpose: perm must be a list", "nan (float)"]),
    (tf.scalar(1.0), ArgumentError, ["transpose: perm must be a list", "float32 tensor"]),
    ("ab", ArgumentError, ["transpose: perm must be a list", "'ab'"]),
    ([1.7, 0.2], ArgumentError, ["transpose: axis must be an int, got float 1.7"]),
    ([NAN, 0], ArgumentError, ["transpose: axis must be an int, got float nan"]),
    ([0, 0], ShapeError, ["rank of input 2 must match length of perm [0, 0]"]),
    ([0], ShapeError, ["must list every axis once"]),
], ids=["int", "nan", "scalar", "str", "fractions", "nan-entry", "repeat", "short"])
def test_perm(perm, cls, words):
    with raises(cls, *words):
        tf.transpose(X, perm)


def test_perm_as_an_int_tensor_or_array():
    assert tf.transpose(X, tf.tensor([1, 0], dtype="int32")).shape == (3, 2)
    assert tf.transpose(X, np.array([1, 0])).shape == (3, 2)


# ---------------------------------------------------------------- dtypes
@pytest.mark.parametrize("call, op", [
    (lambda d: tf.cast(X, d), "cast()"), (lambda d: tf.zeros([2], d), "zeros()"),
    (lambda d: tf.ones([2], d), "ones()"), (lambda d: tf.fill([2], 1, d), "fill()"),
    (lambda d: tf.tensor([1], dtype=d), "tensor()"), (lambda d: tf.range(3, dtype=d), "range()"),
    (lambda d: tf.eye(2, dtype=d), "eye()"), (lambda d: tf.variable(X, dtype=d), "variable()"),
    (lambda d: tf.one_hot(IDX, 2, dtype=d), "one_hot()"),
    (lambda d: tf.random_normal([2], dtype=d), "random_normal()"),
], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("bad", [tf.scalar(1.0), np.array([1]), "float16", 3, []],
                         ids=["tensor", "ndarray", "float16", "int", "list"])
def test_dtype_arguments_name_the_op_and_the_valid_dtypes(call, op, bad):
    with raises(DtypeError, f"{op}: Unknown dtype", "'float32', 'float64', 'int32' and 'bool'"):
        call(bad)


def test_dtype_arguments_accept_names_and_types():
    assert tf.cast(X, np.float64).dtype == "float64"
    assert tf.zeros([1], int).dtype == "int32" and tf.ones([1], np.dtype("bool")).dtype == "bool"
    assert tf.variable(X, dtype="float64", name="dt_ok").dtype == "float64"
    tf.dispose_variables()


# ---------------------------------------------------------------- bool options
BOOL_OPTIONS = [
    (lambda v: tf.sum(X, 0, v), "sum", "keep_dims"),
    (lambda v: tf.max(X, 0, v), "max", "keep_dims"),
    (lambda v: tf.norm(X, "euclidean", None, v), "norm", "keep_dims"),
    (lambda v: tf.mat_mul(X, X, v, True), "mat_mul", "transpose_a"),
    (lambda v: tf.mat_mul(X, X, True, v), "mat_mul", "transpose_b"),
    (lambda v: tf.cumsum(X, 0, v), "cumsum", "exclusive"),
    (lambda v: tf.cumprod(X, 0, False, v), "cumprod", "reverse"),
    (lambda v: tf.top_k(X, 1, v), "topk", "sorted"),
    (lambda v: tf.image.resize_bilinear(IMG, [2, 2], v), "resizeBilinear", "align_corners"),
    (lambda v: tf.variable(X, v), "variable()", "trainable"),
    (lambda v: tf.train.momentum(0.1, 0.9, v), "MomentumOptimizer", "use_nesterov"),
    (lambda v: tf.train.exponential_decay(0.1, 10, 0.5, v), "exponential_decay()",
     "staircase"),
]


@pytest.mark.parametrize("bad", [np.array([1, 0]), tf.tensor([True, False]), tf.scalar(True),
                                 1, None, "yes"],
                         ids=["ndarray", "bool tensor", "bool scalar", "int", "None", "str"])
@pytest.mark.parametrize("case", BOOL_OPTIONS, ids=[f"{o}-{a}" for _, o, a in BOOL_OPTIONS])
def test_bool_options_take_only_bools(case, bad):
    call, op, arg = case
    with raises(ArgumentError, f"{op}: {arg} must be True or False, got"):
        call(bad)
    tf.dispose_variables()


@pytest.mark.parametrize("case", BOOL_OPTIONS, ids=[f"{o}-{a}" for _, o, a in BOOL_OPTIONS])
def test_bool_options_take_numpy_bools(case):
    case[0](np.bool_(False))
    tf.dispose_variables()


# ---------------------------------------------------------------- string options
@pytest.mark.parametrize("call, words", [
    (lambda v: tf.conv2d(IMG, tf.zeros([2, 2, 2, 1]), 1, "same", v),
     ["Error in conv2d: Unknown dataFormat", "'NHWC'"]),
    (lambda v: tf.max_pool(IMG, 2, 1, 1, v), ["Error in max_pool: Unknown roundingMode",
                                              "'floor'"]),
    (lambda v: tf.pool(IMG, 2, v, "same"), ["Error in pool: poolingType must be 'max' or 'avg'"]),
    (lambda v: tf.mirror_pad(X, [[1, 1], [1, 1]], v), ["mirror_pad(): Invalid mode", "reflect"]),
    (lambda v: tf.depth_to_space(tf.zeros([1, 1, 1, 4]), 2, v),
     ["depth_to_space(): data_format must be 'NHWC' or 'NCHW'"]),
    (lambda v: tf.search_sorted(tf.tensor([1.0, 2.0]), tf.tensor([1.5]), v),
     ["search_sorted(): side must be 'left' or 'right'"]),
    (lambda v: tf.meshgrid(tf.tensor([1.0]), tf.tensor([2.0]), v),
     ["is not a valid third argument to meshgrid"]),
    (lambda v: tf.jacobian(lambda x: x, mode=v), ["jacobian: mode must be 'rev' or 'fwd'"]),
], ids=["data_format", "dim_rounding_mode", "pooling_type", "mirror_pad-mode",
        "depth_to_space-format", "side", "indexing", "jacobian-mode"])
@pytest.mark.parametrize("bad", [np.array([1, 0]), tf.scalar(1.0), "nope", 3],
                         ids=["ndarray", "tensor", "unknown", "int"])
def test_string_options_check_the_allowed_values(call, words, bad):
    with raises(ArgumentError, *words):
        call(bad)


# ---------------------------------------------------------------- numbers
@pytest.mark.parametrize("call, words", [
    (lambda v: tf.train.sgd(0.1, clip_norm=v), ["SGDOptimizer: clip_norm must be"]),
    (lambda v: tf.train.adam(0.1, beta1=v), ["AdamOptimizer: beta1 must be"]),
    (lambda v: tf.train.rmsprop(0.1, epsilon=v), ["RMSPropOptimizer: epsilon must be"]),
    (lambda v: tf.clip_by_norm(X, v), ["clip_by_norm(): clip_norm must be"]),
    (lambda v: tf.clip_by_global_norm([X], v), ["clip_by_global_norm(): clip_norm must be"]),
    (lambda v: tf.train.cosine_decay(v, 10), ["cosine_decay(): initial_learning_rate must be"]),
    (lambda v: tf.random_normal([2], v), ["random_normal(): mean must be"]),
    (lambda v: tf.leaky_relu(X, v), ["leaky_relu: alpha must be"]),
], ids=["sgd-clip_norm", "adam-beta1", "rmsprop-epsilon", "clip_by_norm", "clip_by_global_norm",
        "cosine_decay", "random_normal-mean", "leaky_relu"])
@pytest.mark.parametrize("bad", ["x", np.array([1.0, 2.0]), tf.tensor([1.0, 2.0]), [1.0], 1j],
                         ids=["str", "ndarray", "vector", "list", "complex"])
def test_numbers_refuse_strings_arrays_and_vectors(call, words, bad):
    with raises(ArgumentError, *words):
        call(bad)


def test_optimizer_numbers_must_be_finite_and_clips_positive():
    with raises(ArgumentError, "AdamOptimizer: beta2 must be a finite number, got nan"):
        tf.train.adam(0.1, beta2=NAN)
    with raises(ArgumentError, "clip_norm must be positive, got nan"):
        tf.train.sgd(0.1, clip_norm=NAN)
    with raises(ArgumentError, "clip_value must be positive, got -1"):
        tf.train.sgd(0.1, clip_value=-1)
    tf.train.sgd(0.1, clip_norm=tf.scalar(2.0)).dispose()      # a one-element tensor is fine


@pytest.mark.parametrize("weights, words", [
    ("abc", ["SGD.set_weights() takes the list that get_weights() returns, got 'abc'"]),
    (3, ["SGD.set_weights() takes the list", "got 3 (int)"]),
    ([("iter", "abc")], ["the iteration count (the first entry) must be an integer"]),
    ([("iter", -1)], ["the iteration count (the first entry) must be >= 0, got -1"]),
], ids=["str", "int", "str-count", "negative-count"])
def test_set_weights(weights, words):
    opt = tf.train.sgd(0.1)
    with raises(ArgumentError, *words):
        opt.set_weights(weights)
    opt.dispose()


# ---------------------------------------------------------------- argnums and arity
@pytest.mark.parametrize("api", ["jacobian", "hessian", "hvp"])
@pytest.mark.parametrize("bad", [None, 1.0, "0", [], (0.5,), 3, True],
                         ids=["None", "1.0", "str", "empty", "float-tuple", "out-of-range",
                              "bool"])
def test_argnums(api, bad):
    x = tf.tensor([1.0, 2.0])
    f = getattr(tf, api)(lambda v: (v * v).sum(), argnums=bad)
    with raises(ArgumentError, f"{api}: argnums"):
        f(x, x) if api == "hvp" else f(x)


@pytest.mark.parametrize("api, call", [
    ("jacobian", lambda f, x: tf.jacobian(f)(x)), ("hessian", lambda f, x: tf.hessian(f)(x)),
    ("hvp", lambda f, x: tf.hvp(f)(x, x)), ("vjp", lambda f, x: tf.vjp(f, x)),
    ("jvp", lambda f, x: tf.jvp(f, [x], [x])),
], ids=lambda v: v if isinstance(v, str) else "")
def test_f_with_the_wrong_number_of_parameters(api, call):
    x = tf.tensor([1.0, 2.0])
    with raises(ArgumentError, f"{api}: f (two) takes 2 positional argument(s) but is given 1"):
        def two(a, b):
            return (a * b).sum()
        call(two, x)
    with raises(ArgumentError, f"{api}: f (none) takes 0 positional argument(s) but is given 1"):
        def none():
            return x.sum()
        call(none, x)


def test_check_arity_counts_defaults_and_star_args():
    arg_checks.check_arity(lambda a, b=1: a, 1, "api")
    arg_checks.check_arity(lambda *a: a, 5, "api")
    arg_checks.check_arity(lambda: 0, 2, "api", fewer_ok=True)    # grad's seed-001 closures
    with raises(ArgumentError, "api: f (<lambda>) takes 1 to 2 positional argument(s) but is "
                               "given 3"):
        arg_checks.check_arity(lambda a, b=1: a, 3, "api")
    with raises(ArgumentError, "keyword-only parameter 'k' without a default"):
        arg_checks.check_arity(lambda a, *, k: a, 1, "api")


# ---------------------------------------------------------------- sizes that cannot exist
@pytest.mark.parametrize("call, op, shape", [
    (lambda: tf.range(0, 1e12), "range()", "[1000000000000]"),
    (lambda: tf.zeros([2 ** 40]), "fill()", "[1099511627776]"),
    (lambda: tf.eye(2 ** 30), "eye()", "[1073741824, 1073741824]"),
    (lambda: tf.linspace(0, 1, 2 ** 40), "linspace()", "[1099511627776]"),
    (lambda: tf.one_hot(IDX, 2 ** 40, dtype="float32"), "one_hot", "[2, 1099511627776]"),
    (lambda: tf.random_uniform([2 ** 20, 2 ** 20, 2 ** 20]), "random_uniform()", None),
    (lambda: tf.tile(X, [2 ** 40, 1]), "tile", "[2199023255552, 3]"),
    (lambda: tf.pad(X, [[2 ** 40, 0], [0, 0]]), "pad", None),
    (lambda: tf.broadcast_to(X, [2 ** 40, 2, 3]), "broadcast_to()", None),
    (lambda: tf.scatter_nd(tf.tensor([[0]], dtype="int32"), tf.tensor([1.0]), [2 ** 40]),
     "scatter_nd", None),
    (lambda: tf.unsorted_segment_sum(X, IDX, 2 ** 40), "unsorted_segment_sum", None),
    (lambda: tf.image.resize_bilinear(IMG, [2 ** 40, 2 ** 40]), "resizeBilinear", None),
    (lambda: tf.conv2d(IMG, tf.zeros([2, 2, 2, 1]), 1, "same", "NHWC", 2 ** 40), "conv2d",
     None),
    (lambda: tf.conv1d(tf.zeros([1, 4, 2]), tf.zeros([2, 2, 3]), 1, 2 ** 40), "conv1d", None),
    (lambda: tf.max_pool(IMG, 2, 1, 2 ** 40), "max_pool", None),
], ids=["range", "zeros", "eye", "linspace", "one_hot", "random_uniform", "tile", "pad",
        "broadcast_to", "scatter_nd", "unsorted_segment_sum", "resize", "conv2d-dilations",
        "conv1d-pad", "max_pool-pad"])
def test_sizes_beyond_memory_say_what_would_be_allocated(call, op, shape):
    words = [f"{op}: ", "elements of float32", "iB", "more than the physical memory of this "
             "machine", "cannot be allocated"] + ([f"shape {shape}"] if shape else [])
    with raises(AllocationError, *words):
        call()
    assert issubclass(AllocationError, MemoryError)


def test_the_allocation_limit_can_be_set(monkeypatch):
    monkeypatch.setattr(arg_checks, "MAX_BYTES", 1 << 27)
    tf.zeros([1 << 20])                                     # 4 MiB: below the quick bound
    with raises(AllocationError, "fill(): the result would have shape [67108864]",
                "67,108,864 elements of float32, 256 MiB", "MAX_BYTES (flowgrad.arg_checks) (128 MiB)"):
        tf.zeros([1 << 26])


def test_range_refuses_infinite_and_nan_bounds():
    with raises(ArgumentError, "range(): start 0.0, stop inf and step 1.0 give inf values"):
        tf.range(0, float("inf"))
    with raises(ArgumentError, "range(): start nan"):
        tf.range(NAN, 3)


# ---------------------------------------------------------------- disposed tensors
@pytest.mark.parametrize("call, kernel", [
    (lambda t: tf.reshape(t, [2, 3]), "Reshape"), (lambda t: tf.squeeze(t), "Reshape"),
    (lambda t: tf.cast(t, "float32"), "Cast"), (lambda t: tf.to_float(t), "Cast"),
    (lambda t: tf.transpose(t, [0, 1]), "Transpose"), (lambda t: tf.broadcast_to(t, [2, 3]),
                                                        "BroadcastTo"),
    (lambda t: tf.slice(t, [0, 0], [2, 3]), "Slice"), (lambda t: tf.reverse(t, []), "Reverse"),
    (lambda t: tf.tile(t, [1, 1]), "Tile"), (lambda t: tf.expand_dims(t, 0), "Reshape"),
], ids=["reshape-same", "squeeze-nothing", "cast-same", "to_float",
        "transpose-identity", "broadcast-same", "slice-all", "reverse-none", "tile-ones",
        "expand_dims"])
def test_a_disposed_tensor_never_passes_through_an_op_that_changes_nothing(call, kernel):
    t = tf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    t.dispose()
    with raises(DisposedError, f"Tensor is disposed. The input of '{kernel}'",
                "was disposed by dispose() or by the tidy() that created it"):
        call(t)


def test_a_disposed_1d_tensor_through_flatten_and_meshgrid():
    t = tf.tensor([1.0, 2.0])
    t.dispose()
    with raises(DisposedError, "Tensor is disposed. The input of 'Reshape'"):
        tf.flatten(t)
    with raises(DisposedError, "Tensor is disposed."):
        tf.meshgrid(t)


# ---------------------------------------------------------------- var_list (issue 27)
def _objects(*items):
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


@pytest.fixture
def trained():
    """A variable, an SGD optimizer and a loss of it; disposed afterwards."""
    w = tf.variable(tf.tensor([1.0, 2.0]), name="w_var_list")
    opt = tf.train.sgd(0.1)
    yield w, opt, lambda: w.square().sum()
    opt.dispose()
    w.dispose()


VAR_LISTS = {"int": (3, "got 3 (int)"), "nan": (NAN, "got nan (float)"),
             "function": (len, "(builtin_function_or_method)"),
             "object": (object(), "(object)"),
             "scalar tensor": (tf.scalar(1.0), "got a float32 tensor of shape []"),
             "object array": (None, "got a NumPy array of shape [2]"),
             "str": ("w", "got 'w'")}


@pytest.mark.parametrize("bad", VAR_LISTS)
def test_minimize_refuses_a_var_list_that_is_not_a_list_of_variables(trained, bad):
    w, opt, f = trained
    value, got = VAR_LISTS[bad]
    value = _objects(w, w) if bad == "object array" else value
    with raises(ArgumentError, "The var_list passed in SGDOptimizer.minimize(f, var_list) must "
                "be an array of variables: a list or tuple of tf.variable(...) objects, or "
                "None for every trainable variable f uses; ", got):
        opt.minimize(f, var_list=value)
    assert opt.iterations == 0
    np.testing.assert_allclose(w.numpy(), [1.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize("api, call", [
    ("variable_grads(f, var_list)", lambda opt, f, v: tf.variable_grads(f, v)),
    ("SGDOptimizer.compute_gradients(f, var_list)",
     lambda opt, f, v: opt.compute_gradients(f, v)),
    ("DistributedOptimizer.minimize(f, var_list)",
     lambda opt, f, v: tf.distributed.DistributedOptimizer(opt).minimize(f, var_list=v)),
], ids=["variable_grads", "compute_gradients", "distributed"])
def test_every_function_taking_var_list_checks_it_alike(trained, api, call):
    w, opt, f = trained
    for value, got in [(3, "got 3 (int)"), (tf.scalar(1.0), "a float32 tensor of shape []"),
                       ([w, tf.scalar(1.0)], "var_list[1] is a float32 tensor of shape []"),
                       (w, "the Variable 'w_var_list' itself: put it in a list, [w]")]:
        with raises(ArgumentError, f"The var_list passed in {api} must be an array of "
                    f"variables", got):
            call(opt, f, value)
    value, grads = tf.variable_grads(f, (w,))              # a tuple is a list of variables
    np.testing.assert_allclose(grads[w].numpy(), [2.0, 4.0], rtol=1e-6)
    assert value.item() == pytest.approx(5.0, rel=1e-6)


# ---------------------------------------------------------------- ints no dtype holds
def test_one_hot_refuses_indices_beyond_int32_instead_of_overflowing():
    with raises(ArgumentError, "Argument 'indices' passed to 'one_hot': "
                "1180591620717411303424 does not fit in int32 (accepted: integers from "
                "-2,147,483,648 to 2,147,483,647)"):
        tf.one_hot(2 ** 70, 3)
    with raises(ArgumentError, "one_hot': 1099511627776 does not fit in int32"):
        tf.one_hot(2 ** 40, 3)                # (it wrapped around to index 0 before)
    with raises(ArgumentError, "one_hot': 1099511627776 does not fit in int32"):
        tf.one_hot([1, 2 ** 40], 3)
    with raises(ArgumentError, "one_hot': the integer 1180591620717411303424 does not fit in "
                "int64 (write it as a float, e.g. 1.18e+21, if a float tensor is meant)"):
        tf.one_hot([2 ** 70], 3)
    assert tf.one_hot(tf.tensor([2], dtype="int32"), 3).array_sync() == [[0, 0, 1]]


@pytest.mark.parametrize("arr, shown", [
    (np.array([3_000_000_000]), "3000000000"),           # NumPy's default int64
    (np.array([2 ** 32 + 5]), "4294967301"),              # (it wrapped around to 5)
    (np.array([1, -2 ** 31 - 1]), "-2147483649"),
    (np.uint32(4_000_000_000), "4000000000"),
    (np.array([2 ** 63 - 1], dtype=np.uint64), "9223372036854775807"),
])
def test_numpy_integers_beyond_int32_are_refused_not_wrapped(arr, shown):
    with raises(ArgumentError, f"tensor() (an array of {np.asarray(arr).dtype}; flowgrad's "
                f"integers are int32: cast to float64 for larger values): {shown} does not "
                f"fit in int32"):
        tf.tensor(arr)
    # what fits converts as before, and a float dtype takes the large values
    assert tf.tensor(np.array([2 ** 31 - 1, -2 ** 31])).array_sync() == [2 ** 31 - 1, -2 ** 31]
    assert tf.tensor(arr, dtype="float64").array_sync() == np.asarray(arr, float).tolist()


def test_huge_python_ints_become_floats_or_say_why_not():
    assert tf.tensor(2 ** 70).item() == pytest.approx(2.0 ** 70, rel=1e-6)   # float32
    with raises(ArgumentError, "tensor(): the integer 100000000000... (401 digits) is too "
                "large for a float (accepted: numbers up to about 1.8e308)"):
        tf.tensor(10 ** 400)
    with raises(ArgumentError, "tensor(): 1180591620717411303424 does not fit in int32"):
        tf.tensor(2 ** 70, dtype="int32")
    with raises(ArgumentError, "fill(): value must be a number a float can hold"):
        tf.fill([2], 10 ** 400)
    with raises(ArgumentError, "Adam: learning_rate must be a number or a schedule"):
        tf.train.adam(10 ** 400)
