"""Assertions about what was enqueued, read from the history (what Oban's ``assert_enqueued``
and ``refute_enqueued`` do against its jobs table).

"Enqueued" means a ``job_enqueued`` event: a new job. An idempotent repeat or a request
skipped because its subject already had a live job appends no event, so it is not counted —
which is what a test of "this block did not enqueue twice" wants. The events are read in
tail order (the order every tailing reader of the history uses) between two positions, so a
block's jobs are exactly those whose ``job_enqueued`` committed after the block began and
before it ended (or before the assertion, while it is still open).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple
from uuid import UUID

from ledger.api.event_feed import EventFeed, TailPosition
from ledger.api.reader import Reader
from ledger.core.events import JobEnqueued
from ledger.core.values import JSON, EnqueueRequest

__all__ = [
    "EnqueuedJob",
    "EnqueuedJobs",
    "assert_enqueued",
    "enqueued",
    "refute_enqueued",
]

PAGE = 1000
"""How many events one read of the history after a position returns at most."""

FINAL_WAIT_S = 30.0
"""How long reading a span waits for its committed events to become final in tail order
(an older transaction still open holds them back; a test's own, left open, would never end)."""

ExpectedJob = str | tuple[str, Mapping[str, Any]]
"""A job type alone (any payload), or a job type with its exact payload."""


class EnqueuedJob(NamedTuple):
    """One job a ``job_enqueued`` event made: its id and the request exactly as it was made."""

    job_id: UUID
    request: EnqueueRequest

    @property
    def job_type(self) -> str:
        return self.request.job_type

    @property
    def payload(self) -> dict[str, JSON]:
        return self.request.payload

    def matches(
        self,
        job_type: str | None,
        payload: Mapping[str, Any] | None,
        fields: Mapping[str, Any],
    ) -> bool:
        """Whether this job is of ``job_type`` (any if ``None``), its payload holds every key
        of ``payload`` with that value (Oban's args match the same way), and its request has
        each of ``fields`` (``queue``, ``org``, ``priority`` …) as given."""
        _check_fields(fields)
        if job_type is not None and self.request.job_type != job_type:
            return False
        if payload is not None and any(
            key not in self.request.payload or self.request.payload[key] != value
            for key, value in payload.items()
        ):
            return False
        return all(getattr(self.request, name) == value for name, value in fields.items())


class EnqueuedJobs:
    """The jobs enqueued after a position of the history: from where :func:`enqueued` began
    to now (or to where its block ended)."""

    def __init__(self, reader: Reader, start: TailPosition | None = None) -> None:
        self._feed = EventFeed(reader)
        self._reader = reader
        self._before: frozenset[int] = frozenset()
        if start is None:
            with reader.store.read_snapshot() as snapshot:
                snapshot.prime_frontier()
                start = snapshot.tail_head()
                # Committed before the block began but not yet final in tail order (on
                # PostgreSQL an older transaction still open holds the tail's head back):
                # read after the start once it is final, yet not the block's.
                self._before = frozenset(snapshot.positions_after(start))
        self._start = start
        self._end: frozenset[int] | None = None
        """Once closed: the positions after the start that had committed when it closed."""
        self._jobs: list[EnqueuedJob] = []
        self._read_to = self._start
        self._seen: set[int] = set()

    def close(self) -> None:
        """End the span here: later enqueues are not this block's. What had committed by now
        is the block's, even if an older transaction still open keeps it out of the final
        prefix (it is read once final, when the jobs are asked for)."""
        if self._end is None:
            self._end = self._committed_now()

    @property
    def jobs(self) -> list[EnqueuedJob]:
        """The jobs enqueued in the span, in tail order (the order they committed)."""
        if self._end is None:
            self._read_through(self._committed_now(), only_those=False)
        else:
            self._read_through(self._end, only_those=True)
        return list(self._jobs)

    @property
    def job_ids(self) -> list[UUID]:
        return [job.job_id for job in self.jobs]

    def _committed_now(self) -> frozenset[int]:
        """The positions after what was read that have committed by now, final or not."""
        with self._reader.store.read_snapshot() as snapshot:
            snapshot.prime_frontier()
            return frozenset(snapshot.positions_after(self._read_to)) - self._before

    def _read_through(self, owed: frozenset[int], *, only_those: bool) -> None:
        """Read the history on in tail order until every position ``owed`` has been read,
        waiting (at most :data:`FINAL_WAIT_S`) for those an older transaction keeps from
        being final; the enqueues among them are the span's (``only_those``: a closed span's
        end), or every enqueue read (an open span reads up to now)."""
        missing = set(owed) - self._seen
        waited_since: float | None = None
        while True:
            page = self._feed.after(self._read_to, PAGE)
            if not page:
                if not missing:
                    return
                waited_since = waited_since or time.monotonic()
                if time.monotonic() - waited_since > FINAL_WAIT_S:
                    raise TimeoutError(
                        f"{len(missing)} event(s) committed in the span are still not final "
                        f"in tail order after {FINAL_WAIT_S:g} s: a transaction older than "
                        "them is still open"
                    )
                time.sleep(0.005)
                continue
            ids = []
            for item in page:
                self._seen.add(item.position)
                missing.discard(item.position)
                if (
                    item.event == JobEnqueued.name
                    and item.job_id
                    and item.position not in self._before
                    and (not only_those or item.position in owed)
                ):
                    ids.append(item.job_id)
            states = self._reader.get_many(ids)
            self._jobs.extend(EnqueuedJob(job_id, states[job_id].request) for job_id in ids)
            self._read_to = page[-1].at
            if only_those and not missing:
                return

    def assert_jobs(self, expected: Sequence[ExpectedJob]) -> None:
        """Assert that the span enqueued exactly ``expected``: as many jobs, each matched by
        one entry (a type alone matches any payload of that type; a ``(type, payload)`` pair
        needs that payload exactly), in any order."""
        jobs = self.jobs
        unmatched = list(jobs)
        missing: list[ExpectedJob] = []
        for entry in expected:
            job_type, payload = (entry, None) if isinstance(entry, str) else entry
            found = next(
                (
                    job
                    for job in unmatched
                    if job.job_type == job_type and (payload is None or job.payload == payload)
                ),
                None,
            )
            if found is None:
                missing.append(entry)
            else:
                unmatched.remove(found)
        if missing or unmatched:
            raise AssertionError(
                "the jobs enqueued differ from those expected:\n"
                f"  expected but not enqueued: {_shown(missing)}\n"
                f"  enqueued but not expected: {_shown(unmatched)}\n"
                f"  enqueued, in order: {_shown(jobs)}"
            )

    def assert_enqueued(
        self,
        type: str | None = None,
        payload: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> EnqueuedJob:
        """Assert that the span enqueued at least one job matching (:meth:`EnqueuedJob.matches`);
        the first such job."""
        _check_fields(fields)
        jobs = self.jobs
        for job in jobs:
            if job.matches(type, payload, fields):
                return job
        raise AssertionError(
            f"no job enqueued matches {_wanted(type, payload, fields)}; enqueued: {_shown(jobs)}"
        )

    def refute_enqueued(
        self,
        type: str | None = None,
        payload: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        """Assert that the span enqueued no job matching (:meth:`EnqueuedJob.matches`)."""
        _check_fields(fields)
        found = [job for job in self.jobs if job.matches(type, payload, fields)]
        if found:
            raise AssertionError(
                f"{len(found)} job(s) enqueued match {_wanted(type, payload, fields)}: "
                f"{_shown(found)}"
            )


@contextmanager
def enqueued(reader: Reader) -> Iterator[EnqueuedJobs]:
    """``with enqueued(ledger) as jobs: ...``: the jobs the block enqueued (its span ends
    when the block does, so assertions after it see only the block's)."""
    jobs = EnqueuedJobs(reader)
    try:
        yield jobs
    finally:
        jobs.close()


def assert_enqueued(
    reader: Reader,
    type: str | None = None,
    payload: Mapping[str, Any] | None = None,
    **fields: Any,
) -> EnqueuedJob:
    """Assert that the whole history has a matching ``job_enqueued``; the first such job."""
    return EnqueuedJobs(reader, TailPosition()).assert_enqueued(type, payload, **fields)


def refute_enqueued(
    reader: Reader,
    type: str | None = None,
    payload: Mapping[str, Any] | None = None,
    **fields: Any,
) -> None:
    """Assert that the whole history has no matching ``job_enqueued``."""
    EnqueuedJobs(reader, TailPosition()).refute_enqueued(type, payload, **fields)


def _check_fields(fields: Mapping[str, Any]) -> None:
    """A misspelt field would match nothing and make every refute pass: refused instead."""
    unknown = sorted(set(fields) - set(EnqueueRequest.__struct_fields__))
    if unknown:
        raise TypeError(f"an enqueue request has no field {unknown[0]!r}")


def _wanted(
    job_type: str | None, payload: Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> str:
    parts = [f"type={job_type!r}"] if job_type is not None else []
    if payload is not None:
        parts.append(f"payload ⊇ {dict(payload)!r}")
    parts.extend(f"{name}={value!r}" for name, value in fields.items())
    return ", ".join(parts) or "anything"


def _shown(entries: Sequence[ExpectedJob | EnqueuedJob]) -> str:
    shown = [
        (entry.job_type, entry.payload) if isinstance(entry, EnqueuedJob) else entry
        for entry in entries
    ]
    return repr(shown) if shown else "none"
