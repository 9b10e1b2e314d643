"""Exchange files edited by a test: split an export into its parts, and seal edited lines
with the trailer a whole file ends with (so that an import reaches the edit rather than
refusing the file as changed)."""

from __future__ import annotations

import json

from ledger.core.exchange_trailer import FileDigest, StreamCounts, Trailer, trailer_line


def parts(data: bytes) -> tuple[bytes, list[bytes], bytes]:
    """An export's header, event lines and trailer (each line with its newline)."""
    header, *events, trailer = data.splitlines(keepends=True)
    assert trailer.startswith(b'{"trailer"'), trailer
    return header, events, trailer


def seal(header: bytes, events: list[bytes]) -> bytes:
    """The file of ``header`` and ``events`` (lines with their newlines), ending in the
    trailer that states them: counts by kind and the digest of every line."""
    digest = FileDigest()
    streams: dict[str, set[str]] = {"job_type": set(), "job": set(), "workflow": set()}
    for line in (header, *events):
        digest.update(line)
    for line in events:
        decoded = json.loads(line)  # not msgspec: a test's bad line may hold a lone surrogate
        streams[decoded["kind"]].add(decoded["stream"])
    counts = StreamCounts(**{kind: len(ids) for kind, ids in streams.items()})
    trailer = Trailer(events=len(events), streams=counts, digest=digest.value())
    return header + b"".join(events) + trailer_line(trailer)


def resealed(data: bytes) -> bytes:
    """``data`` (a header, event lines, perhaps a trailer) ending in a trailer that states
    its lines as they are now."""
    header, *lines = data.splitlines(keepends=True)
    return seal(header, [line for line in lines if not line.startswith(b'{"trailer"')])
