"""The history exchange format: versioned JSON Lines, written without I/O.

A file is a header line (:func:`header_line`), one line per stored event (:func:`event_line`):
definitions first, then jobs, then workflow runs, each stream whole and contiguous, in version
order, and a trailer line (:mod:`ledger.core.exchange_trailer`: counts and a digest of every
line before it), so that a file cut short is refused rather than read as a history of jobs
stopped mid-way. The bytes depend only on the events, never on when, where or by
whom the export ran, so export -> import -> export is byte-identical. ``docs/export-format.md``
is the reference.

This module holds the format's vocabulary (its name and versions, the stream kinds, the
import errors, an export's :class:`Selection`, a read :class:`Stream`) and the writing; the
reading, which validates every line, is :mod:`ledger.core.exchange_reader`.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from ledger.core.codec import EventCodec, Record, topic_of
from ledger.core.errors import LedgerError
from ledger.core.events import Event, JobEvent
from ledger.core.exchange_trailer import ChainSeal
from ledger.core.workflows.events import WorkflowEvent

FORMAT = "jobledger-history"
FORMAT_VERSION = 2
"""Bumped whenever a reader of the previous version could misread a file of the new one.
Version 2 added the trailer."""
SEALED_VERSION = 3
"""A sealed file (``export --signing-key``): version 2 with the trailer's ``chain`` key (the
source's chain head and a signature). Plain exports stay version 2, so that export, import
and export again give the same bytes (the target's chain is its own)."""
UNTRAILED_VERSION = 1
"""The format version before the trailer: still read, but only when asked to
(``allow_untrailed``), since a cut-short file of it cannot be told from a whole one."""


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


class ImportTruncatedError(ImportBadLineError):
    """A version-2 file that ends without its trailer: it was cut short."""

    code = "import.truncated"


class ImportUntrailedError(ImportBadLineError):
    """A version-1 file (no trailer) imported without ``allow_untrailed``."""

    code = "import.untrailed"


class ImportTrailerMismatchError(ImportBadLineError):
    """A trailer whose counts or digest are not the file's: the file was changed."""

    code = "import.trailer_mismatch"


class FileEnd(msgspec.Struct):
    """What :func:`~ledger.core.exchange_reader.read_streams` found once it has read a whole
    file: its format version, its lines (trailer included) and event lines, and the digest its
    trailer stated and the reader checked (``None``: an untrailed version-1 file, read as it
    stands)."""

    version: int = 0
    lines: int = 0
    events: int = 0
    digest: str | None = None
    chain: ChainSeal | None = None
    """A sealed file's seal (version 3), as the trailer stated it; checked against a key
    only when one is given (``import --verify-signature``)."""


class ImportSignatureError(LedgerError):
    """``--verify-signature``: the file is not sealed, or its seal does not hold under the
    key given."""

    code = "import.signature"


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


_encoder = msgspec.json.Encoder()


# --- writing ---------------------------------------------------------------------------------


def header_line(version: int = FORMAT_VERSION) -> bytes:
    """The first line of every file this code writes (with its newline)."""
    return _encoder.encode({"format": FORMAT, "version": version}) + b"\n"


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC, always with a four-digit year and microseconds: one spelling per
    instant, and one RFC 3339 reads (``strftime("%Y")`` writes the year 999 as ``999``)."""
    if moment.tzinfo is None:
        raise ValueError(f"naive time {moment!r} in a stored event")
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


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
