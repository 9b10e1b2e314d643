"""Checking the history against its hash chain: ``jobledger integrity verify``.

In one read snapshot, :func:`verify_chain` walks the witness block by block:

1. the witness itself: each block continues the chain where the one before it ended, and its
   entries fold to the head it records (an edited witness shows here);
2. the events: those now stored in the block's stretch of tail order are compared with the
   entries (:func:`ledger.core.integrity.first_divergence`): an edited event (``changed``),
   a swapped or re-keyed one (``moved``), a deleted one (``missing``) and one inserted into
   the past (``unexpected``) each show at their position. Events that retention moved to
   the archive are counted as archived, or read from it with ``include_archive``;
3. the checkpoints: each one's head is the chain's at its count of events, and its signature
   holds (under the operator's public key, if given); a published head (``expect``) is the
   chain's at its count.

It stops at the first divergence of the events (the report names it: position, job, version,
event, what differs) but checks every checkpoint. Events after the chain's head are counted,
not checked: the follower has not reached them yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal
from uuid import UUID

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.core.integrity import (
    GENESIS,
    ChainHead,
    Divergence,
    StoredEventBytes,
    WitnessBlock,
    Witnessed,
    chain_over,
    first_divergence,
    unpack_entries,
)
from ledger.core.integrity_checkpoints import (
    INTEGRITY_STREAM_ID,
    IntegrityCheckpoint,
    parse_short_head,
    short_head,
    signature_problem,
)
from ledger.core.retention import RETENTION_STREAM_ID, JobsArchived
from ledger.store.integrity_tables import (
    block_of_position,
    chain_head,
    stored_range,
    witness_blocks,
)
from ledger.store.reads import ReadSnapshot, decode_records
from ledger.store.store import Store
from ledger.views.stream_events import TailPosition
from projections.chain import checkpoints

BLOCKS_PER_READ = 20

FindingKind = Literal[
    "changed", "moved", "missing", "unexpected", "witness", "checkpoint", "signature", "published"
]


class IntegrityFinding(msgspec.Struct, frozen=True):
    """One thing that does not check: where, which job and event, what differs."""

    kind: FindingKind
    detail: str
    position: int | None = None
    job_id: UUID | None = None
    version: int | None = None
    event: str | None = None
    checkpoint: int | None = None
    """The checkpoint's number (1 for the first) where the finding is a checkpoint's."""


class IntegrityReport(msgspec.Struct):
    """What ``integrity verify`` found (``ok``: nothing)."""

    ok: bool
    started: bool
    start_position: int
    events: int
    """Events the chain covers (from the start, or from ``--from``'s block)."""
    checked: int
    """Events compared with what is stored (the rest of ``events`` were archived, or after a
    divergence)."""
    archived: int
    unwitnessed: int
    """Events after the chain's head: not hashed yet."""
    head: str
    short_head: str
    checkpoints: int
    signed: int
    first_divergence: IntegrityFinding | None = None
    findings: list[IntegrityFinding] = msgspec.field(default_factory=list)


def _finding(d: Divergence, stored: Sequence[StoredEventBytes]) -> IntegrityFinding:
    topic = next(
        (e.topic for e in stored if e.position == d.position),
        None,
    )
    return IntegrityFinding(d.kind, d.detail, d.position, d.job_id, d.version, topic)


class _Walk:
    """The state of one walk over the witness."""

    def __init__(self, snapshot: ReadSnapshot, archived: set[UUID], include_archive: bool):
        self.snapshot = snapshot
        self.archived_streams = archived
        self.include_archive = include_archive
        self.chain_at: dict[int, bytes] = {}
        """The chain after N events, for the counts a checkpoint or published head names."""
        self.wanted: set[int] = set()
        self.checked = 0
        self.archived = 0
        self.divergence: IntegrityFinding | None = None
        self.witness_problem: IntegrityFinding | None = None

    def block(self, block: WitnessBlock, after: TailPosition) -> list[Witnessed]:
        entries = unpack_entries(block.entries)
        if chain_over(block.chain_before, entries) != block.chain_after:
            self.witness_problem = IntegrityFinding(
                "witness",
                f"witness block {block.block}'s entries do not fold to the head it records: "
                "the witness was edited",
                block.position,
            )
            return entries
        for count in self.wanted:
            if block.events_before < count <= block.events_before + len(entries):
                k = count - block.events_before
                self.chain_at[count] = chain_over(block.chain_before, entries[:k])
        if self.divergence is not None:
            return entries
        stored = stored_range(
            self.snapshot, after, TailPosition(block.transaction_id, block.position)
        )
        present = {e.position for e in stored}
        kept = entries
        if not self.include_archive and self.archived_streams:
            kept = [
                e
                for e in entries
                if e.position in present or e.originator_id not in self.archived_streams
            ]
            self.archived += len(entries) - len(kept)
        found = first_divergence(kept, stored)
        if found is not None:
            self.divergence = _finding(found, stored)
            self.checked += sum(1 for e in kept if e.position < found.position)
        else:
            self.checked += len(kept)
        return entries


def verify_chain(
    store: Store,
    *,
    from_position: int | None = None,
    public_key: Ed25519PublicKey | None = None,
    expect: str | None = None,
    include_archive: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> IntegrityReport:
    """Recompute and check the chain (see the module docstring). ``include_archive``: the
    store reads the archive too (a reader opened with it); ``progress(done, total)`` is
    called after each read of blocks."""
    published = parse_short_head(expect) if expect is not None else None
    with store.read_snapshot() as snapshot:
        head = chain_head(snapshot)
        if head is None:
            blocks = witness_blocks(snapshot, 0, 1)
            why = (
                "the chain's head row is gone while its witness blocks remain: the witness "
                "was edited"
                if blocks
                else "the chain has not started: run `jobledger migrate` to start it"
            )
            return IntegrityReport(
                ok=False,
                started=False,
                start_position=0,
                events=0,
                checked=0,
                archived=0,
                unwitnessed=snapshot.count_after(TailPosition()),
                head="",
                short_head="",
                checkpoints=0,
                signed=0,
                findings=[IntegrityFinding("witness", why)],
            )
        found = _checkpoints(snapshot)
        archived = set() if include_archive else _archived_streams(snapshot)
        walk = _Walk(snapshot, archived, include_archive)
        walk.wanted = {c.events for c in found} | ({published[0]} if published else set())
        first = 0
        if from_position is not None:
            found_block = block_of_position(snapshot, from_position)
            first = head.blocks if found_block is None else found_block
        findings, covered = _walk_blocks(snapshot, walk, head, first, progress)
        findings += _check_checkpoints(found, walk.chain_at, head, public_key, first > 0)
        if published is not None:
            findings += _check_published(published, walk.chain_at, head)
        unwitnessed = snapshot.count_after(TailPosition(head.transaction_id, head.position))
    if walk.divergence is not None:
        findings.insert(0, walk.divergence)
    return IntegrityReport(
        ok=not findings,
        started=True,
        start_position=head.start_position,
        events=covered,
        checked=walk.checked,
        archived=walk.archived,
        unwitnessed=unwitnessed,
        head=head.chain.hex(),
        short_head=short_head(head.events, head.chain),
        checkpoints=len(found),
        signed=sum(1 for c in found if c.signature is not None),
        first_divergence=findings[0] if findings else None,
        findings=findings,
    )


def _walk_blocks(
    snapshot: ReadSnapshot,
    walk: _Walk,
    head: ChainHead,
    first: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[IntegrityFinding], int]:
    findings: list[IntegrityFinding] = []
    running: bytes | None = GENESIS if first == 0 else None
    count: int | None = 0 if first == 0 else None
    after = TailPosition(head.start_transaction_id, head.start_position)
    covered = 0
    number = first
    if first > 0:
        for previous in witness_blocks(snapshot, first - 1, 1):
            after = TailPosition(previous.transaction_id, previous.position)
    while number < head.blocks:
        blocks = witness_blocks(snapshot, number, BLOCKS_PER_READ)
        if not blocks:
            break
        for block in blocks:
            if (
                block.block != number
                or (running is not None and block.chain_before != running)
                or (count is not None and block.events_before != count)
            ):
                findings.append(
                    IntegrityFinding(
                        "witness",
                        f"witness block {block.block} does not continue the chain where block "
                        f"{number - 1} ended: the witness was edited",
                        block.position,
                    )
                )
                return findings, covered
            entries = walk.block(block, after)
            if walk.witness_problem is not None:
                findings.append(walk.witness_problem)
                return findings, covered
            covered += len(entries)
            running = block.chain_after
            count = block.events_before + len(entries)
            after = TailPosition(block.transaction_id, block.position)
            number += 1
        if progress is not None:
            progress(covered, head.events)
    if running is not None and (running != head.chain or count != head.events):
        findings.append(
            IntegrityFinding(
                "witness",
                "the chain's recorded head is not where its blocks end: the witness was edited",
                head.position,
            )
        )
    return findings, covered


def _checkpoints(snapshot: ReadSnapshot) -> list[IntegrityCheckpoint]:
    rows = snapshot.fetch(
        "events_of_job_after", {"ids": snapshot.ids.keys([INTEGRITY_STREAM_ID]), "after": 0}
    )
    return checkpoints(decode_records(snapshot.codec, snapshot.ids, rows, INTEGRITY_STREAM_ID))


def _archived_streams(snapshot: ReadSnapshot) -> set[UUID]:
    rows = snapshot.fetch(
        "events_of_job_after", {"ids": snapshot.ids.keys([RETENTION_STREAM_ID]), "after": 0}
    )
    streams: set[UUID] = set()
    for record in decode_records(snapshot.codec, snapshot.ids, rows, RETENTION_STREAM_ID):
        if isinstance(record.event, JobsArchived):
            streams.update(record.event.job_ids)
    return streams


def _check_checkpoints(
    found: Sequence[IntegrityCheckpoint],
    chain_at: dict[int, bytes],
    head: ChainHead,
    trusted: Ed25519PublicKey | None,
    partial: bool,
) -> list[IntegrityFinding]:
    findings: list[IntegrityFinding] = []
    first_signed = next((n for n, c in enumerate(found, 1) if c.signature is not None), None)
    if trusted is not None and first_signed is None:
        findings.append(
            IntegrityFinding(
                "signature",
                "no checkpoint is signed, but a public key was given (were the signed ones "
                "removed?)",
            )
        )
    for number, checkpoint in enumerate(found, start=1):
        # Before signing began, an unsigned checkpoint is no finding: the key came later.
        before_signing = first_signed is None or number < first_signed
        problem = None if before_signing else signature_problem(checkpoint, trusted)
        if problem is None and not before_signing and checkpoint.signature is None:
            # No runner makes one (the key's holder checkpoints once one is signed): a writer
            # pinning a forged chain where no key reaches.
            problem = "unsigned, after the signed checkpoints began"
        if problem is not None:
            findings.append(
                IntegrityFinding(
                    "signature",
                    f"checkpoint {number} (at {checkpoint.events} events): {problem}",
                    checkpoint.position,
                    checkpoint=number,
                )
            )
        if checkpoint.events > head.events:
            findings.append(
                IntegrityFinding(
                    "checkpoint",
                    f"checkpoint {number} records {checkpoint.events} events, but the chain "
                    f"holds {head.events}: the witness was cut short",
                    checkpoint.position,
                    checkpoint=number,
                )
            )
            continue
        computed = chain_at.get(checkpoint.events)
        if computed is None:
            if not partial:
                findings.append(
                    IntegrityFinding(
                        "checkpoint",
                        f"checkpoint {number} names {checkpoint.events} events, a count the "
                        "walk over the witness never reached",
                        checkpoint.position,
                        checkpoint=number,
                    )
                )
            continue
        if computed != checkpoint.head:
            findings.append(
                IntegrityFinding(
                    "checkpoint",
                    f"checkpoint {number} recorded head {checkpoint.head.hex()[:16]}... after "
                    f"{checkpoint.events} events; the chain now gives {computed.hex()[:16]}...",
                    checkpoint.position,
                    checkpoint=number,
                )
            )
    return findings


def _check_published(
    published: tuple[int, str], chain_at: dict[int, bytes], head: ChainHead
) -> list[IntegrityFinding]:
    events, prefix = published
    computed = chain_at.get(events)
    if computed is None:
        return [
            IntegrityFinding(
                "published",
                f"the published head names {events} events; the chain covers {head.events}"
                if events > head.events
                else f"the published head's count ({events}) was not reached by this walk",
            )
        ]
    if not computed.hex().startswith(prefix):
        return [
            IntegrityFinding(
                "published",
                f"the published head {events}:{prefix} is not the chain's "
                f"({events}:{computed.hex()[: len(prefix)]})",
            )
        ]
    return []
