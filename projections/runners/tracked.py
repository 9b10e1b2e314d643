"""The tracked-projection runner: catches a tracked view up with the history, batch by batch.

Each batch is one write transaction: lock the projection's ``jl_tracking`` row (its
position), read the next events after it (``events_after``, notification order), apply the
projection's pure rules (:func:`projections.rules.audit.audit_row`), write the rows and the new
position, commit. Rows and position commit together or not at all, so a crash mid-batch
leaves both as they were; an event at or before the recorded position is a re-delivery and
is skipped, and a row whose position is already stored is not written again.

Only ``audit`` is tracked so far. :class:`projections.runners.follower.Follower` keeps it caught up
while the system runs (every worker pool runs one; ``jobledger projections follow`` is one on
its own); readers that need everything committed catch up first (``Ledger.stats``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec

from ledger.core.events import JobEnqueued, JobEvent
from ledger.store.store import Store
from ledger.store.views import ViewTables
from projections.rules.audit import audit_row
from projections.rules.catalog import AUDIT, Projection
from projections.rules.replay import Row, StreamEvent

BATCH = 5_000
"""Events applied per transaction."""
ORIGINS_CACHED = 100_000
"""Jobs whose (type, org) the runner remembers between batches (then it starts afresh)."""


class UnknownJobError(LookupError):
    """A job event whose job has no enqueue event in the batch nor a row in ``jl_queue``."""


class CatchUp(msgspec.Struct, frozen=True):
    """What a catch-up did: events applied, batches, and the position reached."""

    name: str
    applied: int
    batches: int
    position: int


class TrackedRunner:
    """Catch one tracked projection (``audit``) up with the history of a store."""

    def __init__(self, store: Store, projection: Projection = AUDIT, *, batch: int = BATCH) -> None:
        if projection is not AUDIT:
            raise ValueError(f"no tracked runner for {projection.name!r}")
        self.store = store
        self.projection = projection
        self.batch = batch
        self._origins: dict[UUID, tuple[str, str | None]] = {}

    def run_once(self, limit: int | None = None) -> int:
        """Apply the next batch (up to ``limit`` events) in one transaction; how many."""
        with self.store.view_tables() as tables:
            position = tables.lock_tracking(self.projection.name)
            events = tables.events_after(position, limit or self.batch)
            return self.apply(tables, events, position)

    def catch_up(self) -> CatchUp:
        """Run batches until the recorded position is the head."""
        applied = batches = 0
        with self.store.read_snapshot() as snapshot:
            # Nothing new: answer from a read, without taking the write lock (a follower
            # asks this on every wake-up; on SQLite the write lock is the whole database's).
            position = snapshot.tracking().get(self.projection.name, 0)
            if snapshot.head() <= position:
                return CatchUp(self.projection.name, 0, 0, position)
        while True:
            with self.store.view_tables() as tables:
                position = tables.lock_tracking(self.projection.name)
                events = tables.events_after(position, self.batch)
                if not events:
                    return CatchUp(self.projection.name, applied, batches, position)
                applied += self.apply(tables, events, position)
                batches += 1

    def apply(
        self, tables: ViewTables, events: Sequence[StreamEvent], position: int | None = None
    ) -> int:
        """Write the rows of the events after the recorded position and the new position, in
        ``tables``' transaction; how many were new (re-delivered ones change nothing)."""
        if position is None:
            position = tables.lock_tracking(self.projection.name)
        fresh = [item for item in events if item.position > position]
        if not fresh:
            return 0
        tables.insert_audit(self._rows(tables, fresh))
        tables.set_tracking(self.projection.name, fresh[-1].position)
        return len(fresh)

    def _rows(self, tables: ViewTables, events: list[StreamEvent]) -> list[Row]:
        if len(self._origins) > ORIGINS_CACHED:
            self._origins.clear()
        jobs = [item for item in events if isinstance(item.event, JobEvent)]
        for item in jobs:
            if isinstance(item.event, JobEnqueued):
                request = item.event.request
                self._origins[item.originator_id] = (request.job_type, request.org)
        # (A comprehension, not a set difference with the cache's keys: that would hash
        # every cached id on every batch.)
        unknown = {item.originator_id for item in jobs if item.originator_id not in self._origins}
        if unknown:
            self._origins.update(tables.job_origins(sorted(unknown)))
        rows: list[dict[str, Any]] = []
        for item in jobs:
            origin = self._origins.get(item.originator_id)
            if origin is None:
                raise UnknownJobError(f"job {item.originator_id} has no enqueue event or row")
            assert isinstance(item.event, JobEvent)
            rows.append(audit_row(item.position, item.originator_id, item.event, *origin))
        return rows
