"""Facts about one job read from its state and its history: pure, no store, no clock.

These are the answers an operator surface shows next to a job's state (``jobledger show``,
``timeline``, ``diagnose``; the HTTP API and the dashboard alike), and which the state alone
cannot give: how often the current attempt renewed its lease, whether a pending job is waiting
out a retry's backoff, which state fields each event changed. Every function takes the records
as :meth:`Ledger.history` returns them (one job's events, oldest first).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from ledger.core.codec import Record
from ledger.core.diagnostics import Finding
from ledger.core.events import (
    JobEnqueued,
    JobEvent,
    JobHeartbeated,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
)
from ledger.core.state import JobState, evolve
from ledger.core.values import JobStatus


def history_prefix(
    records: Sequence[Record], *, version: int | None = None, at: datetime | None = None
) -> list[Record]:
    """The records up to event ``version`` (inclusive) and up to the first one stamped later
    than ``at``: what the job's history was then. A prefix, never a filter: one job's events
    may be stamped out of order by clocks that interleave, and a filtered history may not even
    fold. Folded (:func:`~ledger.core.diagnostics.current_state`), it is the job's state then
    — the one time-travel rule ``state_at``, ``jobs --at`` and ``replay --to-event/--at``
    share."""
    prefix: list[Record] = []
    for record in records:
        if version is not None and record.originator_version > version:
            break
        if at is not None and record.event.at > at:
            break
        prefix.append(record)
    return prefix


TIMELINE_FIELDS = (
    "status",
    "stage",
    "run_number",
    "attempt",
    "worker_id",
    "lease_expires_at",
    "last_heartbeat_at",
    "started_at",
    "run_at",
    "priority",
    "max_attempts",
    "timeout_s",
    "progress_done",
    "progress_total",
    "checkpoint",
    "last_error",
    "retries",
    "output",
    "result_revision",
    "result_content_hash",
    "finished_at",
    "reason",
)
"""The state fields whose changes a timeline reports, in the order it reports them. Fields
fixed at enqueue (the request, the backoff) and bookkeeping (``version``, ``updated_at``)
are left out: every event would "change" the latter."""

CREATED_FIELDS = ("status", "stage", "run_number", "attempt", "run_at", "priority", "max_attempts")
"""What the first timeline entry (the job coming into being) reports, each as changed from
``None``."""

Change = tuple[Any, Any]
"""A field's value before and after one event."""


class StateChange(NamedTuple):
    """One event and the state fields it changed (by name, in :data:`TIMELINE_FIELDS` order)."""

    record: Record
    created: bool
    """The event that brought the job into being (its changes are :data:`CREATED_FIELDS`)."""
    changes: dict[str, Change]


def lease_renewals(state: JobState, records: Sequence[Record]) -> int | None:
    """Heartbeats of the current attempt (``None`` before the first claim)."""
    if state.attempt == 0:
        return None
    return sum(
        1
        for record in records
        if isinstance(record.event, JobHeartbeated)
        and (record.event.run_number, record.event.attempt) == (state.run_number, state.attempt)
    )


def next_retry_at(state: JobState, records: Sequence[Record]) -> datetime | None:
    """When a pending job waiting out a retry's backoff becomes due (its ``run_at``); ``None``
    if the job is not pending because of a retry (new, released or requeued since)."""
    if state.status is not JobStatus.PENDING:
        return None
    became_pending = (JobEnqueued, JobRetryScheduled, JobReleased, JobRequeued)
    last = next((r.event for r in reversed(records) if isinstance(r.event, became_pending)), None)
    return state.run_at if isinstance(last, JobRetryScheduled) else None


def evidence(finding: Finding, records: Sequence[Record]) -> list[Record]:
    """The records a diagnostic names as its evidence, in the order it names them."""
    by_version = {record.originator_version: record for record in records}
    return [by_version[version] for version in finding.evidence]


def _changed(before: JobState | None, after: JobState) -> dict[str, Change]:
    if before is None:
        return {name: (None, getattr(after, name)) for name in CREATED_FIELDS}
    return {
        name: (getattr(before, name), value)
        for name in TIMELINE_FIELDS
        if (value := getattr(after, name)) != getattr(before, name)
    }


def state_changes(records: Sequence[Record]) -> list[StateChange]:
    """Each event with the difference between the folds before and after it."""
    entries: list[StateChange] = []
    state: JobState | None = None
    for record in records:
        assert isinstance(record.event, JobEvent)
        after = evolve(state, record.event)
        entries.append(StateChange(record, state is None, _changed(state, after)))
        state = after
    return entries
