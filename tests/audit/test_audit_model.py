"""The pure audit query model: cursors, times, checks, pages, the audit rule's code column, and
the composed SQL (values bound, never spliced)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobDeadLettered, JobFailed, JobRetryScheduled
from ledger.core.times import parse_moment
from ledger.core.values import Failure, FailureKind
from ledger.store.audit_reads import audit_sql
from ledger.store.queries import load
from ledger.views.audit import COLUMNS, Origin, audit_row
from ledger.views.audit_query import (
    AuditQuery,
    AuditRow,
    CursorError,
    decode_cursor,
    encode_cursor,
    page,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_cursor_round_trips_and_is_short_and_url_safe() -> None:
    """A cursor decodes to its position for its own order, and is short url-safe text."""
    for order in ("newest", "oldest"):
        for position in (0, 1, 987_654_321_012):
            cursor = encode_cursor(order, position)
            assert decode_cursor(cursor, order) == position
            assert len(cursor) <= 24 and all(c.isalnum() or c in "-_" for c in cursor)


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "garbage!",
        "MS5uLg",
        encode_cursor("newest", 5)[:-2],
        encode_cursor("newest", 999) + "x",
        "Mi5uLjU",
        "MS54LjU",
        "MS5uLi01",
        "MS5uLjA1",
    ],
)
def test_malformed_cursors_are_refused(cursor: str) -> None:
    """Text that is not a cursor of this version (bad base64, trailing characters, missing
    parts, another version, another kind, a negative or zero-padded position) is a
    ``request.invalid`` error."""
    with pytest.raises(CursorError, match="malformed cursor"):
        decode_cursor(cursor, "newest")


def test_a_cursor_of_the_other_order_is_refused() -> None:
    """A newest-first cursor cannot continue an oldest-first query (the bound points back)."""
    with pytest.raises(CursorError, match="newest-first query, not oldest-first"):
        AuditQuery(order="oldest", cursor=encode_cursor("newest", 9)).check()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29", datetime(2026, 11, 29, tzinfo=UTC)),
        ("2026-11-29T10:00:00Z", datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ("2026-11-29T12:00:00+02:00", datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ("7d", NOW - timedelta(days=7)),
        ("12h", NOW - timedelta(hours=12)),
        ("30m", NOW - timedelta(minutes=30)),
        ("45s", NOW - timedelta(seconds=45)),
    ],
)
def test_times_iso_or_a_span_ago(text: str, expected: datetime) -> None:
    """ISO dates (midnight UTC), zoned date-times, and spans before the given now."""
    assert parse_moment(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "7 days", "-7d", "7w", "2026-11-29T10:00"])
def test_bad_times_are_refused(text: str) -> None:
    """Anything else, including a date-time without a zone, is ``request.invalid``."""
    with pytest.raises(InvalidRequestError):
        parse_moment(text, NOW)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (AuditQuery(limit=0), "limit"),
        (AuditQuery(limit=10_001), "limit"),
        (AuditQuery(events=("job_failed", "job_exploded")), "unknown event job_exploded"),
        (AuditQuery(status="asleep"), "unknown status"),
        (AuditQuery(since=datetime(2026, 1, 1)), "no time zone"),
    ],
)
def test_check_refuses_malformed_queries(query: AuditQuery, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        query.check()


def _row(position: int) -> AuditRow:
    return AuditRow(position, uuid4(), "t", None, "job_enqueued", None, None, None, NOW, None)


def test_page_keeps_limit_rows_and_a_cursor_only_when_more_exist() -> None:
    """A read of limit + 1 rows gives a full page and the cursor of its last row; a read of
    at most limit rows is the last page."""
    query = AuditQuery(limit=2)
    full = page([_row(9), _row(7), _row(4)], query)
    assert [r.position for r in full.rows] == [9, 7]
    assert full.next_cursor is not None and decode_cursor(full.next_cursor, "newest") == 7
    assert page([_row(9), _row(7)], query).next_cursor is None


def test_audit_rule_code_column() -> None:
    """``code`` is the failure's code on failures and dead letters, NULL on retries (they
    carry no failure) and on every other event; the column is in the catalogue's list."""
    failure = Failure(kind=FailureKind.RETRYABLE, code="E42", message="m")
    job = uuid4()
    failed = JobFailed(at=NOW, run_number=1, attempt=1, worker_id="w", failure=failure)
    dead = JobDeadLettered(at=NOW, run_number=1, attempt=2, failure=failure)
    retry = JobRetryScheduled(at=NOW, run_number=1, attempt=1, delay_s=1.0, next_run_at=NOW)
    assert audit_row(1, job, failed, Origin("t", None))["code"] == "E42"
    assert audit_row(2, job, dead, Origin("t", None))["code"] == "E42"
    assert audit_row(3, job, retry, Origin("t", None))["code"] is None
    assert set(audit_row(1, job, failed, Origin("t", None))) == set(COLUMNS)


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_composed_sql_binds_every_value(backend: str) -> None:
    """Filter values travel as parameters: none of them appears in the statement text."""
    hostile = "x'); DROP TABLE jl_events; --"
    query = AuditQuery(
        job=uuid4(),
        job_type=hostile + "t",
        events=("job_failed", "job_retry_scheduled"),
        worker=hostile + "w",
        org=hostile + "o",
        status="dead",
        code=hostile + "c",
        since=NOW - timedelta(days=1),
        until=NOW,
        cursor=encode_cursor("newest", 77),
    )
    for variant in (query, AuditQuery(code=hostile, events=("job_retry_scheduled",))):
        sql, params = audit_sql(load(backend), backend, variant)
        assert hostile not in sql and "DROP" not in sql
        assert any(hostile in str(value) for value in params.values())
    sql, params = audit_sql(load(backend), backend, query)
    assert params["after"] == 77 and params["limit"] == 51
