"""Shadow tables on PostgreSQL: binary COPY loads, index builds under shadow names, renames.

Loads and index builds run in short transactions of their own with ``synchronous_commit =
off`` (a shadow is derived data no reader sees before the swap), so other connections keep
writing meanwhile (:attr:`PostgresShadowTables.concurrent_writers`). The swap takes the
events-table lock, then the live tables (:meth:`PostgresShadowTables.lock_for_swap`).

A partitioned view table (:mod:`ledger.store.postgres.view_partitions`) gets a partitioned
shadow with a partition for each live one (``jl_queue_p202612__rebuild``…); the swap renames
them (and their indexes) to the live names after the old table is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier, Placeholder

from ledger.store.postgres import view_partitions
from ledger.store.postgres.copy import ARRAY_TYPES, column_types, copy_rows
from ledger.store.postgres.unit_of_work import lock_timeout
from ledger.store.shadow_ddl import index_names, projection_schema, shadow, to_shadow
from ledger.store.shadows import ShadowTables
from ledger.views.view import Key, Projection, Row

INDEX_BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` for a shadow's index builds: a million-row sort fits in memory."""


class PostgresShadowTables(ShadowTables):
    """The rebuild's steps on one PostgreSQL write transaction."""

    concurrent_writers = True

    def __init__(self, cursor: psycopg.Cursor[DictRow], recorder: Any) -> None:
        self._cursor = cursor
        self._recorder = recorder

    def _partitioned(self, projection: Projection) -> bool:
        return projection in view_partitions.PARTITIONED_VIEWS and view_partitions.is_partitioned(
            self._cursor, projection.table
        )

    def create(self, projection: Projection) -> None:
        self.drop(projection)
        if self._partitioned(projection):
            view_partitions.create_shadow(self._cursor, projection)
            return
        table, _ = projection_schema("postgres", projection)
        self._cursor.execute(to_shadow(table, projection).encode())

    def _shadow_indexes(self, projection: Projection) -> list[str]:
        if self._partitioned(projection):
            return view_partitions.layout_of(projection, shadowed=True).indexes
        _, indexes = projection_schema("postgres", projection)
        return [to_shadow(statement, projection) for statement in indexes]

    def _bulk(self) -> None:
        """Settings for a transaction that only writes a shadow table.

        ``synchronous_commit = off``: a crash may lose the last such commits, but a shadow is
        derived data that no reader sees before the swap, and a rebuild that did not finish
        starts again from a fresh shadow (the swap's own commit stays synchronous)."""
        self._cursor.execute("SET LOCAL synchronous_commit = off")

    def index(self, projection: Projection) -> None:
        """Build the shadow's indexes (under shadow names) after the load, and analyse it,
        outside the swap's locks; with room to sort in memory."""
        self._bulk()
        self._cursor.execute(f"SET LOCAL maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
        for statement in self._shadow_indexes(projection):
            self._cursor.execute(statement.encode())
        self._cursor.execute(SQL("ANALYZE {}").format(Identifier(shadow(projection.table))))

    def insert(self, projection: Projection, rows: list[Row]) -> None:
        if rows:
            self._bulk()
            copy_rows(self._cursor, shadow(projection.table), projection.columns, rows)

    def delete(self, projection: Projection, keys: list[Key]) -> None:
        if not keys:
            return
        types = column_types(self._cursor, shadow(projection.table))
        query = SQL("DELETE FROM {} AS t USING unnest({}) AS d({}) WHERE {}").format(
            Identifier(shadow(projection.table)),
            SQL(", ").join(
                SQL("{}::{}").format(Placeholder(c, format="b"), ARRAY_TYPES[types[c]])
                for c in projection.key
            ),
            SQL(", ").join(Identifier(c) for c in projection.key),
            SQL(" AND ").join(SQL("t.{0} = d.{0}").format(Identifier(c)) for c in projection.key),
        )
        self._cursor.execute(
            query, {c: [key[i] for key in keys] for i, c in enumerate(projection.key)}
        )

    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """The events-table lock first (appenders wait), then ``ACCESS EXCLUSIVE`` on the live
        tables within ``timeout_s``.

        A writer that locked queue rows before asking for the events lock now waits on us
        while we wait on it: a deadlock. Keeping ``timeout_s`` below ``deadlock_timeout``
        (1 s) makes the rebuild, not the writer, give up (``store.busy``); it retries."""
        self._recorder.lock_table(self._cursor)
        lock_timeout(self._cursor, timeout_s)
        names = [p.table for p in projections]
        if any(p.mode == "tracked" for p in projections):
            # A tracked runner locks its jl_tracking row before writing its table; take the
            # whole table here too, so the two cannot deadlock (the runner waits or we retry).
            names.append("jl_tracking")
        tables = SQL(", ").join(Identifier(name) for name in names)
        self._cursor.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tables))
        self._cursor.execute("SET LOCAL lock_timeout = 0")

    def swap(self, projection: Projection) -> None:
        live = projection.table
        old = live + "__old"
        execute = self._cursor.execute
        partitioned = self._partitioned(projection)
        if partitioned:  # under the swap's locks: no month is made now
            view_partitions.add_shadow_partitions(self._cursor, projection)
        execute(SQL("ALTER TABLE {} RENAME TO {}").format(Identifier(live), Identifier(old)))
        execute(
            SQL("ALTER TABLE {} RENAME TO {}").format(Identifier(shadow(live)), Identifier(live))
        )
        execute(SQL("DROP TABLE {}").format(Identifier(old)))
        _, indexes = projection_schema("postgres", projection)
        rename = SQL("ALTER INDEX {} RENAME TO {}")
        execute(rename.format(Identifier(f"{shadow(live)}_pkey"), Identifier(f"{live}_pkey")))
        extra = view_partitions.extra_indexes(projection) if partitioned else []
        for name in [*index_names(indexes), *extra]:
            execute(rename.format(Identifier(shadow(name)), Identifier(name)))
        if partitioned:
            view_partitions.rename_shadow_partitions(self._cursor, projection)

    def drop(self, projection: Projection) -> None:
        self._cursor.execute(
            SQL("DROP TABLE IF EXISTS {}").format(Identifier(shadow(projection.table)))
        )
