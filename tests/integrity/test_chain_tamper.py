"""The history's hash chain names every edit made by SQL behind the ledger's back.

Each test builds a small real history on each backend, extends the chain over it (the
follower's runner, as a pool's witness does), then tampers with the events table by hand
(:mod:`tests.integrity.tamper`) and asks ``verify`` what it finds: an UPDATE of an event's
state or topic (``changed``), a DELETE (``missing``), a reorder of two events (``moved``), an
INSERT into the past (``unexpected``, PostgreSQL: the one backend where an old transaction's
place in tail order can be forged). The last tests play a writer who also rewrites the
witness to match: the checkpoints, their signatures and a published head still name it.
"""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import FakeClock, Ledger
from ledger.core.integrity import (
    ChainHead,
    StoredEventBytes,
    chain_over,
    pack_entries,
    unpack_entries,
    witness,
)
from ledger.core.integrity_checkpoints import (
    INTEGRITY_STREAM_ID,
    IntegrityCheckpoint,
    short_head,
)
from ledger.store.integrity_tables import chain_head, witness_blocks
from ledger.views.kinds import INTEGRITY
from tests.integrity import tamper


@pytest.fixture
def chained(db_url: str, clock: FakeClock) -> Iterator[Ledger]:
    """A ledger with a few jobs enqueued, run and finished, its chain caught up over them."""
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("t", max_attempts=1)
        for i in range(12):
            ledger.enqueue("t", {"i": i, "note": "café"})
        for state in ledger.claim("w", limit=8):
            assert state.lease is not None
            ledger.succeed(state.lease, output={"ok": True})
        report = ledger.integrity.catch_up(checkpoint_every=None)
        assert report.applied > 20
        yield ledger


def head_of(ledger: Ledger) -> ChainHead:
    with ledger.store.read_snapshot() as snapshot:
        head = chain_head(snapshot)
    assert head is not None
    return head


def a_job_event(ledger: Ledger) -> int:
    """The position of a job's event well inside the chain (the first is a definition's)."""
    assert head_of(ledger).events > 10
    return 7


def test_an_untouched_history_verifies(chained: Ledger) -> None:
    report = chained.integrity.verify()
    head = head_of(chained)
    assert report.ok, report.findings
    assert report.checked == head.events == report.events
    assert report.short_head == short_head(head.events, head.chain)
    assert report.unwitnessed == 0


def test_an_updated_state_is_named_changed(chained: Ledger, db_url: str) -> None:
    position = a_job_event(chained)
    stream, version, topic, state = tamper.event_at(db_url, position)
    tamper.set_state(db_url, position, state.replace(b"caf", b"CAF") + b"\x00")
    report = chained.integrity.verify()
    assert not report.ok
    found = report.first_divergence
    assert found is not None
    assert (found.kind, found.position, found.version, found.event) == (
        "changed",
        position,
        version,
        topic,
    )
    assert found.job_id is not None and found.job_id.hex == UUID(stream).hex
    # Put back, the history verifies again: the finding was the edit, nothing else.
    tamper.set_state(db_url, position, state)
    assert chained.integrity.verify().ok


def test_an_updated_topic_is_named_changed(chained: Ledger, db_url: str) -> None:
    position = a_job_event(chained)
    _, _, topic, _ = tamper.event_at(db_url, position)
    tamper.set_topic(db_url, position, topic.replace(".v", ".v9"))
    found = chained.integrity.verify().first_divergence
    assert found is not None and (found.kind, found.position) == ("changed", position)


def test_a_deleted_event_is_named_missing(chained: Ledger, db_url: str) -> None:
    position = a_job_event(chained)
    stream, version, _, _ = tamper.event_at(db_url, position)
    tamper.delete_event(db_url, position)
    found = chained.integrity.verify().first_divergence
    assert found is not None
    assert (found.kind, found.position, found.version) == ("missing", position, version)
    assert found.job_id is not None and found.job_id.hex == UUID(stream).hex


