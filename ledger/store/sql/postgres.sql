-- Named queries for the PostgreSQL store. Parameters use psycopg's %(name)s style.
-- Times are bigint microseconds since the Unix epoch (see ledger/core/times.py).
-- The events table itself (jl_events) is created by eventsourcing's recorder.

-- name: schema_meta
-- Schema marker: which jobledger schema version this database holds.
CREATE TABLE IF NOT EXISTS jl_meta (
    key text PRIMARY KEY,
    value text NOT NULL
)

-- name: schema_queue
-- The queue view: one row per job, the fold of its history (ledger/views/queue.py).
CREATE TABLE IF NOT EXISTS jl_queue (
    job_id uuid PRIMARY KEY,
    job_type text NOT NULL,
    queue text,
    org text,
    status text NOT NULL,
    stage text NOT NULL,
    priority integer NOT NULL,
    run_at bigint NOT NULL,
    enqueue_seq bigint NOT NULL,
    lease_expires_at bigint,
    run_number integer NOT NULL,
    attempt integer NOT NULL,
    worker_id text,
    idempotency_key text,
    source_id text,
    uri text,
    version integer NOT NULL,
    updated_at bigint NOT NULL,
    state bytea NOT NULL
) WITH (
    fillfactor = 80,
    -- Claims need fresh statistics after a bulk enqueue; analyse after ~1% change.
    autovacuum_analyze_scale_factor = 0.01,
    autovacuum_analyze_threshold = 1000
)

-- name: schema_queue_claim_idx
-- Claim order over pending jobs only: priority DESC, run_at, enqueue order.
CREATE INDEX IF NOT EXISTS jl_queue_claim_idx
    ON jl_queue (priority DESC, run_at, enqueue_seq) WHERE status = 'pending'

-- name: schema_queue_claim_queue_idx
-- Claims by queue (queue_claim_queues): claim order within each queue, pending jobs only. A
-- job without a queue is in the queue 'default' (ledger.core.events.DEFAULT_QUEUE).
CREATE INDEX IF NOT EXISTS jl_queue_claim_queue_idx
    ON jl_queue ((coalesce(queue, 'default')), priority DESC, run_at, enqueue_seq)
    WHERE status = 'pending'

-- name: schema_queue_claim_org_idx
-- Fair claims (queue_claim): claim order within each org ('' is no org), pending jobs only;
-- also the loose index scan that lists the orgs with pending jobs.
CREATE INDEX IF NOT EXISTS jl_queue_claim_org_idx
    ON jl_queue ((coalesce(org, '')), priority DESC, run_at, enqueue_seq)
    WHERE status = 'pending'

-- name: schema_queue_lease_idx
-- Expired-lease scans (reaper), oldest expiry first.
CREATE INDEX IF NOT EXISTS jl_queue_lease_idx
    ON jl_queue (lease_expires_at) WHERE status = 'leased'

-- name: schema_queue_idempotency_idx
-- One job per idempotency key per (job_type, org); global keys (no org) are their own space.
CREATE UNIQUE INDEX IF NOT EXISTS jl_queue_idempotency_idx
    ON jl_queue (job_type, coalesce(org, ''), idempotency_key)
    WHERE idempotency_key IS NOT NULL

-- name: schema_queue_live_subject_idx
-- At most one live (pending or leased) job per sync subject, whatever its op.
CREATE UNIQUE INDEX IF NOT EXISTS jl_queue_live_subject_idx
    ON jl_queue (source_id, uri)
    WHERE source_id IS NOT NULL AND status IN ('pending', 'leased')

-- name: schema_queue_listing_idx
-- Listings and counts by status and type.
CREATE INDEX IF NOT EXISTS jl_queue_listing_idx ON jl_queue (status, job_type)

-- name: schema_queue_listing_seq_idx
-- `jobledger jobs`: pages newest enqueue first (a backward scan, not a sort of every row).
CREATE INDEX IF NOT EXISTS jl_queue_listing_seq_idx ON jl_queue (enqueue_seq)

-- name: schema_definitions
-- The job-type definitions view: the fold of each job type's stream.
CREATE TABLE IF NOT EXISTS jl_definitions (
    job_type text PRIMARY KEY,
    enabled boolean NOT NULL,
    version integer NOT NULL,
    stream_version integer NOT NULL,
    state bytea NOT NULL,
    rate_limit integer,
    rate_interval_us bigint,
    rate_scope text
)

-- name: schema_tokens
-- The API tokens view (ledger/views/tokens.py): the fold of each token's stream; the
-- secret's SHA-256 only, never the secret.
CREATE TABLE IF NOT EXISTS jl_tokens (
    token_id text PRIMARY KEY,
    org text,
    role text NOT NULL,
    label text,
    secret_hash text NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint,
    stream_version integer NOT NULL
)

-- name: schema_schedules
-- The schedules view (ledger/views/schedules.py): the fold of each schedule's stream;
-- next_slot is NULL unless the schedule is active, so the due index holds only live ones.
CREATE TABLE IF NOT EXISTS jl_schedules (
    name text PRIMARY KEY,
    status text NOT NULL,
    cron text NOT NULL,
    tz text NOT NULL,
    job_type text NOT NULL,
    org text,
    next_slot bigint,
    last_slot bigint,
    last_job_id text,
    stream_version integer NOT NULL,
    state bytea NOT NULL
)

-- name: schema_schedules_due_idx
-- The scheduler's due scan (schedules_due): active schedules by next slot.
CREATE INDEX IF NOT EXISTS jl_schedules_due_idx
    ON jl_schedules (next_slot) WHERE next_slot IS NOT NULL

-- name: schema_source_polls
-- The source-polls view (ledger/views/source_polls.py): the fold of each source's poll
-- stream, one row per polled source.
CREATE TABLE IF NOT EXISTS jl_source_polls (
    source text PRIMARY KEY,
    last_poll_at bigint NOT NULL,
    last_result text NOT NULL,
    failures integer NOT NULL,
    breaker_until bigint,
    stream_version integer NOT NULL,
    state bytea NOT NULL
)

-- name: schema_rate_buckets
-- The rate-bucket view (ledger/views/rate_buckets.py): one token bucket per rate-limit key
-- (job_type, scope 'type' | 'org', org), times in µs; the claims skip a key whose next token
-- is still to come (next_token_at > now) by this primary key.
CREATE TABLE IF NOT EXISTS jl_rate_buckets (
    job_type text NOT NULL,
    scope text NOT NULL,
    org text NOT NULL,
    rate_limit integer NOT NULL,
    interval_us bigint NOT NULL,
    tat bigint NOT NULL,
    next_token_at bigint NOT NULL,
    PRIMARY KEY (job_type, scope, org)
)

-- name: schema_states_of_queues
-- The queue-state view (ledger/views/queue_states.py): one row per queue ever paused or
-- resumed, the fold of its stream; the claims skip the jobs of a paused one.
CREATE TABLE IF NOT EXISTS jl_queue_states (
    queue text PRIMARY KEY,
    paused boolean NOT NULL,
    stream_version integer NOT NULL,
    state bytea NOT NULL
)

-- name: schema_sync_state
-- The sync-state view (ledger/views/sync_state.py): one row per (source_id, uri).
CREATE TABLE IF NOT EXISTS jl_sync_state (
    source_id text NOT NULL,
    uri text NOT NULL,
    revision text,
    content_hash text,
    last_seen_at bigint NOT NULL,
    last_ingested_at bigint NOT NULL,
    PRIMARY KEY (source_id, uri)
)

