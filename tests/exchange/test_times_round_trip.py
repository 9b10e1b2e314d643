"""Every time the ledger accepts at the door comes back from export -> import unchanged.

The door: ``Ledger.enqueue(run_at=…)`` (and the HTTP API, through the same request check) takes
any aware ``datetime`` whose UTC instant lies in the years 1 to 9999, at any offset, to the
microsecond; ``--run-at`` takes the same as ISO 8601. Before the fix a year below 1000 was
written as ``999-06-01T…`` (``strftime("%Y")`` does not pad), which RFC 3339 readers refuse, and
an offset pushing the instant out of range was a traceback (``OverflowError``) at the door.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from exchange_helpers import export_bytes, invoke
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger import FakeClock, Ledger
from ledger.core.codec import DEFAULT_CODEC
from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobEnqueued
from ledger.core.exchange import Selection, StreamKind, event_line, stored_fields
from ledger.core.exchange_reader import parse_line
from ledger.core.requests import normalise_request
from ledger.core.values import BackoffPolicy, EnqueueRequest

DAY = timedelta(hours=24)
OFFSETS = st.timedeltas(min_value=-DAY + timedelta(microseconds=1), max_value=DAY).filter(
    lambda offset: offset < DAY
)
"""Every offset ``datetime.timezone`` takes (strictly inside ±24 h, to the microsecond)."""
ZONES = st.one_of(st.just(UTC), OFFSETS.map(timezone), st.timezones())
MOMENTS = st.datetimes(min_value=datetime.min, max_value=datetime.max, timezones=ZONES)
"""Aware times over all of ``datetime``'s range, at any offset or named zone."""

FIRST = datetime.min.replace(tzinfo=UTC)
LAST = datetime.max.replace(tzinfo=UTC)


def _since_first(moment: datetime) -> timedelta:
    """How long after 0001-01-01T00:00Z the instant ``moment`` is, from its wall time and
    offset (not by ``astimezone``, the conversion under test)."""
    offset = moment.utcoffset()
    assert offset is not None
    return moment.replace(tzinfo=None) - datetime.min - offset


def _in_range(moment: datetime) -> bool:
    """Whether the UTC instant of ``moment`` lies in the years 1 to 9999."""
    return timedelta(0) <= _since_first(moment) <= datetime.max - datetime.min


def _utc(moment: datetime) -> datetime:
    """``moment``'s instant in UTC. Compared through this, not with ``==`` on ``moment``
    itself: a time in a named zone's DST gap or fold never equals one in another zone
    (PEP 495), though the ledger takes it, at the offset ``utcoffset()`` gives."""
    return FIRST + _since_first(moment)


def _enqueued(run_at: datetime) -> JobEnqueued:
    request = normalise_request(EnqueueRequest(job_type="t", run_at=run_at))
    assert request.run_at is not None
    return JobEnqueued(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        job_id=uuid4(),
        request=request,
        definition_version=1,
        priority=100,
        run_at=request.run_at,
        max_attempts=3,
        timeout_s=60.0,
        backoff=BackoffPolicy(),
        workflow=None,
    )


@settings(max_examples=600)
@given(MOMENTS)
@example(datetime(999, 6, 1, tzinfo=UTC))
@example(FIRST)
@example(LAST)
@example(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
@example(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(hours=1))))
def test_a_run_at_the_door_accepts_is_written_as_a_line_that_reads_back(moment: datetime) -> None:
    """The enqueue check refuses a time exactly when its UTC instant is outside the years
    1..9999 (a request error, not an OverflowError); any other reads back from its export
    line as the same instant, and writes the same line again."""
    if not _in_range(moment):
        with pytest.raises(InvalidRequestError, match="outside the years 1 to 9999"):
            normalise_request(EnqueueRequest(job_type="t", run_at=moment))
        return
    event = _enqueued(moment)
    topic, state = DEFAULT_CODEC.encode(event)
    line = event_line(
        event.job_id, StreamKind.JOB, 1, topic, stored_fields(DEFAULT_CODEC, topic, state)
    )
    _, record = parse_line(DEFAULT_CODEC, 2, line)
    assert isinstance(record.event, JobEnqueued)
    assert record.event == event and record.event.run_at == _utc(moment)
    again = DEFAULT_CODEC.encode(record.event)
    assert event_line(event.job_id, StreamKind.JOB, 1, *_fields(again)) == line


