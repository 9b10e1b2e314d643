-- Named queries of the job views (`jobledger jobs`, `history --follow`), SQLite.

-- name: queue_list_page
-- Up to :limit jobs enqueued before position :before, newest first, optionally filtered by
-- status (a JSON array or NULL), type, org and queue ('default': also no queue).
-- jl_queue_listing_seq_idx walked backwards (or jl_queue_listing_idx and a sort, for a rare
-- status).
SELECT enqueue_seq, state FROM jl_queue
WHERE enqueue_seq < :before
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:org IS NULL OR org = :org)
  AND (:queue IS NULL OR coalesce(queue, 'default') = :queue)
ORDER BY enqueue_seq DESC
LIMIT :limit

-- name: events_of_job_after
-- One stream's events after a version, in order (jl_events primary key); :ids is a JSON
-- array holding the one stream id.
SELECT originator_version, topic, state FROM jl_events
WHERE originator_id IN (SELECT value FROM json_each(:ids)) AND originator_version > :after
ORDER BY originator_version