-- name: schema_dead_letters
-- The dead-letter view (ledger/views/dead_letters.py): one row per dead job.
CREATE TABLE IF NOT EXISTS jl_dead_letters (
    job_id uuid PRIMARY KEY,
    job_type text NOT NULL,
    org text,
    source_id text,
    uri text,
    run_number integer NOT NULL,
    attempt integer NOT NULL,
    code text NOT NULL,
    dead_at bigint NOT NULL,
    snapshot bytea NOT NULL
)

-- name: schema_dead_letters_subject_idx
-- Pruning a subject's dead jobs when the subject is deleted.
CREATE INDEX IF NOT EXISTS jl_dead_letters_subject_idx
    ON jl_dead_letters (source_id, uri) WHERE source_id IS NOT NULL

-- name: schema_workflow_runs
-- The workflow view's runs (ledger/views/workflows.py): one row per run, its header.
CREATE TABLE IF NOT EXISTS jl_workflow_runs (
    run_id uuid PRIMARY KEY,
    workflow_type text NOT NULL,
    org text,
    idempotency_key text,
    status text NOT NULL,
    result_step text,
    step_count integer NOT NULL,
    submitted_steps integer NOT NULL,
    counts bytea NOT NULL,
    recovered_from uuid,
    submitted_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    finished_at bigint,
    version integer NOT NULL,
    header bytea NOT NULL
)

-- name: schema_workflow_runs_idempotency_idx
-- One run per (type, org, idempotency key): a submit's repeat finds it.
CREATE UNIQUE INDEX IF NOT EXISTS jl_workflow_runs_idempotency_idx
    ON jl_workflow_runs (workflow_type, coalesce(org, ''), idempotency_key)
    WHERE idempotency_key IS NOT NULL

-- name: schema_workflow_runs_listing_idx
-- Listing runs in submit order, a page at a time.
CREATE INDEX IF NOT EXISTS jl_workflow_runs_listing_idx ON jl_workflow_runs (submitted_at, run_id)

-- name: schema_workflow_steps
-- The workflow view's steps: one row per (run, step), what a step's end loads.
CREATE TABLE IF NOT EXISTS jl_workflow_steps (
    run_id uuid NOT NULL,
    step_key text NOT NULL,
    position integer NOT NULL,
    kind text NOT NULL,
    stage text,
    status text NOT NULL,
    pending integer NOT NULL,
    job_id uuid,
    code text,
    released_at bigint,
    finished_at bigint,
    dependents bytea NOT NULL,
    state bytea NOT NULL,
    PRIMARY KEY (run_id, step_key)
)

-- name: schema_workflow_steps_job_idx
-- A step by its job (a job's run and step, the job context's prerequisites).
CREATE INDEX IF NOT EXISTS jl_workflow_steps_job_idx
    ON jl_workflow_steps (job_id) WHERE job_id IS NOT NULL

