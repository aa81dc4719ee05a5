"""The documentation is tested: the examples of docs/*.md run with Sybil (tests/docpages.py
says the page format: python blocks, the ```text block that shows what one prints, the
``<!-- no-test -->`` and ``<!-- test-if: EXPR -->`` markers, one script per page), and what
they print is compared with doctools.page_output_matches: text exactly (``...`` wildcards),
numbers with a tolerance, since trained float32 values differ in the last digit from one CPU
to another. The docstring examples of flowgrad/ (``--doctest-modules``) get the same
tolerance from the root conftest.py.

Each page runs in a fresh interpreter (``python tests/docpages.py --check PAGE``), not
through Sybil's pytest plugin in this process: the pages name their variables, change global
settings and print memory counts, and must print the same whatever ran before them.

To see what the blocks of a page print (to write its ```text blocks):

    python tests/test_docs.py docs/debugging-gradients.md

The API reference is checked to name every public function and class; the site build
(``mkdocs build --strict``, when mkdocs and mkdocstrings are installed:
``pip install -e '.[docs]'``) is a slow test (``pytest -m slow``).
"""
import doctest
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import docpages
import doctools

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_examples(page):
    # a fresh interpreter per page: the pages name their variables, change global settings,
    # and must print the same whatever ran before them
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGRAD_")}
    r = subprocess.run([sys.executable, docpages.__file__, "--check", str(page)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


NEEDING = [(p, line, module, extra) for p in PAGES
           for line, module, extra in docpages.blocks_needing_extras(p)]


@pytest.mark.parametrize("page,line,module,extra", [
    pytest.param(*n, marks=pytest.mark.extra(n[2], n[3]), id=f"{n[0].name}:{n[1]}")
    for n in NEEDING])
def test_blocks_that_need_an_extra(page, line, module, extra):
    # skipped (by the extra marker, tests/conftest.py) where the module is missing; where it
    # is there, the page's run must have run the block, and the whole page passes
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGRAD_")}
    r = subprocess.run([sys.executable, docpages.__file__, "--check", str(page),
                        f"--must-run={line}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def _snippets(page):
    return [r.parsed for _, r in docpages.SYBIL.parse(page).regions
            if isinstance(r.parsed, docpages.Snippet)]


def test_every_guide_has_tested_examples():
    for name in ("custom-gradients.md", "debugging-gradients.md",
                 "derivatives-and-gradients.md", "porting-from-tfjs.md"):
        shown = [s for s in _snippets(DOCS / name)
                 if s.expected is not None and s.marker is None]
        assert len(shown) >= 3, f"{name}: fewer than 3 examples with their output"


def _run(page):
    seen = []
    docpages.run_page(page, lambda s, out, err: seen.append((out, err)))
    return seen


def test_parse_markers(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("Intro.\n\n```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
                    "<!-- no-test -->\n```python\nboom()\n```\n\nProse.\n\n"
                    "<!-- test-if: 1 + 1 == 3 -->\n```python\nboom()\n```\n\n"
                    "<!-- test-if: 1 + 1 == 2 -->\n```python\nprint(2)\n```\n\n"
                    "Not the output:\n\n```text\n3\n```\n\n"
                    "<!-- needs: no_such_module_fg oracle -->\n```python\nboom()\n```\n\n"
                    "<!-- needs: json test -->\n```python\nprint(3)\n```\n")
    snippets = _snippets(page)
    assert [s.line for s in snippets] == [4, 13, 20, 25, 36, 41]
    assert snippets[0].expected == "1\n" and snippets[0].expected_line == 8
    assert all(s.expected is None for s in snippets[1:])
    assert [s.marker for s in snippets] == [None, "no-test", "test-if: 1 + 1 == 3",
                                            "test-if: 1 + 1 == 2",
                                            "needs: no_such_module_fg oracle", "needs: json test"]
    assert _run(page) == [("1\n", None), (None, None), (None, None), ("2\n", None),
                          (None, None), ("3\n", None)]
    assert docpages.blocks_needing_extras(page) == [(36, "no_such_module_fg", "oracle"),
                                                   (41, "json", "test")]
    assert docpages.check_page(page, tmp_path, must_run=[41]) == []
    assert docpages.check_page(page, tmp_path, must_run=[36]) == [
        "p.md:36: the block did not run (its marker skipped it)"]


def test_a_marker_must_precede_a_python_block(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- no-test -->\nProse.\n\n```python\nprint(1)\n```\n")
    with pytest.raises(ValueError, match="must be just before a ```python block"):
        docpages.SYBIL.parse(page)


def test_blocks_run_as_one_script_named_after_the_page(tmp_path):
    page = tmp_path / "my-page.md"
    page.write_text("```python\nimport traceback\n```\n\nProse.\n\n```python\n"
                    "def where():\n    return traceback.extract_stack()[-2]\n```\n\n"
                    "```python\nf = where()\nprint(f.filename, f.lineno, f.line, __name__)\n```\n")
    assert _run(page)[2] == ("my_page.py 4 f = where() __main__\n", None)


def test_last_digit_differences_pass_real_differences_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nprint('Tensor\\n    [[-0.222904],\\n     [0.0365628]]')\n"
                    "```\n\n```text\nTensor\n    [[-0.222904],\n     [0.0365629]]\n```\n\n"
                    "```python\nprint('loss 0.0365 after 100 steps')\n```\n\n"
                    "```text\nloss 0.0366 after ... steps\n```\n")
    (ok, e1), (out, e2) = _run(page)
    assert e1 is None
    assert "loss 0.0366 after ... steps" in str(e2) and "line 16" in str(e2)
    assert docpages.check_page(page, tmp_path)[0].startswith("p.md:12: the block printed")


def test_block_errors_end_the_page_with_a_traceback_in_the_script(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nx = 1\n```\n\n```python\nx = 1 / 0\n```\n\n"
                    "```python\nprint(x)\n```\n")
    failures = docpages.check_page(page, tmp_path)
    assert len(failures) == 1 and failures[0].startswith("p.md:6: the block raised "
                                                         "ZeroDivisionError")
    assert 'File "p.py", line 2' in failures[0] and "x = 1 / 0" in failures[0]


def test_output_comparison():
    m = doctools.page_output_matches
    assert m("a\nb  \n\n", "a\nb") and not m("a\nb", "a\nc")
    assert m("x = ...!\n...\nend", "x = 12!\nmore\nlines\nend")
    assert m("x\n...\nend", "x\nend") and not m("x = ...!", "x = 12?")
    assert m("[0.0365629]", "[0.0365628]") and not m("[0.0366]", "[0.0365]")
    assert m("loss ...: 1.2e-08", "loss 7: -3e-09")             # zero up to rounding
    assert m("[1. 1.]", "[0.9999999 1.0000001]") and not m("[1. 1.]", "[1. 1.01]")
    assert not m("float32 [2, 3]", "float32 [2, 4]")               # integers are exact
    assert m("1", "0.9999999") and not m("1", "2")          # an integer-looking float
    assert not m("float32", "float31") and not m("v1.2.3", "v1.2.4")


def test_docstring_examples_compare_numbers_with_a_tolerance():
    # the checker pytest's --doctest-modules uses here is the root conftest's tolerant one
    import _pytest.doctest
    checker = _pytest.doctest._get_checker()
    assert isinstance(checker, doctools.FloatTolerantOutputs)
    assert checker.check_output("[0.0365629]\n", "[0.0365628]\n", 0)
    assert not checker.check_output("[0.0366]\n", "[0.0365]\n", 0)
    assert checker.check_output("a ... 0.0365629\n", "a b c 0.0365628\n", doctest.ELLIPSIS)
    assert not checker.check_output("a ... 0.0366\n", "a b c 0.0365\n", doctest.ELLIPSIS)
    assert checker.check_output("[1.0,   2.0]\n", "[1.0000001, 2.0]\n",
                                doctest.NORMALIZE_WHITESPACE)
    assert not checker.check_output("shape [2, 3]\n", "shape [2, 4]\n", 0)
    # and through doctest's runner, as pytest runs a docstring
    runner = doctest.DocTestRunner(checker=checker, optionflags=0)
    for printed, failed in (("0.0365628", 0), ("0.0365", 1)):
        test = doctest.DocTestParser().get_doctest(
            f">>> print({printed})\n0.0365629\n", {}, "t", "t.py", 0)
        assert runner.run(test, out=lambda s: None).failed == failed


# ---------------------------------------------------------------- the API reference

def test_docstring_examples_become_code_blocks():
    # docs/_griffe_doctest.py, the griffe extension mkdocs.yml loads: doctests are shown
    # as Python console blocks, a prose line starting with ">" is not a quote
    spec = importlib.util.spec_from_file_location("_griffe_doctest",
                                                  DOCS / "_griffe_doctest.py")
    if importlib.util.find_spec("griffe") is None:
        pytest.skip("griffe (from mkdocstrings[python]) is not installed")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    text = "Intro.\n>= 3 is ignored.\n\n    >>> 1 + 1\n    2\n\nMore.\n```\n>>> kept\n```"
    assert ext.fence_doctests(text).split("\n") == [
        "Intro.", "\\>= 3 is ignored.", "", "```pycon", "    >>> 1 + 1", "    2", "```", "",
        "More.", "```", ">>> kept", "```"]


def _public_objects():
    """name -> object for every public function and class of the groups the reference
    covers: tf.*, tf.losses/image/linalg, tf.train, tf.debug, tf.distributed."""
    import types
    import flowgrad as tf
    found = {}

    def add(prefix, names, ns):
        for n in names:
            obj = getattr(ns, n)
            if isinstance(obj, (types.ModuleType, str, tf.camel_case.Namespace)):
                continue        # submodules, dtype names, the tf.losses-style namespaces
            found[prefix + n] = obj
    add("", tf.__all__, tf)
    for ns in ("losses", "image", "linalg"):
        add(f"{ns}.", tf.ops.NAMESPACES[ns], getattr(tf, ns))
    add("train.", tf.train.__all__, tf.train)
    add("debug.", tf.debug.__all__, tf.debug)
    add("distributed.", tf.distributed.__all__, tf.distributed)
    return found


def _directives():
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((DOCS / "api").glob("*.md")))
    return re.findall(r"^::: (flowgrad\.[\w.]+)", text, re.M)


def test_api_reference_covers_the_public_names():
    import flowgrad as tf
    documented = set()
    for path in _directives():          # every directive names something that exists
        obj = tf
        for part in path.split(".")[1:]:
            obj = getattr(obj, part)
        documented.add(id(obj))
    missing = sorted(n for n, obj in _public_objects().items() if id(obj) not in documented)
    assert not missing, ("public names missing from the API reference: add a "
                         f"'::: flowgrad.NAME' line to the docs/api page of their group: "
                         f"{missing}")


def _have_mkdocs():
    return all(importlib.util.find_spec(m) is not None
               for m in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"))


@pytest.mark.slow          # the mkdocs site build in a subprocess (~7 s warm)
@pytest.mark.skipif(not _have_mkdocs(), reason="mkdocs and mkdocstrings[python] are not "
                    "installed (pip install -e '.[docs]'): the site build is not checked")
def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    api = (tmp_path / "site" / "api" / "gradients" / "index.html").read_text(encoding="utf-8")
    assert 'id="flowgrad.grad"' in api and '<span class="gp">&gt;&gt;&gt; </span>' in api
    for page in ("custom-gradients", "debugging-gradients", "derivatives-and-gradients",
                 "porting-from-tfjs"):
        assert (tmp_path / "site" / page / "index.html").exists()


if __name__ == "__main__":
    # the page writers' command: what each block prints (see docpages.py)
    sys.exit(docpages.main(sys.argv[1:]))
