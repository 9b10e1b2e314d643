-- The history's hash chain (projections/chain.py, docs/integrity.md): a witness of the digests
-- a follower computed over the final prefix, in tail order. Not a view: nothing rebuilds it
-- from the events (that would hash whatever the events now hold).

-- name: schema_integrity_head
-- The chain so far: the tail position of the last event it covers, how many events and blocks
-- it covers, its head; start_* is where it began (migrate on a ledger that had events).
CREATE TABLE IF NOT EXISTS jl_integrity_head (
    id smallint PRIMARY KEY CHECK (id = 1),
    start_transaction_id bigint NOT NULL,
    start_position bigint NOT NULL,
    transaction_id bigint NOT NULL,
    position bigint NOT NULL,
    events bigint NOT NULL,
    blocks bigint NOT NULL,
    chain bytea NOT NULL
)

-- name: schema_integrity_blocks
-- One block per batch the follower hashed: its events' entries (position, stream, version,
-- digest: 64 bytes each), the chain before and after them, the tail position of its last event.
CREATE TABLE IF NOT EXISTS jl_integrity_blocks (
    block bigint PRIMARY KEY,
    events_before bigint NOT NULL,
    transaction_id bigint NOT NULL,
    position bigint NOT NULL,
    chain_before bytea NOT NULL,
    chain_after bytea NOT NULL,
    entries bytea NOT NULL
)

-- name: integrity_head_init
-- The chain's start, if it has none yet.
INSERT INTO jl_integrity_head (id, start_transaction_id, start_position, transaction_id,
                               position, events, blocks, chain)
VALUES (1, %(transaction_id)s, %(position)s, %(transaction_id)s, %(position)s, 0, 0, %(chain)s)
ON CONFLICT (id) DO NOTHING

-- name: integrity_head
-- The chain so far (no row: the chain has not started).
SELECT start_transaction_id, start_position, transaction_id, position, events, blocks, chain
FROM jl_integrity_head WHERE id = 1

-- name: integrity_head_lock
-- The chain so far, locked until commit (one follower extends it at a time).
SELECT start_transaction_id, start_position, transaction_id, position, events, blocks, chain
FROM jl_integrity_head WHERE id = 1 FOR UPDATE

-- name: integrity_head_set
-- Extend the chain (in the transaction that inserts its block).
UPDATE jl_integrity_head
SET transaction_id = %(transaction_id)s, position = %(position)s, events = %(events)s,
    blocks = %(blocks)s, chain = %(chain)s
WHERE id = 1

-- name: integrity_block_insert
-- One block of the witness.
INSERT INTO jl_integrity_blocks (block, events_before, transaction_id, position, chain_before,
                                 chain_after, entries)
VALUES (%(block)s, %(events_before)s, %(transaction_id)s, %(position)s, %(chain_before)s,
        %(chain_after)s, %(entries)s)

-- name: integrity_blocks_from
-- The witness's blocks from number %(block)s on, in order.
SELECT block, events_before, transaction_id, position, chain_before, chain_after, entries
FROM jl_integrity_blocks WHERE block >= %(block)s ORDER BY block LIMIT %(limit)s

-- name: integrity_block_of_position
-- The first block whose last event is at or after notification id %(position)s in tail order's
-- terms: the first block holding an event at or after it (where `verify --from` starts).
SELECT min(block) AS block FROM jl_integrity_blocks WHERE position >= %(position)s

-- name: events_tail_range
-- The events after one tail position up to another, in tail order (jl_events_transaction_idx):
-- what a witness block covers.
SELECT notification_id, originator_id, originator_version, topic, state
FROM jl_events
WHERE (transaction_id, notification_id) > (%(transaction_id)s::text::xid8, %(position)s)
  AND (transaction_id, notification_id) <= (%(upto_transaction_id)s::text::xid8, %(upto_position)s)
ORDER BY jl_events.transaction_id, notification_id
