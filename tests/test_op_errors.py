"""Every error path of the ops, tensor conversion, dtypes and names: class and message.

Rows are (id, callable, exception class, literal message substring), one table per source
file. Gradient API, tidy, disposal and assign errors live in test_gradients.py and
test_memory.py.
"""
import re

import numpy as np
import pytest

import flowgrad as tf
from flowgrad import dtypes
from flowgrad.errors import ArgumentError, DtypeError, ShapeError
from flowgrad.camel_case import Result

V = tf.tensor([1.0, 2.0, 3.0])
M = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
S = tf.scalar(1.0)


def ints(*values):
    return tf.tensor(list(values), dtype="int32")


def row(id_, fn, cls, message):
    return pytest.param(fn, cls, message, id=id_)


# ---------------------------------------------------------------- ops/_core.py
CORE = [
    row("bool-policy-a", lambda: tf.logical_and(V, V), DtypeError,
        "Argument 'a' passed to 'logical_and' must be bool tensor, but got float32 tensor"),
    row("bool-policy-b", lambda: tf.logical_or(tf.tensor([True]), ints(1)), DtypeError,
        "Argument 'b' passed to 'logical_or' must be bool tensor, but got int32 tensor"),
    row("axis-not-int", lambda: tf.sum(M, 0.5), ArgumentError,
        "sum: axis must be an int, got float"),
    row("axis-str", lambda: tf.transpose(V, ["a"]), ArgumentError,
        "transpose: axis must be an int, got str"),
    row("axis-out-of-range", lambda: tf.sum(M, 2), ArgumentError,
        "sum: axis 2 is out of range for a tensor of rank 2 (valid: -2 to 1)"),
    row("axis-out-of-range-softmax", lambda: tf.softmax(V, 1), ArgumentError,
        "softmax: axis 1 is out of range for a tensor of rank 1 (valid: -1 to 0)"),
    row("axis-repeated", lambda: tf.sum(M, [0, -2]), ArgumentError,
        "sum: axis [0, -2] repeats an axis"),
]
# ---------------------------------------------------------------- ops/creation.py
CREATION = [
    row("shape-not-list", lambda: tf.fill("ab", 1), ArgumentError,
        "fill(): shape must be a list or tuple of ints, got str"),
    row("shape-bool", lambda: tf.ones(True), ArgumentError,
        "fill(): shape must be a list or tuple of ints, got bool"),
    row("shape-negative", lambda: tf.zeros([2, -1]), ArgumentError,
        "fill(): shape [2, -1] must contain non-negative ints"),
    row("shape-float", lambda: tf.tensor([1], [1.0]), ArgumentError,
        "tensor(): shape [1.0] must contain non-negative ints"),
    row("tensor-size", lambda: tf.tensor([1, 2, 3], [2, 2]), ShapeError,
        "Based on the provided shape, [2, 2], the tensor should have 4 values but has 3"),
    row("from-numpy-list", lambda: tf.from_numpy([1]), ArgumentError,
        "from_numpy() takes a NumPy array, got list"),
    row("scalar-list", lambda: tf.scalar([1]), ArgumentError,
        "Error creating a new Scalar: value must be a primitive (number|boolean)"),
    row("tensor2d-shape", lambda: tf.tensor2d([1, 2], [2]), ShapeError,
        "tensor2d() requires shape to have two numbers"),
    row("tensor4d-shape", lambda: tf.tensor4d([1], [1]), ShapeError, "have four numbers"),
    row("tensor2d-values", lambda: tf.tensor2d([[[1]]]), ShapeError,
        "tensor2d() requires values to be number[][] or flat/TypedArray"),
    row("tensor2d-flat", lambda: tf.tensor2d([1, 2]), ShapeError,
        "tensor2d() requires shape to be provided when `values` are a flat/TypedArray"),
    row("tensor1d-rank", lambda: tf.tensor1d([[1]]), ShapeError,
        "tensor1d() requires values to be a flat/TypedArray"),
    row("range-step-0", lambda: tf.range(0, 5, 0), ArgumentError, "Cannot have a step of zero"),
    row("linspace-0", lambda: tf.linspace(0, 1, 0), ArgumentError,
        "The number of values should be positive, got 0."),
    row("normal-dtype", lambda: tf.random_normal([2], dtype="int32"), DtypeError,
        "random_normal(): dtype must be float32 or float64, got int32"),
    row("truncated-dtype", lambda: tf.truncated_normal([2], dtype="bool"), DtypeError,
        "truncated_normal(): dtype must be float32 or float64, got bool"),
    row("uniform-bool", lambda: tf.random_uniform([2], dtype="bool"), DtypeError,
        "random_uniform(): dtype must be float32, float64 or int32"),
    row("uniform-bounds", lambda: tf.random_uniform([2], 1, 1), ArgumentError,
        "random_uniform(): minval (1) must be less than maxval (1)"),
    row("one-hot-float", lambda: tf.one_hot(tf.tensor([0.0, 1.0]), 3), DtypeError,
        "Argument 'indices' passed to 'one_hot' must be int32 tensor, but got float32 tensor"),
    row("one-hot-depth", lambda: tf.one_hot(ints(0), 0), ArgumentError,
        "Error in one_hot: depth must be >= 1, but it is 0"),
    row("eye-negative", lambda: tf.eye(-1), ArgumentError,
        "eye(): num_rows must be >= 0, got -1"),
    row("uniform-int-empty", lambda: tf.random_uniform([2], 0.2, 0.5, dtype="int32"),
        ArgumentError, "random_uniform(): minval (0.2) must be less than maxval (0.5) (no "
        "integer lies between them)"),
    row("uniform-str", lambda: tf.random_uniform([2], "a", "b"), ArgumentError,
        "random_uniform(): minval must be a number, got 'a'"),
    row("fill-str-value", lambda: tf.fill([2], "a"), DtypeError,
        "fill(): value must be a number or a bool, got 'a'"),
    row("range-str", lambda: tf.range("a"), ArgumentError,
        "range(): stop must be a number, got 'a'"),
    row("range-none", lambda: tf.range(None), ArgumentError,
        "range(): stop must be a number, got None"),
    row("linspace-none", lambda: tf.linspace(0, 1, None), ArgumentError,
        "linspace(): the number of values must be an integer, got None"),
    row("linspace-fraction", lambda: tf.linspace(0, 1, 2.5), ArgumentError,
        "linspace(): the number of values must be an integer, got 2.5"),
    row("one-hot-depth-fraction", lambda: tf.one_hot(ints(0), 2.5), ArgumentError,
        "Error in one_hot: depth must be an integer, got 2.5"),
    row("tensor-complex-list", lambda: tf.tensor([1 + 2j]), DtypeError,
        "tensor(): complex numbers are not supported"),
]
# ---------------------------------------------------------------- ops/shape.py
SHAPE = [
    row("tensors-not-list", lambda: tf.concat(V), ArgumentError,
        "concat() takes a list of tensors, got Tensor"),
    row("tensors-empty", lambda: tf.stack([]), ArgumentError, "stack() needs at least one tensor"),
    row("reshape-two-implicit", lambda: tf.reshape(M, [-1, -1]), ShapeError,
        "Shapes can only have 1 implicit size. Found -1 at dims [0, 1] of [-1, -1]"),
    row("reshape-fraction", lambda: tf.reshape(V, [2, -1]), ShapeError,
        "The implicit shape can't be a fractional number. Got 3 / 2 (reshape of a tensor of shape (3,) to [2, -1])"),
    row("reshape-size", lambda: tf.reshape(V, [7]), ShapeError,
        "Size(3) must match the product of shape [7]: cannot reshape a tensor of shape (3,)"),
    row("squeeze-non-1", lambda: tf.squeeze(M, 0), ShapeError,
        "Can't squeeze axis 0 since its dim '2' is not 1"),
    row("as2d", lambda: V.as2d(3), ShapeError, "as2d() takes 2 sizes, got 1"),
    row("as-scalar", lambda: V.as_scalar(), ShapeError,
        "The array must have only 1 element, but has shape (3,)."),
    row("transpose-perm", lambda: tf.transpose(M, [0, 0]), ShapeError,
        "Error in transpose: rank of input 2 must match length of perm [0, 0], which must list"),
    row("broadcast-to", lambda: tf.broadcast_to(V, [2, 2]), ShapeError,
        "broadcast_to(): cannot broadcast a tensor of shape (3,) to (2, 2): each axis must match"),
    row("concat-scalars", lambda: tf.concat([S, S]), ShapeError,
        "concat() cannot join scalars (rank 0): use stack()"),
    row("concat-ranks", lambda: tf.concat([M, V]), ShapeError,
        "Error in concat2D: rank of tensors[1] must be the same as the rank of the rest (2)"),
    row("concat-shapes", lambda: tf.concat([M, tf.zeros([2, 3])]), ShapeError,
        "Shape of tensors[1] (2, 3) does not match (2, 2) along the non-concatenated axis 1"),
    row("split-uneven", lambda: tf.split(V, 2), ShapeError,
        "Number of splits must evenly divide the axis: axis 0 has 3 entries, which 2 splits"),
    row("split-two-implicit", lambda: tf.split(V, [-1, -1]), ShapeError,
        "split(): only one size may be -1"),
    row("split-sum", lambda: tf.split(V, [1, 1]), ShapeError,
        "The sum of sizes [1, 1] must match the size of the axis (3)"),
    row("stack-shapes", lambda: tf.stack([V, M]), ShapeError,
        "stack must have matching shapes: tensors[0] has (3,), tensors[1] has (2, 2)"),
    row("unstack-scalar", lambda: tf.unstack(S), ShapeError,
        "unstack() needs a tensor of rank >= 1, got a scalar"),
    row("slice-rank", lambda: tf.slice(V, [0, 0], [1, 1]), ShapeError,
        "Error in slice1D: Length of begin [0, 0] and size [1, 1] must match the rank of the"),
    row("slice-fit", lambda: tf.slice(V, [2], [5]), ShapeError,
        "Error in slice1D: begin [2] and size [5] do not fit in a tensor of shape (3,) (axis 0)."),
    row("pad-pairs", lambda: tf.pad(M, [[1, 1]]), ShapeError,
        "pad(): paddings [[1, 1]] must give one non-negative [before, after] pair per axis of"),
    row("pad-negative", lambda: tf.pad(V, [[-1, 0]]), ShapeError, "pad(): paddings [[-1, 0]]"),
    row("tile-reps", lambda: tf.tile(M, [2]), ShapeError,
        "Error in tile: reps [2] must have one non-negative entry per axis of x (rank 2)"),
    row("gather-float-index", lambda: tf.gather(V, tf.tensor([0.5])), DtypeError,
        "Argument 'indices' passed to 'gather' must be int32 tensor, but got float32 tensor"),
    row("segment-ids-dtype", lambda: tf.unsorted_segment_sum(V, tf.tensor([0.5, 0, 0]), 2),
        DtypeError, "Argument 'segment_ids' passed to 'unsorted_segment_sum' must be int32"),
    row("gather-range-high", lambda: tf.gather(V, ints(3)), ShapeError,
        "gather(): index 3 is out of range for axis 0 of x, which has 3 entries (shape (3,))."),
    row("gather-range-low", lambda: tf.gather(V, ints(0, -1)), ShapeError, "gather(): index -1"),
    row("segment-ids-shape", lambda: tf.unsorted_segment_sum(M, ints(0), 2), ShapeError,
        "unsorted_segment_sum(): segment_ids shape (1,) must be a prefix of x's shape (2, 2)"),
    row("index-too-many", lambda: V[0, 0], ShapeError,
        "too many indices for a tensor of shape (3,): 2 given"),
    row("index-ellipsis", lambda: M[..., ...], ShapeError,
        "an index can only have a single ellipsis ('...')"),
    row("index-bounds", lambda: V[5], ShapeError,
        "index 5 is out of bounds for axis 0 with size 3"),
    row("index-bounds-negative", lambda: M[:, -3], ShapeError,
        "index -3 is out of bounds for axis 1 with size 2"),
    row("index-list", lambda: V[[0, 5]], ShapeError,
        "x[key]: index 5 is out of bounds for axis 0 with size 3"),
    row("index-bool", lambda: V[True], ArgumentError,
        "Tensors are indexed with ints, slices, None, '...' and int or bool arrays (lists, "
        "NumPy arrays, tensors); got bool."),
    row("index-float-slice", lambda: V[0.5:2], ArgumentError,
        "slice indices must be integers or None, got 0.5"),
    row("reshape-str", lambda: tf.reshape(V, "ab"), ArgumentError,
        "reshape: shape must be a list of integers, got str"),
    row("reshape-none", lambda: tf.reshape(V, None), ArgumentError,
        "reshape: shape must be a list of integers, got NoneType"),
    row("reshape-fraction-size", lambda: tf.reshape(V, [3.7]), ArgumentError,
        "reshape: shape[0] must be an integer, got 3.7"),
    row("slice-str", lambda: tf.slice(V, "a"), ArgumentError,
        "slice: begin must be a list of integers, got str"),
    row("split-none", lambda: tf.split(V, None), ArgumentError,
        "split: num_or_size_splits must be a list of integers, got NoneType"),
    row("tile-int-reps", lambda: tf.tile(V, 2), ArgumentError,
        "tile: reps must be a list of integers, got int"),
    row("pad-flat-pair", lambda: tf.pad(V, [1, 1]), ShapeError,
        "pad(): paddings must be a list of [before, after] pairs"),
    row("pad-triple", lambda: tf.pad(V, [[1, 1, 5]]), ShapeError,
        "pad(): paddings must be a list of [before, after] pairs, one per axis"),
    row("broadcast-to-negative", lambda: tf.broadcast_to(tf.zeros([1]), [-1]), ArgumentError,
        "broadcast_to(): shape[0] must be >= 0, got -1"),
    row("segment-count-negative", lambda: tf.unsorted_segment_sum(V, ints(0, 0, 0), -1),
        ArgumentError, "unsorted_segment_sum: num_segments must be >= 0, got -1"),
]
# ------------------------------------------- axis 0 of a scalar (ops/_core.py norm_axis)
# a scalar has no axis: every op taking one says so
_SCALAR_AXIS = "axis 0 is out of range for a tensor of rank 0"
SCALAR_AXIS = [row(f"scalar-axis-{name}", fn, ArgumentError, _SCALAR_AXIS)
               for name, fn in [
                   ("sum", lambda: tf.sum(S, 0)),
                   ("all", lambda: tf.all(tf.scalar(True), 0)),
                   ("reverse", lambda: tf.reverse(S, 0)),
                   ("max", lambda: tf.max(S, 0)),
                   ("mean", lambda: tf.mean(S, 0)),
                   ("arg_max", lambda: tf.arg_max(S)),
                   ("squeeze", lambda: tf.squeeze(S, 0)),
                   ("gather", lambda: tf.gather(S, [0])),
                   ("split", lambda: tf.split(S, 1))]]
