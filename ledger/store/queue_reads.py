"""The store's side of the job views: a page of the live queue, and the queue at a past time.

The live listing is one named query on ``jl_queue`` (``queue_list_page``). The listing at a
time is :class:`ledger.views.time_travel.QueueAt` fed with the stored events in notification
order, read in batches from one read-only snapshot
(:meth:`~ledger.store.store.Store.read_snapshot`), so memory holds one batch of events and
the per-job states, never the whole history.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ledger.views.job_pages import JobPage, JobQuery, ListedJob, page_of
from ledger.views.queue import decode_state

if TYPE_CHECKING:
    from datetime import datetime

    from ledger.store.store import Store

EVENT_BATCH = 5_000
"""Events read per round trip when folding the history (a few MB of decoded events)."""

Progress = Callable[[int, int], None]
"""``progress(position, head)``: how far through the history a fold is."""


def _params(query: JobQuery) -> dict[str, Any]:
    statuses = sorted(status.value for status in query.statuses)
    return {
        # JSON text on both backends: one parameter shape for an optional list.
        "statuses": json.dumps(statuses) if statuses else None,
        "job_type": query.job_type,
        "org": query.org,
        "queue": query.queue,
        "before": query.before,
        "limit": query.limit + 1,  # one more says whether there is a next page
    }


def list_jobs(store: Store, query: JobQuery) -> JobPage:
    """The current jobs the query asks for, newest enqueue first."""
    rows = store.read("queue_list_page", _params(query))
    states = store.caught_up([decode_state(row["state"]) for row in rows])
    candidates = [
        ListedJob(state, int(row["enqueue_seq"])) for state, row in zip(states, rows, strict=True)
    ]
    return page_of(candidates, query.limit)


def jobs_at(
    store: Store,
    at: datetime,
    query: JobQuery,
    *,
    batch: int = EVENT_BATCH,
    progress: Progress | None = None,
) -> JobPage:
    """The jobs the query asks for as they were at ``at`` (see
    :mod:`ledger.views.time_travel`),
    folded from every event up to the head of one read-only snapshot."""
    from ledger.views.time_travel import QueueAt

    fold = QueueAt(at, query)
    with store.read_snapshot() as tables:
        head = tables.head()
        while fold.position < head:
            events = tables.events_after(fold.position, batch)
            if not events:
                break
            fold.apply(events)
            if progress is not None:
                progress(fold.position, head)
    return fold.page()
