"""The history's hash chain: each event's digest, the chain over them, and checking a stretch.

Issue 31, part 1 (a tamper-evident history). The chain runs in the order tailing readers rely
on (``(transaction_id, notification_id)``, over the final prefix): a follower hashes the events
in that order, off the hot path, and keeps what it computed as a witness that no rebuild
recomputes. A write-time chain per stream, by trigger, cost the server 100 µs a job and
12 to 17% of the jobs/s (measured; issue 31's note), so the writers stay as they are.

- :func:`event_digest` is SHA-256 over an event's canonical bytes: its stream, version,
  topic and stored state, each length-delimited where its length varies, behind a format tag.
  Any change of those bytes, or of which stream and version they claim, changes it.
- :func:`chain_next` folds a digest and its position into the running chain, so the chain's
  head names every event up to it, in order: a change, a deletion, an insertion or a reorder
  anywhere before it changes the head.
- :func:`first_divergence` compares the events now stored at a stretch of positions with the
  digests the witness recorded for them, and names the first that differs, and how.

Pure: no store, driver or clock. Digests use the standard library's SHA-256 (OpenSSL's).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple
from uuid import UUID

import msgspec

FORMAT = b"jl-event-1"
"""Tags the canonical form: a later form gets a new tag, never a silent change of meaning."""

GENESIS = hashlib.sha256(b"jl-chain-1").digest()
"""The chain's value before its first event."""


class StoredEventBytes(NamedTuple):
    """One event as the events table holds it, at its position."""

    position: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


class Witnessed(NamedTuple):
    """What the witness recorded for one position: the event it hashed there."""

    position: int
    originator_id: UUID
    originator_version: int
    digest: bytes


class ChainHead(NamedTuple):
    """The chain so far: the tail position of the last event it covers (``transaction_id``,
    ``position``), how many events and witness blocks it covers, and its head. ``start_*``
    is where it began: the tail position before its first event."""

    start_transaction_id: int
    start_position: int
    transaction_id: int
    position: int
    events: int
    blocks: int
    chain: bytes


class WitnessBlock(NamedTuple):
    """One block of the witness: the events one follower batch hashed, in chain order.

    ``events_before`` counts the chain's events before it; ``transaction_id`` and
    ``position`` are its last event's tail position; ``entries`` are packed
    (:func:`pack_entries`)."""

    block: int
    events_before: int
    transaction_id: int
    position: int
    chain_before: bytes
    chain_after: bytes
    entries: bytes


ENTRY = struct.Struct(">q16sq32s")
"""One witnessed event packed: its position, stream id, version and digest (64 bytes)."""


def pack_entries(witnessed: Sequence[Witnessed]) -> bytes:
    """A block's entries as the witness stores them (:data:`ENTRY` each, in chain order)."""
    pack = ENTRY.pack
    return b"".join(
        pack(item.position, item.originator_id.bytes, item.originator_version, item.digest)
        for item in witnessed
    )


def unpack_entries(packed: bytes) -> list[Witnessed]:
    """The entries :func:`pack_entries` packed, in order."""
    if len(packed) % ENTRY.size:
        raise ValueError(f"a witness block of {len(packed)} bytes is not whole entries")
    return [
        Witnessed(position, UUID(bytes=stream), version, digest)
        for position, stream, version, digest in ENTRY.iter_unpack(packed)
    ]


def witness(stored: Iterable[StoredEventBytes]) -> list[Witnessed]:
    """What the witness records for ``stored``, in their order: each event's digest."""
    return [
        Witnessed(
            event.position,
            event.originator_id,
            event.originator_version,
            event_digest(event.originator_id, event.originator_version, event.topic, event.state),
        )
        for event in stored
    ]


class Chained(NamedTuple):
    """What :func:`chain_rows` computed over a run of stored events."""

    chain: bytes
    entries: bytes
    """The packed witness entries (:func:`pack_entries`' form)."""
    events: int


