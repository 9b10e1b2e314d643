"""How a PostgreSQL transaction's cursor runs the read seam's statements.

Event pages and live rows come back as binary results in tuple rows: bytea arrives as raw
bytes instead of hex text to parse, uuid as 16 bytes, and no dict is built per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Identifier

from ledger.store.reads import StoredRow
from ledger.views.view import Projection, Row

LIVE_ROWS_BATCH = 10_000
"""Rows a server-side cursor sends per round trip when reading a whole view."""


class PostgresRunner:
    """:class:`~ledger.store.reads.StatementRunner` on one psycopg cursor."""

    def __init__(self, cursor: psycopg.Cursor[DictRow]) -> None:
        self._cursor = cursor

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        self._cursor.execute(sql.encode(), params)
        return self._cursor.fetchall() if self._cursor.description else []

    def stored_events(self, sql: str, params: Mapping[str, Any]) -> list[StoredRow]:
        with self._cursor.connection.cursor(row_factory=tuple_row) as cursor:
            cursor.execute(sql, params, prepare=True, binary=True)
            return cursor.fetchall()

    def table_rows(self, projection: Projection) -> Iterator[Row]:
        query = SQL("SELECT {} FROM {}").format(
            SQL(", ").join(Identifier(c) for c in projection.columns), Identifier(projection.table)
        )
        # A server-side cursor: the rows stream in batches instead of all at once.
        connection = self._cursor.connection
        columns = projection.columns
        with connection.cursor(name=f"jl_rows_{projection.name}", row_factory=tuple_row) as rows:
            rows.itersize = LIVE_ROWS_BATCH
            rows.execute(query, binary=True)
            while batch := rows.fetchmany(LIVE_ROWS_BATCH):
                for row in batch:
                    yield dict(zip(columns, row, strict=True))
