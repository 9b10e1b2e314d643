-- The history's hash chain (projections/chain.py, docs/integrity.md): a witness of the digests
-- a follower computed over the events in id order (one writer at a time: tail order). Not a
-- view: nothing rebuilds it from the events.

-- name: schema_integrity_head
-- The chain so far: the position of the last event it covers, how many events and blocks it
-- covers, its head; start_* is where it began (migrate on a ledger that had events). The
-- transaction columns are always 0 here.
CREATE TABLE IF NOT EXISTS jl_integrity_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    start_transaction_id INTEGER NOT NULL,
    start_position INTEGER NOT NULL,
    transaction_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    events INTEGER NOT NULL,
    blocks INTEGER NOT NULL,
    chain BLOB NOT NULL
)

-- name: schema_integrity_blocks
-- One block per batch the follower hashed: its events' entries (position, stream, version,
-- digest: 64 bytes each), the chain before and after them, the position of its last event.
CREATE TABLE IF NOT EXISTS jl_integrity_blocks (
    block INTEGER PRIMARY KEY,
    events_before INTEGER NOT NULL,
    transaction_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    chain_before BLOB NOT NULL,
    chain_after BLOB NOT NULL,
    entries BLOB NOT NULL
)

-- name: integrity_head_init
-- The chain's start, if it has none yet.
INSERT INTO jl_integrity_head (id, start_transaction_id, start_position, transaction_id,
                               position, events, blocks, chain)
VALUES (1, :transaction_id, :position, :transaction_id, :position, 0, 0, :chain)
ON CONFLICT (id) DO NOTHING

-- name: integrity_head
-- The chain so far (no row: the chain has not started).
SELECT start_transaction_id, start_position, transaction_id, position, events, blocks, chain
FROM jl_integrity_head WHERE id = 1

-- name: integrity_head_lock
-- The chain so far (the write transaction holds the database's one write lock).
-- include: integrity_head

-- name: integrity_head_set
-- Extend the chain (in the transaction that inserts its block).
UPDATE jl_integrity_head
SET transaction_id = :transaction_id, position = :position, events = :events,
    blocks = :blocks, chain = :chain
WHERE id = 1

-- name: integrity_block_insert
-- One block of the witness.
INSERT INTO jl_integrity_blocks (block, events_before, transaction_id, position, chain_before,
                                 chain_after, entries)
VALUES (:block, :events_before, :transaction_id, :position, :chain_before, :chain_after,
        :entries)

-- name: integrity_blocks_from
-- The witness's blocks from number :block on, in order.
SELECT block, events_before, transaction_id, position, chain_before, chain_after, entries
FROM jl_integrity_blocks WHERE block >= :block ORDER BY block LIMIT :limit

-- name: integrity_block_of_position
-- The first block holding an event at or after id :position (where `verify --from` starts).
SELECT min(block) AS block FROM jl_integrity_blocks WHERE position >= :position

-- name: events_tail_range
-- The events after one id up to another, in order (jl_events rowid): what a witness block
-- covers.
SELECT rowid AS notification_id, originator_id, originator_version, topic, state
FROM jl_events
WHERE rowid > :position AND rowid <= :upto_position
ORDER BY rowid