-- name: schema_events_transaction
-- Each event's writing transaction: tailing readers read the history in (transaction_id,
-- notification_id) order, below the oldest transaction in flight (docs/architecture.md, "The
-- order tailing readers rely on"). Events from before this column get 0: they were appended
-- under the events-table lock, so their notification ids are their commit order. A constant
-- default adds the column without rewriting the table; the real default is set next.
ALTER TABLE jl_events ADD COLUMN IF NOT EXISTS transaction_id xid8 NOT NULL DEFAULT '0'

-- name: schema_events_transaction_default
-- New events record their top-level transaction (a savepoint's rows included).
ALTER TABLE jl_events ALTER COLUMN transaction_id SET DEFAULT pg_current_xact_id()

-- name: schema_events_transaction_idx
-- The tailing readers' order (events_tail, events_since).
CREATE INDEX IF NOT EXISTS jl_events_transaction_idx ON jl_events (transaction_id, notification_id)

-- name: schema_tracking
-- Tracked projections' positions: the (transaction_id, notification_id) of the last event each
-- has applied, written in the same transaction as its rows (projections/tracked.py).
CREATE TABLE IF NOT EXISTS jl_tracking (
    name text PRIMARY KEY,
    position bigint NOT NULL
)

-- name: schema_tracking_transaction
-- The transaction half of a tracked position; 0 for positions recorded before it (their
-- events have transaction_id 0 too).
ALTER TABLE jl_tracking ADD COLUMN IF NOT EXISTS transaction_id xid8 NOT NULL DEFAULT '0'

-- name: schema_audit
-- The audit view (ledger/views/audit.py, tracked): one row per job or workflow event.
CREATE TABLE IF NOT EXISTS jl_audit (
    position bigint PRIMARY KEY,
    job_id uuid NOT NULL,
    job_type text NOT NULL,
    org text,
    event text NOT NULL,
    worker_id text,
    run_number integer,
    attempt integer,
    at bigint NOT NULL,
    code text,
    workflow_run uuid,
    step_key text
)

-- name: schema_audit_workflow_idx
-- One workflow run's rows in order: its own events and its step jobs' (partial: plain jobs'
-- rows have no run).
CREATE INDEX IF NOT EXISTS jl_audit_workflow_idx ON jl_audit (workflow_run, position)
    WHERE workflow_run IS NOT NULL

-- name: schema_audit_type_idx
-- Audit queries by job type, newest or oldest first (position keyset; at filtered in-index).
CREATE INDEX IF NOT EXISTS jl_audit_type_idx ON jl_audit (job_type, position, at)

-- name: schema_audit_org_idx
-- Audit queries by org, newest or oldest first (position keyset; at filtered in-index).
CREATE INDEX IF NOT EXISTS jl_audit_org_idx ON jl_audit (org, position, at)

-- name: schema_audit_event_idx
-- Audit queries by event type over time (and the stats windows).
CREATE INDEX IF NOT EXISTS jl_audit_event_idx ON jl_audit (event, at)

-- name: schema_audit_worker_idx
-- Audit queries by worker, newest or oldest first (position keyset; at filtered in-index).
CREATE INDEX IF NOT EXISTS jl_audit_worker_idx ON jl_audit (worker_id, position, at)

-- name: schema_audit_code_idx
-- Audit queries by failure code (only failures and dead letters carry one), by position.
CREATE INDEX IF NOT EXISTS jl_audit_code_idx ON jl_audit (code, position) WHERE code IS NOT NULL

-- name: schema_audit_job_idx
-- One job's audit trail in order (and the stats run-time join).
CREATE INDEX IF NOT EXISTS jl_audit_job_idx ON jl_audit (job_id, position)

-- name: meta_get
-- One schema-marker value.
SELECT value FROM jl_meta WHERE key = %(key)s

-- name: meta_put
-- Write a schema-marker value once.
INSERT INTO jl_meta (key, value) VALUES (%(key)s, %(value)s) ON CONFLICT (key) DO NOTHING

-- name: tables_present
-- Which jobledger tables exist in the current schema.
SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name LIKE 'jl\_%%'

-- name: indexes_present
-- Which jobledger indexes exist (the migration plan compares them with the schema's).
SELECT indexname AS index_name FROM pg_indexes
WHERE schemaname = current_schema() AND indexname LIKE 'jl\_%%'

-- name: columns_present
-- The columns of the jobledger tables (opening checks those a release added with ALTER TABLE).
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name LIKE 'jl\_%%'

-- name: queue_lock
-- Lock jobs for a unit of work that changes them (primary key).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE job_id = ANY(%(job_ids)s)
ORDER BY job_id
FOR UPDATE

-- name: jobs_trailing_events
-- The events after each leased job's row version (%(ids)s and %(versions)s, arrays of one
-- length): the in-lease reports its lease holder appended without rewriting the row
-- (ledger/views/queue_lag.py). One probe of jl_events' primary key per job; run after the
-- rows are read (and locked), in a statement of its own, so it sees what committed meanwhile.
SELECT e.originator_id, e.originator_version, e.topic, e.state
FROM unnest(%(ids)s::uuid[], %(versions)s::bigint[]) AS t(job_id, version)
JOIN jl_events AS e ON e.originator_id = t.job_id AND e.originator_version > t.version
ORDER BY e.originator_id, e.originator_version

-- name: fragment_claim_orgs
-- Org fairness (a recursive common table expression, included by queue_claim): the orgs
-- with pending jobs ('' is no org), found by a loose index scan of jl_queue_claim_org_idx,
-- one probe per org, instead of a scan of every pending job. The claim walks each org's
-- jobs and merges the walks round-robin, so one org's backlog cannot starve another's
-- (docs/operations.md, "Claim order").
orgs (org) AS (
    (SELECT coalesce(org, '') FROM jl_queue WHERE status = 'pending' ORDER BY 1 LIMIT 1)
    UNION ALL
    SELECT (
        SELECT coalesce(q.org, '') FROM jl_queue AS q
        WHERE q.status = 'pending' AND coalesce(q.org, '') > orgs.org
        ORDER BY 1 LIMIT 1
    )
    FROM orgs WHERE orgs.org IS NOT NULL
)

-- name: fragment_claim_queue_names
-- Queue filter, the names (queue_claim's variants with queues; a FROM item): one row per
-- queue asked for, each joined to its own walk, so the walk is an equality on
-- jl_queue_claim_queue_idx and the index gives the order. `= ANY(queues)` instead would walk
-- jl_queue_claim_idx past every other queue's job: 8.8 ms over 20,000 pending jobs of another
-- queue, 0.14 ms so (measured before the fair order; since each walk is also an org's, the
-- planner has walked jl_queue_claim_org_idx instead, the queue a filter: docs/operations.md,
-- "Claim order"). The names must be distinct (the store dedupes them).
unnest(%(queues)s::text[]) AS wanted (name)
CROSS JOIN

-- name: fragment_claim_queue_filter
-- Queue filter, the walk's condition (queue_claim's variants with queues): a job of the
-- queue named by its wanted row ('default' is no queue; ledger.core.events.DEFAULT_QUEUE).
AND coalesce(queue, 'default') = wanted.name

-- name: fragment_claim_type_filter
-- Type filter (queue_claim's variants with types): a job of one of the types asked for, a
-- filter on each org's walk of jl_queue_claim_org_idx (or of each queue's walk of
-- jl_queue_claim_queue_idx); a worker without a type list gets the variant without it.
AND job_type = ANY(%(types)s)

-- name: fragment_claim_left_out
-- What the claim's limits refused (queue_claim): rows of full_types, of the (type, org) pairs
-- full_orgs (type, U+001F, org) and taken are left out, so a claim whose limits refused some
-- candidates asks again without them. Empty lists when the claim asks first.
AND job_type <> ALL(%(full_types)s::text[])
AND (job_type || chr(31) || coalesce(org, '')) <> ALL(%(full_orgs)s::text[])
AND job_id <> ALL(%(taken)s::uuid[])

-- name: fragment_claim_not_paused
-- Pause (queue_claim): a job whose queue is paused stays pending (jl_queue_states' primary
-- key; only paused rows match). Checked in each walk, so a paused queue's jobs are neither
-- locked nor counted against the limit.
AND NOT EXISTS (SELECT 1 FROM jl_queue_states p  -- its queue is not paused
                WHERE p.paused AND p.queue = coalesce(jl_queue.queue, 'default'))

-- name: fragment_claim_rate_token
-- Rate (queue_claim): a job whose rate key has no token yet stays pending (jl_rate_buckets'
-- primary key). A bucket holds jobs back only while it matches its type's current rate (one
-- left from an earlier rate does not); a per-org rate's bucket is the job's org's. The jobs
-- of a limited type that pass still count against their bucket (ledger.jobs.claim_rates,
-- told by the row's rate_limited).
AND NOT EXISTS (SELECT 1 FROM jl_rate_buckets b  -- its rate key has a token
                JOIN jl_definitions d ON d.job_type = b.job_type
                WHERE b.job_type = jl_queue.job_type AND b.next_token_at > %(now)s
                  AND b.scope = d.rate_scope AND b.rate_limit = d.rate_limit
                  AND b.interval_us = d.rate_interval_us
                  AND (b.scope = 'type' OR b.org = coalesce(jl_queue.org, '')))

-- name: queue_claim
-- variants: types, queues
-- Due pending jobs in fair claim order (docs/operations.md, "Claim order"): each org's jobs
-- in claim order (priority DESC, run_at, enqueue order), taken round-robin across orgs (every
-- org's first job, then every org's second...), skipping rows another claimer holds. The
-- orgs come from fragment_claim_orgs; each org's jobs (each queue's, with queues) by an
-- ordered walk of jl_queue_claim_org_idx (jl_queue_claim_queue_idx), a LATERAL per org (per
-- queue and org), each an equality. A walk may lock up to limit rows the merge then drops;
-- they are free at commit. Each row carries its type's definition (the claim's limits, no
-- second query). Composed from the fragment_claim_* fragments above: four variants, one per
-- filter set (queries.py), each planned for its own filters.
WITH RECURSIVE
-- include: fragment_claim_orgs
SELECT c.job_id, c.enqueue_seq, c.state, d.state AS definition,
    d.stream_version AS definition_version,
    d.rate_limit IS NOT NULL AS rate_limited
FROM
    -- include if queues: fragment_claim_queue_names
    orgs
CROSS JOIN LATERAL (
    SELECT job_id, enqueue_seq, state, job_type, coalesce(org, '') AS org, priority, run_at
    FROM jl_queue
    WHERE status = 'pending' AND run_at <= %(now)s
      -- include if queues: fragment_claim_queue_filter
      AND coalesce(org, '') = orgs.org
      -- include if types: fragment_claim_type_filter
      -- include: fragment_claim_left_out
      -- include: fragment_claim_not_paused
      -- include: fragment_claim_rate_token
    ORDER BY priority DESC, run_at, enqueue_seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) AS c
LEFT JOIN jl_definitions AS d ON d.job_type = c.job_type
ORDER BY
    row_number() OVER (PARTITION BY c.org ORDER BY c.priority DESC, c.run_at, c.enqueue_seq),
    c.priority DESC, c.run_at, c.enqueue_seq
LIMIT %(limit)s

-- name: queue_live_leases
-- Live leases per (type, org) of some job types (jl_queue_listing_idx): what the concurrency
-- limits count.
SELECT job_type, coalesce(org, '') AS org, count(*) AS n FROM jl_queue
WHERE status = 'leased' AND job_type = ANY(%(types)s)
GROUP BY job_type, coalesce(org, '')

