"""tf.debug.explain_gradient names every way a gradient path is cut or zeroed: the op by
its public name and this file's line (issue 19)."""
import os

import numpy as np
import pytest

import flowgrad as tf

HERE = os.path.basename(__file__)
X = [1.0, 2.0]
BEFORE = {}


def _zeros(n):
    return tf.zeros([n])


# (case, f, status, words the reason must contain): each f on one line, the line it names
CASES = [
    ("data_sync", lambda x: tf.tensor(x.data_sync()).sum(), "missing", ["data_sync()"]),
    ("numpy", lambda x: tf.tensor(x.numpy()).sum(), "missing", ["numpy()"]),
    ("np.asarray", lambda x: tf.tensor(np.asarray(x) * 2).sum(), "missing", ["np.asarray"]),
    ("item", lambda x: tf.scalar(x.sum().item()) * 2, "missing",
     ["item()", "a tensor computed from x"]),
    ("float", lambda x: tf.scalar(float(x.sum())), "missing", ["float()"]),
    ("numpy function", lambda x: tf.tensor(np.argsort(x)).cast("float32") * x.sum(),
     "missing", ["np.argsort()", "Use tf.top_k"]),
    ("stop_gradient", lambda x: tf.stop_gradient(x).sum(), "missing", ["stop_gradient"]),
    ("int index", lambda x: tf.gather(tf.tensor([1.0, 2.0, 3.0]), x.cast("int32")).sum(),
     "zero", ["gather", "int32 input", "cast to int32"]),
    ("comparison", lambda x: x.greater(0).to_float().sum(), "zero",
     ["greater has a zero gradient"]),
    ("round", lambda x: x.round().sum(), "zero", ["round has a zero gradient"]),
    ("dead relu", lambda x: x.mul(-1).relu().sum(), "zero", ["relu", "dead"]),
    ("saturated sigmoid", lambda x: x.mul(40).sigmoid().sum(), "zero",
     ["sigmoid", "saturated"]),
    ("saturated tanh", lambda x: x.mul(20).tanh().sum(), "zero", ["tanh", "saturated"]),
    ("where not taken", lambda x: tf.where(x.greater(100), x.square(), _zeros(2)).sum(),
     "zero", ["where", "never takes branch a"]),
    ("times zero", lambda x: x.mul(_zeros(2)).sum(), "zero", ["mul", "by 0"]),
    ("clipped", lambda x: x.clip_by_value(5, 6).sum(), "zero", ["clip_by_value"]),
    ("maximum", lambda x: tf.maximum(x, 100).sum(), "zero", ["maximum", "other argument"]),
]


@pytest.mark.parametrize("case, f, status, words", CASES, ids=[c[0] for c in CASES])
def test_each_cause_names_the_op_and_the_line(case, f, status, words):
    x = tf.tensor(X)
    e = tf.debug.explain_gradient(f, x)[0]
    text = "\n".join(e.reasons)
    assert e.status == status, f"{case}: {e}"
    for w in words:
        assert w in text, f"{case}: {w!r} not in {text!r}"
    assert f"{HERE}:{f.__code__.co_firstlineno}" in text, f"{case}: no line in {text!r}"
    x.dispose()


def test_a_tensor_made_before_f_and_a_frozen_variable():
    x = tf.tensor(X)
    h = x.square()                                  # computed before f: a constant inside f
    e = tf.debug.explain_gradient(lambda x: h.sum(), x)
    assert e[0].status == "missing"
    assert "not used by any op inside f" in e[0].reasons[0]
    assert any("created before it was called" in n for n in e.notes)
    w = tf.variable(tf.tensor([1.0]), trainable=False, name="frozen_explain")
    try:
        e = tf.debug.explain_gradient(lambda: w.square().sum())
        mine = [i for i in e.inputs if "frozen_explain" in i.label][0]
        assert any("trainable=False" in r for r in mine.reasons)
    finally:
        w.dispose()
    tf.dispose([x, h])


def test_a_healthy_input_flows_and_names_nothing():
    x = tf.tensor(X)
    e = tf.debug.explain_gradient(lambda x: x.mul(3).relu().sum(), x)[0]
    assert e.status == "flows" and e.reasons == []
    assert e.norm == pytest.approx(np.sqrt(2 * 9.0))     # d/dx sum(relu(3x)) = 3 each
    x.dispose()


def test_a_zero_on_one_path_does_not_hide_the_other():
    """x reaches the output through a dead relu and through a live square: it flows."""
    x = tf.tensor(X)
    e = tf.debug.explain_gradient(lambda x: x.mul(-1).relu().sum() + x.square().sum(), x)[0]
    assert e.status == "flows"
    assert e.norm == pytest.approx(np.sqrt(2.0 ** 2 + 4.0 ** 2))
    x.dispose()


