"""The house's bounds, kept true by a test (issue 29): a newcomer walks it in one read.

Outside tests: no module over 450 lines, no class over 300, no function over 80; no function
with more than 8 positional parameters (keyword-only options are fine: the idiom of a Python
API); no module name (``errors.py`` and ``__init__.py`` aside) in three or more layers, a
layer being an entry of the layers contract in pyproject.toml (its sub-packages included; the
siblings of one entry, ``|`` or ``:``, count as one layer).

``KNOWN`` lists what broke a bound when the test came and is being taken apart; an entry that
no longer breaks its bound fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "projections", "cli")
MODULE_LINES = 450
CLASS_LINES = 300
FUNCTION_LINES = 80
POSITIONAL = 8
SHARED_NAMES = {"errors.py", "__init__.py"}

KNOWN: set[str] = set()
"""Bounds broken when this test came (issue 29 takes them apart)."""


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _layers() -> list[list[str]]:
    """The layers contract's entries, each a list of sibling packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [[name.strip() for name in re.split(r"[|:]", entry)] for entry in layers]


def _layer_of(module: Path, layers: list[list[str]]) -> int | None:
    dotted = ".".join(module.relative_to(ROOT).with_suffix("").parts)
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, entry in enumerate(layers):
        for package in entry:
            inside = dotted == package or dotted.startswith(package + ".")
            if inside and (best is None or len(package) > best[0]):
                best = (len(package), index)
    return None if best is None else best[1]


def _definitions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """Every class and function with its qualified name (``Class.method``)."""
    found: list[tuple[str, ast.AST]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((name, child))
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)


def breaches() -> dict[str, str]:
    """Every bound broken outside tests, by key, with what breaks it."""
    found: dict[str, str] = {}
    layers = _layers()
    homes: dict[str, set[int]] = defaultdict(set)
    for module in _modules():
        rel = module.relative_to(ROOT).as_posix()
        text = module.read_text()
        lines = text.count("\n")
        if lines > MODULE_LINES:
            found[f"module {rel}"] = f"{lines} lines"
        layer = _layer_of(module, layers)
        if layer is not None and module.name not in SHARED_NAMES:
            homes[module.name].add(layer)
        for name, node in _definitions(ast.parse(text)):
            assert isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if isinstance(node, ast.ClassDef):
                if length > CLASS_LINES:
                    found[f"class {rel}:{name}"] = f"{length} lines"
                continue
            if length > FUNCTION_LINES:
                found[f"function {rel}:{name}"] = f"{length} lines"
            if _positional(node) > POSITIONAL:
                found[f"positional {rel}:{name}"] = f"{_positional(node)} positional parameters"
    for name, where in homes.items():
        if len(where) >= 3:
            found[f"name {name}"] = "in layers " + ", ".join("|".join(layers[i]) for i in where)
    return found


def test_no_new_bound_is_broken() -> None:
    """Nothing outside ``KNOWN`` breaks a bound."""
    new = {key: why for key, why in breaches().items() if key not in KNOWN}
    assert new == {}


def test_the_known_breaches_are_still_breaches() -> None:
    """An entry of ``KNOWN`` that keeps its bound now is taken off the list."""
    assert sorted(KNOWN - set(breaches())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a, b, c, d, e, f, g, h, i): pass\n", {"positional m.py:f"}),
        ("class C:\n    def m(self, a, b, c, d, e, f, g, h): pass\n", set()),
        ("def f(a, *, b, c, d, e, f, g, h, i, j): pass\n", set()),
        ("def f():\n" + "    x = 1\n" * 80, {"function m.py:f"}),
        ("def f():\n" + "    x = 1\n" * 79, set()),
    ],
)
def test_the_bounds_are_measured_as_stated(
    source: str, expected: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measure itself: positional parameters after ``self``, keyword-only ones free,
    a function's lines from its ``def`` to its last line."""
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "m.py").write_text(source)
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.importlinter.contracts]]\ntype = "layers"\nlayers = ["ledger"]\n'
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    found = {key.replace("ledger/", "") for key in breaches() if not key.startswith("name")}
    assert found == expected


def test_siblings_of_one_layer_count_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both sibling spellings of import-linter (``|`` independent, ``:`` not) are one layer, so
    a name shared by two feature namespaces is in one layer, not two."""
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.importlinter.contracts]]\ntype = "layers"\nlayers = ["top", "a : b", "c | d"]\n'
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert _layers() == [["top"], ["a", "b"], ["c", "d"]]
