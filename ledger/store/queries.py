"""Named SQL queries, loaded from the ``.sql`` files shipped with the package.

Each query in ``ledger/store/sql/<backend>.sql`` (and in
``ledger/store/sql/<backend>_<feature>.sql``, the
queries of one feature, read after it in name order) starts with ``-- name: <entity>_<verb>``
and a one-line comment saying what it returns and which index it relies on.

A line ``-- include: <name>`` stands for the body of the query ``<name>``, defined earlier: an
expression several queries must spell exactly alike (the tailing readers' frontier) is
written once, as a ``fragment_*`` query that is never run on its own.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIRECTORY = Path(__file__).with_name("sql")
"""The ``.sql`` files, beside this module in the installed package (a plain path, not
``importlib.resources``: that import alone was ~4 ms of every CLI command's start, for a
package that is never run from a zip)."""

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$")
_INCLUDE = re.compile(r"^(\s*)--\s*include:\s*(\w+)\s*$")


@cache
def load(backend: str) -> dict[str, str]:
    """All queries of ``backend`` ("postgres" or "sqlite"), by name, in file order."""
    directory = SQL_DIRECTORY
    features = sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.name.startswith(f"{backend}_") and entry.name.endswith(".sql")
    )
    queries: dict[str, list[str]] = {}
    for file_name in (f"{backend}.sql", *features):
        current: list[str] | None = None
        for line in directory.joinpath(file_name).read_text(encoding="utf-8").splitlines():
            match = _NAME.match(line)
            include = _INCLUDE.match(line)
            if match:
                name = match.group(1)
                if name in queries:
                    raise ValueError(f"query {name!r} is defined twice ({file_name})")
                current = queries[name] = []
            elif include and current is not None:
                indent, included = include.groups()
                if included not in queries:
                    raise ValueError(f"{file_name} includes {included!r} before defining it")
                body = "\n".join(queries[included]).strip().splitlines()
                current.extend(indent + text for text in body)
            elif current is not None and not line.lstrip().startswith("--"):
                current.append(line)
    return {name: "\n".join(body).strip() for name, body in queries.items()}


def schema_statements(backend: str) -> list[str]:
    """The ``schema_*`` statements, in the order they must run."""
    return [sql for name, sql in load(backend).items() if name.startswith("schema_")]