# ---------------------------------------------------------------- ops/reduce.py
REDUCE = [
    row("mean-empty", lambda: tf.mean(tf.zeros([0])), ShapeError,
        "mean() of an empty axis: axis 0 of shape (0,) has no entries"),
    row("min-empty", lambda: tf.min(tf.zeros([2, 0]), 1), ShapeError,
        "min() of an empty axis: axis 1 of shape (2, 0) has no entries"),
    row("arg-max-empty", lambda: tf.arg_max(tf.zeros([0])), ShapeError, "arg_max() of an empty"),
    row("norm-axes", lambda: tf.norm(tf.zeros([2, 2, 2]), axis=[0, 1, 2]), ArgumentError,
        "Error in norm: invalid axis: [0, 1, 2] (one or two axes)"),
    row("norm-vector-ord", lambda: tf.norm(V, ord="nuc"), ArgumentError,
        "Error in norm: invalid ord 'nuc' for a vector norm (use 1, 2, 'euclidean', inf, -inf"),
    row("norm-matrix-ord", lambda: tf.norm(M, ord=2, axis=[0, 1]), ArgumentError,
        "Error in norm: invalid ord 2 for a matrix norm (use 'fro', 'euclidean', 1, inf or -inf)"),
]
# ---------------------------------------------------------------- ops/linalg.py
LINALG = [
    row("matmul-rank", lambda: tf.mat_mul(V, V), ShapeError,
        "Error in matMul: inputs must have the same rank of at least 2, got ranks 1 and 1."),
    row("matmul-inner", lambda: tf.mat_mul(M, tf.zeros([3, 2])), ShapeError,
        "Error in matMul: inner shapes (2) and (3) of Tensors with shapes (2, 2) and (3, 2)"),
    row("matmul-batch", lambda: tf.mat_mul(tf.zeros([2, 2, 2]), tf.zeros([3, 2, 2])),
        ShapeError, "the batch dimensions (2,) and (3,) of shapes (2, 2, 2) and (3, 2, 2) do"),
    row("dot-rank", lambda: tf.dot(tf.zeros([2, 2, 2]), V), ShapeError,
        "Error in dot: inputs must all be rank 1 or 2, but got ranks 3 and 1."),
    row("dot-inner", lambda: V @ M, ShapeError,
        "Error in dot: inner dimensions of inputs must match, but got 3 and 2."),
    row("outer-rank", lambda: tf.outer_product(M, V), ShapeError,
        "Error in outerProduct: inputs must be rank 1, but got ranks 2 and 1."),
]
# ----------------------------------------- ops/binary.py, unary.py, logical.py, nn.py
ELEMENTWISE = [
    row("add-n-empty", lambda: tf.add_n([]), ArgumentError,
        "Must pass at least one tensor to tf.add_n"),
    row("add-n-shapes", lambda: tf.add_n([V, M]), ShapeError,
        "add_n must have the same shape: tensors[0] has shape (3,), tensors[1] has (2, 2)"),
    row("clip-bounds", lambda: tf.clip_by_value(V, 2, 1), ArgumentError,
        "Error in clip: min (2) must be less than or equal to max (1)."),
    row("logical-not", lambda: tf.logical_not(V), DtypeError,
        "Argument 'x' passed to 'logical_not' must be bool tensor, but got float32 tensor"),
    row("invert", lambda: ~ints(1), DtypeError,
        "'logical_not' must be bool tensor, but got int32"),
    row("where-condition", lambda: tf.where(tf.tensor([1.0, 0.0]), V[:2], V[:2]), DtypeError,
        "Argument 'condition' passed to 'where' must be bool tensor, but got float32 tensor"),
    row("softmax-str", lambda: tf.softmax("a"), ArgumentError,
        "Argument 'logits' passed to 'softmax' must be a Tensor or TensorLike, but got 'str'"),
    row("add-broadcast", lambda: tf.add(V, M), ShapeError,
        "Operands could not be broadcast together with shapes (3,) and (2, 2) (op Add)"),
    row("equal-broadcast", lambda: tf.equal(V, M), ShapeError,
        "Operands could not be broadcast together with shapes (3,) and (2, 2) (op Equal)"),
    row("prelu-broadcast", lambda: tf.prelu(V, tf.zeros([2])), ShapeError,
        "Operands could not be broadcast together with shapes (3,) and (2,) (op Prelu)"),
    row("where-broadcast", lambda: tf.where(tf.tensor([True, False]), V, V), ShapeError,
        "Operands could not be broadcast together with shapes (2,) and (3,) and (3,) (op Select)"),
    row("clip-str", lambda: tf.clip_by_value(V, "a", 1), ArgumentError,
        "clip_by_value: clip_value_min must be a number, got 'a'"),
    row("clip-none", lambda: tf.clip_by_value(V, None, 1), ArgumentError,
        "clip_by_value: clip_value_min must be a number, got None"),
    row("leaky-relu-alpha", lambda: tf.leaky_relu(V, "a"), ArgumentError,
        "leaky_relu: alpha must be a number, got 'a'"),
    row("step-alpha", lambda: tf.step(V, "a"), ArgumentError,
        "step: alpha must be a number, got 'a'"),
    row("cast-none", lambda: tf.cast(V, None), DtypeError,
        "cast(): dtype None is not a dtype"),
]
# ---------------------------------------------------------------- tensor.py
TENSOR = [
    row("constructor", lambda: tf.Tensor(), TypeError,
        "Create tensors with tf.tensor(values, shape=None, dtype=None), tf.scalar(...), "),
    row("item", lambda: V.item(), ShapeError,
        "item() needs a tensor with one element, but this one has shape (3,) (3 elements)."),
    row("array-no-copy", lambda: V.__array__(np.float64, copy=False), ValueError,
        "A copy is needed to change the dtype."),
    row("index-float", lambda: [1, 2][tf.scalar(1.0)], DtypeError,
        "Only int32 or bool tensors can be used as an index, not float32."),
    row("bool", lambda: bool(V), ShapeError,
        "The truth value of a tensor with 3 elements (shape (3,)) is ambiguous: use tf.any(x)"),
    row("len", lambda: len(S), TypeError, "len() of a scalar tensor (rank 0)"),
    row("iter", lambda: iter(S), TypeError, "iteration over a scalar tensor (rank 0)"),
    row("camel-miss", lambda: V.noSuchMethod, AttributeError,
        "'Tensor' object has no attribute 'noSuchMethod'"),
    row("attr-miss", lambda: V.nosuch, AttributeError, "has no attribute 'nosuch'"),
    row("variable-name", lambda: tf.variable(V, name=5), ArgumentError,
        "Variable names are strings, got int."),
    row("numpy-strings", lambda: tf.sqrt(np.array(["a"])), DtypeError,
        "Argument 'x' passed to 'sqrt': strings are not numbers"),
    row("ragged", lambda: tf.tensor([[1, 2], [3]]), ShapeError,
        "tensor(): the nested lists are ragged (every row must have the same length): "),
    row("ragged-op", lambda: tf.sqrt([[1, 2], [3]]), ShapeError,
        "Argument 'x' passed to 'sqrt': the nested lists are ragged"),
    row("list-strings", lambda: tf.sqrt(["a", "b"]), DtypeError,
        "Argument 'x' passed to 'sqrt': values must be numbers or booleans, got strings."),
    row("list-objects", lambda: tf.tensor([1, None]), DtypeError,
        "tensor(): values must be numbers or booleans, got mixed objects."),
    row("unsupported-type", lambda: tf.tensor({}), ArgumentError,
        "tensor(): expected a Tensor or TensorLike (number, bool, nested list or NumPy array), "
        "but got 'dict'"),
    row("convert-none", lambda: tf.concat([V, None]), ArgumentError,
        "Argument 'tensors[1]' passed to 'concat' must be a Tensor or TensorLike, but got 'null'"),
]
# ---------------------------------------------------------------- dtypes.py, names.py
_NO_NUMPY_EQUIVALENT = ("has no flowgrad equivalent: flowgrad supports float32, float64, int32 "
                        "and bool (strings and complex numbers are not supported).")
