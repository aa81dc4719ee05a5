"""The main job: `flowgrad demo` runs every seed example without an error."""
import subprocess
import sys

from flowgrad import cli


def test_demo_runs_every_example(capsys):
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out
    for title in ("Custom gradients", "Debugging gradients", "Derivatives and gradients"):
        assert f"=== {title}" in out
    # a few of the tutorials' promised values, as printed
    assert "  >     [2, 4, 6]" in out                    # custom square
    assert "  >     1.600000023841858" in out            # x - 0.1 * dx
    assert "Cannot find a connection between any variable" in out


def test_module_entry_point_and_help():
    done = subprocess.run([sys.executable, "-m", "flowgrad"], capture_output=True, text=True)
    assert done.returncode == 0 and "demo" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "flowgrad", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
