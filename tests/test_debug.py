"""tf.debug: check_grads (and the op it blames), check_numerics (op, pass, created or
propagated, this file's line), explain_gradient (one test per cause), hooks, tf.print."""
import asyncio
import inspect
import sys

import numpy as np
import pytest

import flowgrad as tf
from flowgrad.debug import GradCheckError, NumericsError
from opcheck import make_inputs
from test_ops_table import CASES

HERE = __file__


def line_of(marker):
    """The line number in this file of the statement carrying ``# <marker>``."""
    for i, text in enumerate(open(HERE).read().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return i
    raise AssertionError(marker)


# ---------------------------------------------------------------- check_grads

DIFFERENTIABLE = [c for c in CASES if c.order >= 1]


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=repr)
def test_check_grads_passes_on_every_op_with_float32_inputs(case):
    arrays = [a.astype(np.float32) for a in make_inputs(case)]
    report = tf.debug.check_grads(case.fn, [tf.tensor(a) for a in arrays])
    assert report.passed and report.checks[0][2][0].max_abs < 1e-5


def test_check_grads_to_third_order_and_both_modes():
    r = tf.debug.check_grads(lambda x, y: (x * y).tanh() + x.exp(), [tf.scalar(0.3),
                                                                     tf.tensor([0.5, -1.0])],
                             order=3, modes=("rev", "fwd"))
    assert r.passed and [(o, m) for o, m, _ in r.checks] == [
        (1, "rev"), (1, "fwd"), (2, "rev"), (2, "fwd"), (3, "rev"), (3, "fwd")]


def test_kinks_are_reported_not_failed():
    r = tf.debug.check_grads(lambda x: x.abs() + x.relu(), tf.tensor([0.0, 1.0]))
    assert r.passed
    assert r.checks[0][2][0].kinks == [(0,)]


@pytest.mark.parametrize("slope, ok", [(-1.0, True), (0.0, True), (0.5, True), (1.0, True),
                                        (2.0, False), (-3.0, False), (1000.0, False)])
def test_at_a_kink_the_analytic_value_must_lie_between_the_one_sided_slopes(slope, ok):
    # |x| at 0: one-sided slopes -1 and 1, any value between them is a subgradient; a rule
    # giving 1000 there passed before (kinks were left out of the check whatever they said)
    def fwd(x, save):
        save([x])
        return x.abs(), lambda dy, s: dy * tf.where(s[0].equal(0), tf.fill(s[0].shape, slope),
                                                    s[0].sign())
    op = tf.custom_grad(fwd)
    x = tf.tensor(np.array([0.0, -2.0, 3.0]), dtype="float64")
    for f in (lambda x: op(x).sum(), lambda x: op(x) * 2):      # scalar and vector outputs
        r = tf.debug.check_grads(f, x, raise_on_fail=False)
        (c,) = r.checks[0][2]
        assert c.kinks == [(0,)] and r.passed == ok, str(r)
        if not ok:
            assert c.failures == 1 and "not between the one-sided slopes" in str(c)


def custom(value_fn, grad_fn, name):
    def fwd(x, save):
        save([x])
        return value_fn(x), lambda dy, saved: grad_fn(dy, saved[0])
    fwd.__name__ = name
    return tf.custom_grad(fwd)


@pytest.mark.parametrize("grad_fn, what", [
    (lambda dy, x: -dy * x * 2, "wrong sign"),
    (lambda dy, x: dy * x * 3, "wrong scale"),
])
def test_wrong_custom_gradient_is_named_with_its_line(grad_fn, what):
    square = custom(lambda x: x.square(), grad_fn, "my_square")

    def f(x):
        return square(x).sin() + x                    # culprit line
    with pytest.raises(GradCheckError) as e:
        tf.debug.check_grads(f, tf.tensor([0.4, 1.3]))
    report = e.value.report
    assert not report.passed and len(report.culprits) == 1
    c = report.culprits[0]
    assert c.op == "my_square" and c.kernel == "CustomGradient"
    assert c.site.filename == HERE and c.site.lineno == line_of("culprit line")
    assert "my_square" in str(e.value) and "culprit line" in str(e.value)


