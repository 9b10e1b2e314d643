"""The facade and the feature namespaces stay walkable: issue 29's bounds over ``ledger/api/``,
``ledger/jobs/`` and each feature's folder (no module over 450 lines, no class over 300, no
function over 80), so ``Ledger`` and ``Reader`` do not grow back into god objects."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "ledger"
FOLDERS = ["api", "jobs", "workflows", "schedules", "sources", "tokens", "retention", "limits"]
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 450, 300, 80


def _oversized(path: Path) -> list[str]:
    source = path.read_text()
    found = []
    if source.count("\n") > MODULE_LINES:
        found.append(f"{path.name}: {source.count(chr(10))} lines")
    for node in ast.walk(ast.parse(source)):
        limit = (
            CLASS_LINES
            if isinstance(node, ast.ClassDef)
            else FUNCTION_LINES
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            else None
        )
        if limit is not None and node.end_lineno is not None:
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{path.name}:{node.name}: {length} lines")
    return found


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_module_class_or_function_of_the_facade_or_a_feature_is_oversized(folder: str) -> None:
    """Every module of the folder is within the bounds, its classes and functions too."""
    modules = sorted((ROOT / folder).glob("*.py"))
    assert modules
    assert [found for path in modules for found in _oversized(path)] == []
