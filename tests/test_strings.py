"""String tensors (TF.js's dtype 'string'): creation, printing in TF.js's format, reading,
memory accounting in UTF-8 bytes, the few ops that move whole elements (clone, reshape),
tidy/dispose, and the DtypeError every other op raises, with its message."""
import gc
import re

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import DtypeError, ShapeError

HINT = "string tensors support creation, printing, reading values, clone, reshape"


def counts():
    gc.collect()
    m = tf.memory()
    return m.num_tensors, m.num_data_buffers, m.num_bytes


# ---------------------------------------------------------------- creation and reading

def test_creation_and_reading():
    t = tf.tensor(["a", "b"])
    assert t.dtype == "string" and t.shape == (2,) and t.size == 2 and t.rank == 1
    assert t.array_sync() == ["a", "b"] and t.arraySync() == ["a", "b"]
    np.testing.assert_array_equal(t.data_sync(), ["a", "b"])
    assert t.numpy().dtype.kind == "U" and t.backend == "numpy"
    s = tf.scalar("héllo")
    assert s.dtype == "string" and s.shape == () and s.item() == "héllo"
    m = tf.tensor([["a", "bc"], ["def", "g"]])
    assert m.shape == (2, 2) and m.array_sync() == [["a", "bc"], ["def", "g"]]
    assert tf.tensor(["a", "b", "c", "d"], [2, 2]).array_sync() == [["a", "b"], ["c", "d"]]
    assert tf.tensor2d(["a", "b", "c", "d"], [2, 2]).shape == (2, 2)
    assert tf.tensor2d([["a", "b"]]).shape == (1, 2)
    assert tf.tensor1d(["x", "y", "z"]).shape == (3,)
    assert tf.tensor3d([[["a"]]]).shape == (1, 1, 1)
    assert tf.tensor(np.array(["u", "vw"])).array_sync() == ["u", "vw"]
    assert tf.tensor(np.array(["u", "vw"], dtype=object), [2, 1]).shape == (2, 1)
    assert tf.tensor("one").array_sync() == "one"
    empty = tf.tensor([], dtype="string")
    assert empty.dtype == "string" and empty.shape == (0,)
    copy = tf.tensor(t)
    assert copy.dtype == "string" and copy.array_sync() == ["a", "b"] and copy is not t


def test_ops_that_move_whole_elements():
    t = tf.tensor(["a", "bc", "d", "e"])
    assert t.reshape([2, 2]).array_sync() == [["a", "bc"], ["d", "e"]]
    assert t.clone().array_sync() == ["a", "bc", "d", "e"]
    assert tf.expand_dims(t, 0).shape == (1, 4)
    assert t.reshape([1, 4, 1]).squeeze().shape == (4,)
    assert t.reshape([2, 2]).flatten().array_sync() == ["a", "bc", "d", "e"]
    assert t.as2d(4, 1).shape == (4, 1) and tf.scalar("s").as1d().array_sync() == ["s"]


# ---------------------------------------------------------------- printing

def test_printing_in_tfjs_format():
    assert str(tf.tensor(["a", "bc"])) == "Tensor\n    ['a', 'bc']"
    # columns are padded to their widest entry, quotes included
    assert tf.tensor([["a", "bc"], ["def", "g"]]).to_string() == (
        "Tensor\n    [['a'  , 'bc'],\n     ['def', 'g' ]]")
    # a scalar string prints as it is (TF.js: vals[0].toString())
    assert tf.scalar("hello").to_string() == "Tensor\n    hello"
    assert tf.tensor(["x"]).to_string(True) == (
        "Tensor\n  dtype: string\n  rank: 1\n  shape: [1]\n  values:\n    ['x']")
    long = tf.tensor([str(i) for i in range(25)])
    assert long.to_string() == "Tensor\n    ['0', '1', '2', ..., '22', '23', '24']"


def test_print_function(capsys):
    tf.print(tf.tensor(["a"]))
    tf.tensor(["b"]).print()
    assert capsys.readouterr().out == "Tensor\n    ['a']\nTensor\n    ['b']\n"


# ---------------------------------------------------------------- memory

def test_memory_counts_utf8_bytes():
    n0, b0, by0 = counts()
    t = tf.tensor(["ab", "cde"])                 # TF.js: 5 bytes
    assert counts() == (n0 + 1, b0 + 1, by0 + 5)
    u = tf.tensor(["é", "日本"])                 # 2 + 6 UTF-8 bytes
    assert counts() == (n0 + 2, b0 + 2, by0 + 13)
    c = t.clone()                                # a clone shares the buffer, counts again
    assert counts() == (n0 + 3, b0 + 2, by0 + 18)
    r = t.reshape([1, 2])
    assert counts() == (n0 + 4, b0 + 2, by0 + 23)
    tf.dispose([t, u, c, r])
    assert counts() == (n0, b0, by0)
    assert t.is_disposed
    with pytest.raises(tf.DisposedError, match="Tensor is disposed"):
        t.array_sync()