def test_missing_broadcast_reduction_is_caught():
    def add(a, b, save):
        return a + b, lambda dy, s: [dy, dy]          # b was broadcast: dy must be summed
    bad_add = tf.custom_grad(add)
    r = tf.debug.check_grads(lambda a, b: bad_add(a, b), [tf.ones([2, 3]), tf.ones([3])],
                             raise_on_fail=False)
    assert not r.passed
    assert "sum over broadcast axes yourself" in str(r)
    assert r.culprits and r.culprits[0].op == "add" and "wrong shape" in r.culprits[0].note


def test_wrong_second_derivative_only():
    # grad_func is right at first order, but uses an op whose own gradient is wrong
    half_square = custom(lambda x: x.square(), lambda dy, x: dy * x, "half_square")  # wrong
    cube = custom(lambda x: x * x * x, lambda dy, x: dy * half_square(x) * 3, "cube")
    first = tf.debug.check_grads(lambda x: x * 1.0 + 0.0 * x, tf.tensor([0.7]))
    assert first.passed
    r1 = tf.debug.check_grads(cube, tf.tensor([0.7, 1.2]), order=1)
    assert r1.passed
    r2 = tf.debug.check_grads(cube, tf.tensor([0.7, 1.2]), order=2, raise_on_fail=False)
    assert not r2.passed and r2.checks[-1][0] == 2
    assert [c.op for c in r2.culprits] == ["half_square"]


def test_stop_gradient_on_the_path_is_named():
    r = tf.debug.check_grads(lambda x: x * tf.stop_gradient(x), tf.tensor([0.5, 2.0]),
                             raise_on_fail=False)
    assert not r.passed and any("stop_gradient" in c.note for c in r.culprits)


def test_check_custom_grad_shortcut_and_projections():
    good = custom(lambda x: x.exp(), lambda dy, x: dy * x.exp(), "my_exp")
    assert tf.debug.check_custom_grad(good, tf.tensor([0.1, -0.2]), order=2).passed
    big = tf.debug.check_grads(lambda x: (x * x).sum(), tf.tensor(np.linspace(-1, 1, 300)),
                               max_elements=100)
    assert big.passed and "projection" in big.checks[0][2][0].worst
    # a wrong custom rule is named after the op, though check_custom_grad calls it
    bad = custom(lambda x: x.exp(), lambda dy, x: dy * x.exp() * 1.5, "my_bad_exp")
    r = tf.debug.check_custom_grad(bad, tf.tensor([0.1, -0.2]), raise_on_fail=False)
    assert not r.passed and [c.op for c in r.culprits] == ["my_bad_exp"]


def test_check_grads_argument_errors():
    with pytest.raises(tf.ArgumentError, match="f must be a function"):
        tf.debug.check_grads(3, tf.scalar(1.0))
    with pytest.raises(tf.ArgumentError, match="modes must be a subset"):
        tf.debug.check_grads(lambda x: x, tf.scalar(1.0), modes=("sideways",))
    with pytest.raises(tf.ArgumentError, match="order must be a positive integer"):
        tf.debug.check_grads(lambda x: x, tf.scalar(1.0), order=0)
    with pytest.raises(tf.ArgumentError, match="no float input"):
        tf.debug.check_grads(lambda x: x, tf.tensor([1], dtype="int32"))


# ---------------------------------------------------------------- check_numerics

def numerics_error(fn):
    with tf.debug.check_numerics():
        with pytest.raises(NumericsError) as e:
            fn()
    return e.value


def test_log_of_zero_in_the_forward_pass():
    e = numerics_error(lambda: tf.log(tf.tensor([1.0, 0.0])))      # log zero
    assert (e.op, e.pass_, e.created, e.kind, e.index) == ("log", "forward", True, "-Inf", (1,))
    assert e.site.filename == HERE and e.site.lineno == line_of("log zero")
    assert "x = 0" in str(e)