def chain_rows(
    previous: bytes,
    rows: Iterable[tuple[int, UUID, int, str, bytes | memoryview, *tuple[int, ...]]],
) -> Chained:
    """The chain after ``rows`` (stored events as the store reads them: position, stream id,
    version, topic, state, and optionally the writing transaction), from ``previous``, and
    their packed witness entries: :func:`witness`, :func:`chain_over` and
    :func:`pack_entries` in one pass, for the follower's hot loop (byte for byte the same:
    tests/unit/test_integrity_chain.py)."""
    sha256 = hashlib.sha256
    pack = ENTRY.pack
    head = previous
    parts = []
    for row in rows:
        position, stream, version, topic, state = row[0], row[1], row[2], row[3], row[4]
        stream_bytes = stream.bytes
        topic_bytes = topic.encode()
        digest = sha256(
            b"".join(
                (
                    FORMAT,
                    stream_bytes,
                    version.to_bytes(8, "big", signed=True),
                    len(topic_bytes).to_bytes(4, "big"),
                    topic_bytes,
                    state,
                )
            )
        ).digest()
        head = sha256(head + position.to_bytes(8, "big", signed=True) + digest).digest()
        parts.append(pack(position, stream_bytes, version, digest))
    return Chained(head, b"".join(parts), len(parts))


def event_digest(originator_id: UUID, originator_version: int, topic: str, state: bytes) -> bytes:
    """SHA-256 of the event's canonical bytes (see the module docstring)."""
    topic_bytes = topic.encode()
    h = hashlib.sha256(FORMAT)
    h.update(originator_id.bytes)
    h.update(originator_version.to_bytes(8, "big", signed=True))
    h.update(len(topic_bytes).to_bytes(4, "big"))
    h.update(topic_bytes)
    h.update(state)
    return h.digest()


def chain_next(previous: bytes, position: int, digest: bytes) -> bytes:
    """The chain after the event ``digest`` at ``position``."""
    return hashlib.sha256(previous + position.to_bytes(8, "big", signed=True) + digest).digest()


def chain_over(previous: bytes, witnessed: Iterable[Witnessed]) -> bytes:
    """The chain after ``witnessed``, in order, from ``previous``."""
    head = previous
    for item in witnessed:
        head = chain_next(head, item.position, item.digest)
    return head


Kind = Literal["changed", "missing", "unexpected", "moved"]


class Divergence(msgspec.Struct, frozen=True):
    """The first place where the stored history differs from what the witness hashed.

    - ``changed``: the event at ``position`` is the one witnessed (same stream and version)
      but its bytes differ (its topic or state was edited);
    - ``moved``: a different event sits at ``position`` (the history was reordered, or one
      event's stream or version was edited);
    - ``missing``: no event at a witnessed ``position`` (deleted);
    - ``unexpected``: an event at a position the witness never saw inside the stretch it
      covers (inserted afterwards).
    """

    kind: Kind
    position: int
    job_id: UUID | None
    version: int | None
    detail: str


def first_divergence(
    witnessed: Sequence[Witnessed], stored: Sequence[StoredEventBytes]
) -> Divergence | None:
    """The first position (lowest) at which ``stored`` differs from ``witnessed``, both in
    position order and covering the same stretch of positions; ``None`` if none does."""
    found: list[Divergence] = []
    stored_at = {event.position: event for event in stored}
    witnessed_at = {item.position for item in witnessed}
    for item in witnessed:
        event = stored_at.get(item.position)
        if event is None:
            found.append(
                Divergence(
                    "missing",
                    item.position,
                    item.originator_id,
                    item.originator_version,
                    "no event at this position: deleted after it was witnessed",
                )
            )
            break
        if (event.originator_id, event.originator_version) != (
            item.originator_id,
            item.originator_version,
        ):
            found.append(
                Divergence(
                    "moved",
                    item.position,
                    event.originator_id,
                    event.originator_version,
                    f"witnessed stream {item.originator_id} version {item.originator_version} "
                    f"here, found stream {event.originator_id} version "
                    f"{event.originator_version}",
                )
            )
            break
        digest = event_digest(
            event.originator_id, event.originator_version, event.topic, event.state
        )
        if digest != item.digest:
            found.append(
                Divergence(
                    "changed",
                    item.position,
                    event.originator_id,
                    event.originator_version,
                    "the event's topic or state differs from what was witnessed",
                )
            )
            break
    for event in stored:
        if event.position not in witnessed_at:
            found.append(
                Divergence(
                    "unexpected",
                    event.position,
                    event.originator_id,
                    event.originator_version,
                    "an event the witness never saw, inside the stretch it covers",
                )
            )
            break
    return min(found, key=lambda d: d.position) if found else None
