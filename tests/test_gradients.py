"""The gradient API: calling forms, recording semantics, every error path with its message,
custom gradients, GradientTape, stop_gradient, camelCase names."""
import numpy as np
import pytest

import flowgrad as tf
from flowgrad import ArgumentError, DtypeError, GradientError, ShapeError


@pytest.fixture
def owned():
    """Variables created by a test, disposed afterwards."""
    made = []
    yield made
    for v in made:
        v.dispose()


# ---------------------------------------------------------------- calling forms

def test_grad_of_non_scalar_output_uses_ones_and_dy():
    x = tf.tensor([1.0, 2.0])
    assert tf.grad(lambda x: x.square())(x).numpy().tolist() == [2, 4]
    assert tf.grad(lambda x: x.square())(x, tf.tensor([10.0, 1.0])).numpy().tolist() == [20, 4]
    assert tf.grad(lambda x: x.square())(x, [10, 1]).numpy().tolist() == [20, 4]


def test_grad_accepts_tensorlikes_and_keeps_float64():
    assert tf.grad(lambda x: x * 3)(2).item() == 3
    g = tf.grad(lambda x: x * 3)(tf.scalar(2, "float64"))
    assert g.dtype == "float64"


def test_gradient_of_int_input_is_float32():
    g = tf.grad(lambda x: x.to_float().square())(tf.tensor([1, 2], dtype="int32"))
    assert g.dtype == "float32" and g.numpy().tolist() == [2, 4]


def test_identity_function_has_gradient_one():
    # TF.js throws here because no op was recorded; the gradient of x is 1
    assert tf.grad(lambda x: x)(tf.tensor([1.0, 2.0])).numpy().tolist() == [1, 1]


def test_grads_bare_tensor_and_closure_forms(owned):
    x = tf.scalar(2.0)
    (g,) = tf.grads(lambda x: x * x)(x)
    assert g.item() == 4
    a, b = tf.variable(tf.scalar(2.0)), tf.variable(tf.scalar(3.0))
    owned += [a, b]
    da, db = tf.grads(lambda: a.square() + b.square())([a, b])   # f takes no argument
    assert (da.item(), db.item()) == (4, 6)


def test_same_tensor_twice_gets_the_same_gradient():
    x = tf.scalar(3.0)
    g1, g2 = tf.grads(lambda a, b: a * b)([x, x])
    assert g1.item() == g2.item() == 6


def test_value_and_grad_forms():
    value, grad = tf.value_and_grad(lambda x: x.square().sum())(tf.tensor([1.0, 2.0]))
    assert value.item() == 5 and grad.numpy().tolist() == [2, 4]
    r = tf.valueAndGrads(lambda a, b: a * b)([tf.scalar(2.0), tf.scalar(5.0)])
    assert r.value.item() == 10 and [g.item() for g in r.grads] == [5, 2]
    assert r["value"] is r.value and r.keys() == ["value", "grads"]


def test_tensor_computed_before_the_call_is_a_constant():
    x = tf.scalar(3.0)
    pre = x.square()
    assert tf.grad(lambda x: pre * x)(x).item() == 9


def test_higher_order_mixed_partials():
    # f = x^2 y^3: d2f/dxdy = 6 x y^2 = 6*2*9 at (2, 3)
    x, y = tf.scalar(2.0, "float64"), tf.scalar(3.0, "float64")
    dxdy = tf.grads(lambda x, y: tf.grads(lambda x, y: x.square() * y.pow(3))([x, y])[0])
    assert dxdy([x, y])[1].item() == pytest.approx(108)


def test_grad_leaves_only_its_result_alive():
    import gc
    x = tf.tensor([1.0, 2.0, 3.0])
    gc.collect()            # garbage of earlier tests must not be collected in between
    gc.disable()
    try:
        before = tf.memory().num_tensors
        g = tf.grad(lambda x: x.exp().mul(x).sum())(x)
        assert tf.memory().num_tensors == before + 1
    finally:
        gc.enable()
    del g


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("api", ["grad", "grads", "value_and_grad", "value_and_grads"])
def test_f_must_be_a_function(api):
    with pytest.raises(ArgumentError, match=f"The f passed in {api}\\(f\\) must be a function"):
        getattr(tf, api)(5)


def test_args_errors():
    with pytest.raises(ArgumentError, match="The args passed in grads\\(f\\)\\(args\\) must be an "
                                            "array of `Tensor`s or `TensorLike`s"):
        tf.grads(lambda x: x)({"x": 1})
    with pytest.raises(ArgumentError, match="gradients\\(\\) received an empty list of xs."):
        tf.grads(lambda: tf.scalar(1))([])
    with pytest.raises(ArgumentError, match="Argument 'x' passed to 'tf.grad' must be a Tensor "
                                            "or TensorLike, but got 'dict'"):
        tf.grad(lambda x: x)({})


