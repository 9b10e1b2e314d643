"""The views' write transaction: a read snapshot's reads, plus what the runners write.

:class:`ViewTables` is what a projection runner holds for one write transaction: everything
a :class:`~ledger.store.reads.ReadSnapshot` reads (the events in notification order, the live
rows), the tracked projections' positions and rows, ``jl_meta``, and the rebuild's
:class:`~ledger.store.shadows.ShadowTables`. The rules that decide the rows live in
:mod:`ledger.views`; this is only I/O.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

from ledger.core.codec import EventCodec
from ledger.store.ids import IdAdapter
from ledger.store.reads import ReadSnapshot, StatementRunner
from ledger.store.shadows import ShadowTables
from ledger.views.stream_events import TailPosition
from ledger.views.view import Row


class ViewTables(ReadSnapshot):
    """One write transaction over the events and the view tables."""

    def __init__(
        self,
        runner: StatementRunner,
        queries: Mapping[str, str],
        ids: IdAdapter,
        codec: EventCodec,
        shadows: ShadowTables,
    ) -> None:
        super().__init__(runner, queries, ids, codec)
        self.shadows = shadows
        """The rebuild's steps, on this same transaction."""

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``jl_meta`` value (commits with the transaction)."""
        self.fetch("meta_set", {"key": key, "value": value})

    def lock_tracking(self, name: str) -> TailPosition:
        """A tracked projection's tail position (the start if none yet), locked until
        commit."""
        self.fetch("tracking_init", {"name": name})
        [row] = self.fetch("tracking_lock", {"name": name})
        return TailPosition(int(row["transaction_id"]), int(row["position"]))

    def set_tracking(self, name: str, at: TailPosition) -> None:
        """Record a tracked projection's tail position (commits with its rows)."""
        params = {"name": name, "position": at.position, "transaction_id": at.transaction_id}
        self.fetch("tracking_set", params)

    @abstractmethod
    def insert_audit(self, rows: list[Row]) -> None:
        """Insert audit rows; a position already present is left as it is."""
