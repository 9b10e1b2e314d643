-- Named queries of export (ledger/store/exporter.py), PostgreSQL. Parameters: %(name)s style.

-- name: exchange_jobs_after
-- Up to %(limit)s jobs whose first event lies in (%(after)s, %(upto)s], in event order: its
-- position, the job's id and current type, and the event (topic, state). A NULL filter admits
-- every job. Scans that range of jl_events_notification_id_idx and looks each first event's
-- stream up in jl_queue by primary key; job-type streams have no row and drop out. The
-- bounded range keeps a page's cost to its window (without it, PostgreSQL may sort the rest
-- of the history for every page) whatever the filters admit.
SELECT e.notification_id AS position, q.job_id, q.job_type, e.topic, e.state
FROM jl_events AS e
JOIN jl_queue AS q ON q.job_id = e.originator_id
WHERE e.notification_id > %(after)s AND e.notification_id <= %(upto)s
  AND e.originator_version = 1
  AND (%(job_type)s::text IS NULL OR q.job_type = %(job_type)s::text)
  AND (%(org)s::text IS NULL OR q.org = %(org)s::text)
  AND (%(status)s::text IS NULL OR q.status = %(status)s::text)
ORDER BY e.notification_id
LIMIT %(limit)s

-- name: exchange_jobs_named
-- As exchange_jobs_after, for the jobs named in %(job_ids)s only (jl_queue primary key, then
-- the jl_events primary key for each one's first event).
SELECT e.notification_id AS position, q.job_id, q.job_type, e.topic, e.state
FROM jl_queue AS q
JOIN jl_events AS e ON e.originator_id = q.job_id AND e.originator_version = 1
WHERE q.job_id = ANY(%(job_ids)s::uuid[])
  AND (%(job_type)s::text IS NULL OR q.job_type = %(job_type)s::text)
  AND (%(org)s::text IS NULL OR q.org = %(org)s::text)
  AND (%(status)s::text IS NULL OR q.status = %(status)s::text)
ORDER BY e.notification_id

-- name: exchange_runs_all
-- Every workflow run with the position of its first event (workflow_submitted), in that order
-- (jl_workflow_runs, then the jl_events primary key for each one's first event).
SELECT e.notification_id AS position, r.run_id
FROM jl_workflow_runs AS r
JOIN jl_events AS e ON e.originator_id = r.run_id AND e.originator_version = 1
ORDER BY e.notification_id

-- name: exchange_runs_named
-- As exchange_runs_all, for the runs named in %(run_ids)s only (jl_workflow_runs primary key).
SELECT e.notification_id AS position, r.run_id
FROM jl_workflow_runs AS r
JOIN jl_events AS e ON e.originator_id = r.run_id AND e.originator_version = 1
WHERE r.run_id = ANY(%(run_ids)s::uuid[])
ORDER BY e.notification_id