def test_two_swapped_events_are_named_moved(chained: Ledger, db_url: str) -> None:
    first = a_job_event(chained)
    tamper.swap_positions(db_url, first, first + 1)
    found = chained.integrity.verify().first_divergence
    assert found is not None and (found.kind, found.position) == ("moved", first)


def test_an_event_inserted_into_the_past_is_named_unexpected(pg_url: str) -> None:
    # Only PostgreSQL: a forged row can take an old transaction's id and so land inside a
    # stretch of tail order the witness covers (SQLite's ids leave no gap to insert into).
    with Ledger.open(pg_url, clock=FakeClock()) as ledger:
        ledger.define("t")
        for i in range(6):
            ledger.enqueue("t", {"i": i})
        ledger.integrity.catch_up(checkpoint_every=None)
        stream, _, _, _ = tamper.event_at(pg_url, 3)
        tamper.run_sql(
            pg_url,
            [
                "INSERT INTO jl_events (originator_id, originator_version, topic, state, "
                "transaction_id) SELECT originator_id, 99, topic, state, transaction_id "
                "FROM jl_events WHERE notification_id = 3"
            ],
        )
        report = ledger.integrity.verify()
    found = report.first_divergence
    assert found is not None
    assert (found.kind, found.version) == ("unexpected", 99)
    assert found.job_id is not None and found.job_id.hex == UUID(stream).hex


def rewrite_witness(url: str, ledger: Ledger) -> None:
    """What a writer who knows the algorithm does after editing events: recompute every
    block from the events now stored, and the head (no key is needed for any of it)."""
    with ledger.store.read_snapshot() as snapshot:
        head = chain_head(snapshot)
        assert head is not None
        blocks = witness_blocks(snapshot, 0, head.blocks)
    chain = blocks[0].chain_before
    for block in blocks:
        entries = unpack_entries(block.entries)
        stored = []
        for entry in entries:
            stream, version, topic, state = tamper.event_at(url, entry.position)
            stored.append(StoredEventBytes(entry.position, UUID(stream), version, topic, state))
        new_entries = witness(stored)
        after = chain_over(chain, new_entries)
        tamper.run_sql(
            url,
            [
                "UPDATE jl_integrity_blocks SET chain_before = ?, chain_after = ?, entries = ? "
                f"WHERE block = {block.block}"
            ],
            (chain, after, pack_entries(new_entries)),
        )
        chain = after
    tamper.run_sql(url, ["UPDATE jl_integrity_head SET chain = ?"], (chain,))


def test_a_rewritten_witness_hides_an_edit_only_until_a_checkpoint(
    chained: Ledger, db_url: str
) -> None:
    """Without a checkpoint or a published head, a writer who rewrites the witness too goes
    unnoticed (docs/integrity.md says so); a checkpoint names the rewrite."""
    published = chained.integrity.verify().short_head
    made = chained.integrity.checkpoint()
    assert made is not None
    position = a_job_event(chained)
    _, _, _, state = tamper.event_at(db_url, position)
    tamper.set_state(db_url, position, state + b"\x00")
    rewrite_witness(db_url, chained)
    report = chained.integrity.verify()
    assert [f.kind for f in report.findings] == ["checkpoint"]
    assert report.findings[0].checkpoint == 1
    # The published head (taken before the checkpoint) names it as well.
    published_check = chained.integrity.verify(expect=published)
    assert "published" in [f.kind for f in published_check.findings]


