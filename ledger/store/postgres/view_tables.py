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
from ledger.views.catalog import AUDIT
from ledger.views.view import Row


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
        # re-deliveries (a rebuild's tail position is below some rows it wrote; jl_tracking
        # set back) are left out first. Positions are not written in notification-id order
        # (the runner reads in tail order), but most rows of a batch are above the highest
        # stored one: only those at or below it are looked up.
        if not rows:
            return
        [top] = self.fetch("audit_top")
        highest = int(top["position"]) if top["position"] is not None else 0
        below = [row["position"] for row in rows if row["position"] <= highest]
        if below:
            present = {r["position"] for r in self.fetch("audit_present", {"positions": below})}
            rows = [row for row in rows if row["position"] not in present]
        copy_rows(self._cursor, AUDIT.table, AUDIT.columns, rows)