-- name: limit_lock
-- Serialise the claims of one limited key until commit (a transaction advisory lock on the
-- key's stable 64-bit hash: limit_lock_id in ledger/store/postgres/unit_of_work.py).
SELECT pg_advisory_xact_lock(%(key)s)

-- name: queue_expired_leases
-- Leased jobs whose lease ended strictly before now, oldest first (jl_queue_lease_idx).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE status = 'leased' AND lease_expires_at < %(now)s
ORDER BY lease_expires_at, enqueue_seq
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: queue_find_idempotent
-- The job holding an idempotency key in its (job_type, org) namespace (jl_queue_idempotency_idx).
-- No row lock: enqueue holds the events-table lock, and locking an existing job's row
-- after that lock would deadlock with a worker write that locks the row first.
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE job_type = %(job_type)s AND coalesce(org, '') = %(org)s
  AND idempotency_key = %(idempotency_key)s

-- name: queue_find_live_subject
-- The live job of a sync subject, if any (jl_queue_live_subject_idx).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE source_id = %(source_id)s AND uri = %(uri)s AND status IN ('pending', 'leased')

-- name: queue_insert
-- New jobs' rows, one binary array per column: one statement for the whole batch.
INSERT INTO jl_queue (
    job_id, job_type, queue, org, status, stage, priority, run_at, enqueue_seq,
    lease_expires_at, run_number, attempt, worker_id, idempotency_key, source_id, uri,
    version, updated_at, state
)
SELECT * FROM unnest(
    %(job_id)b::uuid[], %(job_type)b::text[], %(queue)b::text[], %(org)b::text[],
    %(status)b::text[], %(stage)b::text[], %(priority)b::integer[], %(run_at)b::bigint[],
    %(enqueue_seq)b::bigint[], %(lease_expires_at)b::bigint[], %(run_number)b::integer[],
    %(attempt)b::integer[], %(worker_id)b::text[], %(idempotency_key)b::text[],
    %(source_id)b::text[], %(uri)b::text[], %(version)b::integer[], %(updated_at)b::bigint[],
    %(state)b::bytea[]
)

-- name: queue_update
-- Jobs' rows after more events, as one JSON array of row objects (primary key; keys the
-- statement does not name are ignored); enqueue_seq never changes. JSON, not an array per
-- column: msgspec encodes the batch in C, where psycopg dumps arrays element by element in
-- Python (1.4 ms against 0.4 ms per 100 rows); the state blob travels as base64.
UPDATE jl_queue AS q SET
    status = v.status, stage = v.stage, priority = v.priority, run_at = v.run_at,
    lease_expires_at = v.lease_expires_at, run_number = v.run_number, attempt = v.attempt,
    worker_id = v.worker_id, version = v.version, updated_at = v.updated_at,
    state = decode(v.state, 'base64')
FROM json_to_recordset(%(rows)s::json) AS v(
    job_id uuid, status text, stage text, priority integer, run_at bigint,
    lease_expires_at bigint, run_number integer, attempt integer, worker_id text,
    version integer, updated_at bigint, state text
)
WHERE q.job_id = v.job_id

