"""The history exchange format: versioned JSON Lines, read and written without I/O.

A file is a header line (:func:`header_line`) and then one line per stored event
(:func:`event_line`): definitions first, then jobs, then workflow runs, each stream whole and
contiguous, in version order. The bytes depend only on the events, never on when, where or by
whom the export ran, so export -> import -> export is byte-identical. ``docs/export-format.md``
is the reference.

Reading (:func:`read_streams`) validates as it goes and raises :class:`ImportBadLineError` with
the line number: the header, the shape of each line, each event's fields (older topic versions
go through the codec's upcasters), the bounds the commands enforce on each event
(:func:`ledger.core.recorded.check_recorded`: payload size and depth, names, NUL, leases…),
the order of streams and versions, and the fold of every stream, so an import can check a
whole file before it writes anything.

A workflow run's stream (kind ``workflow``, after the jobs) is checked as a job's is: its
first event is ``workflow_submitted`` with a request a submit would accept, and the run's
fold (:func:`ledger.core.workflows.state.evolve`, which refuses what no decision writes)
holds over the whole stream.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from ledger.core.codec import EventCodec, Record, parse_topic, topic_of
from ledger.core.errors import LedgerError
from ledger.core.events import Event, JobEnqueued, JobEvent, JobTypeDefined, JobTypeUpdated
from ledger.core.recorded import check_recorded
from ledger.core.state import DefinitionState, JobState, evolve, evolve_definition
from ledger.core.workflows.events import WorkflowEvent, WorkflowSubmitted
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.core.workflows.validation import normalise_request

FORMAT = "jobledger-history"
FORMAT_VERSION = 1
"""Bumped whenever a reader of the previous version could misread a file of the new one."""


class StreamKind(StrEnum):
    """Which kind of stream an event belongs to."""

    JOB = "job"
    JOB_TYPE = "job_type"
    WORKFLOW = "workflow"


class ImportBadLineError(LedgerError):
    """A line of an import file that is malformed, out of order or not a legal history."""

    code = "import.bad_line"

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class ImportConflictError(LedgerError):
    """A stream of the file exists in the target with a different history."""

    code = "import.conflict"


class ImportLiveWorkError(LedgerError):
    """The import target holds live work (pending or leased jobs) and was not told to
    import beside it."""

    code = "import.target_has_live_work"


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    """Which jobs an export takes: all the conditions given must hold (none: every job).

    ``status``, ``job_type`` and ``org`` are the job's current ones; ``since``/``until``
    bound its enqueue time (``since <= enqueued_at < until``)."""

    job_ids: tuple[UUID, ...] = ()
    job_type: str | None = None
    org: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def admits_enqueue_time(self, enqueued_at: datetime) -> bool:
        if self.since is not None and enqueued_at < self.since:
            return False
        return self.until is None or enqueued_at < self.until


class Stream(NamedTuple):
    """One whole stream read from a file: its kind, id, job type (a run's: its workflow
    type), events and first line."""

    kind: StreamKind
    stream_id: UUID
    job_type: str
    records: list[Record]
    first_line: int


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    version: int


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    stream: UUID
    kind: StreamKind
    version: int
    topic: str
    event: dict[str, Any]


_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(_Header)
_line_decoder = msgspec.json.Decoder(_Line)


# --- writing ---------------------------------------------------------------------------------


def header_line() -> bytes:
    """The first line of every file (with its newline)."""
    return _encoder.encode({"format": FORMAT, "version": FORMAT_VERSION}) + b"\n"


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC, always with microseconds: one spelling per instant."""
    if moment.tzinfo is None:
        raise ValueError(f"naive time {moment!r} in a stored event")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def stored_fields(codec: EventCodec, topic: str, state: bytes) -> dict[str, Any]:
    """A stored event's fields as JSON-ready values, in the struct's field order.

    An event stored under an older topic version is written as stored (the map in its
    msgpack), so that the reader's upcasters, not the writer's, decide what it means."""
    event = codec.decode(topic, state)
    plain: Any
    if topic_of(type(event)) == topic:
        plain = msgspec.to_builtins(event, builtin_types=(datetime,))
    else:
        plain = msgspec.msgpack.decode(state)
    fields = _jsonable(plain)
    assert isinstance(fields, dict)
    return fields


