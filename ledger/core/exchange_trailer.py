"""The end of an exchange file: counts and a digest of every line before it.

A file of format version 2 ends with one trailer line (:func:`trailer_line`). Without it a
file cut short at a line boundary (``head -n 20``, a copy that stopped, an export that died)
is itself a well-formed history, of jobs stopped mid-way: a dead job arrives leased. So the
writer digests each line as it writes it (:class:`FileDigest`, streaming: an export is never
held whole), and the reader digests each line as it reads it and refuses the file when the
trailer is missing, or its counts or digest are not the file's.

The digest says the file is the one the export wrote, whole; it does not say who wrote it
(anyone who edits the file can write a new trailer). Provenance is issue 31's hash chain,
whose head a later format version adds to this trailer as a new key (``docs/export-format.md``,
"The trailer").

Pure: hashing, no I/O.
"""

from __future__ import annotations

import hashlib

import msgspec

DIGEST_ALGORITHM = "sha256"


class StreamCounts(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Streams in the file by kind (the line's ``kind``): job types', jobs', workflow runs'."""

    job_type: int
    job: int
    workflow: int


class Trailer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What the file holds before its last line: event lines, streams by kind, and the
    digest (``sha256:<64 hex>``) of every byte before the trailer, header included."""

    events: int
    streams: StreamCounts
    digest: str


class _TrailerLine(msgspec.Struct, forbid_unknown_fields=True):
    trailer: Trailer


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_TrailerLine)


class FileDigest:
    """The running digest of a file's bytes, fed line by line (or in chunks of whole lines)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def value(self) -> str:
        return f"{DIGEST_ALGORITHM}:{self._hash.hexdigest()}"


def trailer_line(trailer: Trailer) -> bytes:
    """The last line of a version-2 file (with its newline)."""
    return _encoder.encode(_TrailerLine(trailer)) + b"\n"


def is_trailer(raw: bytes) -> bool:
    """Whether ``raw`` is meant as the trailer: an object whose first key is ``trailer`` (as
    the writer spells it; an event line starts with ``stream``)."""
    return raw.lstrip().startswith(b'{"trailer"')


def parse_trailer(raw: bytes) -> Trailer:
    """A trailer line's content; raises ``ValueError`` naming what is wrong with it."""
    try:
        return _decoder.decode(raw).trailer
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a trailer ({exc})") from None
    except RecursionError:
        raise ValueError("not a trailer (nested too deep to decode)") from None


def mismatch(stated: Trailer, found: Trailer) -> str | None:
    """What differs between the trailer a file states and what its lines hold, or ``None``."""
    if stated.events != found.events:
        return f"the trailer counts {stated.events} event lines, the file holds {found.events}"
    if stated.streams != found.streams:
        return (
            f"the trailer counts streams {_streams(stated.streams)}, "
            f"the file holds {_streams(found.streams)}"
        )
    if stated.digest != found.digest:
        return f"the trailer's digest is {stated.digest}, the file's is {found.digest}"
    return None


def _streams(counts: StreamCounts) -> str:
    return ", ".join(f"{name} {getattr(counts, name)}" for name in counts.__struct_fields__)