-- name: jobs_append_if_unchanged
-- Jobs' events, and their rows after them, for the jobs whose stream is still at the version
-- the caller folded from (%(rows)s as queue_update's, each with its "expected" version; a row
-- with no status is an in-lease report, whose row is left behind: ledger/views/queue_lag.py;
-- %(events)s one JSON array too, the blobs in base64: msgspec encodes it in C): one
-- statement, one round trip, no transaction of its own around it
-- (ledger.store.postgres.unread_appends).
-- The rows are locked in job-id order first, as queue_lock locks them (by primary key, from
-- an array: joined to the JSON rows instead, the planner hashes every row of every month), so
-- that it cannot deadlock with a unit of work locking the same jobs. A stream is at the
-- expected version when its row is at or behind it and no event follows it (a probe of the
-- events' primary key); a job that moved on meanwhile is left alone, and so are its events
-- (and if an event slipped in after this statement's snapshot, the primary key refuses the
-- whole statement: the caller then writes nothing and decides again). The job ids written come
-- back (the pg_notify, like NOTIFY in a unit of work, is delivered at commit).
-- The ids pass through text (array_out and array_in are stable, not immutable) so that no
-- plan can prune the months at planning time: a constant array let a custom plan prune them
-- and look cheaper than the generic plan over every month, and on a ledger of many months
-- the server planned every call afresh (~0.8 ms a call at 17 partitions). Now the server
-- keeps the generic plan, which prunes the same months when it starts
-- (tests/contract/test_start_claimed.py; bench/README.md, "Cost flat in the history").
WITH v AS MATERIALIZED (
    SELECT * FROM json_to_recordset(%(rows)s::json) AS v(
        job_id uuid, expected integer, status text, stage text, priority integer,
        run_at bigint, lease_expires_at bigint, run_number integer, attempt integer,
        worker_id text, version integer, updated_at bigint, state text
    )
), locked AS MATERIALIZED (
    SELECT q.job_id, q.version FROM jl_queue AS q
    WHERE q.job_id = ANY(%(job_ids)s::text::uuid[]) ORDER BY q.job_id FOR UPDATE
), unmoved AS MATERIALIZED (
    SELECT v.* FROM v JOIN locked AS l ON l.job_id = v.job_id AND l.version <= v.expected
    WHERE NOT EXISTS (
        SELECT 1 FROM jl_events AS e
        WHERE e.originator_id = v.job_id AND e.originator_version > v.expected
    )
), moved AS (
    UPDATE jl_queue AS q SET
        status = v.status, stage = v.stage, priority = v.priority, run_at = v.run_at,
        lease_expires_at = v.lease_expires_at, run_number = v.run_number,
        attempt = v.attempt, worker_id = v.worker_id, version = v.version,
        updated_at = v.updated_at, state = decode(v.state, 'base64')
    FROM unmoved AS v
    WHERE q.job_id = v.job_id AND v.status IS NOT NULL
    RETURNING q.job_id
), appended AS (
    INSERT INTO jl_events (originator_id, originator_version, topic, state)
    SELECT e.originator_id, e.originator_version, e.topic, decode(e.state, 'base64')
    FROM json_to_recordset(%(events)s::json)
        AS e(originator_id uuid, originator_version bigint, topic text, state text)
    WHERE e.originator_id IN (SELECT job_id FROM unmoved)
    RETURNING 1
)
SELECT u.job_id,
       (SELECT pg_notify(%(channel)s, '') WHERE EXISTS (SELECT 1 FROM unmoved)) AS notified
FROM unmoved AS u

-- name: queue_month_partitions
-- The partitions of jl_queue (none if it is not partitioned): the months the pool's write may
-- name instead of the parent (ledger.store.postgres.queue_months).
SELECT c.relname AS name FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass('jl_queue')

-- name: queue_counts
-- Jobs per status (jl_queue_listing_idx).
SELECT status, count(*) AS n FROM jl_queue GROUP BY status

-- name: definitions_all
-- Every job type's definition.
SELECT state, stream_version FROM jl_definitions ORDER BY job_type

-- name: definitions_get
-- Some job types' definitions (primary key).
SELECT state, stream_version FROM jl_definitions WHERE job_type = ANY(%(job_types)s)

-- name: definitions_upsert
-- A job type's definition row after its events.
INSERT INTO jl_definitions (job_type, enabled, version, stream_version, state, rate_limit,
                            rate_interval_us, rate_scope)
VALUES (%(job_type)s, %(enabled)s, %(version)s, %(stream_version)s, %(state)s,
        %(rate_limit)s, %(rate_interval_us)s, %(rate_scope)s)
ON CONFLICT (job_type) DO UPDATE SET
    enabled = EXCLUDED.enabled, version = EXCLUDED.version,
    stream_version = EXCLUDED.stream_version, state = EXCLUDED.state,
    rate_limit = EXCLUDED.rate_limit, rate_interval_us = EXCLUDED.rate_interval_us,
    rate_scope = EXCLUDED.rate_scope

-- name: queue_leased_by_prefix
-- Leased jobs whose worker id starts with a prefix (boot reap of a restarted pool).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE status = 'leased' AND starts_with(worker_id, %(prefix)s)
ORDER BY enqueue_seq
FOR UPDATE SKIP LOCKED

-- name: jobs_available_notify
-- Wake idle workers in other processes; delivered at commit, once per transaction.
NOTIFY jl_jobs_available

-- name: jobs_cancelled_notify
-- Tell pools in other processes, on the same channel, that leased jobs were cancelled: each
-- renews its leases at once and stops the handlers the fence says were cancelled. Once per
-- transaction; the payload tells it from a plain wake-up.
NOTIFY jl_jobs_available, 'cancelled'

-- name: rate_buckets_spend
-- A rate-charged lease spends one token: tat = max(tat, at) + interval, or at + interval
-- when the policy changed (a changed rate starts afresh) (primary key). bigint casts: psycopg
-- sends a small int as int2/int4, and (limit - 1) * interval overflows those.
INSERT INTO jl_rate_buckets AS b (job_type, scope, org, rate_limit, interval_us, tat,
                                  next_token_at)
VALUES (%(job_type)s, %(scope)s, %(org)s, %(rate_limit)s::bigint, %(interval_us)s::bigint,
        %(at)s::bigint + %(interval_us)s::bigint,
        %(at)s::bigint + %(interval_us)s::bigint - (%(rate_limit)s::bigint - 1) * %(interval_us)s::bigint)
ON CONFLICT (job_type, scope, org) DO UPDATE SET
    tat = CASE WHEN b.rate_limit = EXCLUDED.rate_limit AND b.interval_us = EXCLUDED.interval_us
              THEN greatest(b.tat, %(at)s::bigint) ELSE %(at)s::bigint END + EXCLUDED.interval_us,
    next_token_at = CASE WHEN b.rate_limit = EXCLUDED.rate_limit AND b.interval_us = EXCLUDED.interval_us
              THEN greatest(b.tat, %(at)s::bigint) ELSE %(at)s::bigint END + EXCLUDED.interval_us
        - (EXCLUDED.rate_limit - 1) * EXCLUDED.interval_us,
    rate_limit = EXCLUDED.rate_limit, interval_us = EXCLUDED.interval_us

-- name: rate_buckets_of_types
-- The buckets of some job types (primary key prefix).
SELECT job_type, scope, org, rate_limit, interval_us, tat, next_token_at FROM jl_rate_buckets
WHERE job_type = ANY(%(job_types)s)

-- name: rate_buckets_all
-- Every bucket (a scan: one row per rate-limited key).
SELECT job_type, scope, org, rate_limit, interval_us, tat, next_token_at FROM jl_rate_buckets
ORDER BY job_type, scope, org

-- name: queue_live_counts
-- Live jobs per queue and status ('default' is no queue; a scan of the live rows).
SELECT coalesce(queue, 'default') AS queue, status, count(*) AS n FROM jl_queue
WHERE status IN ('pending', 'leased')
GROUP BY coalesce(queue, 'default'), status

-- name: queue_states_upsert
-- A queue's row after its events (primary key).
INSERT INTO jl_queue_states (queue, paused, stream_version, state)
VALUES (%(queue)s, %(paused)s, %(stream_version)s, %(state)s)
ON CONFLICT (queue) DO UPDATE SET
    paused = EXCLUDED.paused, stream_version = EXCLUDED.stream_version, state = EXCLUDED.state

-- name: queue_states_get
-- One queue's state (primary key).
SELECT queue, paused, stream_version, state FROM jl_queue_states WHERE queue = %(queue)s

-- name: queue_states_all
-- Every queue ever paused or resumed (a scan: a handful of rows).
SELECT queue, paused, stream_version, state FROM jl_queue_states ORDER BY queue

-- name: rate_types_lock
-- Serialise the claims of some rate-limited job types until commit (sorted: no deadlock).
SELECT pg_advisory_xact_lock(hashtextextended('jl_rate:' || t, 0))
FROM (SELECT t FROM unnest(%(job_types)s::text[]) AS t ORDER BY t) AS sorted

-- name: sync_state_upsert
-- Record an ingested result; a missing value keeps the stored one (never erases).
INSERT INTO jl_sync_state AS s (source_id, uri, revision, content_hash, last_seen_at,
                                last_ingested_at)
VALUES (%(source_id)s, %(uri)s, %(revision)s, %(content_hash)s, %(last_seen_at)s,
        %(last_ingested_at)s)
ON CONFLICT (source_id, uri) DO UPDATE SET
    revision = coalesce(EXCLUDED.revision, s.revision),
    content_hash = coalesce(EXCLUDED.content_hash, s.content_hash),
    last_seen_at = EXCLUDED.last_seen_at,
    last_ingested_at = EXCLUDED.last_ingested_at

-- name: sync_state_delete
-- Forget a deleted document (primary key).
DELETE FROM jl_sync_state WHERE source_id = %(source_id)s AND uri = %(uri)s

-- name: sync_state_of_source
-- Every row of one source (primary key prefix).
SELECT source_id, uri, revision, content_hash, last_seen_at, last_ingested_at
FROM jl_sync_state WHERE source_id = %(source_id)s ORDER BY uri

-- name: dead_letters_insert
-- A job died.
INSERT INTO jl_dead_letters (job_id, job_type, org, source_id, uri, run_number, attempt,
                             code, dead_at, snapshot)
VALUES (%(job_id)s, %(job_type)s, %(org)s, %(source_id)s, %(uri)s, %(run_number)s,
        %(attempt)s, %(code)s, %(dead_at)s, %(snapshot)s)

-- name: dead_letters_delete
-- A dead job was requeued (primary key).
DELETE FROM jl_dead_letters WHERE job_id = %(job_id)s

-- name: dead_letters_prune_subject
-- A sync subject was deleted: its dead jobs are moot (jl_dead_letters_subject_idx).
DELETE FROM jl_dead_letters WHERE source_id = %(source_id)s AND uri = %(uri)s

-- name: dead_letters_all
-- Every dead letter, oldest death first.
SELECT snapshot FROM jl_dead_letters ORDER BY dead_at, job_id

-- name: dead_letters_of_type
-- The dead letters of one job type, oldest death first.
SELECT snapshot FROM jl_dead_letters WHERE job_type = %(job_type)s ORDER BY dead_at, job_id

-- name: events_insert
-- Append stored events, one binary array per column (jl_events primary key). No table lock:
-- transaction_id (its default) is what keeps tailing readers in order.
INSERT INTO jl_events (originator_id, originator_version, topic, state)
SELECT * FROM unnest(%(originator_id)b::uuid[], %(originator_version)b::bigint[],
                     %(topic)b::text[], %(state)b::bytea[])

-- name: events_insert_returning
-- As events_insert, returning the notification ids in insertion order.
INSERT INTO jl_events (originator_id, originator_version, topic, state)
SELECT * FROM unnest(%(originator_id)b::uuid[], %(originator_version)b::bigint[],
                     %(topic)b::text[], %(state)b::bytea[])
RETURNING notification_id

-- name: events_copied_first
-- The first of the %(count)s events this session just copied (jl_events notification-id
-- index): currval is the last id the COPY drew, and under the events-table lock (which the COPY
-- path still takes) the batch's ids are consecutive (ledger/store/postgres/bulk_writes.py).
SELECT notification_id, originator_id, originator_version FROM jl_events
WHERE notification_id = (
    -- A sub-select: run once, so the index is used (currval itself is volatile).
    SELECT currval(pg_get_serial_sequence('jl_events', 'notification_id')) - %(count)s + 1
)

-- name: events_of_streams
-- Every event of some streams, each stream in order (jl_events primary key).
SELECT originator_id, originator_version, topic, state FROM jl_events
WHERE originator_id = ANY(%(originator_ids)s::uuid[])
ORDER BY originator_id, originator_version

-- name: events_of_streams_in_log_order
-- Every event of some streams, in the log's order (notification id): how a run's timeline
-- interleaves its stream with its steps' jobs' streams. An event caused by another one
-- committed before it always has the higher id (the cause committed before the effect's
-- transaction could read it).
SELECT notification_id, originator_id, originator_version, topic, state FROM jl_events
WHERE originator_id = ANY(%(originator_ids)s::uuid[])
ORDER BY notification_id

-- name: queue_get_many
-- Some jobs' folded states, read only (primary key).
SELECT job_id, enqueue_seq, state FROM jl_queue WHERE job_id = ANY(%(job_ids)s::uuid[])

-- name: meta_set
-- Write a marker value, replacing any (projection versions after a rebuild).
INSERT INTO jl_meta (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value

-- name: meta_all
-- Every marker value (schema and projection versions).
SELECT key, value FROM jl_meta ORDER BY key

-- name: events_after
-- The next stored events after a position, in notification order (jl_events notification-id
-- index): complete within one snapshot only (ids may commit out of order), so only readers of
-- one snapshot (rebuild's first pass, verify, time travel, export) page through it.
SELECT notification_id, originator_id, originator_version, topic, state FROM jl_events
WHERE notification_id > %(position)s
ORDER BY notification_id
LIMIT %(limit)s

-- name: events_after_transactions
-- As events_after, with each event's writing transaction (verify: which events a tracked
-- view's tail position covers).
SELECT notification_id, originator_id, originator_version, topic, state,
       transaction_id::text::bigint AS transaction_id
FROM jl_events
WHERE notification_id > %(position)s
ORDER BY notification_id
LIMIT %(limit)s

-- name: events_positions_after
-- The ids of the events after a tail position, final or not (jl_events_transaction_idx): what
-- a rebuild leaves out of a tracked view whose position it records.
SELECT notification_id AS position FROM jl_events
WHERE (transaction_id, notification_id) > (%(transaction_id)s::text::xid8, %(position)s)

-- name: events_count_after
-- How many events follow a tail position in tail order, final or not (jl_events_transaction_idx):
-- a tracked view's lag. Not the head's id minus the position's: a transaction that took its
-- id early and appended late puts its events before a later one's in tail order, so the view's
-- last applied event need not be the newest id (the difference would never reach 0).
SELECT count(*) AS n FROM jl_events
WHERE (transaction_id, notification_id) > (%(transaction_id)s::text::xid8, %(position)s)

-- name: events_head
-- The newest notification id this transaction sees (0: none).
SELECT coalesce(max(notification_id), 0) AS head FROM jl_events

-- name: fragment_events_frontier
-- (An expression, included by events_tail, events_tail_head and events_frontier.) The
-- frontier: this snapshot's oldest transaction in flight, leaving out those pg_stat_activity
-- shows running in another database (they cannot append here; one it cannot place counts), so
-- a long transaction elsewhere on the server holds no reader back; with none in flight, the
-- next transaction id.
coalesce(
    (SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x
     WHERE NOT EXISTS (
         SELECT FROM pg_stat_activity AS a
         WHERE a.backend_xid = x::xid
           AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))),
    pg_snapshot_xmax(pg_current_snapshot()))

-- name: events_tail
-- The next events of the final prefix after a tail position, in (transaction_id,
-- notification_id) order (jl_events_transaction_idx). Final: written by transactions older
-- than every one in flight (the frontier: fragment_events_frontier), so no event can be
-- inserted before them any more.
WITH frontier AS (
    SELECT
    -- include: fragment_events_frontier
    AS xid
)
SELECT notification_id, originator_id, originator_version, topic, state,
       transaction_id::text::bigint AS transaction_id
FROM jl_events
WHERE (transaction_id, notification_id) > (%(transaction_id)s::text::xid8, %(position)s)
  AND transaction_id < (SELECT xid FROM frontier)
-- Qualified: a bare transaction_id here names the output column (the bigint cast), which no
-- index orders, and the sort read every event after the position (14 s a batch at 20M).
ORDER BY jl_events.transaction_id, notification_id
LIMIT %(limit)s

-- name: events_tail_head
-- The tail position of the last event of the final prefix, or none (jl_events_transaction_idx,
-- backward).
WITH frontier AS (
    SELECT
    -- include: fragment_events_frontier
    AS xid
)
SELECT transaction_id::text::bigint AS transaction_id, notification_id AS position
FROM jl_events
WHERE transaction_id < (SELECT xid FROM frontier)
ORDER BY jl_events.transaction_id DESC, notification_id DESC  -- the column: as events_tail
LIMIT 1

-- name: events_tail_position_of
-- The tail position of the event at a notification id, or none (jl_events primary key): where
-- a live stream resumed after that event goes on (ledger/api/event_feed.py).
SELECT transaction_id::text::bigint AS transaction_id, notification_id AS position
FROM jl_events
WHERE notification_id = %(position)s

-- name: events_frontier
-- The oldest transaction in flight that may append here (as events_tail's frontier) and the
-- next to start.
SELECT
    -- include: fragment_events_frontier
    ::text::bigint AS xmin,
    pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax

-- name: events_frontier_prime
-- Read the sessions' activity now: PostgreSQL keeps the first read of a transaction for the
-- rest of it, so the frontier of a later statement (events_tail) places every transaction that
-- was running before that statement's snapshot (one that ended in between would count as in
-- flight, conservatively, holding the frontier back for a pass).
SELECT count(*) AS sessions FROM pg_stat_activity

-- name: events_pending_before
-- Whether any event after a tail position was written by a transaction older than
-- %(before)s (jl_events_transaction_idx): what a catch-up that must hold every event committed
-- before it started checks, whatever the frontier.
SELECT EXISTS (
    SELECT FROM jl_events
    WHERE (transaction_id, notification_id) > (%(transaction_id)s::text::xid8, %(position)s)
      AND transaction_id < %(before)s::text::xid8
) AS pending

-- name: events_snapshot
-- This transaction's snapshot, as a mark for events_since.
SELECT pg_current_snapshot()::text AS snapshot

-- name: events_since
-- The events this transaction sees that the snapshot %(since)s did not, after a notification
-- id, in notification order (jl_events_transaction_idx for the transactions not older than
-- that snapshot's xmin, then a sort). Each stream's events come in version order: a stream's
-- next version is appended only after its previous one committed, so with a higher id.
SELECT notification_id, originator_id, originator_version, topic, state FROM jl_events
WHERE transaction_id >= pg_snapshot_xmin(%(since)s::pg_snapshot)
  AND NOT pg_visible_in_snapshot(transaction_id, %(since)s::pg_snapshot)
  AND notification_id > %(position)s
ORDER BY notification_id
LIMIT %(limit)s

-- name: events_since_count
-- How many events this transaction sees that the snapshot %(since)s did not (as events_since).
SELECT count(*) AS n FROM jl_events
WHERE transaction_id >= pg_snapshot_xmin(%(since)s::pg_snapshot)
  AND NOT pg_visible_in_snapshot(transaction_id, %(since)s::pg_snapshot)

-- name: tracking_init
-- A tracked projection's position row, at 0 if it has none yet.
INSERT INTO jl_tracking (name, position) VALUES (%(name)s, 0) ON CONFLICT (name) DO NOTHING

-- name: tracking_lock
-- A tracked projection's tail position, locked until commit (one runner at a time).
SELECT position, transaction_id::text::bigint AS transaction_id FROM jl_tracking
WHERE name = %(name)s FOR UPDATE

-- name: tracking_set
-- Record a tracked projection's tail position (with its rows, in one transaction).
INSERT INTO jl_tracking (name, position, transaction_id)
VALUES (%(name)s, %(position)s, %(transaction_id)s::text::xid8)
ON CONFLICT (name) DO UPDATE
SET position = EXCLUDED.position, transaction_id = EXCLUDED.transaction_id

-- name: tracking_all
-- Every tracked projection's tail position.
SELECT name, position, transaction_id::text::bigint AS transaction_id FROM jl_tracking
ORDER BY name

-- name: audit_top
-- The highest position the audit view holds, or NULL (primary key, backward scan;
-- partitioned: jl_audit_position_idx, a backward scan per partition merged).
SELECT max(position) AS position FROM jl_audit

-- name: audit_present
-- Which of some positions the audit view holds already (primary key; partitioned:
-- jl_audit_position_idx).
SELECT position FROM jl_audit WHERE position = ANY(%(positions)s::bigint[])

-- name: workflow_run_origins
-- Runs' type and org (fixed by their submit), for the audit runner (primary key).
SELECT run_id, workflow_type, org FROM jl_workflow_runs WHERE run_id = ANY(%(run_ids)s::uuid[])

-- name: queue_origins
-- Jobs' type, org and state (its workflow link: all fixed by the enqueue event), for the audit
-- runner (primary key).
SELECT job_id, job_type, org, state FROM jl_queue WHERE job_id = ANY(%(job_ids)s::uuid[])

-- name: queue_counts_by_type
-- Jobs per status and type (jl_queue_listing_idx).
SELECT status, job_type, count(*) AS n FROM jl_queue GROUP BY status, job_type

-- name: queue_oldest_due
-- The earliest run_at of a due pending job (jl_queue_claim_idx's rows).
SELECT min(run_at) AS run_at FROM jl_queue WHERE status = 'pending' AND run_at <= %(now)s

-- name: audit_throughput
-- Terminal-ish events per name since a time (jl_audit_event_idx).
SELECT event, count(*) AS n FROM jl_audit
WHERE event IN ('job_succeeded', 'job_failed', 'job_dead_lettered') AND at >= %(since)s
GROUP BY event

-- name: audit_event_totals
-- Every job's enqueue, success, failed attempt and death the audit holds, per name and job
-- type (jl_audit_event_idx): the server's /metrics counters (ledger/api/metrics.py).
SELECT event, job_type, count(*) AS n FROM jl_audit
WHERE event IN ('job_enqueued', 'job_succeeded', 'job_failed', 'job_dead_lettered')
GROUP BY event, job_type

-- name: audit_run_times
-- Successes since a time with their attempt's lease time (jl_audit_event_idx, jl_audit_job_idx).
SELECT s.job_type, s.at - l.at AS micros FROM jl_audit AS s
JOIN jl_audit AS l ON l.job_id = s.job_id AND l.event = 'job_leased'
    AND l.run_number = s.run_number AND l.attempt = s.attempt AND l.position < s.position
WHERE s.event = 'job_succeeded' AND s.at >= %(since)s

-- name: workflow_run_get
-- A run's row (primary key); its release lock is already held.
SELECT submitted_steps, header FROM jl_workflow_runs WHERE run_id = %(run_id)s

-- name: workflow_steps_get
-- Some steps of a run (primary key).
SELECT state, dependents FROM jl_workflow_steps
WHERE run_id = %(run_id)s AND step_key IN (SELECT unnest(%(step_keys)s::text[]))

-- name: workflow_steps_of_run
-- Every step of a run, in its order (primary key prefix).
SELECT state, dependents FROM jl_workflow_steps WHERE run_id = %(run_id)s ORDER BY position

-- name: workflow_run_upsert
-- A run's row after its events.
INSERT INTO jl_workflow_runs (run_id, workflow_type, org, idempotency_key, status, result_step, step_count, submitted_steps, counts, recovered_from, submitted_at, updated_at, finished_at, version, header)
VALUES (%(run_id)s, %(workflow_type)s, %(org)s, %(idempotency_key)s, %(status)s, %(result_step)s, %(step_count)s, %(submitted_steps)s, %(counts)s, %(recovered_from)s, %(submitted_at)s, %(updated_at)s, %(finished_at)s, %(version)s, %(header)s)
ON CONFLICT (run_id) DO UPDATE SET
    status = EXCLUDED.status, step_count = EXCLUDED.step_count, submitted_steps = EXCLUDED.submitted_steps, counts = EXCLUDED.counts, updated_at = EXCLUDED.updated_at, finished_at = EXCLUDED.finished_at, version = EXCLUDED.version, header = EXCLUDED.header

-- name: workflow_step_upsert
-- A step's row after its run's events.
INSERT INTO jl_workflow_steps (run_id, step_key, position, kind, stage, status, pending, job_id, code, released_at, finished_at, dependents, state)
VALUES (%(run_id)s, %(step_key)s, %(position)s, %(kind)s, %(stage)s, %(status)s, %(pending)s, %(job_id)s, %(code)s, %(released_at)s, %(finished_at)s, %(dependents)s, %(state)s)
ON CONFLICT (run_id, step_key) DO UPDATE SET
    status = EXCLUDED.status, pending = EXCLUDED.pending, job_id = EXCLUDED.job_id, code = EXCLUDED.code, released_at = EXCLUDED.released_at, finished_at = EXCLUDED.finished_at, dependents = EXCLUDED.dependents, state = EXCLUDED.state

-- name: workflow_run_find_idempotent
-- The run of an idempotency key (jl_workflow_runs_idempotency_idx).
SELECT run_id FROM jl_workflow_runs
WHERE workflow_type = %(workflow_type)s AND coalesce(org, '') = %(org)s
    AND idempotency_key = %(idempotency_key)s

-- name: workflow_run_exists
-- Whether a run exists (primary key).
SELECT run_id FROM jl_workflow_runs WHERE run_id = %(run_id)s

-- name: workflow_runs_page
-- A page of runs in submit order after a cursor, filtered (jl_workflow_runs_listing_idx).
SELECT run_id, workflow_type, org, idempotency_key, status, result_step, step_count,
    counts, recovered_from, submitted_at, updated_at, finished_at, version, header
FROM jl_workflow_runs
WHERE (%(workflow_type)s::text IS NULL OR workflow_type = %(workflow_type)s::text)
    AND (%(status)s::text IS NULL OR status = %(status)s::text)
    AND (%(org)s::text IS NULL OR org = %(org)s::text)
    AND (submitted_at, run_id) > (%(after_at)s::bigint, %(after_id)s::uuid)
ORDER BY submitted_at, run_id
LIMIT %(limit)s

-- name: workflow_run_row
-- One run's row, for the reader (primary key).
SELECT run_id, workflow_type, org, idempotency_key, status, result_step, step_count,
    counts, recovered_from, submitted_at, updated_at, finished_at, version, header
FROM jl_workflow_runs WHERE run_id = %(run_id)s

-- name: workflow_step_of_job
-- The step a job runs (jl_workflow_steps_job_idx).
SELECT run_id, step_key FROM jl_workflow_steps WHERE job_id = %(job_id)s

-- name: workflow_run_lock
-- A run's release lock, until commit: waits (under the transaction's lock_timeout).
SELECT pg_advisory_xact_lock(%(key)s::bigint)

-- name: workflow_run_try_lock
-- A run's release lock, until commit, if free now (complete, append: fail fast).
SELECT pg_try_advisory_xact_lock(%(key)s::bigint) AS locked

-- name: workflow_live_step_jobs
-- The jobs of a run's enqueued steps (primary key prefix).
SELECT job_id FROM jl_workflow_steps
WHERE run_id = %(run_id)s AND status = 'enqueued' AND job_id IS NOT NULL
ORDER BY job_id

-- name: tokens_upsert
-- A token's row after its events (primary key).
INSERT INTO jl_tokens (token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version)
VALUES (%(token_id)s, %(org)s, %(role)s, %(label)s, %(secret_hash)s, %(created_at)s, %(revoked_at)s, %(stream_version)s)
ON CONFLICT (token_id) DO UPDATE SET
    revoked_at = EXCLUDED.revoked_at, stream_version = EXCLUDED.stream_version

-- name: tokens_all
-- Every token, oldest first (a scan: a handful of rows).
SELECT token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version FROM jl_tokens ORDER BY created_at, token_id

-- name: tokens_get
-- One token by id (primary key).
SELECT token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version FROM jl_tokens WHERE token_id = %(token_id)s

-- name: dead_letters_of_org
-- One org's dead letters (of one job type, if given), oldest death first (a scan: the view
-- holds only the dead jobs).
SELECT snapshot FROM jl_dead_letters WHERE org = %(org)s AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s) ORDER BY dead_at, job_id

-- name: queue_counts_by_type_of_org
-- One org's jobs per status and type (a scan of jl_queue, as queue_counts_by_type).
SELECT status, job_type, count(*) AS n FROM jl_queue WHERE org = %(org)s GROUP BY status, job_type

-- name: audit_throughput_of_org
-- One org's terminal-ish events per name since a time (jl_audit_event_idx, org filtered).
SELECT event, count(*) AS n FROM jl_audit
WHERE event IN ('job_succeeded', 'job_failed', 'job_dead_lettered') AND at >= %(since)s
    AND org = %(org)s
GROUP BY event

-- name: queue_oldest_due_of_org
-- The earliest run_at of one org's due pending job (jl_queue_claim_idx's rows, org filtered).
SELECT min(run_at) AS run_at FROM jl_queue
WHERE status = 'pending' AND run_at <= %(now)s AND org = %(org)s

