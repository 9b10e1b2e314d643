-- Named queries of the job views (`jobledger jobs`, `history --follow`), PostgreSQL.

-- name: queue_list_page
-- Up to %(limit)s jobs enqueued before position %(before)s, newest first, optionally filtered
-- by status (a JSON array or NULL), type, org and queue ('default': also no queue).
-- jl_queue_listing_seq_idx walked backwards (or jl_queue_listing_idx and a sort, for a rare
-- status).
SELECT enqueue_seq, state FROM jl_queue
WHERE enqueue_seq < %(before)s
  AND (%(statuses)s::text::jsonb IS NULL
       OR status IN (SELECT jsonb_array_elements_text(%(statuses)s::text::jsonb)))
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)
  AND (%(org)s::text IS NULL OR org = %(org)s::text)
  AND (%(queue)s::text IS NULL OR coalesce(queue, 'default') = %(queue)s::text)
ORDER BY enqueue_seq DESC
LIMIT %(limit)s

-- name: events_of_job_after
-- One stream's events after a version, in order (jl_events primary key); %(ids)s is an
-- array holding the one stream id.
SELECT originator_version, topic, state FROM jl_events
WHERE originator_id = ANY(%(ids)s::uuid[]) AND originator_version > %(after)s
ORDER BY originator_version
