"""Values at kinks, ties and edges: TF.js's conventions, and the places where TF.js is wrong
and flowgrad is right. Expected values are worked out by hand from the reference."""
import math

import numpy as np
import pytest

import flowgrad as tf

SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772


def g(f, x, dtype="float32"):
    return tf.grad(f)(tf.tensor(x, dtype=dtype)).numpy().tolist()


@pytest.mark.parametrize("f, x, want", [
    (tf.relu, [-1.0, 0.0, 2.0], [0, 0, 1]),                 # relu'(0) = 0
    (tf.abs, [-1.0, 0.0, 2.0], [-1, -1, 1]),                # abs'(0) = -1
    (tf.relu6, [0.0, 3.0, 6.0, 7.0], [0, 1, 1, 0]),         # 1 on 0 < x <= 6
    (lambda x: tf.leaky_relu(x, 0.25), [-1.0, 0.0, 1.0], [0.25, 0.25, 1]),
    (tf.elu, [0.0], [1]),                                    # elu'(0) = 1
    (lambda x: tf.clip_by_value(x, -1, 1), [-2.0, -1.0, 0.0, 1.0, 2.0], [0, 1, 1, 1, 0]),
    (lambda x: tf.clip_by_value(x, -1, 1), [float("nan")], [0]),
    (lambda x: tf.max(x), [3.0, 1.0, 3.0], [1, 0, 1]),      # ties all get dy
    (lambda x: tf.min(x), [1.0, 5.0, 1.0], [1, 0, 1]),
    (lambda x: x.prod(), [2.0, 0.0, 3.0], [0, 6, 0]),        # exact with a zero
    (lambda x: x.prod(), [0.0, 0.0, 3.0], [0, 0, 0]),
    (tf.sign, [-2.0, 0.0, 2.0], [0, 0, 0]),
    (lambda x: x.step(), [-1.0, 1.0], [0, 0]),
])
def test_gradient_conventions(f, x, want):
    assert g(f, x) == pytest.approx(want)


def test_selu_at_zero_is_scale_times_alpha():
    assert g(tf.selu, [0.0], "float64") == pytest.approx([SELU_SCALE * SELU_ALPHA])


def test_maximum_and_minimum_ties_go_to_a():
    a, b = tf.scalar(2.0), tf.scalar(2.0)
    for op in (tf.maximum, tf.minimum):
        da, db = tf.grads(op)([a, b])
        assert (da.item(), db.item()) == (1.0, 0.0)


def test_infinite_gradients_at_the_edge_of_the_domain():
    assert g(tf.sqrt, [0.0]) == [math.inf]
    assert g(tf.log, [0.0]) == [math.inf]
    assert g(tf.reciprocal, [0.0]) == [-math.inf]
    assert tf.grad(lambda a: a.pow(0.5))(tf.scalar(0.0)).item() == math.inf


def test_pow_exponent_gradient_is_zero_for_non_positive_base():
    # d/db a^b = a^b log(a) for a > 0, and 0 where a <= 0 (TF.js's convention)
    da, db = tf.grads(lambda a, b: a.pow(b))([tf.tensor([-2.0, 2.0]), tf.tensor([3.0, 3.0])])
    assert da.numpy().tolist() == pytest.approx([12.0, 12.0])
    assert db.numpy().tolist() == pytest.approx([0.0, 8 * math.log(2)])


def test_floor_div_uses_the_real_division_gradient():
    da, db = tf.grads(tf.floor_div)([tf.scalar(7.0), tf.scalar(2.0)])
    assert (da.item(), db.item()) == pytest.approx((0.5, -7 / 4))


def test_mod_gradients_and_sign_of_divisor():
    assert tf.mod(tf.tensor([-7.0, 7.0]), tf.tensor([2.0, -2.0])).numpy().tolist() == [1, -1]
    da, db = tf.grads(tf.mod)([tf.scalar(7.0), tf.scalar(2.0)])
    assert (da.item(), db.item()) == (1.0, -3.0)                  # -floor(7/2)


