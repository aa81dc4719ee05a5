"""Tensor printing must match TF.js 4.22 exactly (tfjs-semantics.md section 10).

Every expected string here is written by hand from the spec and from TF.js's
tensor_format.ts algorithm and JavaScript's Number formatting rules.
"""
import math

import pytest

import flowgrad as tf
from flowgrad.printing import js_fixed7, js_number

NAN, INF = math.nan, math.inf
F32_THIRD = 0.3333333432674408          # float32(1/3) widened to a double


def T(body):
    return "Tensor\n" + body


# ---------------------------------------------------------------- JS helpers
@pytest.mark.parametrize("v, want", [
    (0.0, "0"), (-0.0, "0"), (12.0, "12"), (100.0, "100"), (-2.5, "-2.5"),
    (0.1, "0.1"), (1 / 3, "0.3333333333333333"), (F32_THIRD, "0.3333333432674408"),
    (NAN, "NaN"), (INF, "Infinity"), (-INF, "-Infinity"),
    # decimal notation down to 1e-6, exponent notation below it
    (0.000001, "0.000001"), (0.00001, "0.00001"), (0.000001234, "0.000001234"),
    (1e-7, "1e-7"), (-1e-7, "-1e-7"), (1.5e-7, "1.5e-7"), (123e-20, "1.23e-18"),
    (5e-324, "5e-324"),
    # plain digits below 1e21, exponent notation with an explicit '+' from 1e21 on
    (1e20, "100000000000000000000"), (123456789012345680000.0, "123456789012345680000"),
    (2.0 ** 53, "9007199254740992"), (1e21, "1e+21"), (1.2345e21, "1.2345e+21"),
    (1.5e300, "1.5e+300"), (1.7976931348623157e308, "1.7976931348623157e+308"),
])
def test_js_number(v, want):
    assert js_number(v) == want


@pytest.mark.parametrize("v, want", [
    (1 / 3, "0.3333333"), (2 / 3, "0.6666667"), (F32_THIRD, "0.3333333"),
    (0.0, "0"), (-0.0, "0"), (1e-8, "0"), (-1e-8, "0"),      # '-0.0000000' -> -0 -> '0'
    (0.99999999, "1"), (-0.99999996, "-1"), (2.5, "2.5"), (100.0, "100"),
    (1234.56789012, "1234.5678901"), (123456789.123, "123456789.123"),
    (123456792.0, "123456792"),
    # near-ties are decided by the exact binary value
    (0.12345675, "0.1234568"), (1.23456785, "1.2345678"), (5e-8, "0"),
    (1.5e-7, "1e-7"),                   # '0.0000001' -> 1e-7 -> '1e-7'
    (1.0000000116860974e-7, "1e-7"), (-2.499999993688107e-07, "-2e-7"),
    (2.0 ** -24, "1e-7"), (2.0 ** -25, "0"), (1.2e-6, "0.0000012"),
    # exact binary ties (odd multiples of 1/256): toFixed rounds the magnitude up
    (0.00390625, "0.0039063"), (-0.00390625, "-0.0039063"),
    (0.01171875, "0.0117188"), (-0.01171875, "-0.0117188"),
    (0.99609375, "0.9960938"), (1.00390625, "1.0039063"), (-2.50390625, "-2.5039063"),
    (1234567.00390625, "1234567.0039063"),
    # toFixed of |x| >= 1e21 is String(x)
    (1e20, "100000000000000000000"), (1.0000000200408773e20, "100000002004087730000"),
    (1e21, "1e+21"), (1.0000000200408773e21, "1.0000000200408773e+21"),
    (NAN, "NaN"), (INF, "Infinity"), (-INF, "-Infinity"),
])
def test_js_fixed7(v, want):
    assert js_fixed7(v) == want


# ---------------------------------------------------------------- scalars
@pytest.mark.parametrize("make, want", [
    (lambda: tf.scalar(1 / 3), "0.3333333432674408"),
    (lambda: tf.scalar(12), "12"),
    (lambda: tf.scalar(0.1), "0.10000000149011612"),
    (lambda: tf.scalar(1e-8), "9.99999993922529e-9"),
    (lambda: tf.scalar(1e21), "1.0000000200408773e+21"),
    (lambda: tf.scalar(123456789.123), "123456792"),
    (lambda: tf.scalar(-0.0), "0"),
    (lambda: tf.scalar(NAN), "NaN"),
    (lambda: tf.scalar(INF), "Infinity"),
    (lambda: tf.scalar(-INF), "-Infinity"),
    (lambda: tf.scalar(True), "true"),
    (lambda: tf.scalar(False), "false"),
    (lambda: tf.scalar(7, "int32"), "7"),
    (lambda: tf.scalar(-2147483648, "int32"), "-2147483648"),
    (lambda: tf.scalar(1 / 3, "float64"), "0.3333333333333333"),
    (lambda: tf.scalar(0.1, "float64"), "0.1"),
])
def test_scalar(make, want):
    assert make().to_string() == T("    " + want)