def test_zero_over_zero_in_the_forward_pass():
    e = numerics_error(lambda: tf.tensor([0.0]) / tf.tensor([0.0]))   # zero over zero
    assert (e.op, e.pass_, e.created, e.kind) == ("div", "forward", True, "NaN")
    assert e.site.lineno == line_of("zero over zero")


def test_nan_propagated_by_a_later_op():
    nan = tf.tensor([float("nan")])
    e = numerics_error(lambda: nan * 2)                    # propagated
    assert (e.op, e.created) == ("mul", False)
    assert e.site.lineno == line_of("propagated")


def test_sqrt_gradient_at_zero_in_the_backward_pass():
    e = numerics_error(lambda: tf.grad(lambda x: x.sqrt())(tf.tensor([4.0, 0.0])))  # sqrt'(0)
    assert (e.op, e.pass_, e.wrt, e.created, e.kind) == ("sqrt", "backward", "x", True, "Inf")
    assert e.site.lineno == line_of("sqrt'(0)")
    assert "in the gradient of sqrt, with respect to x" in str(e)


def test_inf_in_the_backward_pass_only():
    # asin(1) = pi/2 is finite; asin'(1) = 1/sqrt(1 - 1) is not
    e = numerics_error(lambda: tf.grad(lambda x: x.asin() * 2)(tf.tensor([0.5, 1.0])))  # asin
    assert (e.op, e.pass_, e.wrt, e.created, e.kind, e.index) == (
        "asin", "backward", "x", True, "Inf", (1,))
    assert e.site.lineno == line_of("asin") and "x = 1" in str(e)


def test_backward_nan_created_then_propagated():
    # a custom gradient creates the NaN; exp's rule only passes it on
    bad = tf.custom_grad(lambda x, save: (x * 1, lambda dy, s: dy * float("nan")))
    e = numerics_error(lambda: tf.grad(lambda x: bad(x.exp()))(tf.scalar(1.0)))
    assert (e.pass_, e.created, e.op) == ("backward", True, "custom_grad")
    with pytest.warns(tf.debug.NumericsWarning):
        with tf.debug.check_numerics(mode="warn") as check:
            tf.grad(lambda x: bad(x.exp()))(tf.scalar(1.0))
    assert [(f.op, f.created) for f in check.findings] == [("custom_grad", True),
                                                           ("exp", False)]


def test_the_where_trap_is_recognised():
    x = tf.tensor([-1.0, 4.0])
    e = numerics_error(lambda: tf.grad(lambda x: tf.where(x > 0, x.sqrt(), 0))(x))  # trap
    assert (e.op, e.pass_, e.wrt, e.created, e.where_trap) == ("sqrt", "backward", "x", True,
                                                               True)
    assert e.site.lineno == line_of("trap")
    assert "The where trap" in str(e) and "mask the input first" in str(e)
    with tf.debug.check_numerics():                          # the fix passes
        g = tf.grad(lambda x: tf.where(x > 0, tf.where(x > 0, x, 1).sqrt(), 0))(x)
    assert g.numpy().tolist() == [0, 0.25]


def test_warn_mode_collects_findings():
    with pytest.warns(tf.debug.NumericsWarning):
        with tf.debug.check_numerics(mode="warn") as check:
            tf.log(tf.tensor([0.0]))
            tf.sqrt(tf.tensor([-1.0]))
    assert [f.op for f in check.findings] == ["log", "sqrt"]


def test_debug_mode_switch_and_off_means_off():
    tf.enable_debug_mode()
    try:
        with pytest.raises(NumericsError):
            tf.log(tf.tensor([0.0]))
    finally:
        tf.disable_debug_mode()
    assert tf.log(tf.tensor([0.0])).item() == -np.inf     # no check once off


