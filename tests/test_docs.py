"""The documentation is tested: every ```python block of docs/*.md runs, in order, in one
namespace per file, and where a ```text block follows it, what the block printed must be
that text. A line ``...`` in the expected text stands for any number of lines, and ``...``
inside a line for any characters (as doctest's ELLIPSIS). A block preceded by
``<!-- no-test -->`` is not run; one preceded by ``<!-- test-if: EXPR -->`` runs only when
EXPR (evaluated in the file's namespace) is true.

The blocks of one page run as one script named after the page (``debugging_gradients.py``
for ``debugging-gradients.md``), its lines numbered across the blocks in order, so that the
places debug reports name read as they would in a user's script.

To see what the blocks of a page print (to write its ```text blocks):

    python tests/test_docs.py docs/debugging-gradients.md

The API reference is checked to name every public function and class, and, when mkdocs and
mkdocstrings are installed (``pip install -e '.[docs]'``), the site is built with
``mkdocs build --strict``.
"""
import contextlib
import importlib.util
import io
import linecache
import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

import flowgrad  # noqa: F401 - the pages import it; run_page reads its variable registry

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*(no-test|test-if:(.*?))\s*-->\s*$")


class Block:
    def __init__(self, lang, lineno, code, marker):
        self.lang, self.lineno, self.code, self.marker = lang, lineno, code, marker
        self.expected = None        # the ```text block that follows, if any


def parse(path):
    """The fenced blocks of a Markdown file: python blocks with their expected output."""
    lines = pathlib.Path(path).read_text(encoding="utf-8").split("\n")
    blocks, i, marker, last = [], 0, None, None
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m and m.group(1):
            start = i + 1
            j = start
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            if j == len(lines):
                raise ValueError(f"{path}:{i + 1}: unclosed ``` block")
            b = Block(m.group(1), start + 1, "\n".join(lines[start:j]) + "\n", marker)
            if b.lang == "text" and last is not None and last.lang == "python" \
                    and last.expected is None and last.adjacent:
                last.expected = b
            else:
                blocks.append(b)
            b.adjacent = True
            last, marker, i = b, None, j + 1
            continue
        mm = _MARK.match(lines[i].strip())
        if mm:
            marker = mm.group(1)
        elif lines[i].strip() and last is not None:
            last.adjacent = False   # prose between a code block and a text block
        i += 1
    return [b for b in blocks if b.lang == "python"]


def matches(expected, actual):
    """expected (with ``...`` wildcards) equals actual, ignoring trailing spaces and
    trailing blank lines."""
    def norm(s):
        return "\n".join(line.rstrip() for line in s.rstrip().split("\n"))
    exp, act = norm(expected), norm(actual)
    if "..." not in exp:
        return exp == act
    parts = []
    for line in exp.split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.split("...")) + r"\n")
    return re.fullmatch("".join(parts), act + "\n") is not None


def script_name(page):
    return pathlib.Path(page).stem.replace("-", "_") + ".py"


def run_page(page, on_block):
    """Run the python blocks of ``page`` in one namespace; call
    ``on_block(block, printed_or_None, error_or_None)`` after each."""
    registry = sys.modules["flowgrad.tensor"]._VARIABLES     # (tf.tensor is the op)
    before = set(registry)
    name = script_name(page)
    namespace = {"__name__": "__main__", "__file__": name}
    source = []
    try:
        for b in parse(page):
            if b.marker == "no-test":
                on_block(b, None, None)
                continue
            if b.marker and b.marker.startswith("test-if:"):
                if not eval(b.marker[len("test-if:"):], namespace):
                    on_block(b, None, None)
                    continue
            first = len(source) + 1
            source += b.code.split("\n")[:-1]
            text = "\n".join(source) + "\n"
            linecache.cache[name] = (len(text), None, text.splitlines(True), name)
            code = compile("\n" * (first - 1) + b.code, name, "exec")
            out = io.StringIO()
            error = None
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    exec(code, namespace)
                except Exception as e:   # reported with the block's place in the page
                    error = e
            on_block(b, out.getvalue(), error)
            if error is not None:
                return
    finally:
        linecache.cache.pop(name, None)
        for key in set(registry) - before:      # pages name their variables: free the names
            registry[key].dispose()


def check_page(page):
    """Run a page's blocks; the list of failures (empty when every block ran and printed
    what the page shows)."""
    page = pathlib.Path(page).resolve()
    failures = []

    def check(b, printed, error):
        where = f"{os.path.relpath(page, ROOT)}:{b.lineno}"
        if printed is None:
            return
        if error is not None:
            failures.append(f"{where}: the block raised {type(error).__name__}: {error}")
        elif b.expected is not None and not matches(b.expected.code, printed):
            failures.append(f"{where}: the block printed\n{printed}\nbut the page shows "
                            f"(line {b.expected.lineno})\n{b.expected.code}")
    run_page(page, check)
    return failures


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_examples(page):
    # a fresh interpreter per page: the pages name their variables, change global settings,
    # and must print the same whatever ran before them
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGRAD_")}
    r = subprocess.run([sys.executable, __file__, "--check", str(page)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_guide_has_tested_examples():
    for name in ("custom-gradients.md", "debugging-gradients.md",
                 "derivatives-and-gradients.md", "porting-from-tfjs.md"):
        blocks = parse(DOCS / name)
        shown = [b for b in blocks if b.expected is not None and b.marker is None]
        assert len(shown) >= 3, f"{name}: fewer than 3 examples with their output"


def test_matches():
    assert matches("a\nb  \n\n", "a\nb")
    assert not matches("a\nb", "a\nc")
    assert matches("x = ...!\n...\nend", "x = 12!\nmore\nlines\nend")
    assert matches("x\n...\nend", "x\nend")
    assert not matches("x = ...!", "x = 12?")


def test_parse_markers(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("Intro.\n\n```python\nprint(1)\n```\n\n```text\n1\n```\n\n"
                    "<!-- no-test -->\n```python\nboom()\n```\n\nProse.\n\n```python\n"
                    "print(2)\n```\n\nNot the output:\n\n```text\n3\n```\n")
    blocks = parse(page)
    assert [b.marker for b in blocks] == [None, "no-test", None]
    assert blocks[0].expected.code == "1\n" and blocks[2].expected is None
    seen = []
    run_page(page, lambda b, out, err: seen.append((out, err)))
    assert seen == [("1\n", None), (None, None), ("2\n", None)]


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
            if isinstance(obj, (types.ModuleType, str, tf.names.Namespace)):
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


def _main(argv):
    """Print what each python block of the given pages prints."""
    for page in argv or PAGES:
        print(f"======== {page}")

        def show(b, printed, error):
            print(f"---- line {b.lineno}" + (f" ({b.marker})" if b.marker else ""))
            if printed:
                print(printed, end="")
            if error is not None:
                print(f"!!!! {type(error).__name__}: {error}")
            if b.expected is not None and printed is not None and error is None:
                print("     (matches the page)" if matches(b.expected.code, printed)
                      else "     (DIFFERS from the page)")
        run_page(page, show)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        found = [f for page in sys.argv[2:] for f in check_page(page)]
        print("\n\n".join(found))
        sys.exit(1 if found else 0)
    _main(sys.argv[1:])
