"""Reading a history exchange file (:mod:`ledger.core.exchange`): every line validated, no I/O.

:func:`read_streams` validates as it goes and raises
:class:`~ledger.core.exchange.ImportBadLineError` with the line number: the header, the shape
of each line, each event's fields (older topic versions go through the codec's upcasters),
the bounds the commands enforce on each event (:func:`ledger.core.recorded.check_recorded`:
payload size and depth, names, NUL, leases…), the order of streams and versions, the fold of
every stream, and the trailer, so an import can check a whole file before it writes anything.
Every key of an event must be one its schema declares
(:func:`ledger.core.unknown_fields.unknown_field`): decoding alone would drop an unknown one
silently.

A workflow run's stream (kind ``workflow``, after the jobs) is checked as a job's is: its
first event is ``workflow_submitted`` with a request a submit would accept, and the run's
fold (:func:`ledger.core.workflows.state.evolve`, which refuses what no decision writes)
holds over the whole stream.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from ledger.core.codec import EventCodec, Record, parse_topic
from ledger.core.errors import LedgerError
from ledger.core.events import JobEnqueued, JobEvent, JobTypeDefined, JobTypeUpdated
from ledger.core.exchange import (
    FORMAT,
    FORMAT_VERSION,
    SEALED_VERSION,
    UNTRAILED_VERSION,
    FileEnd,
    ImportBadLineError,
    ImportTrailerMismatchError,
    ImportTruncatedError,
    ImportUntrailedError,
    Stream,
    StreamKind,
    kind_of,
)
from ledger.core.exchange_trailer import (
    FileDigest,
    StreamCounts,
    Trailer,
    is_trailer,
    mismatch,
    parse_trailer,
)
from ledger.core.recorded import check_recorded
from ledger.core.state import DefinitionState, JobState, evolve, evolve_definition
from ledger.core.unknown_fields import unknown_field
from ledger.core.workflows.events import WorkflowEvent, WorkflowSubmitted
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.core.workflows.validation import normalise_request


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    version: int


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    stream: UUID
    kind: StreamKind
    version: int
    topic: str
    event: dict[str, Any]


_header_decoder = msgspec.json.Decoder(_Header)
_line_decoder = msgspec.json.Decoder(_Line)


def check_header(raw: bytes, *, allow_untrailed: bool = False) -> int:
    """The format version of a header this code reads; refuse anything else, and an
    untrailed version-1 file unless ``allow_untrailed``."""
    try:
        header = _header_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ImportBadLineError(1, f"not a {FORMAT} header ({exc})") from None
    if header.format != FORMAT:
        raise ImportBadLineError(1, f"format {header.format!r} is not {FORMAT!r}")
    if header.version == UNTRAILED_VERSION:
        if not allow_untrailed:
            raise ImportUntrailedError(
                1,
                f"format version {UNTRAILED_VERSION} has no trailer, so a file cut short "
                "cannot be told from a whole one; re-export it with this jobledger, or pass "
                "--allow-untrailed (allow_untrailed=True) to import it as it stands",
            )
        return header.version
    if header.version not in (FORMAT_VERSION, SEALED_VERSION):
        raise ImportBadLineError(
            1,
            f"format version {header.version} is not {FORMAT_VERSION}, {SEALED_VERSION} "
            f"(or {UNTRAILED_VERSION}), which this code reads",
        )
    return header.version


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
        cls, fields = codec.upcast(line.topic, line.event)
    except LedgerError as exc:
        raise ImportBadLineError(number, exc.message) from None
    except (KeyError, TypeError, ValueError) as exc:  # an upcaster given a malformed map
        raise ImportBadLineError(number, f"{line.topic}: cannot upcast ({exc!r})") from None
    unknown = unknown_field(fields, cls)
    if unknown is not None:
        raise ImportBadLineError(number, f"{line.topic}: unknown field `{unknown}`")
    try:
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
        self.streams = {kind: 0 for kind in StreamKind}
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
        self.streams[kind] += 1
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
    lines: Iterable[bytes],
    codec: EventCodec,
    type_stream: Callable[[str], UUID],
    *,
    allow_untrailed: bool = False,
    end: FileEnd | None = None,
) -> Iterator[Stream]:
    """The streams of a file, each whole, validated; ``type_stream(job_type)`` is the
    originator id a job type's stream must have.

    The trailer is checked once the last line is read, so the generator raises there (before
    it is exhausted) on a file cut short or changed: a caller appending streams as they come
    must do so in one transaction, rolled back when the generator raises. ``end``, when
    given, is filled in once the whole file has been read and found good."""
    checker = _Checker(type_stream)
    digest = FileDigest()
    current: Stream | None = None
    version = 0
    events = 0
    number = 0
    trailer: Trailer | None = None
    for number, raw in enumerate(lines, start=1):
        if trailer is not None:
            raise ImportBadLineError(number, "a line after the trailer, which ends the file")
        if number == 1:
            version = check_header(raw, allow_untrailed=allow_untrailed)
            digest.update(raw)
            continue
        if version != UNTRAILED_VERSION and is_trailer(raw):
            trailer = _checked_trailer(number, raw, checker, events, digest, version=version)
            continue
        digest.update(raw)
        if not raw.strip():
            raise ImportBadLineError(number, "empty line")
        kind, record = parse_line(codec, number, raw)
        events += 1
        if current is None or record.originator_id != current.stream_id:
            if current is not None:
                yield current
            current = checker.start(kind, record, number)
        elif kind is not current.kind:
            raise ImportBadLineError(number, f"kind {kind} within a {current.kind} stream")
        checker.add(current, record, number)
    if number == 0:
        raise ImportBadLineError(1, f"empty file: no {FORMAT} header")
    if trailer is None and version != UNTRAILED_VERSION:
        raise ImportTruncatedError(
            number + 1,
            f"the file ends after line {number} without the trailer that ends every "
            f"version-{version} export: it was cut short (an export or a copy that did not "
            "finish); nothing imported",
        )
    if end is not None:
        end.version, end.lines, end.events = version, number, events
        end.digest = None if trailer is None else trailer.digest
        end.chain = None if trailer is None else trailer.chain
    if current is not None:
        yield current


def _checked_trailer(
    number: int, raw: bytes, checker: _Checker, events: int, digest: FileDigest, *, version: int
) -> Trailer:
    """The trailer at line ``number``, refused unless it states what the lines before hold
    (and, in a sealed file only, a seal)."""
    try:
        stated = parse_trailer(raw)
    except ValueError as exc:
        raise ImportBadLineError(number, str(exc)) from None
    if (stated.chain is not None) != (version == SEALED_VERSION):
        raise ImportBadLineError(
            number,
            f"a version-{version} trailer "
            + ("without the seal (chain) it must have" if stated.chain is None else "with a seal"),
        )
    if not raw.endswith(b"\n"):
        raise ImportTruncatedError(number, "the trailer has no newline: the file was cut short")
    counts = checker.streams
    found = Trailer(
        events=events,
        streams=StreamCounts(
            job_type=counts[StreamKind.JOB_TYPE],
            job=counts[StreamKind.JOB],
            workflow=counts[StreamKind.WORKFLOW],
        ),
        digest=digest.value(),
    )
    wrong = mismatch(stated, found)
    if wrong is not None:
        raise ImportTrailerMismatchError(
            number, f"{wrong}: the file was changed after export; nothing imported"
        )
    return stated


def same_history(file: Iterable[Record], stored: Iterable[Record]) -> bool:
    """Whether two histories of one stream are the same events (after upcasting)."""
    return [(r.originator_version, r.event) for r in file] == [
        (r.originator_version, r.event) for r in stored
    ]
