-- Decision replay (jobledger replay --check --all): page through the jobs by id.

-- name: replay_job_ids
-- The next job ids after :after (32-hex), in id order (jl_queue primary key).
SELECT job_id FROM jl_queue WHERE job_id > %(after)s::uuid ORDER BY job_id LIMIT %(limit)s

-- name: replay_job_ids_of_type
-- The next job ids of one type after :after, in id order (jl_queue primary key, filtered).
SELECT job_id FROM jl_queue WHERE job_id > %(after)s::uuid AND job_type = %(job_type)s
ORDER BY job_id LIMIT %(limit)s

-- name: replay_run_ids
-- The next workflow run ids after :after, in id order (jl_workflow_runs primary key).
SELECT run_id FROM jl_workflow_runs WHERE run_id > %(after)s::uuid ORDER BY run_id LIMIT %(limit)s
