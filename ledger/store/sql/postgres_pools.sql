-- Worker pools' reports (PostgreSQL): operational state, not a view of the history.
-- Each pool's reporter (ledger/maintenance/pool_reporter.py) replaces its own row on an
-- interval and deletes it when the pool stops; rows of pools silent for longer than the
-- retention are deleted by any reporter. No event explains these rows and none needs to:
-- like jl_tracking they say what a process is doing now, and `projections verify` and
-- rebuilds never touch them. Times are microseconds since the Unix epoch.

-- name: schema_pools
-- One row per running worker pool, keyed by its worker id (<name>@<host>:<pid>).
CREATE TABLE IF NOT EXISTS jl_pools (
    pool_id text PRIMARY KEY,
    host text NOT NULL,
    pid bigint NOT NULL,
    name text NOT NULL,
    started_at bigint NOT NULL,
    last_seen_at bigint NOT NULL,
    interval_s double precision NOT NULL,
    concurrency bigint NOT NULL,
    in_flight bigint NOT NULL,
    status text NOT NULL,
    reasons text NOT NULL,
    version text NOT NULL
)

-- name: pools_report
-- Replace one pool's row with its latest report (primary key).
INSERT INTO jl_pools (pool_id, host, pid, name, started_at, last_seen_at, interval_s, concurrency, in_flight, status, reasons, version)
VALUES (%(pool_id)s, %(host)s, %(pid)s, %(name)s, %(started_at)s, %(last_seen_at)s, %(interval_s)s, %(concurrency)s, %(in_flight)s, %(status)s, %(reasons)s, %(version)s)
ON CONFLICT (pool_id) DO UPDATE SET
    host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    name = EXCLUDED.name,
    started_at = EXCLUDED.started_at,
    last_seen_at = EXCLUDED.last_seen_at,
    interval_s = EXCLUDED.interval_s,
    concurrency = EXCLUDED.concurrency,
    in_flight = EXCLUDED.in_flight,
    status = EXCLUDED.status,
    reasons = EXCLUDED.reasons,
    version = EXCLUDED.version

-- name: pools_remove
-- Delete one pool's row (the pool stopped; primary key).
DELETE FROM jl_pools WHERE pool_id = %(pool_id)s

-- name: pools_prune
-- Delete the rows of pools silent since before a cutoff (a sequential scan: a few rows),
-- skipping rows another reporter is deleting: a reporter frozen mid-prune must not stall
-- every other pool's reports behind its row locks.
DELETE FROM jl_pools WHERE pool_id IN (
    SELECT pool_id FROM jl_pools WHERE last_seen_at < %(before)s FOR UPDATE SKIP LOCKED
)

-- name: pools_all
-- Every pool's row, by id (a sequential scan: a few rows).
SELECT pool_id, host, pid, name, started_at, last_seen_at, interval_s, concurrency, in_flight, status, reasons, version FROM jl_pools ORDER BY pool_id