-- name: audit_run_times_of_org
-- One org's successes since a time with their attempt's lease time (as audit_run_times).
SELECT s.job_type, s.at - l.at AS micros FROM jl_audit AS s
JOIN jl_audit AS l ON l.job_id = s.job_id AND l.event = 'job_leased'
    AND l.run_number = s.run_number AND l.attempt = s.attempt AND l.position < s.position
WHERE s.event = 'job_succeeded' AND s.at >= %(since)s AND s.org = %(org)s

-- name: schedules_upsert
-- A schedule's row after its events (primary key).
INSERT INTO jl_schedules (name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state)
VALUES (%(name)s, %(status)s, %(cron)s, %(tz)s, %(job_type)s, %(org)s, %(next_slot)s, %(last_slot)s, %(last_job_id)s, %(stream_version)s, %(state)s)
ON CONFLICT (name) DO UPDATE SET
    status = EXCLUDED.status, cron = EXCLUDED.cron, tz = EXCLUDED.tz,
    job_type = EXCLUDED.job_type, org = EXCLUDED.org, next_slot = EXCLUDED.next_slot,
    last_slot = EXCLUDED.last_slot, last_job_id = EXCLUDED.last_job_id,
    stream_version = EXCLUDED.stream_version, state = EXCLUDED.state

