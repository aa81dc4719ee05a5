"""The package's import graph, read from its source: circles, imports up the layers, and
reaches into another module's underscore names. `python -m tests.architecture` prints them;
tests/test_architecture.py holds the package to them.

Every import counts, wherever it sits (top level or inside a function: a lazy import ties two
modules as surely as an eager one), and so do registry lookups through `sys.modules[...]`.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "flowgrad"

# The layers of DESIGN.md, lowest first. A module may import its own layer and the ones below.
# Modules are matched by the longest prefix listed here.
LAYERS: list[tuple[str, ...]] = [
    ("flowgrad.errors", "flowgrad.dtypes", "flowgrad.after_fork", "flowgrad.camel_case",
     "flowgrad.float_errors", "flowgrad.strings", "flowgrad.user_frames", "flowgrad.printing",
     "flowgrad.finalizer_interrupts"),
    ("flowgrad.backends", "flowgrad.buffer_pool"),
    ("flowgrad.thread_state", "flowgrad.recording"),
    ("flowgrad.engine",),
    ("flowgrad.scopes", "flowgrad.interceptors", "flowgrad.arg_checks"),
    ("flowgrad.tape",),
    ("flowgrad.tensor",),
    ("flowgrad.batching",),
    ("flowgrad.ops",),
    ("flowgrad.gradients", "flowgrad.custom", "flowgrad.jacobians", "flowgrad.vmap",
     "flowgrad.jit", "flowgrad.jit_closures", "flowgrad.jit_native",
     "flowgrad.jit_native_cache", "flowgrad.native_costs", "flowgrad.native_math",
     "flowgrad.fusion",
     "flowgrad.replay_buffers",
     "flowgrad.numpy_interop", "flowgrad.numpy_functions", "flowgrad.numpy_arrays",
     "flowgrad.numpy_linalg"),
    ("flowgrad.train",),
    ("flowgrad.distributed",),
    ("flowgrad.debug",),
    ("flowgrad.tfjs_engine", "flowgrad.cli", "flowgrad.demo", "flowgrad._stubgen",
     "flowgrad.__main__", "flowgrad"),
]


def layer_of(mod: str) -> int:
    best, rank = -1, -1
    for i, names in enumerate(LAYERS):
        for n in names:
            if (mod == n or mod.startswith(n + ".")) and len(n) > best:
                best, rank = len(n), i
    return rank


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)       # module -> modules it imports
    private: set[tuple[str, str, str]] = field(default_factory=set)  # (user, owner, _name)

    def circles(self) -> list[list[str]]:
        """The strongly connected components of more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in sorted(self.edges.get(v, ())):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
        for v in sorted(self.modules):
            if v not in index:
                visit(v)
        return sorted(out)

    def upward(self) -> list[tuple[str, str]]:
        """Imports from a module to one in a higher layer. A package's __init__ importing its
        own submodules is how a package is made, not a reach up."""
        ups = []
        for a, bs in self.edges.items():
            for b in bs:
                if b.startswith(a + "."):
                    continue
                if layer_of(b) > layer_of(a):
                    ups.append((a, b))
        return sorted(ups)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def build() -> Graph:
    g = Graph()
    for path in sorted(ROOT.rglob("*.py")):
        g.modules[module_name(path)] = path
    for mod, path in g.modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps: set[str] = set()
        aliases: dict[str, str] = {}          # local name -> flowgrad module it is bound to

        def add(target: str) -> str | None:
            while target and target not in g.modules:
                target = target.rpartition(".")[0]
            if target and target != mod:
                deps.add(target)
            return target or None

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("flowgrad"):
                        t = add(a.name)
                        if t and a.asname:
                            aliases[a.asname] = t
                        elif t:
                            aliases[a.name.split(".")[0]] = "flowgrad"
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, is_pkg, node)
                if not src.startswith("flowgrad"):
                    continue
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    if sub in g.modules:              # `from . import engine`: the submodule
                        add(sub)
                        aliases[a.asname or a.name] = sub
                        continue
                    owner = add(src)
                    if owner and a.name.startswith("_") and not a.name.startswith("__"):
                        g.private.add((mod, owner, a.name))
            elif isinstance(node, ast.Subscript):
                # sys.modules["flowgrad.x"]: a registry lookup is an import by another name
                v = node.value
                if (isinstance(v, ast.Attribute) and v.attr == "modules"
                        and isinstance(v.value, ast.Name) and v.value.id == "sys"
                        and isinstance(node.slice, ast.Constant)
                        and isinstance(node.slice.value, str)
                        and node.slice.value.startswith("flowgrad")):
                    t = add(node.slice.value)
                    if t:
                        aliases.setdefault(f"<sys:{t}>", t)
        # attribute reads through a module alias: E._tls
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                owner = aliases[node.value.id]
                if owner != mod:
                    g.private.add((mod, owner, node.attr))
        g.edges[mod] = deps
    return g


def report(g: Graph) -> str:
    lines = []
    circles = g.circles()
    lines.append(f"{len(circles)} import circles")
    for c in circles:
        lines.append("  " + " <-> ".join(c))
    ups = g.upward()
    lines.append(f"{len(ups)} imports up the layers")
    for a, b in ups:
        lines.append(f"  {a} -> {b}")
    lines.append(f"{len(g.private)} reaches into another module's underscore names")
    for user, owner, name in sorted(g.private):
        lines.append(f"  {user}: {owner}.{name}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(build()))
