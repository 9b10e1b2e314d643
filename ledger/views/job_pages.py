"""Listing jobs: the filters and keyset page a listing asks for, and the page it gets back.

One query serves the live listing (``jl_queue``) and the listing as it was at a past time
(:mod:`ledger.views.time_travel`), so both page alike: newest enqueue first, and the cursor is
the ``enqueue_seq`` (the position of the job's ``job_enqueued``) of the last job shown. A
cursor, unlike an offset, keeps its place when jobs are enqueued between two pages.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.limits import INT64_MAX
from ledger.core.state import JobState
from ledger.core.values import EnqueueRequest, JobStatus, queue_of

DEFAULT_LIMIT = 50
NO_CURSOR = 2**62
"""Above any position: "from the newest job"."""


class JobQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which jobs, and which page of them. An empty ``statuses`` means every status."""

    statuses: frozenset[JobStatus] = frozenset()
    job_type: str | None = None
    org: str | None = None
    queue: str | None = None
    """Only jobs in this queue (``"default"``: also those enqueued without one)."""
    limit: int = DEFAULT_LIMIT
    cursor: int | None = None
    """Show jobs enqueued before this position (a previous page's ``next_cursor``)."""

    @property
    def before(self) -> int:
        return NO_CURSOR if self.cursor is None else self.cursor

    def admits_origin(self, request: EnqueueRequest) -> bool:
        """Whether a job enqueued so can match (type, org and queue are fixed at enqueue)."""
        return (
            (self.job_type is None or request.job_type == self.job_type)
            and (self.org is None or request.org == self.org)
            and (self.queue is None or queue_of(request.queue) == self.queue)
        )


def job_query(
    statuses: Iterable[JobStatus | str],
    job_type: str | None,
    org: str | None,
    limit: int,
    cursor: int | None,
    *,
    queue: str | None = None,
) -> JobQuery:
    """A checked query (``request.invalid`` for a bad limit, cursor or status)."""
    if limit < 1 or (cursor is not None and not 1 <= cursor <= INT64_MAX):
        raise InvalidRequestError("a job listing needs limit >= 1 and 1 <= cursor < 2**63")
    try:
        wanted = frozenset(JobStatus(status) for status in statuses)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None
    return JobQuery(
        statuses=wanted, job_type=job_type, org=org, queue=queue, limit=limit, cursor=cursor
    )


class ListedJob(msgspec.Struct, frozen=True):
    state: JobState
    enqueue_seq: int


class JobPage(msgspec.Struct, frozen=True):
    """One page of a listing, newest enqueue first; ``next_cursor`` is ``None`` on the last."""

    jobs: list[ListedJob]
    next_cursor: int | None


def page_of(candidates: list[ListedJob], limit: int) -> JobPage:
    """The page from up to ``limit + 1`` candidates already in listing order: the extra one
    only says that there is a next page."""
    shown = candidates[:limit]
    more = len(candidates) > limit
    return JobPage(shown, shown[-1].enqueue_seq if more else None)
