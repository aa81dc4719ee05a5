"""The examples of docs/*.md, parsed and run with Sybil.

Format of a page (the pages are written so; new pages must keep it):

- every ```python block runs, in page order, in one namespace per page (Sybil's document
  namespace);
- a ```text block that follows a python block, with only blank lines between, is what that
  block prints, compared by ``doctools.page_output_matches`` (``...`` wildcards, numbers with
  a tolerance);
- ``<!-- no-test -->`` just before a python block: the block is not run;
  ``<!-- test-if: EXPR -->``: it runs only when EXPR, evaluated in the page's namespace, is
  true; ``<!-- needs: MODULE EXTRA -->``: it runs only where MODULE can be imported, which
  ``pip install -e '.[EXTRA]'`` installs and the test extra does not (tests/test_docs.py
  reports each such block as a test that skips with that reason) (all three become Sybil
  skip regions, evaluated by Sybil's ``Skipper``);
- the blocks of a page run as one script named after the page (``debugging_gradients.py``
  for ``debugging-gradients.md``), its lines numbered across the blocks that ran, so that the
  places debug reports name (file, line, source text) read as in a user's script.

Sybil does the lexing of fenced blocks, the document model (regions in order, one namespace),
skipping and the evaluation protocol. What is ours: pairing a python block with the text block
after it (Sybil's own Markdown parsers check output only in doctest ``>>>`` form), the two
marker spellings the pages already use, and the evaluator that runs a block as part of the
page's script and compares what it printed.

    python tests/docpages.py docs/debugging-gradients.md     # what each block prints
    python tests/docpages.py --check PAGE [--must-run=LINE]  # its failures; exit status 1
"""
import contextlib
import dataclasses
import io
import linecache
import pathlib
import re
import sys
import traceback
import unittest
import warnings

from sybil import Region, Sybil
from sybil.evaluators.skip import Skipper
from sybil.example import SybilFailure
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

from doctools import page_output_matches

_MARKER = re.compile(r"^<!--\s*(no-test|test-if:(.*?)|needs:\s*([\w.]+)\s+(\w+))\s*-->[ \t]*$",
                     re.M)


def blocks_needing_extras(page):
    """(line of the python block, module, extra) for each ``needs:`` marker of ``page``."""
    return [(s.line, *s.marker.split()[1:]) for _, r in SYBIL.parse(pathlib.Path(page)).regions
            if isinstance(s := r.parsed, Snippet) and (s.marker or "").startswith("needs:")]


@dataclasses.dataclass
class Snippet:
    code: str
    line: int                       # the page line of its first line of code
    expected: str = None            # the text block that follows it, if any
    expected_line: int = None
    marker: str = None              # "no-test", "test-if: EXPR" or "needs: MODULE EXTRA"


def script_name(page):
    return pathlib.Path(page).stem.replace("-", "_") + ".py"


class PageParser:
    """Sybil parser: python blocks with their output, and the markers before them."""

    def __init__(self):
        self.lexer = FencedCodeBlockLexer(r"(?:python|text)[ \t]*")   # "```python " too
        self.skipper = Skipper("no-test")

    def __call__(self, document):
        text = document.text
        blocks = sorted(self.lexer(document), key=lambda r: r.start)
        python = [b for b in blocks if b.lexemes["language"].strip() == "python"]
        markers = {}
        for m in _MARKER.finditer(text):
            following = next((b for b in blocks if b.start > m.end()), None)
            if following not in python or text[m.end():following.start].strip():
                raise ValueError(f"{document.path}:{text.count(chr(10), 0, m.start()) + 1}: "
                                 f"{m.group(0)} must be just before a ```python block")
            markers[following.start] = m.group(1)
            expr = m.group(2)
            if m.group(3):      # needs: MODULE EXTRA
                expr = f"__import__('importlib.util').util.find_spec({m.group(3)!r}) is not None"
            # Sybil's skip: "next" skips the next example; "if(cond)" skips it when cond is true
            yield Region(m.start(), m.end(),
                         ("next", None if expr is None else f"if(not ({expr.strip()}))"),
                         self.skipper)

        def line_after_fence(region):
            return text.count("\n", 0, region.start) + 2
        for b in python:
            snippet = Snippet(str(b.lexemes["source"]), line_after_fence(b),
                              marker=markers.get(b.start))
            end = b.end
            nxt = next((n for n in blocks if n.start > b.start), None)
            if nxt is not None and nxt.lexemes["language"].strip() == "text" \
                    and not text[b.end:nxt.start].strip():
                snippet.expected = str(nxt.lexemes["source"])
                snippet.expected_line = line_after_fence(nxt)
                end = nxt.end
            yield Region(b.start, end, snippet, run_snippet)