-- name: schedules_all
-- Every schedule, removed ones too, by name (a scan: a handful of rows).
SELECT name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state FROM jl_schedules ORDER BY name

-- name: schedules_get
-- One schedule by name (primary key).
SELECT name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state FROM jl_schedules WHERE name = %(name)s

-- name: schedules_due
-- The active schedules whose next slot has come, soonest first (jl_schedules_due).
SELECT name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state FROM jl_schedules
WHERE next_slot IS NOT NULL AND next_slot <= %(now)s
ORDER BY next_slot, name
LIMIT %(limit)s

-- name: source_polls_upsert
-- A source's poll row after its events (primary key).
INSERT INTO jl_source_polls (source, last_poll_at, last_result, failures, breaker_until, stream_version, state)
VALUES (%(source)s, %(last_poll_at)s, %(last_result)s, %(failures)s, %(breaker_until)s, %(stream_version)s, %(state)s)
ON CONFLICT (source) DO UPDATE SET
    last_poll_at = EXCLUDED.last_poll_at, last_result = EXCLUDED.last_result,
    failures = EXCLUDED.failures, breaker_until = EXCLUDED.breaker_until,
    stream_version = EXCLUDED.stream_version, state = EXCLUDED.state

-- name: source_polls_all
-- Every polled source, by name (a scan: one row per source).
SELECT source, last_poll_at, last_result, failures, breaker_until, stream_version, state FROM jl_source_polls ORDER BY source