def test_result_must_be_a_tensor():
    with pytest.raises(GradientError, match="The result y returned by f\\(\\) must be a tensor"):
        tf.grad(lambda x: [x * 2])(tf.scalar(1.0))


@pytest.mark.parametrize("api, call, prefix", [
    ("grad", lambda f, x, dy: tf.grad(f)(x, dy),
     "The shape of dy passed in grad(f)(x, dy) must match the shape returned by f(x)"),
    ("grads", lambda f, x, dy: tf.grads(f)([x], dy),
     "The shape of dy passed in grads(f)([x1,...], dy) must match the shape returned by "
     "f([x1,...])"),
    ("value_and_grad", lambda f, x, dy: tf.value_and_grad(f)(x, dy),
     "The shape of dy passed in value_and_grad(f)(x, dy) must match"),
    ("value_and_grads", lambda f, x, dy: tf.value_and_grads(f)([x], dy),
     "The shape of dy passed in value_and_grads(f)([x1,...], dy) must match"),
])
def test_dy_shape_is_checked(api, call, prefix):
    x = tf.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ShapeError) as e:
        call(lambda x: x.square(), x, tf.scalar(1.0))
    assert str(e.value).startswith(prefix)
    assert "Shapes () and (3,) must match" in str(e.value)


def test_dy_must_be_float():
    with pytest.raises(DtypeError, match="dy must have a float dtype .* but has 'int32'"):
        tf.grad(lambda x: x * 2)(tf.scalar(1.0), tf.scalar(1, "int32"))


def test_unconnected_single_input_message():
    with pytest.raises(tf.UnconnectedGradientError) as e:
        tf.grad(lambda x: tf.scalar(5.0))(tf.scalar(1.0))
    msg = str(e.value)
    assert msg.startswith("Cannot compute gradient of y=f(x) with respect to x. Make sure that "
                          "the f you passed encloses all operations that lead from x to y.")
    assert "x (a float32 tensor of shape ()) is not connected" in msg
    assert "allow_unconnected=True" in msg


def test_unconnected_one_of_two_inputs_names_it():
    with pytest.raises(tf.UnconnectedGradientError) as e:
        tf.grads(lambda a, b: a * 2)([tf.scalar(1.0), tf.tensor([1.0, 2.0])])
    msg = str(e.value)
    assert msg.startswith("Cannot compute gradient of y=f(x) with respect to x. Make sure that\n"
                          "    the f you passed encloses all operations that lead from x to y.")
    assert "args[1] (a float32 tensor of shape (2,)) is not connected" in msg
    assert "does not depend on it" in msg


def test_allow_unconnected_gives_zeros():
    ga, gb = tf.grads(lambda a, b: a * 2, allow_unconnected=True)(
        [tf.scalar(1.0), tf.tensor([1.0, 2.0])])
    assert ga.item() == 2 and gb.numpy().tolist() == [0, 0]


def test_connected_through_zero_gradient_ops_gives_zeros_not_an_error():
    assert tf.grad(lambda x: x.floor() + x.greater(0).to_float())(tf.scalar(1.5)).item() == 0


def test_stop_gradient_cuts_the_path():
    x = tf.scalar(3.0)
    assert tf.grad(lambda x: x * tf.stop_gradient(x))(x).item() == 3
    with pytest.raises(tf.UnconnectedGradientError):
        tf.grad(lambda x: tf.stop_gradient(x).square())(x)
    assert tf.grad(lambda x: tf.stop_gradient(x).square(), allow_unconnected=True)(x).item() == 0


# ---------------------------------------------------------------- variable_grads

def test_variable_grads_keys_and_omissions(owned):
    w = tf.variable(tf.scalar(2.0), name="w_t")
    unused = tf.variable(tf.scalar(1.0), name="unused_t")
    frozen = tf.variable(tf.scalar(5.0), trainable=False, name="frozen_t")
    owned += [w, unused, frozen]
    value, grads = tf.variable_grads(lambda: w.square() * frozen)
    assert value.item() == 20
    assert grads[w].item() == grads["w_t"].item() == 20
    assert "unused_t" not in grads and "frozen_t" not in grads and unused not in grads
    _, grads = tf.variable_grads(lambda: w.square() * frozen, [w, frozen])
    assert grads["frozen_t"] is None and grads.get(w).item() == 20