class _Script:
    """The page's blocks so far, as one script: its name and its lines."""

    def __init__(self, path):
        self.name = script_name(path)
        self.lines = []


_SCRIPTS = {}       # document -> _Script, dropped by run_page when the page ends


def run_snippet(example):
    """Sybil evaluator: run the block as the next lines of the page's script; a non-empty
    return (what it printed, against the page) is Sybil's failure."""
    snippet = example.parsed
    script = _SCRIPTS.setdefault(example.document, _Script(example.document.path))
    first = len(script.lines) + 1
    script.lines += snippet.code.split("\n")[:-1]
    source = "\n".join(script.lines) + "\n"
    linecache.cache[script.name] = (len(source), None, source.splitlines(True), script.name)
    code = compile("\n" * (first - 1) + snippet.code, script.name, "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(code, example.namespace)
    printed = out.getvalue()
    example.printed = printed
    if snippet.expected is not None and not page_output_matches(snippet.expected, printed):
        return (f"the block printed\n{printed}\nbut the page shows (line "
                f"{snippet.expected_line})\n{snippet.expected}")
    return ""


SYBIL = Sybil(parsers=[PageParser()], patterns=["*.md"])


def run_page(page, on_block):
    """Run the examples of ``page`` in order; ``on_block(snippet, printed, error)`` after each
    python block (``printed`` None: not run; ``error``: the SybilFailure for a mismatch, the
    exception it raised, which ends the page). Variables the page made are freed after."""
    registry = sys.modules["flowgrad.tensor"]._VARIABLES     # (tf.tensor is the op)
    before = set(registry)
    document = SYBIL.parse(pathlib.Path(page))
    document.namespace.update(__name__="__main__", __file__=script_name(page))
    try:
        for example in document.examples():
            snippet = example.parsed
            if not isinstance(snippet, Snippet):
                example.evaluate()          # a marker: installs Sybil's skipper
                continue
            try:
                example.evaluate()
            except unittest.SkipTest:
                on_block(snippet, None, None)
            except SybilFailure as e:
                on_block(snippet, getattr(example, "printed", ""), e)
            except Exception as e:   # reported with the block's place in the page
                on_block(snippet, "", e)
                return
            else:
                on_block(snippet, getattr(example, "printed", None), None)
    finally:
        script = _SCRIPTS.pop(document, None)
        if script is not None:
            linecache.cache.pop(script.name, None)
        for key in set(registry) - before:      # pages name their variables: free the names
            registry[key].dispose()


def check_page(page, root, must_run=()):
    """The failures of a page (empty when every block ran and printed what the page shows,
    and the blocks at the lines ``must_run`` were not skipped)."""
    page = pathlib.Path(page).resolve()
    failures = []
    skipped = set()

    def check(snippet, printed, error):
        where = f"{page.relative_to(root)}:{snippet.line}"
        if printed is None and error is None:
            skipped.add(snippet.line)
        if isinstance(error, SybilFailure):
            failures.append(f"{where}: {error.result}")
        elif error is not None:
            tb = "".join(traceback.format_exception(error)[1:])     # from the page's frames
            failures.append(f"{where}: the block raised {type(error).__name__}: {error}\n{tb}")
    run_page(page, check)
    failures += [f"{page.relative_to(root)}:{line}: the block did not run (its marker skipped it)"
                 for line in must_run if line in skipped]
    return failures


def show_pages(pages):
    """Print what each python block of the pages prints (to write their ```text blocks)."""
    for page in pages:
        print(f"======== {page}")

        def show(snippet, printed, error):
            print(f"---- line {snippet.line}" + (f" ({snippet.marker})" if snippet.marker else "")
                  + (" (not run)" if printed is None else ""))
            if printed:
                print(printed, end="")
            if isinstance(error, SybilFailure):
                print("     (DIFFERS from the page)")
            elif error is not None:
                print(f"!!!! {type(error).__name__}: {error}")
            elif snippet.expected is not None and printed is not None:
                print("     (matches the page)")
        run_page(page, show)


def main(argv):
    import flowgrad  # noqa: F401 - run_page reads its variable registry
    root = pathlib.Path(__file__).resolve().parent.parent
    if argv[:1] == ["--check"]:
        must_run = [int(a.split("=")[1]) for a in argv if a.startswith("--must-run=")]
        found = [f for page in argv[1:] if not page.startswith("--")
                 for f in check_page(page, root, must_run)]
        print("\n\n".join(found))
        return 1 if found else 0
    show_pages(argv or sorted((root / "docs").glob("*.md")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
