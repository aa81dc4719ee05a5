"""One table runs every op: forward against NumPy in float64 and float32, gradients against
central finite differences in float64 to the order given (3 for exp, tanh, sigmoid, sin, cos,
pow), broadcasting shapes, non-differentiable ops give zero gradients, and no case leaks a
tensor."""
import math

import numpy as np
import pytest

import flowgrad as tf
from opcheck import BACKENDS, Case, run_case

SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772   # TF.js's constants
erf_ref = np.vectorize(math.erf)
IDX = np.array([2, 0, 1, 2])


def sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


def softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def unary(name, ref, dom="real", order=2, shape=(2, 3)):
    return Case(name, getattr(tf, name), ref, [(shape, dom)], order)


BCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


def binary(name, ref, doms=("real", "real"), order=2):
    return [Case(f"{name}{list(sa)}{list(sb)}", getattr(tf, name), ref,
                 [(sa, doms[0]), (sb, doms[1])], order) for sa, sb in BCAST]


def _ratio(x):
    with np.errstate(divide="ignore"):      # (x / 0: the infinities is_inf and co. look for)
        return x / np.round(x)


def mod_inputs():
    # fractional parts of a/b in (0.2, 0.8): far from the jumps of mod and floor
    b = np.array([[1.5, -2.0, 2.5], [-1.25, 3.0, 1.75]])
    a = b * np.array([[1.3, -0.6, 2.45], [0.7, -1.35, 3.5]])
    return [a, b]


