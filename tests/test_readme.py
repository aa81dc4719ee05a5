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