def test_variable_grads_errors(owned):
    w = tf.variable(tf.tensor([1.0, 2.0]), name="w_err")
    c = tf.variable(tf.scalar(1.0), trainable=False, name="c_err")
    owned += [w, c]
    with pytest.raises(ArgumentError, match="The f passed in variable_grads\\(f\\) must be a "
                                            "function"):
        tf.variable_grads(None)
    with pytest.raises(ArgumentError, match="The var_list passed in variable_grads\\(f, "
                                            "var_list\\) must be an array of variables"):
        tf.variable_grads(lambda: w.sum(), [w.clone()])
    with pytest.raises(GradientError, match="expects at least one of the input variables to be "
                                            "trainable, but none of the 1 variables is trainable"):
        tf.variable_grads(lambda: c * 2, [c])
    with pytest.raises(GradientError, match="Cannot find a connection between any variable and "
                                            "the result of the loss function"):
        tf.variable_grads(lambda: tf.scalar(2.0).square())
    with pytest.raises(GradientError, match="must return a scalar, but it returned a rank-1 "
                                            "tensor"):
        tf.variable_grads(lambda: w.square())


def test_assign_inside_gradient_after_use_is_refused(owned):
    w = tf.variable(tf.scalar(2.0), name="w_assign")
    owned.append(w)

    def f():
        y = w.square()
        w.assign(tf.scalar(5.0))
        return y
    with pytest.raises(tf.VariableError, match="assigned inside a gradient function"):
        tf.variable_grads(f)


# ---------------------------------------------------------------- custom_grad

def cube_op():
    def cube(x, save):
        save([x])
        return {"value": x.pow(3), "grad_func": lambda dy, saved: dy * saved[0].square() * 3}
    return tf.custom_grad(cube)


def test_custom_backward_is_differentiable_to_third_order():
    c = cube_op()
    x = tf.scalar(2.0, "float64")
    assert tf.grad(c)(x).item() == 12
    assert tf.grad(tf.grad(c))(x).item() == 12
    assert tf.grad(tf.grad(tf.grad(c)))(x).item() == 6


def test_grad_func_may_use_tensors_created_in_the_forward():
    # TF.js disposes x2 before gradFunc runs (its quirk 13); flowgrad keeps it usable
    def f(x, save):
        x2 = x.square()
        return {"value": x2 * x, "grad_func": lambda dy: dy * x2 * 3}
    op = tf.custom_grad(f)
    x = tf.scalar(2.0, "float64")
    assert tf.grad(op)(x).item() == 12
    assert tf.grad(tf.grad(op))(x).item() == 12    # x2 is connected: d(3x^2)/dx


def test_custom_op_outside_gradient_returns_value():
    assert cube_op()(tf.scalar(2.0)).item() == 8


def test_custom_grad_tuple_form_and_multiple_inputs():
    op = tf.custom_grad(lambda a, b, save: (a * b, lambda dy, s: [dy * b, dy * a]))
    ga, gb = tf.grads(op)([tf.scalar(3.0), tf.scalar(4.0)])
    assert (ga.item(), gb.item()) == (4, 3)


@pytest.mark.parametrize("f, match", [
    (lambda x, save: [x], "must return an object where `obj.value` is a tensor"),
    (lambda x, save: {"value": x * 1, "grad_func": 3}, "`obj.grad_func` is a function"),
])
def test_custom_grad_forward_errors(f, match):
    with pytest.raises(GradientError, match=match):
        tf.custom_grad(f)(tf.scalar(1.0))


@pytest.mark.parametrize("grad_func, match", [
    (lambda dy, s: [dy], "returns the same number of tensors as inputs"),
    (lambda dy, s: [dy, 1.0], "returns a list of only tensors"),
    (lambda dy, s: [dy, tf.tensor([1.0, 2.0])], "Error in gradient for op my_op. The gradient of "
                                                 "input '1' has shape \\(2,\\), which does not "
                                                 "match the shape of the input \\(\\)"),
    (lambda dy, s: [dy, tf.scalar(1, "int32")], "The gradient of input 1 must have a float "
                                                 "dtype"),
])
def test_custom_grad_backward_errors(grad_func, match):
    def my_op(a, b, save):
        return {"value": a * b, "grad_func": grad_func}
    op = tf.custom_grad(my_op)
    with pytest.raises(GradientError, match=match):
        tf.grads(op)([tf.scalar(1.0), tf.scalar(2.0)])


def test_custom_grad_argument_errors():
    with pytest.raises(ArgumentError, match="The f passed in custom_grad\\(f\\) must be a "
                                            "function."):
        tf.custom_grad("nope")
    with pytest.raises(ArgumentError, match="must all be tensors"):
        cube_op()(object())


# ---------------------------------------------------------------- GradientTape

