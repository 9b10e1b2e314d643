"""The exchange format without a database: lines, times, header checks, upcasting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar
from uuid import UUID, uuid4

import pytest
from exchange_files import seal

from ledger.core.codec import DEFAULT_CODEC, EventCodec
from ledger.core.events import ALL_EVENTS, Event, JobCancelled, JobEnqueued, JobTypeDefined
from ledger.core.exchange import (
    ImportBadLineError,
    StreamKind,
    event_line,
    format_time,
    header_line,
    stored_fields,
)
from ledger.core.exchange_reader import parse_line, read_streams
from ledger.core.values import BackoffPolicy, EnqueueRequest, JobDefinition
from ledger.store.streams import job_type_stream_id

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_header_and_line_layout_are_fixed() -> None:
    """The header and an event line are exactly these bytes (key order included)."""
    assert header_line() == b'{"format":"jobledger-history","version":2}\n'
    stream = UUID("00000000-0000-0000-0000-000000000001")
    cancelled = JobCancelled(at=AT, run_number=1, reason="cancelled by operator")
    topic, state = DEFAULT_CODEC.encode(cancelled)
    line = event_line(stream, StreamKind.JOB, 3, topic, stored_fields(DEFAULT_CODEC, topic, state))
    assert line == (
        b'{"stream":"00000000-0000-0000-0000-000000000001","kind":"job","version":3,'
        b'"topic":"job_cancelled.v1","event":{"run_number":1,"reason":"cancelled by operator",'
        b'"at":"2026-01-01T12:00:00.000000Z"}}\n'
    )


def test_times_are_utc_with_microseconds() -> None:
    """One spelling per instant: UTC, six fraction digits, Z; naive times are refused."""
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2026, 1, 1, 14, 0, 0, 5, tzinfo=plus_two)) == (
        "2026-01-01T12:00:00.000005Z"
    )
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (b"", "line 1: empty file"),
        (b"{}", "line 1: not a jobledger-history header"),
        (b'{"format":"other","version":1}', "line 1: format 'other'"),
        (b'{"format":"jobledger-history","version":0}', "line 1: format version 0"),
    ],
)
def test_bad_headers_are_refused_at_line_1(first: bytes, message: str) -> None:
    """Anything but this format's header at this version is refused as line 1."""
    lines = [first] if first else []
    with pytest.raises(ImportBadLineError, match=message) as caught:
        list(read_streams(lines, DEFAULT_CODEC, job_type_stream_id))
    assert caught.value.code == "import.bad_line" and caught.value.line == 1


class JobCancelledV2(JobCancelled, frozen=True):
    """A later schema of job_cancelled: the reason split into a code and a note."""

    version: ClassVar[int] = 2
    code: str = "operator"


def _upcast_v1_v2(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "code": "legacy"}


def _codec_v2() -> EventCodec:
    codec = EventCodec([*(e for e in ALL_EVENTS if e is not JobCancelled), JobCancelledV2])
    codec.register_upcaster("job_cancelled", 1, _upcast_v1_v2)
    return codec


def test_older_topic_versions_import_through_the_upcasters() -> None:
    """A line stored as job_cancelled.v1 reads, under code that has v2, as the upcast v2."""
    line = (
        b'{"stream":"00000000-0000-0000-0000-000000000001","kind":"job","version":2,'
        b'"topic":"job_cancelled.v1","event":{"run_number":1,"reason":"r",'
        b'"at":"2026-01-01T12:00:00.000000Z"}}'
    )
    kind, record = parse_line(_codec_v2(), 7, line)
    assert kind is StreamKind.JOB and record.originator_version == 2
    assert record.event == JobCancelledV2(at=AT, run_number=1, reason="r", code="legacy")
    with pytest.raises(ImportBadLineError, match=r"line 7: .*newer than this code reads"):
        parse_line(DEFAULT_CODEC, 7, line.replace(b"cancelled.v1", b"cancelled.v3"))


def test_an_event_stored_under_an_older_topic_is_exported_as_stored() -> None:
    """Export writes the stored topic version and its fields as stored, not upcast."""
    topic, state = DEFAULT_CODEC.encode(JobCancelled(at=AT, run_number=1, reason="r"))
    fields = stored_fields(_codec_v2(), topic, state)
    assert topic == "job_cancelled.v1"
    assert fields == {"run_number": 1, "reason": "r", "at": "2026-01-01T12:00:00.000000Z"}


def _line(stream: UUID, kind: StreamKind, version: int, event: Event) -> bytes:
    topic, state = DEFAULT_CODEC.encode(event)
    return event_line(stream, kind, version, topic, stored_fields(DEFAULT_CODEC, topic, state))


def test_a_job_stream_must_carry_its_own_job_id() -> None:
    """A job's stream id is its job_enqueued's job_id; a definition's is its type's id."""
    defined = JobTypeDefined(at=AT, definition=JobDefinition(job_type="t"))
    job_id = uuid4()
    enqueued = JobEnqueued(
        at=AT,
        job_id=job_id,
        request=EnqueueRequest(job_type="t"),
        definition_version=1,
        priority=100,
        run_at=AT,
        max_attempts=3,
        timeout_s=60.0,
        backoff=BackoffPolicy(),
        workflow=None,
    )
    definition = _line(job_type_stream_id("t"), StreamKind.JOB_TYPE, 1, defined)
    good = [header_line(), definition, _line(job_id, StreamKind.JOB, 1, enqueued)]
    whole = seal(good[0], good[1:]).splitlines(keepends=True)
    streams = list(read_streams(whole, DEFAULT_CODEC, job_type_stream_id))
    assert [(s.kind, s.stream_id, len(s.records)) for s in streams] == [
        (StreamKind.JOB_TYPE, job_type_stream_id("t"), 1),
        (StreamKind.JOB, job_id, 1),
    ]
    elsewhere = uuid4()
    wrong_job = [*good[:2], _line(elsewhere, StreamKind.JOB, 1, enqueued)]
    with pytest.raises(ImportBadLineError, match=f"line 3: job {job_id} in stream {elsewhere}"):
        list(read_streams(wrong_job, DEFAULT_CODEC, job_type_stream_id))
    wrong_type = [header_line(), _line(elsewhere, StreamKind.JOB_TYPE, 1, defined)]
    with pytest.raises(ImportBadLineError, match=r"line 2: .* is not job type 't'"):
        list(read_streams(wrong_type, DEFAULT_CODEC, job_type_stream_id))
    mislabelled = [header_line(), definition.replace(b'"kind":"job_type"', b'"kind":"job"')]
    with pytest.raises(ImportBadLineError, match=r"line 2: job_type_defined\.v1 is not an event"):
        list(read_streams(mislabelled, DEFAULT_CODEC, job_type_stream_id))
