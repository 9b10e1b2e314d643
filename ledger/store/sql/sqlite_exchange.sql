-- Named queries of export (ledger/store/exporter.py), SQLite. Parameters: sqlite3's :name style.

-- name: exchange_jobs_after
-- Up to :limit jobs whose first event lies in (:after, :upto], in the order of that event: its
-- position, the job's id and current type, and the event (topic, state). A NULL filter admits
-- every job. Scans that range of jl_events by rowid (the notification order) and looks each
-- first event's stream up in jl_queue by primary key; job-type streams have no row and drop
-- out. The bounded range keeps a page's cost to its window whatever the filters admit.
SELECT e.rowid AS position, q.job_id, q.job_type, e.topic, e.state
FROM jl_events AS e
JOIN jl_queue AS q ON q.job_id = e.originator_id
WHERE e.rowid > :after AND e.rowid <= :upto AND e.originator_version = 1
  AND (:job_type IS NULL OR q.job_type = :job_type)
  AND (:org IS NULL OR q.org = :org)
  AND (:status IS NULL OR q.status = :status)
ORDER BY e.rowid
LIMIT :limit

-- name: exchange_jobs_named
-- As exchange_jobs_after, for the jobs named in :job_ids only (jl_queue primary key, then the
-- jl_events primary key for each one's first event).
SELECT e.rowid AS position, q.job_id, q.job_type, e.topic, e.state
FROM jl_queue AS q
JOIN jl_events AS e ON e.originator_id = q.job_id AND e.originator_version = 1
WHERE q.job_id IN (SELECT value FROM json_each(:job_ids))
  AND (:job_type IS NULL OR q.job_type = :job_type)
  AND (:org IS NULL OR q.org = :org)
  AND (:status IS NULL OR q.status = :status)
ORDER BY e.rowid

-- name: exchange_runs_all
-- Every workflow run with the position of its first event (workflow_submitted), in that order
-- (jl_workflow_runs, then the jl_events primary key for each one's first event).
SELECT e.rowid AS position, r.run_id
FROM jl_workflow_runs AS r
JOIN jl_events AS e ON e.originator_id = r.run_id AND e.originator_version = 1
ORDER BY e.rowid

-- name: exchange_runs_named
-- As exchange_runs_all, for the runs named in :run_ids only (jl_workflow_runs primary key).
SELECT e.rowid AS position, r.run_id
FROM jl_workflow_runs AS r
JOIN jl_events AS e ON e.originator_id = r.run_id AND e.originator_version = 1
WHERE r.run_id IN (SELECT value FROM json_each(:run_ids))
ORDER BY e.rowid
