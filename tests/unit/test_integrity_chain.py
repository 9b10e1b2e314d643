"""The hash chain's pure core: digests, the chain, and naming the first divergence."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.integrity import (
    GENESIS,
    StoredEventBytes,
    Witnessed,
    chain_next,
    chain_over,
    chain_rows,
    event_digest,
    first_divergence,
    pack_entries,
    unpack_entries,
    witness,
)
from ledger.core.integrity_checkpoints import (
    IntegrityCheckpoint,
    parse_short_head,
    short_head,
    signature_problem,
    signed,
)

JOB, OTHER = uuid4(), uuid4()


def history() -> list[StoredEventBytes]:
    return [
        StoredEventBytes(1, JOB, 1, "ledger.core.events:JobEnqueued", b'{"a":1}'),
        StoredEventBytes(2, OTHER, 1, "ledger.core.events:JobEnqueued", b'{"b":2}'),
        StoredEventBytes(4, JOB, 2, "ledger.core.events:JobLeased", b'{"w":"x"}'),
    ]


def test_an_untouched_history_matches_its_witness() -> None:
    events = history()
    assert first_divergence(witness(events), events) is None


def test_an_edited_state_is_named_with_its_position_job_and_version() -> None:
    events = history()
    seen = witness(events)
    events[2] = events[2]._replace(state=b'{"w":"y"}')
    found = first_divergence(seen, events)
    assert found is not None
    assert (found.kind, found.position, found.job_id, found.version) == ("changed", 4, JOB, 2)


def test_a_deleted_event_is_missing_and_the_first_divergence_wins() -> None:
    events = history()
    seen = witness(events)
    later_edit = events[2]._replace(topic="ledger.core.events:JobSucceeded")
    found = first_divergence(seen, [events[0], later_edit])
    assert found is not None and (found.kind, found.position) == ("missing", 2)


def test_a_reorder_and_an_insertion_are_named() -> None:
    events = history()
    seen = witness(events)
    swapped = [events[0]._replace(position=2), events[1]._replace(position=1), events[2]]
    found = first_divergence(seen, sorted(swapped))
    assert found is not None and (found.kind, found.position) == ("moved", 1)
    inserted = [*events[:2], StoredEventBytes(3, JOB, 9, "t", b"{}"), events[2]]
    found = first_divergence(seen, inserted)
    assert found is not None and (found.kind, found.position, found.version) == (
        "unexpected",
        3,
        9,
    )


def test_the_digest_binds_the_stream_the_version_and_the_topic_boundary() -> None:
    base = event_digest(JOB, 1, "ab", b"c")
    assert event_digest(OTHER, 1, "ab", b"c") != base
    assert event_digest(JOB, 2, "ab", b"c") != base
    assert event_digest(JOB, 1, "a", b"bc") != base  # a byte moved from topic to state


@given(st.lists(st.binary(min_size=32, max_size=32), min_size=2, max_size=8), st.data())
def test_the_head_changes_with_any_change_of_order_or_content(
    digests: list[bytes], data: st.DataObject
) -> None:
    items = [Witnessed(i + 1, JOB, i + 1, d) for i, d in enumerate(digests)]
    head = chain_over(GENESIS, items)
    assert head == chain_next(chain_over(GENESIS, items[:-1]), items[-1].position, digests[-1])
    i = data.draw(st.integers(0, len(items) - 2))
    swapped = [*items[:i], items[i + 1], items[i], *items[i + 2 :]]
    if swapped != items:
        assert chain_over(GENESIS, swapped) != head
    assert chain_over(GENESIS, items[:i] + items[i + 1 :]) != head


@given(
    st.lists(
        st.tuples(
            st.integers(1, 2**40),
            st.integers(1, 10_000),
            st.text(min_size=1, max_size=30),
            st.binary(max_size=300),
        ),
        max_size=30,
    )
)
def test_the_followers_one_pass_equals_digest_chain_and_pack(
    fields: list[tuple[int, int, str, bytes]],
) -> None:
    """``chain_rows`` (the follower's hot loop) is byte for byte ``witness``, ``chain_over``
    and ``pack_entries``, and the packed entries unpack to the witness."""
    stored = [
        StoredEventBytes(position, uuid4(), version, topic, state)
        for position, version, topic, state in fields
    ]
    rows = [(*event, 7) for event in stored]  # as the tail read gives them: a transaction id
    chained = chain_rows(GENESIS, rows)
    witnessed = witness(stored)
    assert chained.chain == chain_over(GENESIS, witnessed)
    assert chained.entries == pack_entries(witnessed)
    assert chained.events == len(stored)
    assert unpack_entries(chained.entries) == witnessed


def test_a_signed_checkpoint_holds_only_for_its_own_head_and_key() -> None:
    key = Ed25519PrivateKey.generate()
    head = chain_over(GENESIS, witness(history()))
    public_key, signature = signed(key, 3, 4, head)

    def checkpoint(**changes: object) -> IntegrityCheckpoint:
        fields = {
            "at": datetime(2026, 1, 1, tzinfo=UTC),
            "events": 3,
            "position": 4,
            "transaction_id": 0,
            "head": head,
            "public_key": public_key,
            "signature": signature,
            **changes,
        }
        return IntegrityCheckpoint(**fields)  # type: ignore[arg-type]

    assert signature_problem(checkpoint(), key.public_key()) is None
    assert signature_problem(checkpoint(), None) is None
    assert "does not match" in str(signature_problem(checkpoint(events=4), None))
    assert "does not match" in str(signature_problem(checkpoint(head=GENESIS), None))
    other = Ed25519PrivateKey.generate().public_key()
    assert "not by the key given" in str(signature_problem(checkpoint(), other))
    unsigned = checkpoint(public_key=None, signature=None)
    assert signature_problem(unsigned, None) is None
    assert "unsigned" in str(signature_problem(unsigned, other))


def test_a_published_head_parses_back_and_refuses_a_short_one() -> None:
    head = chain_over(GENESIS, witness(history()))
    assert parse_short_head(short_head(3, head)) == (3, head.hex()[:32])
    for bad in ("3", "x:abcdef0123456789", "3:abc", "3:zzzzzzzzzzzzzzzzzz"):
        try:
            parse_short_head(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} parsed")
