-- Named queries of a reader on a streaming replica (ledger/store/postgres/replica.py),
-- PostgreSQL. Server functions only: no table, so no index.

-- name: replica_status
-- Whether the server is a hot standby; whether its WAL receiver streams (a role without
-- pg_read_all_stats sees no status, only that a receiver runs); whether it has replayed
-- all the WAL it received; the WAL position it replayed up to; the age of the last
-- transaction it replayed (seconds, NULL if none since it started); its cluster's system
-- identifier; and how many bytes of WAL it has yet to replay to reach %(primary_lsn)s (the
-- primary's position, read just before; NULL if unknown). On a server not in recovery the
-- replay functions return NULL.
SELECT pg_is_in_recovery() AS standby,
       COALESCE((SELECT COALESCE(status = 'streaming', pid IS NOT NULL)
                 FROM pg_stat_wal_receiver), false) AS streaming,
       COALESCE(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), false)
           AS replayed_all,
       pg_last_wal_replay_lsn()::text AS replay_lsn,
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8 AS replayed_age_s,
       (SELECT system_identifier FROM pg_control_system())::text AS system_id,
       pg_wal_lsn_diff(%(primary_lsn)s::pg_lsn, pg_last_wal_replay_lsn())::bigint
           AS behind_bytes

-- name: primary_position
-- The primary's current WAL write position and its cluster's system identifier (a standby
-- refuses pg_current_wal_lsn() with SQLSTATE 55000).
SELECT pg_current_wal_lsn()::text AS lsn,
       (SELECT system_identifier FROM pg_control_system())::text AS system_id