def _fields(encoded: tuple[str, bytes]) -> tuple[str, dict[str, object]]:
    topic, state = encoded
    return topic, stored_fields(DEFAULT_CODEC, topic, state)


def test_a_ledger_round_trips_every_run_at_it_accepts(db_url: str, target_url: str) -> None:
    """On each backend, jobs enqueued at times drawn over the whole accepted range (the ends,
    years below 1000, microseconds, offsets) are exported, imported into another ledger and
    exported again: the same run_at in the target, the same bytes."""
    with Ledger.open(db_url) as source, Ledger.open(target_url, create=True) as target:
        source.define("t")

        @settings(max_examples=12, deadline=None)
        @given(st.lists(MOMENTS.filter(_in_range), min_size=1, max_size=6))
        @example([FIRST, LAST, datetime(999, 6, 1, tzinfo=UTC)])
        @example([datetime(1, 1, 1, 1, 0, 0, 1, tzinfo=timezone(timedelta(hours=1)))])
        def round_trip(moments: list[datetime]) -> None:
            ids: list[UUID] = []
            for moment in moments:
                job_id = source.enqueue("t", run_at=moment).job_id
                assert job_id is not None
                ids.append(job_id)
            chunks: list[bytes] = []
            source.export_history(chunks.append, Selection(job_ids=tuple(ids)))
            lines = b"".join(chunks).splitlines(keepends=True)
            # The target holds the pending jobs of earlier examples: import beside them.
            target.import_history(lambda: iter(lines), into_live=True)
            for job_id, moment in zip(ids, moments, strict=True):
                job = target.get(job_id)
                assert job is not None and job.run_at == _utc(moment)
            again: list[bytes] = []
            target.export_history(again.append, Selection(job_ids=tuple(ids)))
            assert b"".join(again) == b"".join(chunks)

        round_trip()


def test_the_issue_repro_a_year_before_1000_imports(
    db_url: str, target_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """`enqueue t1 --run-at 0999-06-01T00:00:00Z`, `export -o f`, `import f` into a fresh
    ledger: imported, the job's run at is the year 999, and the target exports the same file."""
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("t1")
    enqueued = invoke(db_url, "enqueue", "t1", "--run-at", "0999-06-01T00:00:00Z")
    assert enqueued.exit_code == 0, enqueued.stderr
    path = tmp_path / "f"
    assert invoke(db_url, "export", "-o", str(path)).exit_code == 0
    assert b'"run_at":"0999-06-01T00:00:00.000000Z"' in path.read_bytes()
    imported = invoke(target_url, "import", str(path))
    assert imported.exit_code == 0, imported.stderr
    with Ledger.open(target_url) as target:
        job = target.get(UUID(enqueued.stdout.strip()))
        assert job is not None and job.run_at == datetime(999, 6, 1, tzinfo=UTC)
    assert export_bytes(target_url) == path.read_bytes()


@pytest.mark.parametrize(
    "text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999-00:00:01"]
)
def test_a_run_at_outside_the_years_1_to_9999_in_utc_is_refused_at_the_door(
    sqlite_url: str, text: str
) -> None:
    """`--run-at` whose UTC instant is outside the years 1..9999: one usage error line
    (exit 2), no traceback, nothing written; the API refuses it with request.invalid."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define("t1")
        before = ledger.store.head_position()
        with pytest.raises(InvalidRequestError, match="outside the years 1 to 9999"):
            ledger.enqueue("t1", run_at=datetime.fromisoformat(text))
    result = invoke(sqlite_url, "enqueue", "t1", "--run-at", text)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: Invalid value for '--run-at'") and "1 to 9999" in line
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.store.head_position() == before
