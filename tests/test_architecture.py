"""The package's structure (DESIGN.md, "Layers"): read from the source by tests/architecture.py.

No two modules import each other (directly or round a circle, lazy imports and
``sys.modules`` lookups included), no module reads another's underscore names, and at most a
few imports run up the layers, each listed here with the reason it is allowed.
"""
import functools

import architecture

# imports up the layers that are allowed, and why
ALLOWED_UP: dict[tuple[str, str], str] = {}


@functools.lru_cache(maxsize=1)
def graph():
    # (built once for the tests that read the package as it is: ~1 s a build)
    return architecture.build()


def test_no_import_circles():
    circles = graph().circles()
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_no_reach_into_underscore_names():
    reaches = sorted(graph().private)
    assert not reaches, "modules reading another module's underscore names:\n" + "\n".join(
        f"{user}: {owner}.{name}" for user, owner, name in reaches)


def test_imports_up_the_layers_are_the_allowed_few():
    ups = [u for u in graph().upward() if u not in ALLOWED_UP]
    assert not ups, "imports up the layers:\n" + "\n".join(f"{a} -> {b}" for a, b in ups)
    assert len(ALLOWED_UP) <= 3


def test_every_module_has_a_layer():
    g = graph()
    assert [m for m in g.modules if architecture.layer_of(m) < 0] == []


def test_the_checker_sees_what_it_checks(tmp_path, monkeypatch):
    """The measurement itself: a planted circle, reach and upward import are found."""
    pkg = tmp_path / "flowgrad"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from . import tensor\n")
    (pkg / "tensor.py").write_text("from .errors import _secret\n"
                                   "def f():\n    from . import errors\n")
    monkeypatch.setattr(architecture, "ROOT", pkg)
    g = architecture.build()
    assert g.circles() == [["flowgrad.errors", "flowgrad.tensor"]]
    assert g.private == {("flowgrad.tensor", "flowgrad.errors", "_secret")}
    assert ("flowgrad.errors", "flowgrad.tensor") in g.upward()


def _page_rows():
    """(section number, module name) of every table row of docs/architecture.md."""
    import re
    from pathlib import Path
    text = (Path(architecture.ROOT).parent / "docs" / "architecture.md").read_text()
    rows, section = [], -1
    for line in text.splitlines():
        if line.startswith("### "):
            section += 1
        m = re.match(r"\| ((?:`[\w.]+`(?:, )?)+) \|", line)
        if m and section >= 0:
            rows += [(section, name) for name in re.findall(r"`([\w.]+)`", m.group(1))]
    return rows


def test_the_architecture_page_lists_every_module_in_layer_order():
    g = graph()
    top = {m.split(".")[1] for m in g.modules if m.count(".") >= 1}
    listed = {name for _, name in _page_rows()}
    assert top - listed == set(), "modules the architecture page does not list"
    assert listed - top == set(), "the architecture page lists modules that do not exist"
    # sections go up the layers: each one's modules all sit above the previous one's
    spans = {}
    for section, name in _page_rows():
        layer = architecture.layer_of(f"flowgrad.{name}")
        lo, hi = spans.get(section, (layer, layer))
        spans[section] = (min(lo, layer), max(hi, layer))
    ordered = [spans[k] for k in sorted(spans)]
    for (lo1, hi1), (lo2, hi2) in zip(ordered, ordered[1:]):
        assert hi1 < lo2, ordered


def test_the_readme_layout_names_every_module():
    import re
    from pathlib import Path
    readme = (Path(architecture.ROOT).parent / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)(?:\.py|/)`", layout))
    top = {m.split(".")[1] for m in graph().modules if m.count(".") >= 1}
    assert top - named == set()
    assert "docs/architecture.md" in layout