def test_tape_basic_watch_and_unwatched_constant():
    x, c = tf.scalar(3.0), tf.scalar(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x * c
    gx, gc = tape.gradient(y, [x, c])
    assert gx.item() == 12 and gc is None


def test_tape_variables_are_watched_and_persistent_reuse(owned):
    w = tf.variable(tf.scalar(2.0))
    owned.append(w)
    with tf.GradientTape(persistent=True) as tape:
        y = w.square()
        z = y * 3
    assert tape.gradient(y, w).item() == 4
    assert tape.gradient(z, {"w": w})["w"].item() == 12
    with tf.GradientTape(watch_accessed_variables=False) as tape2:
        y = w.square()
    assert tape2.gradient(y, w) is None


def test_non_persistent_tape_is_used_once():
    x = tf.scalar(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x.exp()
    tape.gradient(y, x)
    with pytest.raises(GradientError, match="A non-persistent GradientTape can only be used to "
                                            "compute one set of gradients"):
        tape.gradient(y, x)


def test_nested_tapes_give_second_derivatives():
    x = tf.scalar(0.5, "float64")
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x.tanh()
        dy = inner.gradient(y, x)
    d2 = outer.gradient(dy, x)
    t = np.tanh(0.5)
    assert d2.item() == pytest.approx(-2 * t * (1 - t * t))


def test_tape_output_gradients_and_zero_option():
    x, c = tf.tensor([1.0, 2.0]), tf.scalar(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x.square()
    gx, gc = tape.gradient(y, (x, c), output_gradients=tf.tensor([1.0, 10.0]),
                           unconnected_gradients="zero")
    assert gx.numpy().tolist() == [2, 40] and gc.item() == 0


# ---------------------------------------------------------------- names, operators, dtypes

def test_camel_case_names_resolve_to_the_same_objects():
    assert tf.valueAndGrads is tf.value_and_grads and tf.variableGrads is tf.variable_grads
    assert tf.customGrad is tf.custom_grad and tf.clipByValue is tf.clip_by_value
    x = tf.tensor([[1.0, 2.0]])
    assert x.matMul(x, False, True).item() == 5 and x.dataSync().tolist() == [1, 2]
    assert tf.memory().numTensors == tf.memory().num_tensors
    assert "valueAndGrads" not in dir(tf) and "matMul" not in dir(x)
    with pytest.raises(AttributeError):
        tf.noSuchThing


def test_python_operators_and_numpy_operands():
    a = tf.tensor([1.0, 2.0])
    assert ((a + 1) * 2 - a / 2).numpy().tolist() == [3.5, 5]
    assert (np.array([1.0, 1.0]) * a).numpy().tolist() == [1, 2]
    assert isinstance(np.array([1.0, 1.0]) * a, tf.Tensor)
    assert (2 ** a).numpy().tolist() == [2, 4] and (-a).numpy().tolist() == [-1, -2]
    assert (a > 1).numpy().tolist() == [False, True] and (a == 2).dtype == "bool"
    assert ((a > 1) & (a < 3)).numpy().tolist() == [False, True]
    assert (tf.tensor([[1.0, 2.0]]) @ tf.tensor([[3.0], [4.0]])).item() == 11
    assert (a != "text") is True


@pytest.mark.parametrize("a, b, want", [
    (tf.tensor([1, 2], dtype="int32"), 1, "float32"),             # a JS number is float32
    (tf.tensor([1, 2], dtype="int32"), tf.tensor([3, 4], dtype="int32"), "int32"),
    (tf.tensor([1.0]), tf.tensor([1.0], dtype="float64"), "float64"),
    (tf.tensor([1.0], dtype="float64"), 2, "float64"),
    (tf.tensor([True]), tf.tensor([1], dtype="int32"), "int32"),
])
def test_binary_dtype_promotion(a, b, want):
    assert (a + b).dtype == want


def test_int_division_floors():
    q = tf.tensor([5, -7, 9], dtype="int32") / tf.tensor([2, 2, 2], dtype="int32")
    assert q.dtype == "int32" and q.numpy().tolist() == [2, -4, 4]


def test_bad_tensorlike_message():
    with pytest.raises(ArgumentError, match="Argument 'x' passed to 'sqrt' must be a Tensor or "
                                            "TensorLike, but got 'str'"):
        tf.sqrt("nine")


def test_check_custom_grad_of_a_function_without_save():
    """custom_grad's f may leave out ``save``; the gradient check re-runs f the same way."""
    op = tf.custom_grad(lambda x: (x.square(), lambda dy: dy * x * 2))
    assert tf.debug.check_custom_grad(op, tf.tensor([1.0, 2.0])).passed
    wrong = tf.custom_grad(lambda x: (x.square(), lambda dy: dy * x * 3))
    report = tf.debug.check_grads(lambda x: wrong(x).sum(), tf.tensor([1.0, 2.0]),
                                  raise_on_fail=False)
    assert not report.passed and "custom_grad" in str(report)     # the culprit, named