-- name: source_polls_get
-- One source's polls (primary key).
SELECT source, last_poll_at, last_result, failures, breaker_until, stream_version, state FROM jl_source_polls WHERE source = %(source)s

-- name: schedules_counts
-- Schedules by status, for stats (a scan: a handful of rows).
SELECT status, count(*) AS n FROM jl_schedules GROUP BY status

-- name: schedules_counts_of_org
-- One org's schedules by status, for stats (a scan: a handful of rows).
SELECT status, count(*) AS n FROM jl_schedules WHERE org = %(org)s GROUP BY status

-- name: schedules_next
-- The next slot of any active schedule, and whose (jl_schedules_due).
SELECT name, next_slot FROM jl_schedules WHERE next_slot IS NOT NULL
ORDER BY next_slot, name
LIMIT 1

-- name: schedules_next_of_org
-- One org's next slot of an active schedule, and whose (a scan of the due index).
SELECT name, next_slot FROM jl_schedules WHERE next_slot IS NOT NULL AND org = %(org)s
ORDER BY next_slot, name
LIMIT 1

-- name: joined_lock_timeout_get
-- The application's transaction's lock_timeout, put back after a joined unit of work.
SELECT current_setting('lock_timeout') AS lock_timeout

-- name: joined_lock_timeout_put
-- Put the lock_timeout back for the rest of the application's transaction.
SELECT set_config('lock_timeout', %(lock_timeout)s, true)

-- name: joined_ledger_present
-- Whether the application's connection sees a ledger's schema (its marker table).
SELECT to_regclass('jl_meta') IS NOT NULL AS present