# ---------------------------------------------------------------- rank 1
def _join(nums):
    return ", ".join(str(n) for n in nums)


@pytest.mark.parametrize("make, want", [
    (lambda: tf.tensor([1, 2, 3]), "[1, 2, 3]"),
    (lambda: tf.tensor([1 / 3, 1e-8, 123456789.123, -0.0, -1e-8]),
     "[0.3333333, 0, 123456792, 0, 0]"),
    (lambda: tf.tensor([NAN, INF, -INF]), "[NaN, Infinity, -Infinity]"),
    (lambda: tf.tensor([16777217, 0.1]), "[16777216, 0.1]"),     # float32 storage
    (lambda: tf.tensor([0.00390625, -0.00390625]), "[0.0039063, -0.0039063]"),
    (lambda: tf.tensor([1e-7, 1e20, 1e21]),
     "[1e-7, 100000002004087730000, 1.0000000200408773e+21]"),
    (lambda: tf.range(25), "[0, 1, 2, ..., 22, 23, 24]"),
    (lambda: tf.range(21), "[0, 1, 2, ..., 18, 19, 20]"),
    (lambda: tf.range(20), "[" + _join(range(20)) + "]"),      # 20 is not elided
    (lambda: tf.tensor([1, -2, 2147483647], dtype="int32"), "[1, -2, 2147483647]"),
    (lambda: tf.tensor([0.1, 1 / 3, 1e-8], dtype="float64"), "[0.1, 0.3333333, 0]"),
    (lambda: tf.tensor([True, False, True]), "[true, false, true]"),
    (lambda: tf.tensor([i % 2 == 0 for i in range(22)], dtype="bool"),
     "[true, false, true, ..., false, true, false]"),
    (lambda: tf.tensor([], shape=[0]), "[]"),
])
def test_rank1(make, want):
    assert make().to_string() == T("    " + want)


# ---------------------------------------------------------------- rank >= 2
R50 = list(range(50))
WIDE = [0.0] * 50
WIDE[20] = 123.5          # row 10, column 0: elided, yet it sets the column width
COLS = [0.0] * 50
COLS[10], COLS[23] = 123456, 1000.5    # an elided column, and shown column 23

RANK2 = [
    # columns padded to their widest entry; continuation lines one space deeper
    (lambda: tf.tensor([[1, 22.5], [-3, 4]]), "    [[1 , 22.5],\n     [-3, 4   ]]"),
    (lambda: tf.tensor([[1, -10], [100, 2]], dtype="int32"),
     "    [[1  , -10],\n     [100, 2  ]]"),
    (lambda: tf.tensor([[0.5, 1 / 3], [2, 4]], dtype="float64"),
     "    [[0.5, 0.3333333],\n     [2  , 4        ]]"),
    (lambda: tf.tensor([[True, False], [False, True]]),
     "    [[true , false],\n     [false, true ]]"),
    (lambda: tf.tensor([[NAN, 1], [-INF, 2]]), "    [[NaN      , 1],\n     [-Infinity, 2]]"),
    # single-row matrix quirk, and how it nests
    (lambda: tf.tensor([[1, 2, 3]]), "     [[1, 2, 3],]"),
    (lambda: tf.tensor([[[1, 2, 3]]]), "     [ [[1, 2, 3],]]"),
    # empty
    (lambda: tf.zeros([0, 3]), "     []"),
    (lambda: tf.zeros([2, 0]), "    [[],\n     []]"),
    # more than 20 columns: every row is elided, columns padded across rows
    (lambda: tf.tensor(R50, shape=[2, 25]),
     "    [[0 , 1 , 2 , ..., 22, 23, 24],\n     [25, 26, 27, ..., 47, 48, 49]]"),
    (lambda: tf.tensor(COLS, shape=[2, 25]),
     "    [[0, 0, 0, ..., 0, 1000.5, 0],\n     [0, 0, 0, ..., 0, 0     , 0]]"),
    # more than 20 rows: 3 rows, '...,' and 3 rows
    (lambda: tf.tensor(R50, shape=[25, 2]),
     "    [[0 , 1 ],\n     [2 , 3 ],\n     [4 , 5 ],\n     ...,\n"
     "     [44, 45],\n     [46, 47],\n     [48, 49]]"),
    (lambda: tf.range(21).reshape([21, 1]),
     "    [[0 ],\n     [1 ],\n     [2 ],\n     ...,\n     [18],\n     [19],\n     [20]]"),
    (lambda: tf.tensor(WIDE, shape=[25, 2]),
     "    [[0    , 0],\n" + "     [0    , 0],\n" * 2 + "     ...,\n"
     + "     [0    , 0],\n" * 2 + "     [0    , 0]]"),
    # rank 3: one blank line between blocks (spec example)
    (lambda: tf.tensor([1, 2, 3, 4, 5, 6, 7, 8], shape=[2, 2, 2]),
     "    [[[1, 2],\n      [3, 4]],\n\n     [[5, 6],\n      [7, 8]]]"),
    # rank 4: two blank lines between rank-3 blocks
    (lambda: tf.tensor(list(range(8)), shape=[2, 1, 2, 2]),
     "    [[[[0, 1],\n       [2, 3]]],\n\n\n     [[[4, 5],\n       [6, 7]]]]"),
    # rank 3 with more than 20 blocks: the '...' line has no comma and no blank line
    (lambda: tf.tensor(list(range(42)), shape=[21, 2, 1]),
     "    [[[0 ],\n      [1 ]],\n\n     [[2 ],\n      [3 ]],\n\n"
     "     [[4 ],\n      [5 ]],\n\n     ...\n"
     "     [[36],\n      [37]],\n\n     [[38],\n      [39]],\n\n"
     "     [[40],\n      [41]]]"),
]


