"""Binary COPY into a table, and the column types it needs (shadow loads, audit rows, the
events and queue rows of a large enqueue).

COPY sends values as the server stores them: no SQL to parse per row, no arrays to build and
unpack (a third of the audit runner's time went into arrays for ``INSERT … unnest``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

import psycopg
from psycopg.copy import QueuedLibpqWriter
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composable, Identifier
from psycopg.types.string import BytesBinaryDumper

from ledger.views.view import Row

ARRAY_TYPES: dict[str, Composable] = {
    name: SQL(name + "[]")  # from this fixed set only
    for name in ("uuid", "text", "integer", "bigint", "bytea", "boolean")
}
"""Array casts for the column types the views use (spliced into SQL, so a fixed set)."""


def _checked_type(name: str) -> str:
    """A column type the loads know how to send (the fixed set of :data:`ARRAY_TYPES`)."""
    if name not in ARRAY_TYPES:
        raise ValueError(f"a view column of unexpected type {name!r}")
    return name


def _values(columns: Sequence[str]) -> Callable[[Row], Sequence[Any]]:
    """A row's values in ``columns`` order (itemgetter: a C call per row)."""
    if len(columns) == 1:
        return lambda row: (row[columns[0]],)
    return itemgetter(*columns)


def column_types(cursor: psycopg.Cursor[DictRow], table: str) -> dict[str, str]:
    """Each column's type, asked of ``table`` itself (a shadow may have a new column)."""
    cursor.execute(
        "SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        (table,),
    )
    return {row["attname"]: _checked_type(row["type"]) for row in cursor.fetchall()}


def copy_rows(
    cursor: psycopg.Cursor[DictRow], table: str, columns: Sequence[str], rows: list[Row]
) -> None:
    """Binary COPY of ``rows`` (the replay's types) into ``table``'s ``columns``."""
    if not rows:
        return
    types = column_types(cursor, table)
    copy_values(cursor, table, columns, [types[c] for c in columns], map(_values(columns), rows))


def copy_values(
    cursor: psycopg.Cursor[DictRow],
    table: str,
    columns: Sequence[str],
    types: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> None:
    """Binary COPY of ``rows`` (values in ``columns`` order, of the column ``types``: binary
    COPY sends no type names, so a wrong one is refused as bad data) into ``table``."""
    query = SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        Identifier(table), SQL(", ").join(Identifier(c) for c in columns)
    )
    # By type name, psycopg picks the last dumper registered for bytea: psycopg.dbapi20's,
    # in Python (a call per value: a sixth of a bulk enqueue's COPY formatting, profiled).
    # Registered without a class, psycopg's own (in C with psycopg[binary]) serves only the
    # look-ups by type name that set_types makes, and only on this cursor.
    cursor.adapters.register_dumper(None, BytesBinaryDumper)
    # The queued writer sends on its own thread while this one formats the next rows.
    with cursor.copy(query, writer=QueuedLibpqWriter(cursor)) as copy:
        copy.set_types([_checked_type(name) for name in types])
        write_row = copy.write_row
        for row in rows:
            write_row(row)
