"""The views' write transaction on PostgreSQL: audit rows by binary COPY."""

from __future__ import annotations

import psycopg
from psycopg.rows import DictRow

from ledger.core.codec import EventCodec
from ledger.store.ids import IdAdapter
from ledger.store.postgres.copy import copy_rows
from ledger.store.postgres.session import PostgresRunner
from ledger.store.postgres.shadows import PostgresShadowTables
from ledger.store.views import ViewTables
from projections.rules.catalog import AUDIT
from projections.rules.replay import Row


class PostgresViewTables(ViewTables):
    """Writes at READ COMMITTED on one pooled connection (see
    :class:`~ledger.store.postgres.shadows.PostgresShadowTables` for the swap's locks)."""

    def __init__(
        self,
        cursor: psycopg.Cursor[DictRow],
        queries: dict[str, str],
        ids: IdAdapter,
        codec: EventCodec,
        shadows: PostgresShadowTables,
    ) -> None:
        super().__init__(PostgresRunner(cursor), queries, ids, codec, shadows)
        self._cursor = cursor

    def insert_audit(self, rows: list[Row]) -> None:
        # Binary COPY, as a shadow load. COPY cannot skip a row that is already there, so
        # rows at or below the highest stored position are left out first: rows are only
        # ever written as a prefix of the positions (runner batches in order, or a rebuild
        # to the head), so those are re-deliveries — e.g. after jl_tracking was set back.
        if not rows:
            return
        [top] = self.fetch("audit_top")
        highest = int(top["position"]) if top["position"] is not None else 0
        fresh = [row for row in rows if row["position"] > highest]
        copy_rows(self._cursor, AUDIT.table, AUDIT.columns, fresh)
