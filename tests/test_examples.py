"""Every script in examples/ runs and prints what it promises.

Each example has ``main()`` (``main(quick=True)`` where it trains: fewer steps) returning
what it computed; the checks below are on that and on what it printed. Each script also
runs as a script (``python examples/NAME.py --quick``) in a subprocess."""
import inspect
import math
import os
import pathlib
import runpy
import subprocess
import sys
import warnings

import pytest

import flowgrad as tf

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


def run(path):
    ns = runpy.run_path(str(path), run_name="example")
    main = ns["main"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tf.debug.NumericsWarning)    # check_numerics(mode="warn")
        return main(quick=True) if "quick" in inspect.signature(main).parameters else main()


def close(a, b, tol=1e-5):
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol * max(1.0, abs(b))


def check_newton_rosenbrock(result, out):
    assert result == 6 and "step 6: p = [1. 1.]" in out


def check_levenberg_marquardt(result, out):
    assert abs(result[0] - 2) < 0.01 and abs(result[1] + 0.7) < 0.01


def check_debugging_gradients(result, out):
    assert "the gradient rule of square" in out and "The where trap" in out
    assert "round has a zero gradient" in out


def check_seed_000_custom_gradients(r, out):
    assert r["square"] == [1, 4, 9] and r["square_grad"] == [2, 4, 6]
    assert r["add_grads"] == [[1, 1], [1, 1]]
    assert close(r["exp_grad"], math.e, 1e-6) and close(r["exp_grad2"], math.e, 1e-6)
    assert r["no_variable_error"].startswith("Cannot find a connection between any variable")
    assert close(r["trained"], [0.98 ** 100 * k for k in (1, 2, 3)], 1e-5)
    assert r["clip_grad"] == [0, 1, 1] and r["scaled_grad"] == [1, 2, 3]
    assert r["composed_grad"] == [[32, 72], [22, 50]]
    assert "custom_op(x): [1.0, 4.0, 9.0]" in out


def check_seed_001_debugging_gradients(r, out):
    assert (r["value"], r["grad_w"], r["grad_b"]) == (10.375, -17.5, -5.5)
    assert close([r["x"], r["y"]], [1.6, 2.4], 1e-6)
    assert "must be a tensor (got NoneType)" in r["no_result_error"]
    assert close(list(r["tape"]), [3.2, 4.8], 1e-6)
    assert r["check_passed"] and r["clipped"] == -1 and r["leaked"] == 0
    assert close(r["clipped_by_norm"], [0.6, 0.8], 1e-6)
    assert "[10.375]\n[-17.5]\n[-5.5]" in out


def check_seed_002_derivatives_and_gradients(r, out):
    assert r["grad"] == 7 and r["grads"] == (4, 6)
    assert close(list(r["sgd"]), [1.7, 1.6], 1e-6)
    assert r["value_and_grads"] == (10, 13)
    assert r["tidy"] == 8 and r["tidy_left"] == 0
    assert r["loss_after"] < r["loss_before"] / 3
    assert r["higher"] == (12, 12)


def check_linear_regression(r, out):
    best_w, best_b = r["least_squares"]
    assert abs(r["w"] - best_w) < 0.01 and abs(r["b"] - best_b) < 0.01
    assert abs(r["w"] - 2) < 0.05 and abs(r["b"] + 1) < 0.05
    assert "step   0: loss" in out


def check_mlp_adam(r, out):
    assert r["loss_after"] < r["loss_before"] / 10
    assert r["train_accuracy"] > 0.95 and r["test_accuracy"] > 0.95
    assert "accuracy" in out


def check_straight_through(r, out):
    plain, ste = r["plain"], r["straight_through"]
    assert plain["gradient"] == [0, 0, 0] and plain["loss_after"] == plain["loss_before"]
    assert ste["quantized"] == [1.5, -0.5, 2.0] and ste["loss_after"] < 1e-6
    assert "straight-through round" in out


def check_nan_hunt(r, out):
    losses = r["losses"]
    assert math.isnan(losses[-1]) and all(math.isfinite(v) for v in losses[:-1])
    assert losses[-2] < losses[0]                    # it was training fine until then
    e = r["finding"]
    assert e is not None and e.op == "log" and e.pass_ == "forward" and e.created
    assert "nan_hunt.py" in str(e.site) and "log_not_p = (1 - p).log()" in str(e.site)
    assert all(math.isfinite(v) for v in r["fixed"]) and r["fixed"][-1] < 0.1
    assert "-Inf created by log (forward pass)" in out


def check_checkpoint_resume(r, out):
    # killed with SIGKILL between two saves, resumed from the last whole checkpoint: every
    # loss and weight is the very bits of the run that never stopped
    assert r["match"] and r["losses_after_resume_match"] and r["weights_match"], r
    assert r["resumed_from"] % 10 == 0 and 0 < r["resumed_from"] <= r["killed_after"]
    assert r["loss_last"] < r["loss_first"] / 2
    assert "resumed exactly" in out and "exit status" in out


def check_dp_sgd(r, out):
    assert r["gap"] < 1e-6                          # vmap's clipped average == the loop's
    assert r["worst"] == 7                          # the outlier the data was given
    assert r["losses"][-1] < r["losses"][0] * 0.6 and r["accuracy"] > 0.85
    assert "vmap vs loop" in out


CHECKS = {name[len("check_"):]: f for name, f in globals().items()
          if name.startswith("check_")}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, capsys):
    result = run(path)
    out = capsys.readouterr().out
    assert path.stem in CHECKS, f"examples/{path.name} has no check in tests/test_examples.py"
    CHECKS[path.stem](result, out)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_as_a_script(path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGRAD_")}
    r = subprocess.run([sys.executable, str(path), "--quick"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip()
