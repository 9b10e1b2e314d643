"""Reading the events a leased job's row has not folded yet (:mod:`ledger.views.queue_lag`).

``jobs_trailing_events`` probes the events' primary key once per leased row, after the row's
version; a caller runs it after reading (and, in a unit of work, locking) the rows, in a
statement of its own, so that it sees what committed while it waited for the locks. Only
a backend whose rows may lag asks (``rows_may_lag``: PostgreSQL; SQLite appends every event
with its row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from ledger.core.codec import EventCodec
from ledger.core.events import JobEvent
from ledger.core.state import JobState
from ledger.store.ids import IdAdapter
from ledger.views.queue_lag import caught_up, may_lag

Fetch = Callable[[str, dict[str, Any]], Sequence[Any]]
"""Runs a named query with its parameters; rows indexable by column name."""


def trailing_events(
    fetch: Fetch, codec: EventCodec, ids: IdAdapter, states: Sequence[JobState]
) -> dict[UUID, list[JobEvent]]:
    """The events after each leased state's version, by job, in version order."""
    lagging = [state for state in states if may_lag(state)]
    if not lagging:
        return {}
    params = {
        "ids": ids.keys([state.job_id for state in lagging]),
        "versions": ids.values([state.version for state in lagging]),
    }
    found: dict[UUID, list[JobEvent]] = {}
    for row in fetch("jobs_trailing_events", params):
        event = codec.decode(row["topic"], row["state"])
        assert isinstance(event, JobEvent), "a job's stream holds job events"
        found.setdefault(ids.uuid(row["originator_id"]), []).append(event)
    return found


def with_trailing(
    fetch: Fetch, codec: EventCodec, ids: IdAdapter, states: Sequence[JobState]
) -> list[JobState]:
    """``states`` caught up with their trailing events (the same order)."""
    trailing = trailing_events(fetch, codec, ids, states)
    return caught_up(states, trailing) if trailing else list(states)
