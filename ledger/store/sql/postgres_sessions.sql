-- Named queries about the server's sessions (the frozen-writer watchdog), PostgreSQL.

-- name: sessions_frozen_end
-- End (pg_terminate_backend) the sessions of this database frozen inside a write that block
-- another, and the other stuck sessions of the same jobledger process; one row per session
-- ended. Frozen: in a transaction, waiting for its client (ClientRead) for more than
-- %(silent_s)s seconds since its last statement began, not in a COPY (but for a bulk
-- enqueue's into jl_events or jl_queue), and either 'active' (a
-- pipeline's Execute sent without its Sync: no server timeout applies) or idle in its
-- transaction and opened by a jobledger store (application_name 'jobledger <pid>@<host>',
-- whose units of work never sit idle). Blocking: a blocker (pg_blocking_pids) of a session
-- waiting on a lock, or a jobledger session holding a transaction id: appends take no table
-- lock, so nobody waits on it, yet it holds back every tailing reader's frontier and its
-- locked rows are skipped (SKIP LOCKED) by every claimer and reaper. Same process: the same jobledger application_name, in a transaction,
-- nothing since more than %(silent_s)s seconds (a lock wait queued before the freeze).
-- No index: pg_stat_activity and pg_stat_progress_copy are shared-memory views, and
-- pg_blocking_pids (which briefly locks the lock manager) runs only when a candidate exists.
WITH stuck AS MATERIALIZED (
    SELECT pid, usename, application_name, client_addr, xact_start, state_change, state,
           wait_event_type, wait_event, query, backend_xid
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND backend_type = 'client backend'
      AND xact_start IS NOT NULL
      AND state_change < clock_timestamp() - make_interval(secs => %(silent_s)s)
      -- A COPY streams without moving state_change (a rebuild's load): left alone, unless
      -- it is a large enqueue's COPY into the events or queue table, which holds the
      -- events-table lock and lasts milliseconds per thousand rows.
      AND pid NOT IN (SELECT pid FROM pg_stat_progress_copy
                      WHERE relid <> ALL (ARRAY[to_regclass('jl_events'),
                                                to_regclass('jl_queue')]::oid[]))
), frozen AS MATERIALIZED (
    SELECT pid, application_name, backend_xid FROM stuck
    WHERE wait_event_type = 'Client' AND wait_event = 'ClientRead'
      AND (state = 'active'
           OR (state LIKE 'idle in transaction%%' AND application_name LIKE 'jobledger %%'))
), blocked AS MATERIALIZED (
    SELECT waiter.pid AS waiter, unnest(pg_blocking_pids(waiter.pid)) AS blocker
    FROM pg_stat_activity AS waiter
    WHERE waiter.datname = current_database()
      AND waiter.wait_event_type = 'Lock'
      AND EXISTS (SELECT FROM frozen)
), blocking AS MATERIALIZED (
    SELECT frozen.pid, frozen.application_name,
           coalesce(array_agg(DISTINCT blocked.waiter ORDER BY blocked.waiter)
                        FILTER (WHERE blocked.waiter IS NOT NULL),
                    '{}') AS blocked_pids
    FROM frozen LEFT JOIN blocked ON blocked.blocker = frozen.pid
    WHERE blocked.waiter IS NOT NULL
       OR (frozen.backend_xid IS NOT NULL AND frozen.application_name LIKE 'jobledger %%')
    GROUP BY frozen.pid, frozen.application_name
), ending AS MATERIALIZED (
    SELECT pid, blocked_pids, NULL::integer AS frozen_pid FROM blocking
    UNION ALL
    SELECT DISTINCT ON (stuck.pid) stuck.pid, '{}'::integer[], blocking.pid
    FROM blocking JOIN stuck ON stuck.application_name = blocking.application_name
    WHERE blocking.application_name LIKE 'jobledger %%'
      AND stuck.pid NOT IN (SELECT pid FROM blocking)
)
SELECT stuck.pid,
       stuck.usename AS user_name,
       stuck.application_name,
       host(stuck.client_addr) AS client_addr,
       stuck.state,
       extract(epoch FROM clock_timestamp() - stuck.state_change)::float8 AS silent_s,
       extract(epoch FROM clock_timestamp() - stuck.xact_start)::float8 AS transaction_s,
       ending.blocked_pids,
       ending.frozen_pid,
       left(stuck.query, 200) AS query,
       pg_terminate_backend(stuck.pid) AS ended
FROM ending JOIN stuck USING (pid)
ORDER BY ending.frozen_pid NULLS FIRST, stuck.pid
