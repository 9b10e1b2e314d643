"""The views' write transaction on SQLite: audit rows by ``executemany``."""

from __future__ import annotations

from eventsourcing.sqlite import SQLiteCursor

from ledger.core.codec import EventCodec
from ledger.store.ids import IdAdapter
from ledger.store.sqlite.session import SQLiteRunner
from ledger.store.sqlite.shadows import SQLiteShadowTables
from ledger.store.views import ViewTables
from ledger.views.view import Row


class SQLiteViewTables(ViewTables):
    """A ``BEGIN IMMEDIATE`` transaction, which already excludes every other writer."""

    def __init__(
        self,
        cursor: SQLiteCursor,
        queries: dict[str, str],
        ids: IdAdapter,
        codec: EventCodec,
        shadows: SQLiteShadowTables,
    ) -> None:
        super().__init__(SQLiteRunner(cursor, ids), queries, ids, codec, shadows)
        self._cursor = cursor

    def insert_audit(self, rows: list[Row]) -> None:
        if rows:
            stored = [self.ids.stored_params(row) for row in rows]
            self._cursor.executemany(self.queries["audit_insert"], stored)