def test_a_forged_checkpoint_fails_its_signature(chained: Ledger, db_url: str) -> None:
    """The writer also rewrites the checkpoint's head to the forged chain's: without the key
    the signature no longer holds, and the operator's public key says so."""
    key = Ed25519PrivateKey.generate()
    made = chained.integrity.checkpoint(signing_key=key)
    assert made is not None and made.signature is not None
    assert chained.integrity.verify(public_key=key.public_key()).ok

    position = a_job_event(chained)
    _, _, _, state = tamper.event_at(db_url, position)
    tamper.set_state(db_url, position, state + b"\x00")
    rewrite_witness(db_url, chained)
    forged_head = head_of(chained).chain
    [checkpoint_position] = [
        r[0]
        for r in tamper.run_sql(
            db_url,
            [
                f"SELECT {tamper.id_column(db_url)} FROM jl_events "
                "WHERE topic LIKE 'integrity_checkpoint%'"
            ],
        )
    ]
    _, _, _, stored = tamper.event_at(db_url, int(checkpoint_position))
    as_map = msgspec.msgpack.decode(stored)
    as_map["head"] = forged_head
    tamper.set_state(db_url, int(checkpoint_position), msgspec.msgpack.encode(as_map))
    # The checkpoint event is itself in the chain once hashed; here it is after the head.
    report = chained.integrity.verify(public_key=key.public_key())
    kinds = [f.kind for f in report.findings]
    assert kinds == ["signature"], report.findings
    assert "does not match" in report.findings[0].detail


def test_a_checkpoint_signed_by_another_key_is_named(chained: Ledger) -> None:
    chained.integrity.checkpoint(signing_key=Ed25519PrivateKey.generate())
    report = chained.integrity.verify(public_key=Ed25519PrivateKey.generate().public_key())
    assert [f.kind for f in report.findings] == ["signature"]
    assert "not by the key given" in report.findings[0].detail


def test_verify_from_a_position_trusts_the_chain_before_its_block(
    chained: Ledger, db_url: str
) -> None:
    """``--from`` starts at the witness block holding the position: an edit before that
    block is not looked at (the chain before it is trusted), one inside or after it is."""
    early = a_job_event(chained)
    for i in range(5):
        chained.enqueue("t", {"late": i})
    chained.integrity.catch_up(checkpoint_every=None)  # a second block
    second_block_starts = head_of(chained).events - 4
    _, _, _, state = tamper.event_at(db_url, early)
    tamper.set_state(db_url, early, state + b"\x00")
    assert not chained.integrity.verify().ok
    later = chained.integrity.verify(from_position=second_block_starts + 2)
    assert later.ok, later.findings
    assert later.checked == 5
    whole = chained.integrity.verify(from_position=1)
    found = whole.first_divergence
    assert found is not None and found.position == early


def test_a_witness_cut_short_or_headless_is_named(chained: Ledger, db_url: str) -> None:
    """Deleting the witness's rows is no way out: blocks gone leave a head their blocks do
    not reach; the head row gone, with blocks left, is named too."""
    tamper.run_sql(db_url, ["DELETE FROM jl_integrity_blocks"])
    [cut] = chained.integrity.verify().findings
    assert cut.kind == "witness" and "recorded head" in cut.detail
    chained.enqueue("t", {"after": "the cut"})
    chained.integrity.catch_up(checkpoint_every=None)  # a block again, numbered after the cut
    tamper.run_sql(db_url, ["DELETE FROM jl_integrity_head"])
    [headless] = chained.integrity.verify().findings
    assert headless.kind == "witness" and "head row is gone" in headless.detail


def test_an_unsigned_checkpoint_after_signed_ones_is_named(chained: Ledger) -> None:
    """A writer who forged the history after the last signed checkpoint cannot sign a new
    one, and an unsigned one after signed ones is named even without --public-key (no
    runner makes one: once a checkpoint is signed, the key's holder makes the rest)."""
    chained.integrity.checkpoint(signing_key=Ed25519PrivateKey.generate())
    chained.enqueue("t", {"after": "signing"})
    chained.integrity.catch_up(checkpoint_every=None)
    head = head_of(chained)
    forged = IntegrityCheckpoint(
        at=chained.clock.now(),
        events=head.events,
        position=head.position,
        transaction_id=head.transaction_id,
        head=head.chain,
        public_key=None,
        signature=None,
    )
    with chained.store.unit_of_work() as uow:
        uow.serialise_appends()
        uow.append([INTEGRITY.change(INTEGRITY_STREAM_ID, [forged])])
    report = chained.integrity.verify()
    assert [f.kind for f in report.findings] == ["signature"]
    assert "after the signed checkpoints began" in report.findings[0].detail
