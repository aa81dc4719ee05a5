"""Variables and tf.jit: a variable passed as an argument, a trainable flag changed after the
trace, variables made by other threads while a trace runs, lists of tensors as arguments.
Each case against the same calls run eagerly (the numbers by hand where short)."""
import sys
import threading

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.errors import JitError
from flowgrad.tensor import registered_variables

BACKENDS = ["numpy"] + (["native"] if tf.jit_native.numba_installed() else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def test_a_variable_argument_is_the_one_updated(backend):
    opt = tf.train.sgd(0.1)
    step = tf.jit(lambda v: opt.minimize(lambda: (v * v).sum()), backend=backend)
    v1, v2 = tf.variable(tf.tensor([1.0, 2.0])), tf.variable(tf.tensor([10.0, 20.0]))
    for v in (v1, v2, v1, v2, v1):
        step(v)
    # w ← w − 0.1·2w = 0.8w per step: v1 three steps, v2 two (a replay updated the
    # traced variable with the argument's gradient: v1 got v2's steps, v2 none)
    np.testing.assert_allclose(v1.numpy(), [0.512, 1.024], rtol=1e-6)
    np.testing.assert_allclose(v2.numpy(), [6.4, 12.8], rtol=1e-6)
    assert len(step.traces) == 2
    assert "variables args[0]" in step.explain()
    tf.dispose([v1, v2])
    opt.dispose()


def test_a_trainable_flag_changed_after_the_trace_is_followed(backend):
    a, b = tf.variable(tf.tensor([1.0, 2.0])), tf.variable(tf.tensor([1.0, 2.0]))
    opt = tf.train.sgd(1.0)
    step = tf.jit(lambda x: opt.minimize(lambda: (a * x + b * x).sum()), backend=backend)
    x = tf.ones([2])
    step(x)
    step(x)
    b.trainable = False
    step(x)
    step(x)
    b.trainable = True
    step(x)
    # d/da = d/db = x = 1: a moves every step, b in three of five
    np.testing.assert_allclose(a.numpy(), [-4.0, -3.0])
    np.testing.assert_allclose(b.numpy(), [-2.0, -1.0])
    tf.dispose([a, b])
    opt.dispose()


def test_trainable_takes_booleans_only():
    v = tf.variable(tf.scalar(1.0))
    with pytest.raises(tf.errors.ArgumentError, match="trainable must be True or False"):
        v.trainable = "no"
    v.trainable = np.False_
    assert v.trainable is False
    v.dispose()


def test_variables_made_by_another_thread_do_not_fail_a_trace():
    w = tf.variable(tf.ones([64, 64]))
    opt = tf.train.adam(0.01)
    x = tf.ones([10, 64])
    step = tf.jit(lambda x: opt.minimize(lambda: x.mat_mul(w).tanh().mean(), return_cost=True),
                  backend="numpy")
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            tf.variable(tf.zeros([2])).dispose()
    t = threading.Thread(target=churn)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)          # (the threads take turns inside every trace)
    t.start()
    try:
        for n in range(1, 11):           # ten traces (one per batch size)
            step(x[:n])
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(switch)
    assert len(step.traces) == 10
    # while a variable made inside the function itself is refused
    names = set(registered_variables())
    with pytest.raises(JitError, match="created or disposed variables"):
        tf.jit(lambda x: tf.variable(x).add(1))(tf.ones([2]))
    tf.dispose([v for n, v in registered_variables().items() if n not in names])
    tf.dispose(w)
    opt.dispose()


def test_a_list_of_tensors_as_an_argument_is_refused_by_name():
    a = tf.variable(tf.tensor([1.0, 2.0]))
    with pytest.raises(JitError, match=r"args\[1\] is a list of tensors"):
        tf.jit(lambda x, vs: x)(tf.ones([2]), [a])
    # plain numbers in a list are data, as before
    assert tf.jit(lambda x, y: x + y)(tf.ones([2]), [1.0, 2.0]).numpy().tolist() == [2, 3]
    a.dispose()
