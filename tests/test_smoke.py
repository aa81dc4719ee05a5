import flowgrad as tf


def test_gradient_of_polynomial_by_hand():
    # f(x) = x^2 + x, f'(3) = 2*3 + 1 = 7
    assert tf.grad(lambda x: x.square().add(x))(tf.scalar(3.0)).item() == 7.0
