"""The log as a feed of small, org-labelled items: what the HTTP API's live event stream sends.

A :class:`FeedEvent` names one stored event (its notification id, name, time), the job or
workflow run it belongs to, and the org and job type it concerns; never a payload. Items come
from the final prefix of the history in tail order (``ReadSnapshot.events_tail``), so a
follower that asks again after the last item's :class:`TailPosition` never skips or repeats
one, even while several writers commit at once on PostgreSQL.

Orgs: a job's event has its job's org (from the queue view, where it never changes); a
workflow run's event has its run's org; everything else (job type definitions, API tokens)
has none. Who may see which is the HTTP layer's rule (docs/http.md, "Live events").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from ledger.api.reader import Reader
from ledger.core.events import (
    Event,
    JobCancelled,
    JobDeadLettered,
    JobEnqueued,
    JobEvent,
    JobHandlerStopped,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobSucceeded,
    JobTypeDefined,
    JobTypeUpdated,
)
from ledger.core.values import JobStatus
from ledger.core.workflows.events import WorkflowEvent, WorkflowSubmitted
from ledger.store.follow import EventWaiter, event_waiter
from ledger.views.stream_events import StreamEvent, TailPosition

__all__ = ["EventFeed", "EventWaiter", "FeedEvent", "TailPosition", "status_after"]

CACHE_SIZE = 100_000
"""How many jobs' (and runs') labels the feed keeps (an org and a type never change)."""

_STATUS_AFTER: dict[type[Event], JobStatus] = {
    JobEnqueued: JobStatus.PENDING,
    JobSucceeded: JobStatus.SUCCEEDED,
    JobRetryScheduled: JobStatus.PENDING,
    JobDeadLettered: JobStatus.DEAD,
    JobReleased: JobStatus.PENDING,
    JobCancelled: JobStatus.CANCELLED,
    JobHandlerStopped: JobStatus.CANCELLED,
    JobRequeued: JobStatus.PENDING,
}
"""The job events whose own kind fixes the status after them (``evolve``); every other job
event (leased, heartbeated, stage changed, progressed, failed, reap deferred) happens to or
leaves a leased job (a failure is followed, in its commit, by a retry or a death)."""


def status_after(event: Event) -> JobStatus | None:
    """The job's status right after ``event`` (``None``: not a job event)."""
    if not isinstance(event, JobEvent):
        return None
    return _STATUS_AFTER.get(type(event), JobStatus.LEASED)


class FeedEvent(NamedTuple):
    """One event of the log as the live stream shows it."""

    at: TailPosition
    """Where a follower goes on after it (``at.position`` is the notification id)."""
    event: str
    time: datetime
    job_id: UUID | None
    workflow_run_id: UUID | None
    job_type: str | None
    org: str | None
    status: JobStatus | None

    @property
    def position(self) -> int:
        return self.at.position

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.at.position,
            "event": self.event,
            "at": self.time.isoformat(),
            "job_id": None if self.job_id is None else str(self.job_id),
            "workflow_run_id": None if self.workflow_run_id is None else str(self.workflow_run_id),
            "job_type": self.job_type,
            "org": self.org,
            "status": None if self.status is None else self.status.value,
        }


class _JobLabel(NamedTuple):
    org: str | None
    job_type: str
    run_id: UUID | None


class EventFeed:
    """Reads the log after a tail position as :class:`FeedEvent` items (from any thread)."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._jobs: OrderedDict[UUID, _JobLabel] = OrderedDict()
        self._runs: OrderedDict[UUID, str | None] = OrderedDict()
        self._labels_lock = threading.Lock()

    def head(self) -> TailPosition:
        """Where the final prefix of the log ends now (a new follower starts there)."""
        with self._reader.store.read_snapshot() as snapshot:
            snapshot.prime_frontier()
            return snapshot.tail_head()

    def position_of(self, position: int) -> TailPosition | None:
        """The tail position of the event at notification id ``position`` (``0``: the start;
        ``None``: no event there)."""
        if position == 0:
            return TailPosition()
        with self._reader.store.read_snapshot() as snapshot:
            return snapshot.tail_position_of(position)

    def waiter(self) -> EventWaiter:
        """A waiter woken when events may have been appended (LISTEN on PostgreSQL, this
        process's commits on SQLite: poll it with a timeout)."""
        return event_waiter(self._reader.store)

    def after(self, at: TailPosition, limit: int) -> list[FeedEvent]:
        """Up to ``limit`` final events after ``at``, in tail order."""
        with self._reader.store.read_snapshot() as snapshot:
            snapshot.prime_frontier()
            events = snapshot.events_tail(at, limit)
        with self._labels_lock:
            self._learn(events)
            return [self._item(stored) for stored in events]

    def _learn(self, events: list[StreamEvent]) -> None:
        jobs = {e.originator_id for e in events if isinstance(e.event, JobEvent)}
        unknown = [job_id for job_id in jobs if job_id not in self._jobs]
        for job_id, state in self._reader.get_many(unknown).items():
            run_id = state.workflow.run_id if state.workflow is not None else None
            self._remember(self._jobs, job_id, _JobLabel(state.org, state.job_type, run_id))
        for stored in events:
            event = stored.event
            if isinstance(event, WorkflowSubmitted):
                self._remember(self._runs, event.run_id, event.request.org)
            elif isinstance(event, WorkflowEvent) and stored.originator_id not in self._runs:
                run = self._reader.workflows.run(stored.originator_id)
                self._remember(self._runs, stored.originator_id, run.org if run else None)

    @staticmethod
    def _remember(cache: OrderedDict[UUID, Any], key: UUID, value: Any) -> None:
        cache[key] = value
        if len(cache) > CACHE_SIZE:
            cache.popitem(last=False)

    def _item(self, stored: StreamEvent) -> FeedEvent:
        event = stored.event
        at = TailPosition.of(stored)
        if isinstance(event, JobEvent):
            label = self._jobs.get(stored.originator_id)
            if label is None and isinstance(event, JobEnqueued):
                label = _JobLabel(event.request.org, event.request.job_type, None)
            return FeedEvent(
                at,
                event.name,
                event.at,
                stored.originator_id,
                label.run_id if label else None,
                label.job_type if label else None,
                label.org if label else None,
                status_after(event),
            )
        if isinstance(event, WorkflowEvent):
            org = self._runs.get(stored.originator_id)
            return FeedEvent(at, event.name, event.at, None, stored.originator_id, None, org, None)
        job_type = (
            event.definition.job_type
            if isinstance(event, JobTypeDefined | JobTypeUpdated)
            else None
        )
        return FeedEvent(at, event.name, event.at, None, None, job_type, None, None)
