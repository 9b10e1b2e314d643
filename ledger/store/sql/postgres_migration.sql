-- Schema changes (init, migrate, projection rebuilds): the migration lock that serialises
-- them across processes (ledger/store/postgres/migration_lock.py) and the guarded DDL
-- transaction that cannot deadlock with the ledger's writers
-- (ledger/store/postgres/guarded_ddl.py). No index: advisory locks and the catalogue.

-- name: migration_lock_try
-- Take the migration lock (a session-level advisory lock on :key) if it is free: got.
SELECT pg_try_advisory_lock(%(key)s) AS got

-- name: migration_lock_wait
-- Wait for the migration lock (bounded by the session's lock_timeout).
SELECT pg_advisory_lock(%(key)s)

-- name: migration_lock_release
-- Give the migration lock back (closing the session would too).
SELECT pg_advisory_unlock(%(key)s) AS released

-- name: migration_lock_holder
-- Who holds the migration lock of this database: pid, application name, client, since when
-- its current transaction or statement runs (a bigint key shows as classid = high 32 bits,
-- objid = low 32 bits, objsubid = 1).
SELECT a.pid, a.application_name, host(a.client_addr) AS client_addr, a.backend_start,
       a.state_change
FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid::bigint = (%(key)s::bigint >> 32) AND l.objid::bigint = (%(key)s::bigint & 4294967295)
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LIMIT 1

-- name: ddl_lock_timeout
-- How long the guarded DDL waits for a table lock (ms): half the server's deadlock_timeout,
-- at most 500 ms, so that in a lock cycle with a writer this transaction gives up first.
SELECT least(500, greatest(1, floor(extract(epoch FROM current_setting('deadlock_timeout')::interval)
       * 1000 / 2)))::int AS ms

-- name: ddl_relations_present
-- Which of the relations :names (schema-qualified or on the search path) exist, in the
-- order given.
SELECT n AS name FROM unnest(%(names)s::text[]) WITH ORDINALITY AS t(n, i)
WHERE to_regclass(n) IS NOT NULL ORDER BY i
