"""The queue as it was at a past time, folded from the ordered stream of stored events.

Which events count: a job's state at time T is the fold of its history up to, not including,
its first event stamped later than T — exactly :meth:`ledger.Ledger.state_at` with ``at=T``.
One job's events are stamped in the order they are appended, so that prefix is "the job's
events whose own ``at`` <= T". Across jobs the stream is in notification order, and a commit
can be stamped slightly before one that landed ahead of it (a writer reads the clock, then
waits for the append lock), so the whole stream is read: no position is known after which
every event is later than T. A job whose ``job_enqueued`` is later than T is absent.

Pure: the same :func:`ledger.core.state.evolve` as every other fold, no driver, no clock. Memory
is one :class:`~ledger.core.state.JobState` per job that existed at T and can match the query's
type, org and cursor (those are fixed at enqueue); events are applied as they stream by.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from ledger.core.events import JobEnqueued, JobEvent
from ledger.core.state import IllegalTransitionError, JobState, evolve
from ledger.views.job_pages import JobPage, JobQuery, ListedJob, page_of
from ledger.views.rows_from_history import StreamEvent


class QueueAt:
    """The jobs a query asks for, as they were at ``at``, after the events applied so far."""

    def __init__(self, at: datetime, query: JobQuery) -> None:
        self.at = at
        self.query = query
        self.position = 0
        """The last position applied (0: none)."""
        self._states: dict[UUID, JobState] = {}
        self._enqueue_seq: dict[UUID, int] = {}
        self._past: set[UUID] = set()
        """Jobs that already had an event later than ``at``: the rest of their stream is too."""

    def apply(self, events: Iterable[StreamEvent]) -> None:
        """Fold ``events`` (in position order; job-type events are ignored)."""
        for item in events:
            self.position = item.position
            if isinstance(item.event, JobEvent):
                self._apply(item, item.event)

    def _apply(self, item: StreamEvent, event: JobEvent) -> None:
        job_id = item.originator_id
        state = self._states.get(job_id)
        if state is None:
            # Only a kept job's first event starts a state; the later events of a job left
            # out (enqueued after ``at``, or not matching) find no state and are skipped.
            if not self._keeps(item, event):
                return
            self._enqueue_seq[job_id] = item.position
        elif job_id in self._past:
            return
        elif event.at > self.at:
            self._past.add(job_id)
            return
        state = evolve(state, event)
        if state.version != item.version:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of job "
                f"{job_id}, but folds to version {state.version}"
            )
        self._states[job_id] = state

    def _keeps(self, item: StreamEvent, event: JobEvent) -> bool:
        return (
            isinstance(event, JobEnqueued)
            and event.at <= self.at
            and item.position < self.query.before
            and self.query.admits_origin(event.request)
        )

    def page(self) -> JobPage:
        """The page the query asks for, newest enqueue first."""
        query = self.query
        matching = (
            ListedJob(state, self._enqueue_seq[job_id])
            for job_id, state in self._states.items()
            if not query.statuses or state.status in query.statuses
        )
        candidates = heapq.nlargest(query.limit + 1, matching, key=lambda job: job.enqueue_seq)
        return page_of(candidates, query.limit)
