"""Printed output compared as a reader compares it: text exactly, computed numbers with a
tolerance.

Docs pages, docstring examples and examples print floats computed through many steps (100
Adam updates, a float32 matmul); another CPU or BLAS rounds the last digit differently
(``0.0365629`` here, ``0.0365628`` there). So every number in the expected text is matched
against the number at the same place in the output:

- floats (a ``.`` or an exponent on either side) agree when
  ``|a - b| <= max(ATOL, RTOL * max(|a|, |b|))``: RTOL = 1e-5 is ~50 float32 ulps, a
  last-digit difference of a 7-digit float32 print is ~3e-6 relative, a real change
  (``0.0366`` vs ``0.0365``, 3e-3) is far outside; ATOL = 1e-6 lets values that are zero up
  to float32 rounding (``1.2e-08`` vs ``-3e-09``) agree;
- integers (no ``.``, no exponent, on both sides: counts, shapes, sizes) must be equal;
- a number is a token not glued to a word or another number (the ``32`` of ``float32``,
  the digits of ``1.2.3`` or of ``x1`` are text);
- everything else is compared exactly, with the caller's ``...`` wildcards.

``FloatTolerantChecker`` is doctest's OutputChecker with this fallback; the root
``conftest.py`` installs it for pytest's ``--doctest-modules``.
"""
import doctest
import re

RTOL = 1e-5
ATOL = 1e-6

_NUM = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
# not preceded by a word character or a dot, not followed by one or by ".<digit>"
NUMBER = re.compile(rf"(?<![\w.]){_NUM}(?![\w]|\.\d)")
_GROUP = rf"((?<![\w.]){_NUM}(?![\w]|\.\d))"


def _is_int(s):
    return not any(c in s for c in ".eE")


def numbers_close(want, got, rtol=RTOL, atol=ATOL):
    """Two printed numbers agree: integers exactly, floats within the tolerance."""
    if _is_int(want) and _is_int(got):
        return int(want) == int(got)
    a, b = float(want), float(got)
    return abs(a - b) <= max(atol, rtol * max(abs(a), abs(b)))


def _literal(text, whitespace):
    """Regex for a piece of expected text without wildcards: its numbers become groups."""
    out, nums, pos = [], [], 0
    for m in NUMBER.finditer(text):
        out.append(_escape(text[pos:m.start()], whitespace))
        out.append(_GROUP)
        nums.append(m.group())
        pos = m.end()
    out.append(_escape(text[pos:], whitespace))
    return "".join(out), nums


def _escape(text, whitespace):
    if not whitespace:
        return re.escape(text)
    return r"\s+".join(re.escape(p) for p in re.split(r"\s+", text))


def _match(pattern, nums, got, flags=0):
    m = re.fullmatch(pattern, got, flags)
    return m is not None and all(numbers_close(w, g) for w, g in zip(nums, m.groups()))


def page_output_matches(expected, actual):
    """The docs pages' rule: ``expected`` equals ``actual`` up to trailing spaces, trailing
    blank lines and number tolerance; a line ``...`` stands for any lines (none included),
    ``...`` inside a line for any characters of that line."""
    def norm(s):
        return "\n".join(line.rstrip() for line in s.rstrip().split("\n"))
    exp, act = norm(expected), norm(actual)
    if exp == act:
        return True
    parts, nums = [], []
    for line in exp.split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = []
        for piece in line.split("..."):
            regex, found = _literal(piece, whitespace=False)
            pieces.append(regex)
            nums += found
        parts.append("[^\n]*?".join(pieces) + r"\n")
    return _match("".join(parts), nums, act + "\n")


class FloatTolerantOutputs:
    """Mixin for a doctest OutputChecker: when the exact check fails, numbers are compared
    with the tolerance (the example's ELLIPSIS and NORMALIZE_WHITESPACE still apply)."""

    def check_output(self, want, got, optionflags):
        if super().check_output(want, got, optionflags):
            return True
        if not optionflags & doctest.DONT_ACCEPT_BLANKLINE:
            want = re.sub(r"(?m)^%s\s*?$" % re.escape(doctest.BLANKLINE_MARKER), "", want)
        whitespace = bool(optionflags & doctest.NORMALIZE_WHITESPACE)
        if whitespace:
            want, got = want.strip(), got.strip()
        pieces = want.split(doctest.ELLIPSIS_MARKER) if optionflags & doctest.ELLIPSIS \
            else [want]
        regexes, nums = [], []
        for piece in pieces:
            regex, found = _literal(piece, whitespace)
            regexes.append(regex)
            nums += found
        return bool(nums) and _match(".*?".join(regexes), nums, got, re.S)


class FloatTolerantChecker(FloatTolerantOutputs, doctest.OutputChecker):
    pass


def install_in_pytest_doctest():
    """Make pytest's --doctest-modules use the tolerant checker (on top of pytest's own
    checker class, so its NUMBER, ALLOW_UNICODE and ALLOW_BYTES options keep working).
    pytest has no public hook for the checker: this sets its module-level CHECKER_CLASS
    (present since pytest 3.x); tests/test_docs.py checks that it took effect."""
    import _pytest.doctest as pd
    base = pd._get_checker().__class__
    if not issubclass(base, FloatTolerantOutputs):
        pd.CHECKER_CLASS = type("FloatTolerantChecker", (FloatTolerantOutputs, base), {})
