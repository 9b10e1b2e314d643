"""How far a job's row may lag its history, and how a reader catches it up.

A lease holder's in-lease reports (the handler's start, its stages, its progress) change
nothing a query filters or sorts on: the status, lease, worker, attempt, priority and due time
stay as they were. So the pool appends them without rewriting the job's row
(:mod:`ledger.store.postgres.unread_appends`); the row keeps the version it had, and the events
after it (its *trailing* events) wait for the next write that rewrites the row: the outcome,
a heartbeat, a reap, a cancel. That saves a row write per report, a rewritten state blob and
its WAL, on every job a pool starts from its buffer (bench/README.md, "In-lease reports
without the row").

What holds instead of "the row is the fold of the whole stream":

- every column a query filters or sorts on is exact; only :data:`LAGGING_COLUMNS` may be
  behind, and only on a ``leased`` row (a report needs a lease, and what ends a lease rewrites
  the row);
- the row is the fold of its stream up to its ``version``, and every reader that returns a
  state folds the trailing events onto it (:func:`caught_up`), so no answer is stale: a unit
  of work under the row's lock before it decides, ``show``, ``wait``, listings, verify.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve
from ledger.core.values import JobStatus
from ledger.views.queue import queue_row

LAGGING_COLUMNS = ("stage", "version", "updated_at", "state")
"""The row's columns that may be behind its stream: no query filters or sorts on them."""

_EXACT_FIELDS = (
    "status",
    "priority",
    "run_at",
    "lease_expires_at",
    "run_number",
    "attempt",
    "worker_id",
)
"""The state's fields behind the row's other updatable columns (``queue_update``'s)."""


def in_lease_only(before: JobState, after: JobState) -> bool:
    """Whether the change from ``before`` to ``after`` may leave the row behind: a leased
    job that stays leased with every filtered column as it was."""
    if before.status is not JobStatus.LEASED or after.status is not JobStatus.LEASED:
        return False
    return all(getattr(before, name) == getattr(after, name) for name in _EXACT_FIELDS)


def may_lag(state: JobState) -> bool:
    """Whether a row holding ``state`` may have trailing events: it is leased."""
    return state.status is JobStatus.LEASED


def caught_up(
    states: Iterable[JobState], trailing: Mapping[UUID, Sequence[JobEvent]]
) -> list[JobState]:
    """Each state with its trailing events folded on (in version order, as read)."""
    out = []
    for state in states:
        ahead = state
        for event in trailing.get(state.job_id, ()):
            ahead = evolve(ahead, event)
        out.append(ahead)
    return out


def rolled_forward(row: dict[str, Any], state: JobState) -> dict[str, Any]:
    """``row`` with its lagging columns set from ``state`` (its own state caught up): the
    others are left as read, so a drift in them still shows."""
    ahead = queue_row(state, row["enqueue_seq"], row["job_id"])
    return {**row, **{column: ahead[column] for column in LAGGING_COLUMNS}}
