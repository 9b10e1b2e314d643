-- Retention (ledger/retention/retention_runs.py, ledger/store/sqlite/archive.py): which
-- finished jobs may leave the hot tables. The archive's own statements are derived from the
-- catalogue.

-- name: retention_candidates
-- The next finished jobs enqueued after position :after unchanged since before :cutoff (µs),
-- in enqueue order (jl_queue_listing_seq_idx: a batch's events and audit rows are then
-- neighbours in their tables and indexes, so the move touches few pages), that are neither a
-- workflow step (jl_workflow_steps_job_idx) nor a sync subject's job; last_position is the
-- job's newest event: its highest version's (the jl_events primary key backwards).
SELECT q.job_id, q.job_type, q.status, q.version, q.updated_at, q.enqueue_seq,
       (SELECT e.rowid FROM jl_events AS e WHERE e.originator_id = q.job_id
        ORDER BY e.originator_version DESC LIMIT 1) AS last_position
FROM jl_queue AS q
WHERE q.enqueue_seq > :after AND q.status IN ('succeeded', 'dead', 'cancelled')
  AND q.updated_at < :cutoff AND q.source_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM jl_workflow_steps AS s WHERE s.job_id = q.job_id)
ORDER BY q.enqueue_seq LIMIT :limit

-- name: retention_hot_versions
-- The current status and version of the jobs in the JSON array :ids (jl_queue primary key),
-- read under the write lock before their rows leave.
SELECT job_id, status, version FROM main.jl_queue
WHERE job_id IN (SELECT value FROM json_each(:ids))

-- name: retention_archived_versions
-- The newest archived event version of each job in :ids (the archive's unique key).
SELECT originator_id AS job_id, max(originator_version) AS version
FROM archive.jl_events WHERE originator_id IN (SELECT value FROM json_each(:ids))
GROUP BY originator_id

-- name: stream_version
-- A stream's newest version, 0 if it has none (jl_events primary key).
SELECT coalesce(max(originator_version), 0) AS version FROM jl_events
WHERE originator_id = :stream_id

-- name: retention_head
-- The hot events table's highest rowid: a job holding it waits (rowids are not AUTOINCREMENT,
-- so deleting the maximum would hand its id out again).
SELECT coalesce(max(rowid), 0) AS head FROM main.jl_events