CASES = [
    # arithmetic and exponentials
    unary("neg", np.negative),
    unary("square", np.square),
    unary("sqrt", np.sqrt, "pos"),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), "pos"),
    unary("reciprocal", lambda x: 1 / x, "pos"),
    unary("abs", np.abs, "nonzero"),
    unary("exp", np.exp, order=3),
    unary("expm1", np.expm1),
    unary("log", np.log, "pos"),
    unary("log1p", np.log1p, "pos"),
    unary("sigmoid", sigmoid_ref, order=3),
    unary("softplus", lambda x: np.log1p(np.exp(x))),
    unary("log_sigmoid", lambda x: -np.log1p(np.exp(-x))),
    unary("erf", erf_ref),
    # trigonometric and hyperbolic
    unary("sin", np.sin, order=3),
    unary("cos", np.cos, order=3),
    unary("tan", np.tan, "unit"),
    unary("asin", np.arcsin, "unit"),
    unary("acos", np.arccos, "unit"),
    unary("atan", np.arctan),
    unary("sinh", np.sinh),
    unary("cosh", np.cosh),
    unary("tanh", np.tanh, order=3),
    unary("asinh", np.arcsinh),
    unary("acosh", np.arccosh, "gt1"),
    unary("atanh", np.arctanh, "unit"),
    # activations
    unary("relu", lambda x: np.maximum(x, 0), "nonzero"),
    unary("relu6", lambda x: np.clip(x, 0, 6), "nonzero"),
    Case("relu6[big]", tf.relu6, lambda x: np.clip(x, 0, 6),
         [np.array([-1.0, 2.0, 5.5, 6.5, 9.0])]),
    unary("elu", lambda x: np.where(x > 0, x, np.expm1(x)), "nonzero"),
    unary("selu", lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
          "nonzero"),
    Case("leaky_relu", lambda x: tf.leaky_relu(x, 0.3),
         lambda x: np.where(x > 0, x, 0.3 * x), [((2, 3), "nonzero")]),
    Case("prelu", tf.prelu, lambda x, a: np.where(x > 0, x, a * x),
         [((2, 3), "nonzero"), ((3,), "pos")]),
    Case("clip_by_value", lambda x: tf.clip_by_value(x, -0.5, 0.7),
         lambda x: np.clip(x, -0.5, 0.7), [np.array([-1.3, -0.2, 0.3, 0.9, 1.7, 0.65])]),
    # binary, with broadcasting
    *binary("add", np.add),
    *binary("sub", np.subtract),
    *binary("mul", np.multiply, order=3),
    *binary("div", np.divide, ("real", "pos")),
    *binary("pow", np.power, ("pos", "real"), order=3),
    *binary("maximum", np.maximum),
    *binary("minimum", np.minimum),
    *binary("squared_difference", lambda a, b: (a - b) ** 2),
    *binary("atan2", np.arctan2, ("real", "pos")),
    Case("mod", tf.mod, np.mod, mod_inputs()),
    # [conv] floor_div's gradient is real division's (TF.js): checked in test_conventions
    Case("floor_div", tf.floor_div, np.floor_divide, mod_inputs(), order=-1),
    # non-differentiable elementwise ops: zero gradient, backprop never fails
    unary("sign", np.sign, order=0),
    unary("floor", np.floor, order=0),
    unary("ceil", np.ceil, order=0),
    unary("round", np.round, order=0),
    Case("step", tf.step, lambda x: (x > 0).astype(float), [((2, 3), "nonzero")], order=0),
    *[Case(n, getattr(tf, n), r, [((2, 3), "real"), ((3,), "real")], order=0, exact=True)
      for n, r in [("greater", np.greater), ("greater_equal", np.greater_equal),
                   ("less", np.less), ("less_equal", np.less_equal), ("equal", np.equal),
                   ("not_equal", np.not_equal)]],
    *[Case(n, (lambda f: lambda a, b: f(a > 0, b > 0))(getattr(tf, n)),
           (lambda f: lambda a, b: f(a > 0, b > 0))(r), [((2, 3), "real"), ((3,), "real")],
           order=0, exact=True)
      for n, r in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                   ("logical_xor", np.logical_xor)]],
    Case("logical_not", lambda x: tf.logical_not(x > 0), lambda x: ~(x > 0),
         [((2, 3), "real")], order=0, exact=True),
    *[Case(n, (lambda f: lambda x: f(x / x.round()))(getattr(tf, n)),
           (lambda f: lambda x: f(_ratio(x)))(r), [np.array([0.2, 1.1, -0.3, 2.4])],
           order=0, exact=True)
      for n, r in [("is_nan", np.isnan), ("is_inf", np.isinf), ("is_finite", np.isfinite)]],
    # [conv] casts pass the gradient through (TF.js): checked in test_conventions
    Case("cast_int", lambda x: tf.cast(x * 3, "int32"), lambda x: np.trunc(x * 3),
         [((2, 3), "real")], order=-1, exact=True),
    Case("to_int", lambda x: tf.to_int(x * 3), lambda x: np.trunc(x * 3), [((2, 3), "real")],
         order=-1, exact=True),
    Case("to_bool", lambda x: tf.to_bool(x.round()), lambda x: np.round(x) != 0,
         [((2, 3), "real")], order=0, exact=True),
    Case("to_float", lambda x: tf.to_float(x) * 2, lambda x: x.astype(np.float32) * 2.0,
         [((2, 3), "real")],
         order=-1, f32_rtol=1e-6),
    # selection
    Case("where", lambda a, b: tf.where(a > b, a * 2, b.exp()),
         lambda a, b: np.where(a > b, a * 2, np.exp(b)), [((2, 3), "real"), ((3,), "real")]),
    Case("where_method", lambda a, b: a.where(b > 0, b),
         lambda a, b: np.where(b > 0, a, b), [((2, 3), "real"), ((2, 3), "real")]),
    # reductions
    Case("sum", lambda x: tf.sum(x), np.sum, [((2, 3), "real")]),
    Case("sum_axis", lambda x: x.sum(1), lambda x: x.sum(1), [((2, 3), "real")]),
    Case("sum_keep", lambda x: x.sum(-1, True), lambda x: x.sum(-1, keepdims=True),
         [((2, 3, 2), "real")]),
    Case("sum_axes", lambda x: x.sum([0, 2]), lambda x: x.sum((0, 2)), [((2, 3, 2), "real")]),
    Case("mean", lambda x: x.mean(0), lambda x: x.mean(0), [((2, 3), "real")]),
    Case("mean_all_keep", lambda x: x.mean(None, True), lambda x: x.mean(keepdims=True),
         [((2, 3), "real")]),
    Case("prod", lambda x: x.prod(1), lambda x: x.prod(1), [((2, 4), "real")], order=3),
    Case("prod_axes", lambda x: x.prod([0, 2], True), lambda x: x.prod((0, 2), keepdims=True),
         [((2, 3, 2), "real")]),
    Case("max", lambda x: x.max(1), lambda x: x.max(1), [((2, 3), "real")]),
    Case("max_all", lambda x: tf.max(x), np.max, [((2, 3), "real")]),
    Case("min", lambda x: x.min(-1, True), lambda x: x.min(-1, keepdims=True),
         [((2, 3), "real")]),
    Case("all", lambda x: (x > 0).all(1), lambda x: (x > 0).all(1), [((2, 3), "real")],
         order=0, exact=True),
    Case("any", lambda x: (x > 0).any(), lambda x: (x > 0).any(), [((2, 3), "real")],
         order=0, exact=True),
    Case("arg_max", lambda x: tf.arg_max(x, 1), lambda x: x.argmax(1), [((2, 3), "real")],
         order=0, exact=True),
    Case("arg_min", lambda x: tf.arg_min(x), lambda x: x.argmin(0), [((2, 3), "real")],
         order=0, exact=True),
    Case("log_sum_exp", lambda x: x.log_sum_exp(1),
         lambda x: np.log(np.exp(x).sum(1)), [((2, 3), "real")]),
    Case("softmax", tf.softmax, softmax_ref, [((2, 3), "real")]),
    Case("softmax_axis0", lambda x: tf.softmax(x, 0), lambda x: softmax_ref(x, 0),
         [((2, 3), "real")]),
    Case("log_softmax", tf.log_softmax, lambda x: np.log(softmax_ref(x)), [((2, 3), "real")]),
    Case("norm", lambda x: tf.norm(x), lambda x: np.sqrt((x ** 2).sum()), [((2, 3), "real")]),
    Case("norm_1_axis", lambda x: tf.norm(x, 1, 1), lambda x: np.abs(x).sum(1),
         [((2, 3), "nonzero")]),
    Case("norm_inf", lambda x: tf.norm(x, np.inf, 0), lambda x: np.abs(x).max(0),
         [((2, 3), "nonzero")]),
    Case("norm_p3", lambda x: tf.norm(x, 3, -1), lambda x: (np.abs(x) ** 3).sum(-1) ** (1 / 3),
         [((2, 3), "nonzero")]),
    Case("norm_fro", lambda x: tf.norm(x, "fro", [0, 1]), lambda x: np.sqrt((x ** 2).sum()),
         [((2, 3), "real")]),
    # matrix norms: axis[0] is the rows' axis, in the order given (1 ↔ inf when swapped)
    Case("norm_1_swapped", lambda x: tf.norm(x, 1, [1, 0]),
         lambda x: np.linalg.norm(x, 1, (1, 0)), [((2, 3), "nonzero")]),
    Case("norm_inf_swapped", lambda x: tf.norm(x, np.inf, [1, 0]),
         lambda x: np.linalg.norm(x, np.inf, (1, 0)), [((2, 3), "nonzero")]),
    Case("norm_neg_inf", lambda x: tf.norm(x, -np.inf, [0, 1]),
         lambda x: np.linalg.norm(x, -np.inf, (0, 1)), [((2, 3), "nonzero")]),
    Case("norm_1_3d", lambda x: tf.norm(x, 1, [2, 0], True),
         lambda x: np.linalg.norm(x, 1, (2, 0), keepdims=True), [((2, 3, 4), "nonzero")]),
    Case("norm_inf_3d", lambda x: tf.norm(x, np.inf, [-1, -2]),
         lambda x: np.linalg.norm(x, np.inf, (-1, -2)), [((2, 3, 4), "nonzero")]),
    # linear algebra
    Case("mat_mul", tf.mat_mul, np.matmul, [((2, 3), "real"), ((3, 4), "real")]),
    Case("mat_mul_ta", lambda a, b: tf.mat_mul(a, b, True), lambda a, b: a.T @ b,
         [((3, 2), "real"), ((3, 4), "real")]),
    Case("mat_mul_tb", lambda a, b: tf.mat_mul(a, b, False, True), lambda a, b: a @ b.T,
         [((2, 3), "real"), ((4, 3), "real")]),
    Case("mat_mul_tab", lambda a, b: a.mat_mul(b, True, True), lambda a, b: a.T @ b.T,
         [((3, 2), "real"), ((4, 3), "real")]),
    Case("mat_mul_batched", tf.mat_mul, np.matmul, [((2, 2, 3), "real"), ((3, 2), "real")]),
    Case("matmul_operator", lambda a, b: a @ b, np.matmul,
         [((2, 1, 3), "real"), ((2, 3, 2), "real")]),
    Case("dot_vv", tf.dot, np.dot, [((3,), "real"), ((3,), "real")]),
    Case("dot_mv", tf.dot, np.dot, [((2, 3), "real"), ((3,), "real")]),
    Case("dot_vm", tf.dot, np.dot, [((3,), "real"), ((3, 2), "real")]),
    Case("outer_product", tf.outer_product, np.outer, [((3,), "real"), ((2,), "real")]),
    # shapes and indexing
    Case("reshape", lambda x: x.reshape([3, -1]), lambda x: x.reshape(3, -1),
         [((2, 3), "real")]),
    Case("transpose", lambda x: tf.transpose(x, [2, 0, 1]), lambda x: x.transpose(2, 0, 1),
         [((2, 3, 2), "real")]),
    Case("expand_dims", lambda x: x.expand_dims(1), lambda x: x[:, None], [((2, 3), "real")]),
    Case("squeeze", lambda x: x.squeeze(), lambda x: x.squeeze(), [((2, 1, 3), "real")]),
    Case("flatten", lambda x: x.flatten(), lambda x: x.reshape(-1), [((2, 3), "real")]),
    Case("concat", lambda a, b: tf.concat([a, b, a], 1), lambda a, b: np.concatenate([a, b, a], 1),
         [((2, 3), "real"), ((2, 1), "real")]),
    Case("stack", lambda a, b: tf.stack([a, b], 1), lambda a, b: np.stack([a, b], 1),
         [((2, 3), "real"), ((2, 3), "real")]),
    Case("unstack", lambda x: x.unstack(1), lambda x: list(np.moveaxis(x, 1, 0)),
         [((2, 3), "real")]),
    Case("unstack_part", lambda x: x.unstack()[1], lambda x: x[1], [((3, 2), "real")]),
    Case("split", lambda x: tf.split(x, [1, 2], 1), lambda x: np.split(x, [1], 1),
         [((2, 3), "real")]),
    Case("split_part", lambda x: tf.split(x, 3)[2] * 2, lambda x: np.split(x, 3)[2] * 2,
         [((6, 2), "real")]),
    Case("slice", lambda x: tf.slice(x, [1, 0], [1, 2]), lambda x: x[1:2, 0:2],
         [((2, 3), "real")]),
    Case("getitem", lambda x: x[1:, None, ..., ::2], lambda x: x[1:, None, ..., ::2],
         [((3, 2, 3), "real")]),
    Case("getitem_int", lambda x: x[-1, 1], lambda x: x[-1, 1], [((2, 3), "real")]),
    Case("gather", lambda x: tf.gather(x, tf.tensor(IDX, dtype="int32")),
         lambda x: x[IDX], [((3, 2), "real")]),
    Case("gather_axis1", lambda x: x.gather(tf.tensor([[1, 1], [0, 2]], dtype="int32"), 1),
         lambda x: x[:, np.array([[1, 1], [0, 2]])], [((2, 3), "real")]),
    Case("unsorted_segment_sum",
         lambda x: tf.unsorted_segment_sum(x, tf.tensor([1, 0, 1, -1], dtype="int32"), 3),
         lambda x: np.stack([x[1], x[0] + x[2], 0 * x[0]]), [((4, 2), "real")]),
    Case("tile", lambda x: tf.tile(x, [2, 1, 3]), lambda x: np.tile(x, (2, 1, 3)),
         [((2, 1, 2), "real")]),
    Case("tile_rank5", lambda x: x.tile([1, 2, 1, 1, 2]), lambda x: np.tile(x, (1, 2, 1, 1, 2)),
         [((1, 2, 1, 1, 2), "real")]),
    Case("pad", lambda x: tf.pad(x, [[1, 0], [2, 1]], 3), lambda x: np.pad(x, ((1, 0), (2, 1)),
                                                                           constant_values=3),
         [((2, 3), "real")]),
    Case("reverse", lambda x: tf.reverse(x, 1), lambda x: x[:, ::-1], [((2, 3), "real")]),
    Case("reverse_all", lambda x: x.reverse(), lambda x: x[::-1, ::-1], [((2, 3), "real")]),
    Case("broadcast_to", lambda x: tf.broadcast_to(x, [2, 2, 3]),
         lambda x: np.broadcast_to(x, (2, 2, 3)), [((2, 1), "real")]),
    Case("one_hot", lambda x: tf.one_hot(tf.to_int(x.abs() * 1.5), 3) * x.expand_dims(1),
         lambda x: np.eye(3)[np.trunc(np.abs(x) * 1.5).astype(int)] * x[:, None],
         [np.array([0.1, 0.9, 1.5])]),
    Case("add_n", lambda a, b: tf.add_n([a, b, a]), lambda a, b: a + b + a,
         [((2, 3), "real"), ((2, 3), "real")]),
    Case("clone", lambda x: x.clone() * 2, lambda x: x * 2, [((2, 3), "real")]),
    Case("zeros_like", lambda x: tf.zeros_like(x) + tf.ones_like(x) * x,
         lambda x: x, [((2, 3), "real")]),
    Case("stop_gradient", lambda x: x * tf.stop_gradient(x), lambda x: x * x,
         [((3,), "real")], order=0, tags=("stop",)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_op(case, backend):
    run_case(case, backend)


def test_table_covers_the_core_ops():
    names = {c.name.split("[")[0] for c in CASES}
    names |= {n.rsplit("_", 1)[0] for n in names}
    core = """add sub mul div pow neg square sqrt rsqrt reciprocal exp log log1p expm1 abs sign
        floor ceil round relu relu6 elu selu leaky_relu prelu sigmoid log_sigmoid softplus tanh
        sin cos tan asin acos atan sinh cosh atan2 erf maximum minimum squared_difference mod
        floor_div greater greater_equal less less_equal equal not_equal logical_and logical_or
        logical_not logical_xor where is_nan is_inf is_finite to_int to_bool clip_by_value
        step sum mean max min prod all any arg_max arg_min log_sum_exp softmax log_softmax
        mat_mul dot outer_product reshape transpose expand_dims squeeze flatten concat stack
        unstack split slice gather tile pad reverse broadcast_to one_hot add_n norm""".split()
    assert not set(core) - names