@pytest.mark.parametrize("make, want", RANK2)
def test_rank2_and_more(make, want):
    assert make().to_string() == T(want)


# ---------------------------------------------------------------- verbose
def _verbose(dtype, rank, shape, body):
    return (f"Tensor\n  dtype: {dtype}\n  rank: {rank}\n  shape: {shape}\n"
            f"  values:\n{body}")


@pytest.mark.parametrize("make, want", [
    (lambda: tf.tensor([1, 2, 3]), _verbose("float32", 1, "[3]", "    [1, 2, 3]")),
    (lambda: tf.scalar(5), _verbose("float32", 0, "[]", "    5")),
    (lambda: tf.scalar(True), _verbose("bool", 0, "[]", "    true")),
    (lambda: tf.tensor([[1, 2], [3, 4]], dtype="int32"),
     _verbose("int32", 2, "[2,2]", "    [[1, 2],\n     [3, 4]]")),
    (lambda: tf.tensor([0.5], dtype="float64"), _verbose("float64", 1, "[1]", "    [0.5]")),
    (lambda: tf.zeros([0, 3]), _verbose("float32", 2, "[0,3]", "     []")),
    (lambda: tf.zeros([2, 1, 3]), _verbose(
        "float32", 3, "[2,1,3]", "    [ [[0, 0, 0],],\n\n      [[0, 0, 0],]]")),
])
def test_verbose(make, want):
    assert make().to_string(verbose=True) == want
    assert make().to_string(True) == want


# ---------------------------------------------------------------- print / repr
def test_print_method_and_function(capsys):
    t = tf.tensor([[1, 22.5], [-3, 4]])
    want = "Tensor\n    [[1 , 22.5],\n     [-3, 4   ]]"
    t.print()
    assert capsys.readouterr().out == want + "\n"
    tf.print(t)
    assert capsys.readouterr().out == want + "\n"
    assert str(t) == want and t.to_string() == want
    # repr adds shape and dtype around TF.js's layout (issue 17)
    assert repr(t) == "<tf.Tensor shape=[2, 2] dtype=float32\n [[1 , 22.5],\n  [-3, 4   ]]>"


def test_print_verbose(capsys):
    t = tf.tensor([1, 2, 3])
    want = _verbose("float32", 1, "[3]", "    [1, 2, 3]") + "\n"
    t.print(verbose=True)
    assert capsys.readouterr().out == want
    tf.print(t, True)
    assert capsys.readouterr().out == want
    tf.print(t, verbose=True)
    assert capsys.readouterr().out == want


@pytest.mark.parametrize("x", ["hello", 5, [1, 2], None, 2.5])
def test_print_non_tensor(capsys, x):
    tf.print(x)                     # does not throw; prints the object's string form
    assert capsys.readouterr().out == str(x) + "\n"
    tf.print(x, True)
    assert capsys.readouterr().out == str(x) + "\n"
