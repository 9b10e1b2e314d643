"""The tracked-projection runner: catches a tracked view up with the history, batch by batch.

Each batch is one write transaction: lock the projection's ``jl_tracking`` row (its tail
position: the last applied event's writing transaction and notification id), read the next
events of the final prefix after it (``events_tail``, in that order: see docs/architecture.md,
"The order tailing readers rely on"), apply the projection's pure rules
(:func:`ledger.views.audit.audit_row`), write the rows and the new position, commit. Rows
and position commit together or not at all, so a crash mid-batch leaves both as they were;
an event at or before the recorded position is a re-delivery and is skipped, and a row whose
position is already stored is not written again (a rebuild records a tail position below
some of the rows it wrote).

Only ``audit`` is tracked so far. :class:`projections.follower.Follower` keeps it caught up
while the system runs (every worker pool runs one; ``jobledger projections follow`` is one on
its own); readers that need everything committed catch up first (``Ledger.stats``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, cast
from uuid import UUID

import msgspec

from ledger.core.events import Event, JobEnqueued, JobEvent
from ledger.core.queue_pauses import QueuePaused, QueueResumed
from ledger.core.retention import RETENTION_EVENTS, RETENTION_STREAM_ID
from ledger.core.schedules.events import SCHEDULE_EVENTS, ScheduleAdded, ScheduleEvent
from ledger.core.source_polls.events import SOURCE_POLL_EVENTS, SourcePollEvent
from ledger.core.workflows.events import WorkflowEvent, WorkflowSubmitted
from ledger.store.store import Store
from ledger.store.views import ViewTables

# The audit view's own module, not the catalogue: catching it up (before `jobledger stats`
# or `audit` reads it) then never imports every other view's rules.
from ledger.views.audit import PROJECTION as AUDIT
from ledger.views.audit import (
    RETENTION_ORIGIN,
    SOURCE_POLL_ORIGIN,
    Origin,
    audit_row,
    queue_origin,
)
from ledger.views.stream_events import StreamEvent, TailPosition
from ledger.views.view import Projection, Row
from projections.frontier import FIRST_PAUSE_S, MAX_PAUSE_S

BATCH = 5_000
"""Events applied per transaction."""
ORIGINS_CACHED = 100_000
"""Jobs and runs whose origin (type, org, link) the runner remembers between batches (then it
starts afresh)."""


AUDITED: tuple[type[Event], ...] = (
    JobEvent,
    WorkflowEvent,
    *SCHEDULE_EVENTS,
    *RETENTION_EVENTS,
    QueuePaused,
    QueueResumed,
)
"""The events with audit rows whose origin is their stream's: jobs', workflow runs',
schedules', retention's and queues' (source polls' have a fixed one)."""

log = logging.getLogger("jobledger.projections")


class UnknownJobError(LookupError):
    """A job (or run) event whose stream has no enqueue (submit) event in the batch nor a row
    in ``jl_queue`` (``jl_workflow_runs``)."""


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
        self._origins: dict[UUID, Origin] = {RETENTION_STREAM_ID: RETENTION_ORIGIN}

    def run_once(self, limit: int | None = None) -> int:
        """Apply the next batch (up to ``limit`` events) in one transaction; how many."""
        with self.store.view_tables() as tables:
            at = tables.lock_tracking(self.projection.name)
            tables.prime_frontier()
            events = tables.events_tail(at, limit or self.batch)
            return self.apply(tables, events, at)

    def catch_up(self, *, wait_s: float = 0.0) -> CatchUp:
        """Run batches until no final event is left after the recorded position.

        Events of a transaction are final once every older transaction that may append here
        has ended: without ``wait_s`` those not final yet are left for the next catch-up (a
        follower's); with it, this goes on (polling, up to ``wait_s`` seconds) until every
        event committed before the call is applied (what a reader that asks for "everything
        so far" needs)."""
        if wait_s <= 0:
            return self._catch_up_final()
        with self.store.read_snapshot() as snapshot:
            before = snapshot.frontier().next_transaction_id
        deadline = time.monotonic() + wait_s
        pause = FIRST_PAUSE_S
        applied = batches = 0
        while True:
            report = self._catch_up_final()
            applied += report.applied
            batches += report.batches
            with self.store.read_snapshot() as snapshot:
                at = snapshot.tail_positions().get(self.projection.name, TailPosition())
                pending = snapshot.pending_before(at, before)
            if not pending:
                return CatchUp(self.projection.name, applied, batches, at.position)
            if time.monotonic() >= deadline:
                log.warning(
                    "%s catch-up: events older than transaction %d are not final after "
                    "%.1f s (an older transaction is still in flight)",
                    self.projection.name,
                    before,
                    wait_s,
                )
                return CatchUp(self.projection.name, applied, batches, at.position)
            time.sleep(pause)  # another session's transaction, usually a short one
            pause = min(pause * 2, MAX_PAUSE_S)

    def _catch_up_final(self) -> CatchUp:
        applied = batches = 0
        with self.store.read_snapshot() as snapshot:
            # Nothing new: answer from a read, without taking the write lock (a follower
            # asks this on every wake-up; on SQLite the write lock is the whole database's).
            snapshot.prime_frontier()
            at = snapshot.tail_positions().get(self.projection.name, TailPosition())
            if not snapshot.events_tail(at, 1):
                return CatchUp(self.projection.name, 0, 0, at.position)
        while True:
            with self.store.view_tables() as tables:
                at = tables.lock_tracking(self.projection.name)
                tables.prime_frontier()
                events = tables.events_tail(at, self.batch)
                if not events:
                    return CatchUp(self.projection.name, applied, batches, at.position)
                applied += self.apply(tables, events, at)
                batches += 1

    def apply(
        self, tables: ViewTables, events: Sequence[StreamEvent], at: TailPosition | None = None
    ) -> int:
        """Write the rows of ``events`` (a tailing read's, in tail order) after the recorded
        tail position and the new position, in ``tables``' transaction; how many were new
        (re-delivered ones change nothing)."""
        if at is None:
            at = tables.lock_tracking(self.projection.name)
        fresh = [item for item in events if TailPosition.of(item) > at]
        if not fresh:
            return 0
        tables.insert_audit(self._rows(tables, fresh))
        tables.set_tracking(self.projection.name, TailPosition.of(fresh[-1]))
        return len(fresh)

    def _rows(self, tables: ViewTables, events: list[StreamEvent]) -> list[Row]:
        if len(self._origins) > ORIGINS_CACHED:
            self._origins = {RETENTION_STREAM_ID: RETENTION_ORIGIN}
        polls = [item for item in events if isinstance(item.event, SOURCE_POLL_EVENTS)]
        kept = [item for item in events if isinstance(item.event, AUDITED)]
        for item in kept:
            if isinstance(item.event, ScheduleAdded):
                self._origins[item.originator_id] = Origin(item.event.job_type, item.event.org)
            elif isinstance(item.event, QueuePaused | QueueResumed):
                self._origins[item.originator_id] = queue_origin(item.event)
            elif isinstance(item.event, JobEnqueued):
                request, link = item.event.request, item.event.workflow
                self._origins[item.originator_id] = Origin(
                    request.job_type,
                    request.org,
                    None if link is None else link.run_id,
                    None if link is None else link.step_key,
                )
            elif isinstance(item.event, WorkflowSubmitted):
                asked = item.event.request
                self._origins[item.originator_id] = Origin(
                    asked.workflow_type, asked.org, item.originator_id
                )
        # (A comprehension, not a set difference with the cache's keys: that would hash
        # every cached id on every batch.)
        unknown = {item.originator_id for item in kept if item.originator_id not in self._origins}
        if unknown:
            runs = {i.originator_id for i in kept if isinstance(i.event, WorkflowEvent)}
            schedules = {i.originator_id for i in kept if isinstance(i.event, ScheduleEvent)}
            jobs = unknown - runs - schedules
            self._origins.update(tables.job_origins(sorted(jobs)))
            self._origins.update(tables.run_origins(sorted(unknown & runs)))
            for item in kept:
                if item.originator_id in unknown & schedules:
                    self._origins.setdefault(item.originator_id, self._schedule_origin(item))
        rows: list[dict[str, Any]] = []
        for item in kept:
            origin = self._origins.get(item.originator_id)
            if origin is None:
                raise UnknownJobError(f"stream {item.originator_id} has no first event or row")
            rows.append(audit_row(item.position, item.originator_id, item.event, origin))
        for item in polls:  # a source's stream needs no lookup: its origin is fixed
            event = cast(SourcePollEvent, item.event)
            rows.append(audit_row(item.position, item.originator_id, event, SOURCE_POLL_ORIGIN))
        return sorted(rows, key=itemgetter("position")) if polls else rows

    def _schedule_origin(self, item: StreamEvent) -> Origin:
        """A schedule's origin at ``item``: its latest ``schedule_added`` up to ``item``'s
        version, read from its stream (rare: only a schedule whose add came before this
        runner's memory). The view holds the latest definition, which a later replace may
        have changed."""
        added: ScheduleAdded | None = None
        for record in self.store.history(item.originator_id):
            if record.originator_version > item.version:
                break
            if isinstance(record.event, ScheduleAdded):
                added = record.event
        if added is None:
            raise UnknownJobError(f"schedule stream {item.originator_id} has no schedule_added")
        return Origin(added.job_type, added.org)