def test_environment_variable_enables_debug_mode():
    import subprocess
    import sys
    code = "import flowgrad as tf\ntry:\n    tf.log(tf.tensor([0.0]))\nexcept " \
           "tf.debug.NumericsError as e:\n    print('caught', e.op)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "FLOWGRAD_DEBUG": "1"})
    assert out.stdout.strip() == "caught log"


# ---------------------------------------------------------------- explain_gradient

def explain(f, *args):
    return tf.debug.explain_gradient(f, *args)


def test_explain_stop_gradient():
    e = explain(lambda x: tf.stop_gradient(x) * 2, tf.scalar(1.0))           # cut here
    assert e[0].status == "missing"
    assert "cut by stop_gradient" in e[0].reasons[0]
    assert f"{HERE}:{line_of('cut here')}" in e[0].reasons[0]


def test_explain_cast_to_int():
    t = tf.tensor([1.0, 2.0, 3.0])
    e = explain(lambda x: tf.gather(t, x.to_int()), tf.scalar(1.0))
    assert e[0].status == "zero"
    assert "as indices, an int32 input (cast to int32" in e[0].reasons[0]


@pytest.mark.parametrize("f, op", [(lambda x: x.floor() * 3, "floor"),
                                   (lambda x: x.greater(0).to_float(), "greater")])
def test_explain_zero_gradient_op(f, op):
    e = explain(f, tf.scalar(1.5))
    assert e[0].status == "zero" and f"{op} has a zero gradient" in e[0].reasons[0]


def test_explain_tensor_computed_before_f():
    x = tf.scalar(2.0)
    pre = x.square()
    e = explain(lambda x: pre * 3, x)
    assert e[0].status == "missing" and "not used by any op inside f" in e[0].reasons[0]
    assert "created before it was called" in str(e)


def test_explain_variable_not_trainable():
    w = tf.variable(tf.scalar(1.0), trainable=False, name="w_explain")
    try:
        e = explain(lambda: w * 2)
        entry = [i for i in e.inputs if "w_explain" in i.label][0]
        assert "not trainable" in entry.reasons[0]
    finally:
        w.dispose()


def test_explain_tensor_disposed_inside_f():
    def f(x):
        y = x * 2
        y.dispose()
        return y + 1
    e = explain(f, tf.scalar(1.0))
    assert e[0].status == "missing" and "disposed inside f" in e[0].reasons[0]


def test_unconnected_error_points_to_explain_gradient():
    with pytest.raises(tf.UnconnectedGradientError, match="tf.debug.explain_gradient"):
        tf.grad(lambda x: tf.scalar(1.0))(tf.scalar(1.0))


# ---------------------------------------------------------------- hooks and printing

def test_register_hook_observes_and_replaces():
    seen = []

    def f(x):
        y = x * 3
        y.register_hook(lambda g: seen.append(g.item()))
        z = y.square()
        z.register_hook(lambda g: g * 10)               # replace: scales the gradient
        return z
    g = tf.grad(f)(tf.scalar(1.0))
    assert seen == [60.0] and g.item() == 180.0          # dz = 10, dy = 2*3*10, dx = 3*60


def test_on_gradient_handle_and_minimize():
    w = tf.variable(tf.scalar(1.0), name="w_on_grad")
    opt = tf.train.sgd(0.5)
    seen = []
    try:
        with tf.debug.on_gradient(w, lambda g: seen.append(g.item())):
            opt.minimize(lambda: w.square())
        opt.minimize(lambda: w.square())                 # removed: not called again
        assert seen == [2.0]
        assert w.item() == pytest.approx(0.0)
    finally:
        w.dispose()
        opt.dispose()


def test_hook_errors():
    with pytest.raises(tf.ArgumentError, match="must be callable"):
        tf.scalar(1.0).register_hook(3)
    with pytest.raises(tf.GradientError, match="must return None or a tensor"):
        def f(x):
            y = x * 2
            y.register_hook(lambda g: 5)
            return y
        tf.grad(f)(tf.scalar(1.0))


