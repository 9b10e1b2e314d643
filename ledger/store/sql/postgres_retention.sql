-- Retention (ledger/retention/retention_runs.py): which finished jobs are past their policy.
-- A run detaches month partitions of jl_events (ledger/store/postgres/partitions.py,
-- decision 31); these choose and re-check the jobs.

-- name: retention_candidates
-- The next finished jobs enqueued after position :after unchanged since before :cutoff (µs),
-- in enqueue order (jl_queue_listing_seq_idx), that are neither a workflow step (jl_workflow_steps_job_idx) nor a
-- sync subject's job; last_position is the job's newest event: its highest version's
-- (the jl_events primary key backwards; max() of the id would walk the id index instead).
SELECT q.job_id, q.job_type, q.status, q.version, q.updated_at, q.enqueue_seq,
       (SELECT e.notification_id FROM jl_events AS e WHERE e.originator_id = q.job_id
        ORDER BY e.originator_version DESC LIMIT 1) AS last_position
FROM jl_queue AS q
WHERE q.enqueue_seq > %(after)s AND q.status IN ('succeeded', 'dead', 'cancelled')
  AND q.updated_at < %(cutoff)s AND q.source_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM jl_workflow_steps AS s WHERE s.job_id = q.job_id)
ORDER BY q.enqueue_seq LIMIT %(limit)s

-- name: stream_version
-- A stream's newest version, 0 if it has none (jl_events primary key).
SELECT coalesce(max(originator_version), 0) AS version FROM jl_events
WHERE originator_id = %(stream_id)s::uuid

-- name: retention_head
-- The events table's highest notification id.
SELECT coalesce(max(notification_id), 0) AS head FROM jl_events

-- name: retention_hot_versions
-- The current status and version of the jobs :ids (jl_queue primary key), read under the
-- events-table lock before their month's partition is detached.
SELECT job_id::text AS job_id, status, version FROM jl_queue
WHERE job_id = ANY(%(ids)s::uuid[])