DTYPES_NAMES = [
    row("canonical", lambda: dtypes.canonical("complex64"), DtypeError,
        "Unknown dtype 'complex64': flowgrad supports 'float32', 'float64', 'int32' and 'bool'."),
    row("canonical-where", lambda: dtypes.canonical("int8", "cast dtype"), DtypeError,
        "Unknown cast dtype 'int8'"),
    row("canonical-op", lambda: tf.zeros([2], dtype=object), DtypeError, "Unknown dtype <class"),
    row("from-numpy-complex", lambda: dtypes.from_numpy(np.dtype(np.complex64)), DtypeError,
        "NumPy dtype complex64 " + _NO_NUMPY_EQUIVALENT),
    row("from-numpy-str", lambda: dtypes.from_numpy(np.dtype("U3")), DtypeError,
        "NumPy dtype <U3 " + _NO_NUMPY_EQUIVALENT),
    row("result-miss", lambda: Result(value=1, grads=2).nope, AttributeError,
        "Result has no attribute 'nope' (it has value, grads)"),
    row("result-camel-miss", lambda: Result(value=1, grads=2).noPe, AttributeError,
        "Result has no attribute 'noPe' (it has value, grads)"),
]


TABLES = {"core": CORE + SCALAR_AXIS, "creation": CREATION, "shape": SHAPE, "reduce": REDUCE,
          "linalg": LINALG, "elementwise": ELEMENTWISE, "tensor": TENSOR,
          "dtypes-names": DTYPES_NAMES}


@pytest.mark.parametrize("fn, cls, message", [
    pytest.param(*p.values, id=f"{tag}:{p.id}", marks=p.marks)
    for tag, rows in TABLES.items() for p in rows])
def test_error(fn, cls, message):
    with pytest.raises(cls, match=re.escape(message)):
        fn()


def test_one_hot_takes_a_list_of_ints():
    assert tf.one_hot([0, 1], 2).array_sync() == [[1, 0], [0, 1]]
