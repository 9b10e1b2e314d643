"""Following one job's history as it grows (``jobledger history --follow``).

:class:`HistoryFollower` yields the job's events from the first, then each new one as it
commits, until the job is terminal and has stayed quiet for ``linger_s`` (a dead or cancelled
job may still be requeued), or ``timeout_s`` has passed. Every read asks for the versions
after the last one yielded, so each event is yielded once, in order, whatever wakes it.

Waking: on PostgreSQL every transaction that appends events sends ``NOTIFY`` on the
eventsourcing recorder's channel (``jl_events``). ``jl_jobs_available`` would not do: only
commits that may make a job claimable send it, not a lease, heartbeat, success or death. The
follower ``LISTEN``\\ s before its first read, so a commit between a read and the wait is not
slept through; the poll interval still bounds every wait, so a lost notification or a broken
listening connection costs one interval, never an event. SQLite has no notifications: it
polls every ``poll_s`` (commits in this process wake it at once). The waiting is
:mod:`ledger.store.follow`'s, shared with the projection follower. Time here is real elapsed
time (``time.monotonic``), not the ledger's clock: how long to wait for other processes is not
a fact recorded in the ledger.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Literal
from uuid import UUID

from ledger.core.codec import Record
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve
from ledger.core.values import JobStatus
from ledger.store.follow import EventWaiter, event_waiter
from ledger.store.reads import decode_records
from ledger.store.store import Store

TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED})

Stop = Literal["terminal", "timeout"]


def events_after(store: Store, job_id: UUID, after: int) -> list[Record]:
    """The stream's events after version ``after``, in order (any stream: the caller checks)."""
    # One query in a transaction of its own: this runs on every wake-up of a follow.
    rows = store.read("events_of_job_after", {"ids": store.ids.keys([job_id]), "after": after})
    return decode_records(store.codec, store.ids, rows, job_id)


class HistoryFollower:
    """One job's events, old then new; see the module docstring for when it stops."""

    def __init__(
        self,
        store: Store,
        job_id: UUID,
        *,
        poll_s: float = 0.5,
        linger_s: float = 1.0,
        timeout_s: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.job_id = job_id
        self._poll_s = poll_s
        self._linger_s = linger_s
        self._timeout_s = timeout_s
        self._monotonic = monotonic
        self.state: JobState | None = None
        """The job as the events yielded so far make it."""
        self.stopped: Stop | None = None

    def records(self) -> Iterator[Record]:
        """Raises :class:`JobNotFoundError` first if the id names no job."""
        waiter = event_waiter(self._store)
        try:
            yield from self._follow(waiter)
        finally:
            waiter.close()

    def _follow(self, waiter: EventWaiter) -> Iterator[Record]:
        started = last_news = self._monotonic()
        deadline = None if self._timeout_s is None else started + self._timeout_s
        version = 0
        while True:
            records = events_after(self._store, self.job_id, version)
            if version == 0 and (not records or not isinstance(records[0].event, JobEvent)):
                # An unknown id, or a job type's definition stream.
                raise JobNotFoundError(f"no job {self.job_id}")
            for record in records:
                assert isinstance(record.event, JobEvent)
                self.state = evolve(self.state, record.event)
                version = record.originator_version
                yield record
            now = self._monotonic()
            if records:
                last_news = now
            waits = [self._poll_s]
            if self.state is not None and self.state.status in TERMINAL:
                if now - last_news >= self._linger_s:
                    self.stopped = "terminal"
                    return
                waits.append(last_news + self._linger_s - now)
            if deadline is not None:
                if now >= deadline:
                    self.stopped = "timeout"
                    return
                waits.append(deadline - now)
            waiter.wait(min(waits))
