"""Shadow tables on SQLite: ``executemany`` loads; indexes built at the swap.

SQLite cannot rename an index, so a shadow gets its indexes under the live names when it is
swapped in. A write transaction is ``BEGIN IMMEDIATE``, which already excludes every other
writer, so :meth:`SQLiteShadowTables.lock_for_swap` has nothing to take.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from uuid import UUID

from eventsourcing.sqlite import SQLiteCursor

from ledger.store.ids import IdAdapter
from ledger.store.shadow_ddl import (
    index_names,
    projection_schema,
    safe_column,
    safe_name,
    shadow,
    to_shadow,
)
from ledger.store.shadows import ShadowTables
from ledger.views.view import Key, Projection, Row


class SQLiteShadowTables(ShadowTables):
    """The rebuild's steps on one SQLite write transaction."""

    def __init__(self, cursor: SQLiteCursor, ids: IdAdapter) -> None:
        self._cursor = cursor
        self._ids = ids

    def create(self, projection: Projection) -> None:
        self.drop(projection)
        table, _ = projection_schema("sqlite", projection)
        self._cursor.execute(to_shadow(table, projection))

    def index(self, projection: Projection) -> None:
        """Nothing yet: SQLite cannot rename an index, so :meth:`swap` builds them."""

    def insert(self, projection: Projection, rows: list[Row]) -> None:
        if not rows:
            return
        columns = projection.columns
        names = ", ".join(safe_column(c) for c in columns)
        marks = ", ".join("?" for _ in columns)
        values = itemgetter(*columns) if len(columns) > 1 else lambda row: (row[columns[0]],)
        # The id adapter's conversion inline, not a call per value: this runs for every
        # column of every row.
        self._cursor.executemany(
            f"INSERT INTO {shadow(safe_name(projection.table))} ({names}) VALUES ({marks})",
            [[v.hex if type(v) is UUID else v for v in values(row)] for row in rows],
        )

    def delete(self, projection: Projection, keys: list[Key]) -> None:
        if not keys:
            return
        where = " AND ".join(f"{safe_column(c)} = ?" for c in projection.key)
        stored = self._ids.stored
        self._cursor.executemany(
            f"DELETE FROM {shadow(safe_name(projection.table))} WHERE {where}",
            [tuple(stored(v) for v in key) for key in keys],
        )

    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """Nothing to take: ``BEGIN IMMEDIATE`` holds the database's write lock."""

    def swap(self, projection: Projection) -> None:
        live = safe_name(projection.table)
        self._cursor.execute(f"ALTER TABLE {live} RENAME TO {live}__old")
        self._cursor.execute(f"ALTER TABLE {shadow(live)} RENAME TO {live}")
        self._cursor.execute(f"DROP TABLE {live}__old")
        # The old table's indexes went with it; build the shadow's under their live names.
        _, indexes = projection_schema("sqlite", projection)
        for statement in indexes:
            self._cursor.execute(statement)

    def drop(self, projection: Projection) -> None:
        self._cursor.execute(f"DROP TABLE IF EXISTS {shadow(safe_name(projection.table))}")
        _, indexes = projection_schema("sqlite", projection)
        for name in index_names(indexes):
            self._cursor.execute(f"DROP INDEX IF EXISTS {shadow(name)}")