def test_casts_pass_the_gradient_through():
    x = tf.tensor([1.2, -0.7])
    assert tf.grad(lambda x: x.cast("int32").cast("float32").mul(2))(x).numpy().tolist() == [2, 2]
    assert tf.grad(lambda x: x.cast("bool"))(x).numpy().tolist() == [1, 1]
    assert tf.grad(lambda x: tf.to_float(x.to_int()) * 3)(x).numpy().tolist() == [3, 3]


def test_comparisons_on_the_path_do_not_break_backprop():
    # TF.js throws "gradient function not found for Greater"; flowgrad gives the right answer
    x = tf.tensor([-1.0, 2.0])
    got = tf.grad(lambda x: tf.where(x.greater(0), x.square(), x * 3))(x)
    assert got.numpy().tolist() == [3, 4]


def test_where_does_not_leak_nan_from_the_branch_not_taken_when_masked_first():
    x = tf.tensor([-1.0, 4.0])
    got = tf.grad(lambda x: tf.where(x > 0, tf.where(x > 0, x, 1).sqrt(), 0))(x)
    assert got.numpy().tolist() == [0, 0.25]


def test_round_is_half_to_even_and_sign_of_nan_is_zero():
    assert tf.round(tf.tensor([0.5, 1.5, 2.5, -2.5])).numpy().tolist() == [0, 2, 2, -2]
    assert tf.sign(tf.tensor([float("nan")])).numpy().tolist() == [0]
    assert math.isnan(tf.step(tf.tensor([float("nan")])).item())


def test_prod_second_derivative_with_zeros():
    # H_ij = product of the entries other than i and j; at x = [2, 0, 3]:
    # H = [[0, 3, 0], [3, 0, 2], [0, 2, 0]]
    x = tf.tensor([2.0, 0.0, 3.0], dtype="float64")
    H = []
    for i in range(3):
        e = np.eye(3)[i]
        H.append(tf.grad(lambda x: (tf.grad(lambda y: y.prod())(x) * e).sum())(x).numpy())
    np.testing.assert_allclose(np.array(H), [[0, 3, 0], [3, 0, 2], [0, 2, 0]])


def test_clip_with_equal_bounds_stays_connected():
    # TF.js returns a disconnected fill here; the gradient is 1 exactly at the bound
    assert g(lambda x: tf.clip_by_value(x, 1, 1), [1.0, 2.0]) == [1, 0]


@pytest.mark.parametrize("f, d2", [
    (lambda x: x.exp(), lambda v: math.exp(v)),
    (lambda x: x.tanh(), lambda v: -2 * math.tanh(v) * (1 - math.tanh(v) ** 2)),
    (lambda x: x.sigmoid(), lambda v: (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + math.exp(-v)))),
    (lambda x: x * x.exp(), lambda v: (2 + v) * math.exp(v)),      # TF.js: 2e^x, silently
    (lambda x: tf.elu(x), lambda v: math.exp(v)),
    (lambda x: tf.softmax(tf.stack([x, x * 0])).sum() * 0 + tf.softmax(tf.stack([x, x * 0]))[0],
     lambda v: (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + math.exp(-v)))),
    (lambda x: tf.scalar(2.0, "float64").pow(x), lambda v: 2 ** v * math.log(2) ** 2),
])
def test_second_derivatives_that_tfjs_gets_wrong(f, d2):
    v = -0.4
    got = tf.grad(tf.grad(f))(tf.scalar(v, "float64")).item()
    assert got == pytest.approx(d2(v), rel=1e-9)


def test_third_derivative_of_exp_and_fourth_of_cube():
    x = tf.scalar(0.3, "float64")
    assert tf.grad(tf.grad(tf.grad(tf.exp)))(x).item() == pytest.approx(math.exp(0.3))
    d4 = tf.grad(tf.grad(tf.grad(tf.grad(lambda x: x.pow(3)))), allow_unconnected=True)
    assert d4(x).item() == 0
