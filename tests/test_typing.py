"""Types for IDEs and type checkers: the generated stubs are fresh, jedi completes ops and
methods with signatures and docs, mypy types a user script and flags a misspelt op.

The mypy runs are slow (tens of seconds cold): they are marked ``slow`` (``pytest -m slow``,
run by ``.ci/run``); the freshness and jedi tests stay in the default run.
"""
import textwrap
from pathlib import Path

import pytest

import flowgrad as tf
from flowgrad import _stubgen
from flowgrad.ops import OPS

ROOT = Path(__file__).resolve().parent.parent


def test_stubs_are_fresh():
    assert _stubgen.stale() == [], "run: python -m flowgrad._stubgen"
    assert _stubgen.main(["--check"]) == 0


def test_check_fails_when_the_op_table_changes(monkeypatch, capsys):
    def fake_op(x):
        """A fake op."""
        return OPS["neg"](x)

    monkeypatch.setitem(OPS, "fake_op", fake_op)
    assert [p.name for p in _stubgen.stale()] == ["__init__.pyi"]
    monkeypatch.setattr(tf.Tensor, "fake_op", fake_op, raising=False)
    assert sorted(p.name for p in _stubgen.stale()) == ["__init__.pyi", "tensor.pyi"]
    assert _stubgen.main(["--check"]) == 1
    assert "stale: flowgrad/__init__.pyi" in capsys.readouterr().out
    text = _stubgen.generate()[_stubgen.PKG / "__init__.pyi"]
    assert 'def fake_op(x: TensorLike) -> Tensor:\n    """A fake op."""' in text


def test_stub_types_come_from_the_code():
    init = (_stubgen.PKG / "__init__.pyi").read_text()
    tensor = (_stubgen.PKG / "tensor.pyi").read_text()
    # several outputs: lists, Result tuples with fields, a multi-output primitive
    assert "def split(x: TensorLike, num_or_size_splits" in init
    assert "-> list[Tensor]:" in init.split("def unstack(")[1].split("\n")[0]
    assert init.split("def moments(")[1].split("\n")[0].endswith("-> _MomentsResult:")
    assert "def multi_rnn_cell(" in init and "-> list[list[Tensor]]:" in \
        init.split("def multi_rnn_cell(")[1].split("\n")[0]
    assert "def qr(x: TensorLike, full_matrices: bool = False) -> tuple[Tensor, ...]:" in init
    assert "def concat(tensors: Sequence[TensorLike]" in init
    # tf.tensor is the function; the module-level names are listed, camelCase ones are not
    assert "def tensor(values: TensorLike" in init
    assert "from .gradients import value_and_grads as value_and_grads" in init
    assert "def valueAndGrads" not in init and "def matMul" not in tensor
    # methods, operators and properties of Tensor
    assert "    def square(self) -> Tensor:" in tensor
    assert "    def __add__(self, b: TensorLike) -> Tensor:" in tensor
    assert "    shape: tuple[int, ...]" in tensor
    assert "    def rank(self) -> int:" in tensor


def _complete(code):
    import jedi
    lines = code.splitlines()
    return jedi.Script(code, path=str(ROOT / "typing_probe.py")).complete(len(lines),
                                                                           len(lines[-1]))


def test_jedi_completes_ops_and_methods():
    ops = {c.name: c for c in _complete("import flowgrad as tf\ntf.ad")}
    assert {"add", "add_n"} <= set(ops)
    sig = ops["add"].get_signatures()[0].to_string()
    assert sig == "add(a: TensorLike, b: TensorLike) -> Tensor"
    assert "a + b, with broadcasting" in ops["add"].docstring()
    methods = {c.name: c for c in _complete("import flowgrad as tf\n"
                                            "x = tf.tensor([1.0, 2.0])\nx.squ")}
    assert "square" in methods
    assert methods["square"].get_signatures()[0].to_string() == "square() -> Tensor"
    assert methods["square"].docstring(raw=True).startswith("x²")


def _mypy(tmp_path, code):
    from mypy import api
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(code))
    out, err, status = api.run([str(script), "--no-error-summary", "--cache-dir",
                                str(tmp_path / ".mypy_cache"), "--follow-imports=silent"])
    return out, status


@pytest.mark.slow
def test_mypy_types_a_user_script(tmp_path):
    out, status = _mypy(tmp_path, """\
        import flowgrad as tf
        x = tf.tensor([1.0, 2.0])
        reveal_type(tf.add(x, x).square().sum())
        mean, variance = tf.moments(x)
        reveal_type(variance)
        reveal_type(tf.grad(lambda t: t.square())(x))
        reveal_type(x.shape)
        reveal_type(x.sum().item())
        reveal_type(x.numpy())
        """)
    revealed = [line.split("Revealed type is ")[1] for line in out.splitlines()
                if "Revealed type" in line]
    assert revealed[:4] == ['"flowgrad.tensor.Tensor"'] * 3 + ['"tuple[int, ...]"'], out
    assert revealed[4] == '"float | int"', out          # (bool is an int to mypy)
    assert "ndarray" in revealed[5], out
    assert "error" not in out


@pytest.mark.slow
def test_mypy_flags_only_a_misspelt_op(tmp_path):
    out, status = _mypy(tmp_path, """\
        import flowgrad as tf
        x = tf.tensor([1.0, 2.0])
        y = tf.sqaure(x) + x * 2
        opt = tf.train.adam(0.1)
        """)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Module has no attribute "sqaure"' in errors[0], out
    assert status == 1


@pytest.mark.slow
def test_mypy_passes_on_the_examples():
    from mypy import api
    out, err, status = api.run([str(ROOT / "examples")])
    assert status == 0, out + err
