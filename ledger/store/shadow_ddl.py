"""Shadow-table DDL, derived from the live tables' own statements (pure string work).

A shadow's DDL is the live table's ``schema_*`` statements in ``ledger/store/sql`` with the
table and index names suffixed ``__rebuild`` (whole-word substitution, names from the
catalogue only), so a shadow has the same columns, types, storage options and indexes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.store.queries import load
from ledger.views.view import SHADOW_SUFFIX

if TYPE_CHECKING:
    from ledger.views.view import Projection

_INDEX_NAME = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)
_SAFE_NAME = re.compile(r"^jl_[a-z_]+$")
_SAFE_COLUMN = re.compile(r"^[a-z_]+$")


def shadow(name: str) -> str:
    """The shadow's name of a live table or index."""
    return name + SHADOW_SUFFIX


def safe_name(name: str) -> str:
    """``name`` if it is a jobledger table or index name (they are spliced into DDL)."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"not a jobledger table or index name: {name!r}")
    return name


def safe_column(name: str) -> str:
    """``name`` if it is a plain lower-case column name (they are spliced into SQL)."""
    if not _SAFE_COLUMN.match(name):
        raise ValueError(f"not a column name: {name!r}")
    return name


def projection_schema(backend: str, projection: Projection) -> tuple[str, list[str]]:
    """The live ``CREATE TABLE`` statement of a projection and its ``CREATE INDEX`` ones."""
    statements = [
        sql
        for name, sql in load(backend).items()
        if name == projection.schema_prefix or name.startswith(projection.schema_prefix + "_")
    ]
    tables = [sql for sql in statements if _INDEX_NAME.search(sql) is None]
    indexes = [sql for sql in statements if _INDEX_NAME.search(sql) is not None]
    if len(tables) != 1:
        raise ValueError(f"expected one CREATE TABLE for {projection.name}, got {len(tables)}")
    return tables[0], indexes


def index_names(indexes: Sequence[str]) -> list[str]:
    """The index names the ``CREATE INDEX`` statements create."""
    names = []
    for sql in indexes:
        match = _INDEX_NAME.search(sql)
        assert match is not None
        names.append(safe_name(match.group(1)))
    return names


def to_shadow(sql: str, projection: Projection) -> str:
    """A live schema statement rewritten for the shadow table (and shadow index names)."""
    table = safe_name(projection.table)
    sql = re.sub(rf"\b{table}\b", shadow(table), sql)
    for name in index_names([sql]) if _INDEX_NAME.search(sql) else []:
        sql = re.sub(rf"\b{name}\b", shadow(name), sql)
    return sql
