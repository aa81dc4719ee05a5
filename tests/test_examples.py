"""Every script in examples/ runs and prints what it promises."""
import pathlib
import runpy

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, capsys):
    ns = runpy.run_path(str(path), run_name="example")
    result = ns["main"]()
    out = capsys.readouterr().out
    if path.stem == "newton_rosenbrock":
        assert result == 6 and "step 6: p = [1. 1.]" in out
    if path.stem == "levenberg_marquardt":
        assert abs(result[0] - 2) < 0.01 and abs(result[1] + 0.7) < 0.01
    if path.stem == "debugging_gradients":
        assert "the gradient rule of square" in out and "The where trap" in out
        assert "round has a zero gradient" in out