def test_tidy_and_keep():
    n0 = counts()[0]
    kept = []

    def f():
        a = tf.tensor(["x", "y"])
        kept.append(tf.keep(tf.tensor(["k"])))
        a.reshape([2, 1])
        return a.clone()
    out = tf.tidy(f)
    assert counts()[0] == n0 + 2 and out.array_sync() == ["x", "y"]
    tf.dispose([out, kept[0]])
    assert counts()[0] == n0
    tf.engine().start_scope()
    tf.tensor(["scoped"])
    tf.engine().end_scope()
    assert counts()[0] == n0


# ---------------------------------------------------------------- refused ops

def refused(fn, message):
    with pytest.raises(DtypeError, match=re.escape(message)):
        fn()


T = tf.keep(tf.tensor(["a", "bc"]))


@pytest.mark.parametrize("fn,message", [
    (lambda: T.square(), "Argument 'x' passed to 'Square' must be numeric tensor, but got "
                         "string tensor (" + HINT),
    (lambda: tf.exp(T), "Argument 'x' passed to 'exp' must be numeric tensor, but got string "
                        "tensor"),
    (lambda: T.add(1), "Argument 'a' passed to 'add' must be numeric tensor, but got string "
                       "tensor"),
    (lambda: tf.mul(2, T), "Argument 'b' passed to 'mul' must be numeric tensor"),
    (lambda: T + T, "Argument 'a' passed to 'Add' must be numeric tensor"),
    (lambda: T.add(tf.tensor([1, 2])), "Argument 'a' passed to 'add' must be numeric tensor"),
    (lambda: T.equal(T), "passed to 'Equal' must be numeric tensor"),
    (lambda: T.sum(), "Argument 'x' passed to 'Sum' must be numeric tensor"),
    (lambda: T.cast("float32"), "Argument 'x' passed to 'Cast' must be numeric tensor"),
    (lambda: tf.gather(T, [0]), "Argument 'x' passed to 'GatherV2' must be numeric tensor"),
    (lambda: tf.concat([T, T]), "A string and a string tensor cannot meet in an op that "
                                "computes: " + HINT),
    (lambda: tf.stack([T, T]), "A string and a string tensor cannot meet"),
    (lambda: tf.stack([T]), "passed to 'Pack' must be numeric tensor"),
    (lambda: tf.tile(T, [2]), "passed to 'Tile' must be numeric tensor"),
    (lambda: tf.where(tf.tensor([True, False]), T, T), "passed to 'Select' must be numeric"),
])
def test_other_ops_refuse_strings(fn, message):
    refused(fn, message)


def test_creation_errors():
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): a string tensor's values must all be strings, got 1 (int) among them")):
        tf.tensor(["a", 1])
    with pytest.raises(ShapeError, match=re.escape(
            "tensor(): the nested lists are ragged (every row must have the same length)")):
        tf.tensor([["a"], ["b", "c"]])
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): string values make a 'string' tensor; dtype 'float32' is for numbers")):
        tf.tensor(["a"], dtype="float32")
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): dtype must be 'string' (or None) for string values, got a ndarray")):
        tf.tensor(["a"], dtype=np.zeros(2))
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): a string tensor's values must all be strings, got 1.0 (float)")):
        tf.tensor([1.0], dtype="string")
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): byte strings are not supported: decode them to str first")):
        tf.tensor(np.array([b"a"]))
    with pytest.raises(ShapeError, match=re.escape(
            "Based on the provided shape, [3], the tensor should have 3 values but has 2")):
        tf.tensor(["a", "b"], [3])
    with pytest.raises(ShapeError, match=re.escape(
            "tensor2d() requires shape to be provided when `values` are a flat list")):
        tf.tensor2d(["a", "b"])
    with pytest.raises(DtypeError, match=re.escape(
            "tensor(): dtype 'string' needs string values, got a float32 tensor")):
        tf.tensor(tf.tensor([1.0]), dtype="string")
    with pytest.raises(DtypeError, match=re.escape(
            "zeros(): dtype 'string' is not possible here: string tensors come only from "
            "strings (tf.tensor(['a', 'b']))")):
        tf.zeros([2], "string")


def test_string_tensors_in_gradients_and_multi_input_ops_name_the_call():
    s = tf.tensor(["a", "b"])
    with pytest.raises(tf.DtypeError, match=r"grad\(f\)\(x\): x is a string tensor"):
        tf.grad(lambda x: x)(s)
    with pytest.raises(tf.DtypeError, match=r"grads\(f\)\(\[x1,...\]\): args\[1\] is a string"):
        tf.grads(lambda a, b: a)([tf.scalar(1.0), s])
    for op in ("concat", "stack"):
        with pytest.raises(tf.DtypeError, match=rf"^{op}: A string and a string tensor"):
            getattr(tf, op)([s, s])
    s.dispose()
