-- Named queries about the server's sessions (the frozen-writer watchdog), PostgreSQL.

-- name: sessions_frozen_end
-- End (pg_terminate_backend) each session of this database that is frozen inside a write and
-- blocks another: in a transaction, 'active' yet waiting for its client (ClientRead: a
-- pipeline's Execute sent without its Sync) for more than %(silent_s)s seconds since its last
-- statement began, not in a COPY (whose data messages leave state_change alone), and a
-- blocker (pg_blocking_pids) of a session waiting on a lock. One row per session ended.
-- No index: pg_stat_activity and pg_stat_progress_copy are shared-memory views, and
-- pg_blocking_pids (which briefly locks the lock manager) runs only when a candidate exists.
WITH frozen AS MATERIALIZED (
    SELECT pid, usename, application_name, client_addr, xact_start, state_change, query
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND backend_type = 'client backend'
      AND state = 'active'
      AND wait_event_type = 'Client' AND wait_event = 'ClientRead'
      AND xact_start IS NOT NULL
      AND state_change < clock_timestamp() - make_interval(secs => %(silent_s)s)
      AND pid NOT IN (SELECT pid FROM pg_stat_progress_copy)
), blocked AS MATERIALIZED (
    SELECT waiter.pid AS waiter, unnest(pg_blocking_pids(waiter.pid)) AS blocker
    FROM pg_stat_activity AS waiter
    WHERE waiter.datname = current_database()
      AND waiter.wait_event_type = 'Lock'
      AND EXISTS (SELECT FROM frozen)
)
SELECT frozen.pid,
       frozen.usename AS user_name,
       frozen.application_name,
       host(frozen.client_addr) AS client_addr,
       extract(epoch FROM clock_timestamp() - frozen.state_change)::float8 AS silent_s,
       extract(epoch FROM clock_timestamp() - frozen.xact_start)::float8 AS transaction_s,
       array_agg(DISTINCT blocked.waiter ORDER BY blocked.waiter) AS blocked_pids,
       left(frozen.query, 200) AS query,
       pg_terminate_backend(frozen.pid) AS ended
FROM frozen JOIN blocked ON blocked.blocker = frozen.pid
GROUP BY frozen.pid, frozen.usename, frozen.application_name, frozen.client_addr,
         frozen.state_change, frozen.xact_start, frozen.query
