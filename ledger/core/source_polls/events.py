"""A source's poll events. Each source has a stream of its own, its id derived from the
source's name (:func:`ledger.core.source_polls.state.source_stream_id`), so every database
names it alike. ``source`` is the source's name (the sync subjects' ``source_id``).

A poll ends in exactly one of ``source_polled``, ``source_poll_failed`` or
``source_poll_skipped``; a failure that reaches the breaker's threshold is followed, in the
same commit, by ``source_breaker_opened``. No event closes the breaker: the next
``source_polled`` does (the fold says so), so closing can never be recorded without the
success that justifies it.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from ledger.core.events import Event

SOURCE_POLL_JOB_TYPE = "jobledger.source_poll"
"""The built-in job type whose job runs one poll (payload ``{"source": NAME}``). The audit
rows of a source's poll events carry it as their job type, so ``audit --type`` finds the
poll jobs and the polls' own events together."""


class SourcePolled(Event, frozen=True):
    """The lister answered and its listing was diffed and enqueued: any -> closed breaker.

    ``upserted`` / ``deleted`` count the changes the diff found, ``unchanged`` the URIs it
    left alone; ``enqueued`` is how many sync jobs the same commit appended (the changes
    less those whose subject already had a live job, counted in ``already_live``).
    ``poll_job_id`` is the ``jobledger.source_poll`` job that ran the poll (``None``: run
    from the CLI or the API directly)."""

    name = "source_polled"
    source: str
    upserted: int
    unchanged: int
    deleted: int
    enqueued: int
    already_live: int
    poll_job_id: UUID | None


class SourcePollFailed(Event, frozen=True):
    """The lister raised (or returned a listing the diff refused): nothing was enqueued.

    ``error`` is the exception's first line (capped), ``code`` its class name or the
    ledger error's code; ``failures`` the consecutive failed polls, this one included."""

    name = "source_poll_failed"
    source: str
    error: str
    code: str
    failures: int
    poll_job_id: UUID | None


class SourceBreakerOpened(Event, frozen=True):
    """``failures`` consecutive failed polls reached the threshold: closed | open -> open.

    Polls until ``until`` (``at`` + the cool-down) are skipped; the first after it runs
    (half-open): a success closes the breaker, a failure opens it again at once."""

    name = "source_breaker_opened"
    source: str
    failures: int
    threshold: int
    cooldown_s: float
    until: datetime


class SourcePollSkipped(Event, frozen=True):
    """A poll that did not run the lister: the reason is recorded (``reason`` in words,
    ``code`` stable, e.g. ``source.breaker_open``; ``until`` when the skip ends, if known)."""

    name = "source_poll_skipped"
    source: str
    reason: str
    code: str
    until: datetime | None
    poll_job_id: UUID | None


SOURCE_POLL_EVENTS: tuple[type[Event], ...] = (
    SourcePolled,
    SourcePollFailed,
    SourceBreakerOpened,
    SourcePollSkipped,
)

SourcePollEvent = SourcePolled | SourcePollFailed | SourceBreakerOpened | SourcePollSkipped
