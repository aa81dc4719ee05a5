"""The README's quickstart runs and prints what its comments promise (values worked out by
hand: d/dx (x² + x) = 7 at 3; the third derivative of x·eˣ is (x + 3)eˣ, 3 at 0; the data
lie exactly on y = 2x - 1)."""
import pathlib
import re
import subprocess
import sys

from doctools import page_output_matches     # trained values: numbers with a tolerance

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_quickstart_prints_what_it_promises():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quickstart"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 16              # a short quickstart
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    shown = "\n".join(r.stdout.split("\n")[:4])
    assert page_output_matches("7.0\n3.0\n2.0 -1.0\nTrue", shown), r.stdout


def _readme_test_command():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("Install and run the tests"):]
    return re.search(r"```\n(.*?)\n```", section, re.S).group(1).strip()


def test_ci_runs_the_readme_test_command_first_and_verbatim():
    # CI must fail where a newcomer's one line fails: .ci/run holds the README's test command
    # as written, in a fresh venv, before anything else is installed into it
    command = _readme_test_command()
    assert "\n" not in command and command.startswith("pip install")
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in lines, f".ci/run does not run the README's test command {command!r}"
    before = lines[:lines.index(command)]
    code = [ln for ln in before if ln and not ln.startswith("#")]
    assert any("-m venv" in ln for ln in code), "the README's command must run in a fresh venv"
    assert any(ln.startswith(". ") and "activate" in ln for ln in code)
    assert not [ln for ln in code if re.search(r"\b(pip|pip3|apt-get|conda|uv)\b", ln)], \
        f".ci/run installs something before the README's test command: {code}"
