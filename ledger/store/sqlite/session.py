"""How a SQLite transaction's cursor runs the read seam's statements."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from eventsourcing.sqlite import SQLiteCursor

from ledger.store.ids import IdAdapter
from ledger.store.reads import StoredRow
from ledger.store.shadow_ddl import safe_column, safe_name

if TYPE_CHECKING:
    from ledger.views.view import Projection, Row

LIVE_ROWS_BATCH = 10_000
"""Rows fetched per call when reading a whole view."""


_ID_COLUMNS = frozenset({"job_id", "run_id", "recovered_from", "workflow_run"})
_BOOLEAN_COLUMNS = frozenset({"enabled", "paused"})
"""Columns SQLite stores as integers that the views hold as booleans."""
"""Columns holding ids (32-hex text here, ``UUID`` in the replay's rows)."""


class SQLiteRunner:
    """:class:`~ledger.store.reads.StatementRunner` on one eventsourcing SQLite cursor."""

    def __init__(self, cursor: SQLiteCursor, ids: IdAdapter) -> None:
        self._cursor = cursor
        self._ids = ids

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        self._cursor.execute(sql, params)
        return list(self._cursor.fetchall())

    def stored_events(self, sql: str, params: Mapping[str, Any]) -> list[StoredRow]:
        self._cursor.execute(sql, params)
        uuid = self._ids.uuid
        rows = self._cursor.fetchall()
        if rows and len(rows[0]) > 5:  # a tailing read's (its transaction id, always 0)
            return [(row[0], uuid(row[1]), row[2], row[3], row[4], row[5]) for row in rows]
        return [(row[0], uuid(row[1]), row[2], row[3], row[4]) for row in rows]

    def table_rows(self, projection: Projection) -> Iterator[Row]:
        columns = ", ".join(safe_column(c) for c in projection.columns)
        self._cursor.execute(f"SELECT {columns} FROM {safe_name(projection.table)}")
        cursor = self._cursor.sqlite_cursor  # eventsourcing's wrapper has no fetchmany
        while batch := cursor.fetchmany(LIVE_ROWS_BATCH):
            for row in batch:
                values = dict(zip(projection.columns, row, strict=True))
                for column in _ID_COLUMNS.intersection(values):
                    if values[column] is not None:
                        values[column] = self._ids.uuid(values[column])
                for column in _BOOLEAN_COLUMNS.intersection(values):
                    values[column] = bool(values[column])
                yield values
