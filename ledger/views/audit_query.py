"""Audit queries over the ``audit`` view: the filters, the page, and the paging cursor.

Pure: the store composes the SQL (:mod:`ledger.store.audit_reads`), the CLI parses text into
an :class:`AuditQuery`. Pages are keyset pages on the notification position, never OFFSET:
newest first, the page after one ends at position P holds positions ``< P``; oldest first,
``> P``. Events appended while someone pages newest-first have larger positions than any
page already read, so they can neither repeat a row nor push one into the next page; paging
oldest-first simply reaches them at the end.

The cursor is opaque to its users: ``<version>.<order>.<position>`` in url-safe base64,
short enough to paste. It carries its order so that a newest-first cursor is not silently
applied to an oldest-first query (the bound would point the wrong way).
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.events import JOB_EVENTS
from ledger.core.limits import INT64_MAX
from ledger.core.queue_pauses import QUEUE_EVENTS
from ledger.core.source_polls.events import SOURCE_POLL_EVENTS
from ledger.core.values import JobStatus
from ledger.core.workflows.events import WORKFLOW_EVENTS

Order = Literal["newest", "oldest"]

EVENT_NAMES: tuple[str, ...] = tuple(
    event.name for event in (*JOB_EVENTS, *WORKFLOW_EVENTS, *SOURCE_POLL_EVENTS, *QUEUE_EVENTS)
)
"""The events an audit row can be (job, workflow, source-poll and queue events; job-type
events have no row)."""
STATUSES: tuple[str, ...] = tuple(status.value for status in JobStatus)
DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
CURSOR_VERSION = 1


class CursorError(InvalidRequestError):
    """A cursor that this code did not make, or made for the other order."""


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which audit rows, in which order, how many per page, and from where.

    Every filter set must hold (they are ANDed). ``events`` matches any of its names.
    ``status`` is the job's *current* status (``jl_queue``), not its status at the event.
    ``code`` matches the failure code of ``job_failed`` / ``job_dead_lettered`` rows, and of
    ``job_retry_scheduled`` rows by the failure they retry. ``since`` is inclusive and
    ``until`` exclusive, on the event's own time. ``cursor`` continues a previous page.
    ``workflow`` is a run's rows: its own events and its step jobs' (``job_type`` and ``org``
    match a run's own rows by its workflow type and org).
    """

    job: UUID | None = None
    workflow: UUID | None = None
    job_type: str | None = None
    events: tuple[str, ...] = ()
    worker: str | None = None
    org: str | None = None
    status: str | None = None
    code: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_LIMIT
    order: Order = "newest"
    cursor: str | None = None

    def check(self) -> AuditQuery:
        """This query, if it is well formed; :class:`InvalidRequestError` otherwise."""
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidRequestError(f"limit must be 1..{MAX_LIMIT}, not {self.limit}")
        unknown = sorted(set(self.events) - set(EVENT_NAMES))
        if unknown:
            raise InvalidRequestError(
                f"unknown event {', '.join(unknown)}; known: {', '.join(EVENT_NAMES)}"
            )
        if self.status is not None and self.status not in STATUSES:
            raise InvalidRequestError(f"unknown status {self.status!r}; known: {STATUSES}")
        for moment in (self.since, self.until):
            if moment is not None and moment.utcoffset() is None:
                raise InvalidRequestError(f"{moment.isoformat()} has no time zone")
        if self.order not in ("newest", "oldest"):
            raise InvalidRequestError(f"order must be newest or oldest, not {self.order!r}")
        if self.cursor is not None:
            decode_cursor(self.cursor, self.order)
        return self

    def after(self) -> int | None:
        """The position the cursor continues from (``None``: the first page)."""
        return None if self.cursor is None else decode_cursor(self.cursor, self.order)


class AuditRow(msgspec.Struct, frozen=True):
    """One job or workflow event as the audit view holds it (``None``: the event has no such
    field). ``code`` of a ``job_retry_scheduled`` is that of the failure it retries. A run's
    own event has the run's id as ``job_id`` and its workflow type as ``job_type``;
    ``workflow_run`` / ``step_key`` name the run and step of a run's event or a step's job's."""

    position: int
    job_id: UUID
    job_type: str
    org: str | None
    event: str
    worker_id: str | None
    run_number: int | None
    attempt: int | None
    at: datetime
    code: str | None
    workflow_run: UUID | None = None
    step_key: str | None = None


class AuditPage(msgspec.Struct, frozen=True):
    """One page of rows and the cursor of the page after it (``None``: this is the last)."""

    rows: list[AuditRow]
    next_cursor: str | None


def encode_cursor(order: Order, position: int) -> str:
    """The opaque cursor of the page after ``position`` in ``order``."""
    text = f"{CURSOR_VERSION}.{order[0]}.{position}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, order: Order) -> int:
    """The position a cursor made by :func:`encode_cursor` for ``order`` holds."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
        version, kind, position = text.split(".")
        value = int(position)
    except (ValueError, UnicodeError, binascii.Error):
        raise CursorError(f"malformed cursor {cursor!r}") from None
    if version != str(CURSOR_VERSION) or kind not in ("n", "o") or not 0 <= value <= INT64_MAX:
        raise CursorError(f"malformed cursor {cursor!r}")
    made: Order = "newest" if kind == "n" else "oldest"
    if encode_cursor(made, value) != cursor:  # only the one spelling this code makes
        raise CursorError(f"malformed cursor {cursor!r}")
    if kind != order[0]:
        raise CursorError(f"cursor {cursor!r} continues a {made}-first query, not {order}-first")
    return value


def page(rows: list[AuditRow], query: AuditQuery) -> AuditPage:
    """The page of a read that asked for ``query.limit + 1`` rows: the extra row only says
    that another page exists."""
    if len(rows) <= query.limit:
        return AuditPage(rows, None)
    kept = rows[: query.limit]
    return AuditPage(kept, encode_cursor(query.order, kept[-1].position))
