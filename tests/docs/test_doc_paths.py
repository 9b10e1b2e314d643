"""The pages name only files that exist: a module moved or renamed (issue 29 moved many) is
found in every page that names it, not by a reader who follows the path and finds nothing.

A path is a code span that starts with one of the project's folders (``ledger/``,
``projections/``, ``cli/``, ``tests/``, ``bench/``, ``examples/``), optionally ending in
``:name`` (a class or function in it); ``{a,b}`` stands for both. A module may be named
without its ``.py``. Spans with ``*`` or ``<...>`` are patterns, not paths.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PATH = re.compile(r"`((?:ledger|projections|cli|tests|bench|examples)/[\w/{},.\-]*?)(?::[\w.]+)?`")


def named_paths(text: str) -> list[tuple[int, str]]:
    """Each path a page's text names, with its line, braces expanded."""
    found: list[tuple[int, str]] = []
    for match in PATH.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        path = match.group(1)
        if "{" in path:
            head, rest = path.split("{", 1)
            choices, tail = rest.split("}", 1)
            found += [(line, f"{head}{choice}{tail}") for choice in choices.split(",")]
        elif "*" not in path and "<" not in path:
            found.append((line, path))
    return found


def _exists(path: str) -> bool:
    where = ROOT / path.rstrip("/")
    return where.exists() or where.with_name(where.name + ".py").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = [f"line {n}: {p}" for n, p in named_paths(page.read_text()) if not _exists(p)]
    assert missing == []


def test_the_paths_are_read_as_stated() -> None:
    """The reading itself: braces expand, ``:name`` is dropped, patterns are skipped, and a
    path that is not there is reported."""
    text = (
        "`ledger/store/{sqlite,postgres}/store.py` `ledger/core/state.py:evolve`\n"
        "`tests/*.py` `ledger/nowhere.py`"
    )
    assert named_paths(text) == [
        (1, "ledger/store/sqlite/store.py"),
        (1, "ledger/store/postgres/store.py"),
        (1, "ledger/core/state.py"),
        (2, "ledger/nowhere.py"),
    ]
    assert [_exists(p) for _, p in named_paths(text)] == [True, True, True, False]
