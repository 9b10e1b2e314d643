-- Worker pools' reports (SQLite): operational state, not a view of the history.
-- Each pool's reporter (ledger/maintenance/pool_reporter.py) replaces its own row on an
-- interval and deletes it when the pool stops; rows of pools silent for longer than the
-- retention are deleted by any reporter. No event explains these rows and none needs to:
-- like jl_tracking they say what a process is doing now, and `projections verify` and
-- rebuilds never touch them. Times are microseconds since the Unix epoch.

-- name: schema_pools
-- One row per running worker pool, keyed by its worker id (<name>@<host>:<pid>).
CREATE TABLE IF NOT EXISTS jl_pools (
    pool_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    name TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    interval_s REAL NOT NULL,
    concurrency INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    status TEXT NOT NULL,
    reasons TEXT NOT NULL,
    version TEXT NOT NULL
)

-- name: pools_report
-- Replace one pool's row with its latest report (primary key).
INSERT INTO jl_pools (pool_id, host, pid, name, started_at, last_seen_at, interval_s, concurrency, in_flight, status, reasons, version)
VALUES (:pool_id, :host, :pid, :name, :started_at, :last_seen_at, :interval_s, :concurrency, :in_flight, :status, :reasons, :version)
ON CONFLICT (pool_id) DO UPDATE SET
    host = excluded.host,
    pid = excluded.pid,
    name = excluded.name,
    started_at = excluded.started_at,
    last_seen_at = excluded.last_seen_at,
    interval_s = excluded.interval_s,
    concurrency = excluded.concurrency,
    in_flight = excluded.in_flight,
    status = excluded.status,
    reasons = excluded.reasons,
    version = excluded.version

-- name: pools_remove
-- Delete one pool's row (the pool stopped; primary key).
DELETE FROM jl_pools WHERE pool_id = :pool_id

-- name: pools_prune
-- Delete the rows of pools silent since before a cutoff (a sequential scan: a few rows).
DELETE FROM jl_pools WHERE last_seen_at < :before

-- name: pools_all
-- Every pool's row, by id (a sequential scan: a few rows).
SELECT pool_id, host, pid, name, started_at, last_seen_at, interval_s, concurrency, in_flight, status, reasons, version FROM jl_pools ORDER BY pool_id
