"""The package's shape: no import cycle between modules or between packages, and each layer
imports only the layers below it (ARCHITECTURE.md). Imports inside functions and under
TYPE_CHECKING count too: a cycle hidden in a function is still a cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "deltakeeper"
# Bottom to top; a module imports only from its own layer or those before it.
LAYERS = (
    ("delta",),
    ("units",),
    ("compaction",),
    ("maintenance",),
    ("resources",),
    ("runtime",),
    ("k8s", "standalone"),
    ("cli", "__main__"),
)


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package's modules that `name` imports, wherever in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                )
            # `from pkg import mod` imports the module; `from mod import name`, the module.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "deltakeeper":
                yield target


def graph(level: int) -> dict[str, set[str]]:
    """Import edges between modules (level 0) or between packages `level` deep."""
    found = modules()
    known = set(found)
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        src = _cut(name, level)
        for target in imports(name, path, known):
            dst = _cut(target, level)
            if dst != src:
                edges.setdefault(src, set()).add(dst)
    return edges


def _cut(name: str, level: int) -> str:
    return name if level == 0 else ".".join(name.split(".")[: level + 1])


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `edges`, as a path that ends where it starts; None when there is none."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("level", [0, 1, 2], ids=["modules", "packages", "subpackages"])
def test_no_import_cycle(level: int) -> None:
    assert cycle(graph(level)) is None


def test_the_finder_finds_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None


def test_each_layer_imports_only_the_layers_below_it() -> None:
    rank = {top: i for i, layer in enumerate(LAYERS) for top in layer}
    upward = sorted(
        f"{src} -> {dst}"
        for src, dsts in graph(1).items()
        for dst in dsts
        if rank[src.split(".")[1]] < rank[dst.split(".")[1]]
    )
    assert upward == []


def test_every_top_level_module_has_a_layer() -> None:
    tops = {name.split(".")[1] for name in modules() if name != "deltakeeper"}
    assert tops <= {top for layer in LAYERS for top in layer}