def test_print_inside_gradient_functions_runs_in_the_backward_pass(capsys):
    def fwd(x, save):
        tf.print("forward")

        def grad_func(dy, saved):
            tf.print("backward")
            tf.print(dy)
            return dy * 2
        return x * 2, grad_func
    op = tf.custom_grad(fwd)
    tf.grad(lambda x: op(x))(tf.scalar(1.0))
    assert capsys.readouterr().out == "forward\nbackward\nTensor\n    1\n"


def test_next_frame_yields_to_the_event_loop():
    order = []

    async def other():
        order.append("other")

    async def main():
        task = asyncio.ensure_future(other())
        order.append("before")
        await tf.next_frame()
        order.append("after")
        await task
    asyncio.run(main())
    assert order == ["before", "other", "after"]


def test_debug_features_leave_no_seams_on():
    from flowgrad import interceptors
    engine = sys.modules["flowgrad.engine"]       # (tf.engine is TF.js's callable engine())
    with tf.debug.check_numerics():
        pass
    tf.debug.explain_gradient(lambda x: x * 2, tf.scalar(1.0))
    assert interceptors.dx_hook is None and interceptors.y_hook is None and interceptors.reader is None
    assert engine.on_record is None
    assert engine.run_kernel is inspect.getattr_static(engine, "run_kernel") and \
        engine.run_kernel.__module__ == "flowgrad.engine"


def test_check_grads_messages_say_the_error_per_element_and_what_the_numbers_are():
    """(issue 19) A culprit names how many elements are wrong, the largest absolute and
    relative errors and the worst element; the per-op numbers are said to come from the op
    alone with a random cotangent; a passing check at a kink does not print a relative
    error of 1; projections say they are projections."""
    op = tf.custom_grad(lambda x, save: (x.square(), lambda dy, s: dy * x * 3))   # 3x, not 2x
    r = tf.debug.check_grads(lambda x: op(x).sum(), tf.tensor([0.5, 2.0]), raise_on_fail=False)
    (c,) = r.culprits
    assert (c.wrong, c.size, c.index) == (2, 2, (1,))
    assert c.max_rel == pytest.approx(1 / 3, rel=1e-3)            # (3x - 2x) / 3x, by hand
    assert c.analytic / c.numeric == pytest.approx(1.5, rel=1e-5)
    text = str(c)
    assert "2 of 2 elements" in text and "worst at element (1,)" in text
    assert "random cotangent" in text
    kink = tf.debug.check_grads(lambda x: x.relu().sum(), tf.tensor([0.0, 2.0]))
    line = str(kink.checks[0][2][0])
    assert kink.passed and "(away from kinks)" in line and "max rel error 1;" not in line
    big = tf.debug.check_grads(lambda x: op(x).sum(), tf.tensor(np.ones(50)),
                               raise_on_fail=False, max_elements=10)
    assert "random projection" in str(big) and "<u, J v>" in str(big)


def test_numpy_calls_on_tensors_are_named_as_the_user_wrote_them():
    # the reports named the NumPy protocol (__array_ufunc__) instead of np.log
    from flowgrad.debug.numerics import NumericsError
    with tf.debug.check_numerics(), pytest.raises(NumericsError,
                                                  match=r"^-Inf created by np\.log \(forward"):
        np.log(tf.tensor([0.0, 1.0]))
    with tf.debug.check_numerics(), pytest.raises(
            NumericsError, match=r"^Inf created in the gradient of np\.sqrt, with respect"):
        tf.grad(lambda x: np.sum(np.sqrt(x)))(tf.tensor([0.0, 1.0]))
    text = str(tf.debug.graph(lambda x: np.sum(np.exp(x) * x), tf.tensor([1.0, 2.0])))
    assert "np.exp |" in text and "np.sum (output)" in text and "__array" not in text
    kept = []
    with tf.debug.track_leaks() as leaks:
        for _ in range(2):
            kept.append(np.add.reduce(tf.tensor([1.0, 2.0])))
            leaks.step()
    assert [s.ops for s in leaks.report().growing] == [("np.add.reduce",)]
    tf.dispose(kept)