def event_line(
    stream_id: UUID, kind: StreamKind, version: int, topic: str, fields: dict[str, Any]
) -> bytes:
    """One event's line (with its newline); keys always in this order."""
    line = {
        "stream": str(stream_id),
        "kind": kind.value,
        "version": version,
        "topic": topic,
        "event": fields,
    }
    return _encoder.encode(line) + b"\n"


def kind_of(event: Event) -> StreamKind:
    if isinstance(event, JobEvent):
        return StreamKind.JOB
    return StreamKind.WORKFLOW if isinstance(event, WorkflowEvent) else StreamKind.JOB_TYPE


# --- reading ---------------------------------------------------------------------------------


def check_header(raw: bytes) -> None:
    """Refuse anything but this format's header, at this version."""
    try:
        header = _header_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ImportBadLineError(1, f"not a {FORMAT} header ({exc})") from None
    if header.format != FORMAT:
        raise ImportBadLineError(1, f"format {header.format!r} is not {FORMAT!r}")
    if header.version != FORMAT_VERSION:
        raise ImportBadLineError(
            1, f"format version {header.version} is not {FORMAT_VERSION}, which this code reads"
        )


def _naive_time(value: msgspec.Struct) -> str | None:
    """The name of a field (of ``value``, or of the structs in it) holding a naive time."""
    # __struct_fields__, not msgspec.structs.fields(): that one evaluates the annotations on
    # every call, which cost more than everything else in an import together.
    for name in value.__struct_fields__:
        item = getattr(value, name)
        if isinstance(item, datetime) and item.tzinfo is None:
            return name
        if isinstance(item, msgspec.Struct):
            inner = _naive_time(item)
            if inner is not None:
                return f"{name}.{inner}"
    return None


def parse_line(codec: EventCodec, number: int, raw: bytes) -> tuple[StreamKind, Record]:
    """One event line, decoded (and upcast) to a :class:`Record`."""
    try:
        line = _line_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ImportBadLineError(number, str(exc)) from None
    except RecursionError:
        raise ImportBadLineError(number, "nested too deep to decode") from None
    if line.version < 1:
        raise ImportBadLineError(number, f"version {line.version} is not a stream version")
    try:
        parse_topic(line.topic)
        # Through msgpack so that an old topic takes the codec's upcasting path as stored.
        event = codec.decode(line.topic, msgspec.msgpack.encode(line.event))
    except LedgerError as exc:
        raise ImportBadLineError(number, exc.message) from None
    except (
        msgspec.ValidationError,
        msgspec.DecodeError,
        msgspec.EncodeError,
        OverflowError,
        UnicodeEncodeError,
        RecursionError,
    ) as exc:
        raise ImportBadLineError(number, f"{line.topic}: {exc}") from None
    naive = _naive_time(event)
    if naive is not None:
        raise ImportBadLineError(number, f"{line.topic}: `{naive}` has no time zone")
    try:
        check_recorded(event)
        if isinstance(event, WorkflowSubmitted):
            normalise_request(event.request)  # the bounds and the graph a submit checks
    except LedgerError as exc:
        raise ImportBadLineError(number, f"{line.topic}: {exc.message}") from None
    if kind_of(event) is not line.kind:
        raise ImportBadLineError(number, f"{line.topic} is not an event of a {line.kind} stream")
    return line.kind, Record(line.stream, line.version, event)


def _job_type_of(record: Record, number: int) -> str:
    """The job type a stream's first event names (a job's must be ``job_enqueued``)."""
    event = record.event
    if isinstance(event, JobTypeDefined | JobTypeUpdated):
        return event.definition.job_type
    if isinstance(event, JobEnqueued):
        return event.request.job_type
    if isinstance(event, WorkflowSubmitted):
        return event.request.workflow_type
    if isinstance(event, WorkflowEvent):
        raise ImportBadLineError(
            number,
            f"workflow stream {record.originator_id} starts with {type(event).name}, "
            "not workflow_submitted",
        )
    raise ImportBadLineError(
        number,
        f"job stream {record.originator_id} starts with {type(event).name}, not job_enqueued",
    )