OPERATORS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "mat_mul": lambda a, b: a @ b.transpose(),
    "pow": lambda a, b: a ** b, "greater": lambda a, b: a > b, "less": lambda a, b: a < b,
    "greater_equal": lambda a, b: a >= b, "less_equal": lambda a, b: a <= b,
    "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "neg": lambda a, b: -a, "strided_slice": lambda a, b: a[0],
    "floor_div": lambda a, b: a // b, "mod": lambda a, b: a % b,
}


@pytest.mark.parametrize("name", list(OPERATORS))
def test_graph_labels_operators_by_the_public_op_name(name):
    a, b = tf.tensor([[1.0, 2.0]]), tf.tensor([[3.0, 1.0]])
    g = tf.debug.graph(lambda a: OPERATORS[name](a, b), a)
    labels = [n.label for n in g.nodes if n.kind == "op"]
    assert labels[-1] == name, labels
    tf.dispose([a, b])


def _warned_at(fn):
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [(os.path.basename(w.filename), w.lineno, w.category.__name__) for w in seen
            if issubclass(w.category, tf.debug.NumericsWarning)]


def test_numerics_warnings_point_at_the_users_line_forward_and_backward():
    import inspect
    x = tf.tensor([0.0, 1.0])

    def forward():
        with tf.debug.check_numerics(mode="warn"):
            x.log()
    line = inspect.getsourcelines(forward)[1] + 2
    assert (HERE, line, "NumericsWarning") in _warned_at(forward)

    def backward():
        with tf.debug.check_numerics(mode="warn"):
            tf.grad(lambda x: x.sqrt().sum())(x)                  # 1/(2 sqrt(0)) = inf
    line = inspect.getsourcelines(backward)[1] + 2
    got = _warned_at(backward)
    assert got and all(w == (HERE, line, "NumericsWarning") for w in got), got
    x.dispose()


def test_the_skipped_step_warning_points_at_the_minimize_line():
    import inspect
    import warnings
    w = tf.variable(tf.tensor([1.0]), name="w_skip_line")
    opt = tf.train.sgd(0.1)
    try:
        def step():
            opt.minimize(lambda: w.sub(1).log().sum(), skip_nonfinite=True)   # log(0): -inf
        def apply():
            opt.apply_gradients({"w_skip_line": tf.tensor([float("nan")])}, skip_nonfinite=True)
        for fn in (step, apply):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fn()
            got = [(os.path.basename(x.filename), x.lineno) for x in seen
                   if x.category.__name__ == "NonFiniteGradientWarning"]
            assert got == [(HERE, inspect.getsourcelines(fn)[1] + 1)], got
        np.testing.assert_array_equal(w.numpy(), [1.0])          # both steps skipped
    finally:
        w.dispose()
        opt.dispose()


def test_every_debug_tool_names_the_same_user_line():
    """One helper (debug/sites.py) finds the user's frame for explain, numerics,
    check_grads, hooks, warnings and the graph: they all name the same line."""
    import inspect
    import warnings
    sq = tf.custom_grad(lambda x, save: (x.square(), lambda dy, s: dy * x * 3))

    def f(x, z):
        return sq(x).log().sum() + z.mul(-1).relu().sum()
    where = f"{HERE}:{inspect.getsourcelines(f)[1] + 1}"
    x, z = tf.tensor([0.0, 2.0]), tf.tensor([1.0, 3.0])
    found = {}
    e = tf.debug.explain_gradient(f, x, z)[1]                       # z: a dead relu
    found["explain"] = next(r for r in e.reasons if "relu" in r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tf.debug.check_numerics(mode="warn") as chk:
            f(x, z)                                                 # log(0) = -inf
    found["numerics"] = str(chk.findings[0].site)
    g = tf.debug.graph(f, x, z)
    found["graph"] = str(next(n.site for n in g.nodes if n.label == "log"))
    r = tf.debug.check_grads(lambda x: f(x, z), tf.tensor([0.5, 2.0]), raise_on_fail=False)
    found["check_grads"] = str(r.culprits[0].site)
    def hooked(x):
        y = x * 3
        y.register_hook(lambda g: tf.tensor([1.0]))                 # the wrong shape
        return y.sum()
    with pytest.raises(tf.GradientError) as err:
        tf.grad(hooked)(x)
    found["hook"] = str(err.value)
    assert f"{HERE}:{inspect.getsourcelines(hooked)[1] + 2}" in found.pop("hook")
    for tool, text in found.items():
        assert where in text, f"{tool}: {text}"
    tf.dispose([x, z])


def test_warnings_from_code_without_a_file_work():
    """python -c, the REPL and notebooks run code with no source file: the warning still
    names its line (sites.warn once raised ImportError there)."""
    import subprocess
    import sys
    code = ("import warnings, flowgrad as tf\n"
            "w = tf.variable(tf.tensor([1.0]))\n"
            "opt = tf.train.sgd(0.1)\n"
            "opt.minimize(lambda: w.sub(1).log().sum(), skip_nonfinite=True)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "<string>:4: NonFiniteGradientWarning" in r.stderr
