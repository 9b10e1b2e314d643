-- Audit queries (ledger/store/audit_reads.py): fragments one query is composed of. Each filter
-- is a bound parameter; the composer only picks which fragments to join.

-- name: audit_query_select
-- The audit rows' columns, a retry with the code of the failure it retries (the job's row
-- just before it, jl_audit_job_idx; evaluated for the page's rows only); the filters follow.
SELECT a.position, a.job_id, a.job_type, a.org, a.event, a.worker_id, a.run_number,
       a.attempt, a.at, a.workflow_run, a.step_key,
       CASE WHEN a.event = 'job_retry_scheduled' THEN (
           SELECT f.code FROM jl_audit AS f
           WHERE f.job_id = a.job_id AND f.position < a.position
           ORDER BY f.position DESC LIMIT 1
       ) ELSE a.code END AS code
FROM jl_audit AS a

-- name: audit_query_retries
-- Retries by the code of the failure they retry: failures with the code in position order
-- (jl_audit_code_idx), each joined to the job's next row (jl_audit_job_idx); that row is the
-- failure's retry or dead letter, recorded in the same commit. LATERAL keeps it a nested
-- loop in the failures' order, so a page reads about limit failures, not all of them.
SELECT a.position, a.job_id, a.job_type, a.org, a.event, a.worker_id, a.run_number,
       a.attempt, a.at, a.workflow_run, a.step_key, f.code
FROM jl_audit AS f
CROSS JOIN LATERAL (
    SELECT n.* FROM jl_audit AS n
    WHERE n.job_id = f.job_id AND n.position > f.position
    ORDER BY n.position LIMIT 1
) AS a

-- name: audit_filter_retries
-- The retry rows of failures with the code (with audit_query_retries). A dead letter with
-- the code is never followed by a retry, so the failure's own event need not be checked.
f.code = %(code)s AND a.event = 'job_retry_scheduled'

-- name: audit_after_retries_newest
-- The page after a newest-first page of retries ended at this position (keyset on both rows).
f.position < %(after)s AND a.position < %(after)s

-- name: audit_after_retries_oldest
-- The page after an oldest-first page of retries ended at this position (keyset on both rows;
-- ">=": the row at the cursor may be the failure itself, shown by the other part of a union).
f.position >= %(after)s AND a.position > %(after)s

-- name: audit_order_retries_newest
-- Newest first: the failures' order is their retries' order (each retry follows its failure).
ORDER BY f.position DESC LIMIT %(limit)s

-- name: audit_order_retries_oldest
-- Oldest first, likewise.
ORDER BY f.position ASC LIMIT %(limit)s

-- name: audit_query_status
-- Only rows of jobs whose current status is the one asked (jl_queue primary key per row).
JOIN jl_queue AS q ON q.job_id = a.job_id AND q.status = %(status)s

-- name: audit_filter_workflow
-- One workflow run's rows: its own events and its step jobs' (jl_audit_workflow_idx).
a.workflow_run = %(workflow)s

-- name: audit_filter_job
-- One job's rows (jl_audit_job_idx).
a.job_id = %(job)s

-- name: audit_filter_job_type
-- One job type's rows (jl_audit_type_idx: type, then position order).
a.job_type = %(job_type)s

-- name: audit_filter_event
-- One event's rows (jl_audit_event_idx, or the primary key in position order).
a.event = %(event)s

-- name: audit_filter_events
-- Several events' rows (a bitmap of jl_audit_event_idx, or the primary key).
a.event = ANY(%(events)s::text[])

-- name: audit_filter_worker
-- One worker's rows (jl_audit_worker_idx: worker, then position order).
a.worker_id = %(worker)s

-- name: audit_filter_org
-- One org's rows (jl_audit_org_idx: org, then position order).
a.org = %(org)s

-- name: audit_filter_code
-- Failures and dead letters with a code (jl_audit_code_idx, partial on code IS NOT NULL).
a.code = %(code)s

-- name: audit_filter_since
-- Events at or after a time (µs; checked inside the type/org/worker indexes).
a.at >= %(since)s

-- name: audit_filter_until
-- Events before a time (µs; checked inside the type/org/worker indexes).
a.at < %(until)s

-- name: audit_after_newest
-- The page after a newest-first page ended at this position (keyset, not OFFSET).
a.position < %(after)s

-- name: audit_after_oldest
-- The page after an oldest-first page ended at this position (keyset, not OFFSET).
a.position > %(after)s

-- name: audit_order_newest
-- Newest first, one page (and one row more, to tell whether another page exists).
ORDER BY a.position DESC LIMIT %(limit)s

-- name: audit_order_oldest
-- Oldest first, one page (and one row more, to tell whether another page exists).
ORDER BY a.position ASC LIMIT %(limit)s

-- name: audit_union
-- Two pages composed above (rows with the code, retries of failures with it), each on its
-- own index; {first} and {second} are those statements, never values.
SELECT * FROM (
{first}
) AS coded
UNION ALL
SELECT * FROM (
{second}
) AS retries

-- name: audit_union_order_newest
-- Newest first over both parts (at most 2 × (limit + 1) rows to sort).
ORDER BY position DESC LIMIT %(limit)s

-- name: audit_union_order_oldest
-- Oldest first over both parts.
ORDER BY position ASC LIMIT %(limit)s