class _Checker:
    """The rules between lines: order of kinds, streams and versions; each stream's fold."""

    def __init__(self, type_stream: Callable[[str], UUID]) -> None:
        self._type_stream = type_stream
        self._seen: set[int] = set()
        self._types: set[str] = set()
        self._jobs_started = False
        self._runs_started = False
        self._job: JobState | None = None
        self._definition: DefinitionState | None = None
        self._run: RunState | None = None

    def start(self, kind: StreamKind, record: Record, number: int) -> Stream:
        stream_id = record.originator_id
        if record.originator_version != 1:
            raise ImportBadLineError(
                number, f"stream {stream_id} starts at version {record.originator_version}, not 1"
            )
        if stream_id.int in self._seen:
            raise ImportBadLineError(number, f"stream {stream_id} appears twice")
        self._seen.add(stream_id.int)
        job_type = _job_type_of(record, number)
        if kind is StreamKind.WORKFLOW:
            self._runs_started = True
        elif self._runs_started:
            raise ImportBadLineError(number, f"{kind} stream after the first workflow run")
        elif kind is StreamKind.JOB_TYPE:
            if self._jobs_started:
                raise ImportBadLineError(number, "definition after the first job")
            if stream_id != self._type_stream(job_type):
                raise ImportBadLineError(
                    number, f"stream {stream_id} is not job type {job_type!r}'s stream"
                )
            self._types.add(job_type)
        else:
            self._jobs_started = True
            if job_type not in self._types:
                raise ImportBadLineError(
                    number, f"job type {job_type!r} has no definition earlier in the file"
                )
        self._job, self._definition, self._run = None, None, None
        return Stream(kind, stream_id, job_type, [], number)

    def add(self, stream: Stream, record: Record, number: int) -> None:
        expected = len(stream.records) + 1
        if record.originator_version != expected:
            raise ImportBadLineError(
                number,
                f"stream {stream.stream_id} version {record.originator_version} "
                f"where {expected} was due",
            )
        event = record.event
        try:
            if isinstance(event, JobEvent):
                self._job = evolve(self._job, event)
                if self._job.job_id != stream.stream_id:
                    raise ImportBadLineError(
                        number, f"job {self._job.job_id} in stream {stream.stream_id}"
                    )
            elif isinstance(event, WorkflowEvent):
                self._run = evolve_run(self._run, event)
                if self._run.run_id != stream.stream_id:
                    raise ImportBadLineError(
                        number, f"run {self._run.run_id} in stream {stream.stream_id}"
                    )
            else:
                self._definition = evolve_definition(self._definition, event)
                if self._definition.definition.job_type != stream.job_type:
                    raise ImportBadLineError(number, f"another job type in {stream.job_type}'s")
        except LedgerError as exc:
            if isinstance(exc, ImportBadLineError):
                raise
            raise ImportBadLineError(number, str(exc)) from None
        stream.records.append(record)


def read_streams(
    lines: Iterable[bytes], codec: EventCodec, type_stream: Callable[[str], UUID]
) -> Iterator[Stream]:
    """The streams of a file, each whole, validated; ``type_stream(job_type)`` is the
    originator id a job type's stream must have."""
    checker = _Checker(type_stream)
    current: Stream | None = None
    number = 0
    for number, raw in enumerate(lines, start=1):
        if number == 1:
            check_header(raw)
            continue
        if not raw.strip():
            raise ImportBadLineError(number, "empty line")
        kind, record = parse_line(codec, number, raw)
        if current is None or record.originator_id != current.stream_id:
            if current is not None:
                yield current
            current = checker.start(kind, record, number)
        elif kind is not current.kind:
            raise ImportBadLineError(number, f"kind {kind} within a {current.kind} stream")
        checker.add(current, record, number)
    if number == 0:
        raise ImportBadLineError(1, f"empty file: no {FORMAT} header")
    if current is not None:
        yield current


def same_history(file: Iterable[Record], stored: Iterable[Record]) -> bool:
    """Whether two histories of one stream are the same events (after upcasting)."""
    return [(r.originator_version, r.event) for r in file] == [
        (r.originator_version, r.event) for r in stored
    ]
