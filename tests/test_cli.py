"""The main job: `flowgrad demo` (the seed tutorials, a training run with its report, two
bugs caught) and `flowgrad check MODULE:FUNCTION`."""
import subprocess
import sys
import textwrap

from flowgrad import cli


def test_demo_quick_runs_everything_and_writes_the_report(capsys, tmp_path):
    out_dir = tmp_path / "report"
    assert cli.main(["demo", "--quick", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out
    for title in ("Custom gradients", "Debugging gradients", "Derivatives and gradients"):
        assert f"=== {title}" in out
    # the tutorials' promised values, as printed
    assert "  >     [2, 4, 6]" in out                    # custom square: 2x
    assert "  >     [1, 2, 3]" in out                    # scaled gradient: x, not 2x
    assert "  >     1.600000023841858" in out            # x - 0.1 * dx
    assert "  >     7\n" in out and "  >     13\n" in out and "  >     12\n" in out
    assert "Cannot find a connection between any variable" in out
    # the training run and its report
    assert "gradient check of the loss: passed" in out
    report = out_dir / "report.html"
    assert report.exists() and f"The gradient report: {report}" in out
    text = report.read_text()
    assert "<svg" in text and "loss of the spirals network" in text
    # the two bugs, with their culprits and lines in the demo's own code
    assert "the gradient rule of square (kernel CustomGradient)" in out
    assert "The where trap: NaN created in the gradient of sqrt, with respect to x" in out
    assert "names it: example 37," in out                # the poisoned label, by index
    # a learning rate past SGD's stability limit, named with its evidence
    assert "  learning_rate_too_high" in out and "lr x lambda_max" in out


def test_demo_without_training(capsys):
    assert cli.main(["demo", "--no-train", "--no-code"]) == 0
    out = capsys.readouterr().out
    assert "spirals" not in out and "where trap" in out and "  | " not in out


def test_check_command(tmp_path, monkeypatch, capsys):
    (tmp_path / "usermod.py").write_text(textwrap.dedent("""
        import flowgrad as tf
        def good(x, w):
            return x.mat_mul(w).tanh().sum()
        bad_op = tf.custom_grad(lambda x, save: (x.square(), lambda dy, s: dy * x * 3))
        def bad(x):
            return bad_op(x).sum()
    """))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "usermod:good", "--shape", "2,3", "--shape", "3,1",
                     "--order", "2"]) == 0
    out = capsys.readouterr().out
    assert "check_grads: passed" in out and "order 2" in out
    assert cli.main(["check", "usermod:bad", "--shape", "3", "--dtype", "float64"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "usermod.py:7: return bad_op(x).sum()" in out


def test_check_command_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv, message in [(["check", "nomodule:f", "--shape", "2"], "cannot import"),
                          (["check", "no_colon", "--shape", "2"], "MODULE:FUNCTION"),
                          (["check", "json:nothing", "--shape", "2"], "has no function")]:
        done = subprocess.run([sys.executable, "-m", "flowgrad"] + argv, capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr


def test_module_entry_point_and_help():
    done = subprocess.run([sys.executable, "-m", "flowgrad"], capture_output=True, text=True)
    assert done.returncode == 0 and "demo" in done.stdout and "check" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "flowgrad", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
