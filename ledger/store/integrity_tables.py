"""The witness of the history's hash chain: its head row and blocks, and the events' stored
bytes in tail order (what the chain hashes).

Only I/O: the digests and the chain are :mod:`ledger.core.integrity`'s; the follower that
extends the chain is :mod:`projections.chain`. Each function runs in the caller's transaction
(a :class:`~ledger.store.reads.ReadSnapshot` to read, :class:`~ledger.store.views.ViewTables`
to write).
"""

from __future__ import annotations

from typing import Any

from ledger.core.integrity import GENESIS, ChainHead, StoredEventBytes, WitnessBlock
from ledger.store.reads import ReadSnapshot, StoredRow
from ledger.store.views import ViewTables
from ledger.views.stream_events import TailPosition


def _head(row: Any) -> ChainHead:
    return ChainHead(
        int(row["start_transaction_id"]),
        int(row["start_position"]),
        int(row["transaction_id"]),
        int(row["position"]),
        int(row["events"]),
        int(row["blocks"]),
        bytes(row["chain"]),
    )


def _block(row: Any) -> WitnessBlock:
    return WitnessBlock(
        int(row["block"]),
        int(row["events_before"]),
        int(row["transaction_id"]),
        int(row["position"]),
        bytes(row["chain_before"]),
        bytes(row["chain_after"]),
        bytes(row["entries"]),
    )


def chain_head(snapshot: ReadSnapshot) -> ChainHead | None:
    """The chain so far (``None``: it has not started: a ledger created before it existed
    that has not been migrated)."""
    rows = snapshot.fetch("integrity_head")
    return _head(rows[0]) if rows else None


def start_chain(tables: ViewTables) -> ChainHead:
    """Start the chain at the end of the final prefix, unless it has started: on a new ledger
    that is before the first event; on one ``migrate`` brings the chain to, after the events
    it already holds (they stay outside the chain, and ``integrity head`` says so)."""
    at = tables.tail_head()
    params = {"transaction_id": at.transaction_id, "position": at.position, "chain": GENESIS}
    tables.fetch("integrity_head_init", params)
    [row] = tables.fetch("integrity_head")
    return _head(row)


def lock_chain_head(tables: ViewTables) -> ChainHead | None:
    """The chain so far, locked until commit (one follower extends it at a time)."""
    rows = tables.fetch("integrity_head_lock")
    return _head(rows[0]) if rows else None


def extend_chain(tables: ViewTables, block: WitnessBlock, head: ChainHead) -> None:
    """Record ``block`` and the chain's new ``head`` (commit together or not at all)."""
    tables.fetch("integrity_block_insert", block._asdict())
    tables.fetch(
        "integrity_head_set",
        {
            "transaction_id": head.transaction_id,
            "position": head.position,
            "events": head.events,
            "blocks": head.blocks,
            "chain": head.chain,
        },
    )


def stored_tail(snapshot: ReadSnapshot, after: TailPosition, limit: int) -> list[StoredRow]:
    """The next events of the final prefix after ``after``, as stored, in tail order, each
    with its writing transaction's id last (what the follower hashes:
    :func:`ledger.core.integrity.chain_rows`)."""
    params = {"transaction_id": after.transaction_id, "position": after.position, "limit": limit}
    return snapshot.stored_rows("events_tail", params)


def stored_range(
    snapshot: ReadSnapshot, after: TailPosition, upto: TailPosition
) -> list[StoredEventBytes]:
    """The events now stored after ``after`` up to ``upto`` (both tail positions), in tail
    order: what a witness block covers."""
    params = {
        "transaction_id": after.transaction_id,
        "position": after.position,
        "upto_transaction_id": upto.transaction_id,
        "upto_position": upto.position,
    }
    return [
        StoredEventBytes(row[0], row[1], row[2], row[3], bytes(row[4]))
        for row in snapshot.stored_rows("events_tail_range", params)
    ]


def witness_blocks(snapshot: ReadSnapshot, first: int, limit: int) -> list[WitnessBlock]:
    """Up to ``limit`` witness blocks from number ``first`` on, in order."""
    return [
        _block(row)
        for row in snapshot.fetch("integrity_blocks_from", {"block": first, "limit": limit})
    ]


def block_of_position(snapshot: ReadSnapshot, position: int) -> int | None:
    """The first block whose last event's id is at or after ``position`` (``None``: none)."""
    [row] = snapshot.fetch("integrity_block_of_position", {"position": position})
    return None if row["block"] is None else int(row["block"])
