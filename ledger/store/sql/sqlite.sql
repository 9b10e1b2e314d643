-- Named queries for the SQLite store. Parameters use sqlite3's :name style.
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
    job_id text PRIMARY KEY,
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
    state blob NOT NULL
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
    enabled integer NOT NULL,
    version integer NOT NULL,
    stream_version integer NOT NULL,
    state blob NOT NULL,
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
    created_at integer NOT NULL,
    revoked_at integer,
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
    next_slot integer,
    last_slot integer,
    last_job_id text,
    stream_version integer NOT NULL,
    state blob NOT NULL
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
    last_poll_at integer NOT NULL,
    last_result text NOT NULL,
    failures integer NOT NULL,
    breaker_until integer,
    stream_version integer NOT NULL,
    state blob NOT NULL
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
    paused integer NOT NULL,
    stream_version integer NOT NULL,
    state blob NOT NULL
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
    job_id text PRIMARY KEY,
    job_type text NOT NULL,
    org text,
    source_id text,
    uri text,
    run_number integer NOT NULL,
    attempt integer NOT NULL,
    code text NOT NULL,
    dead_at bigint NOT NULL,
    snapshot blob NOT NULL
)

-- name: schema_dead_letters_subject_idx
-- Pruning a subject's dead jobs when the subject is deleted.
CREATE INDEX IF NOT EXISTS jl_dead_letters_subject_idx
    ON jl_dead_letters (source_id, uri) WHERE source_id IS NOT NULL

-- name: schema_workflow_runs
-- The workflow view's runs (ledger/views/workflows.py): one row per run, its header.
CREATE TABLE IF NOT EXISTS jl_workflow_runs (
    run_id text PRIMARY KEY,
    workflow_type text NOT NULL,
    org text,
    idempotency_key text,
    status text NOT NULL,
    result_step text,
    step_count integer NOT NULL,
    submitted_steps integer NOT NULL,
    counts blob NOT NULL,
    recovered_from text,
    submitted_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    finished_at bigint,
    version integer NOT NULL,
    header blob NOT NULL
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
    run_id text NOT NULL,
    step_key text NOT NULL,
    position integer NOT NULL,
    kind text NOT NULL,
    stage text,
    status text NOT NULL,
    pending integer NOT NULL,
    job_id text,
    code text,
    released_at bigint,
    finished_at bigint,
    dependents blob NOT NULL,
    state blob NOT NULL,
    PRIMARY KEY (run_id, step_key)
)

-- name: schema_workflow_steps_job_idx
-- A step by its job (a job's run and step, the job context's prerequisites).
CREATE INDEX IF NOT EXISTS jl_workflow_steps_job_idx
    ON jl_workflow_steps (job_id) WHERE job_id IS NOT NULL

-- name: schema_tracking
-- Tracked projections' positions: the notification id each has applied, written in the same
-- transaction as its rows (projections/tracked.py).
CREATE TABLE IF NOT EXISTS jl_tracking (
    name text PRIMARY KEY,
    position bigint NOT NULL
)

-- name: schema_audit
-- The audit view (ledger/views/audit.py, tracked): one row per job or workflow event.
CREATE TABLE IF NOT EXISTS jl_audit (
    position bigint PRIMARY KEY,
    job_id text NOT NULL,
    job_type text NOT NULL,
    org text,
    event text NOT NULL,
    worker_id text,
    run_number integer,
    attempt integer,
    at bigint NOT NULL,
    code text,
    workflow_run text,
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
SELECT value FROM jl_meta WHERE key = :key

-- name: meta_put
-- Write a schema-marker value once.
INSERT INTO jl_meta (key, value) VALUES (:key, :value) ON CONFLICT (key) DO NOTHING

-- name: tables_present
-- Which jobledger tables exist in the current schema.
SELECT name AS table_name FROM sqlite_master
WHERE type = 'table' AND name LIKE 'jl\_%' ESCAPE '\'

-- name: indexes_present
-- Which jobledger indexes exist (the migration plan compares them with the schema's).
SELECT name AS index_name FROM sqlite_master
WHERE type = 'index' AND name LIKE 'jl\_%' ESCAPE '\'

-- name: queue_lock
-- Jobs a unit of work changes (primary key); BEGIN IMMEDIATE already serialises writers.
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE job_id IN (SELECT value FROM json_each(:job_ids))
ORDER BY job_id

-- name: fragment_claim_orgs
-- Org fairness (a recursive common table expression, included by queue_claim): the orgs
-- with pending jobs ('' is no org), found by a loose index scan of jl_queue_claim_org_idx,
-- one probe per org, instead of a scan of every pending job. The claim walks each org's
-- jobs and merges the walks round-robin, so one org's backlog cannot starve another's
-- (docs/operations.md, "Claim order").
orgs (org) AS (
    SELECT (SELECT coalesce(org, '') FROM jl_queue INDEXED BY jl_queue_claim_org_idx
            WHERE status = 'pending' ORDER BY coalesce(org, '') LIMIT 1)
    UNION ALL
    SELECT (SELECT coalesce(q.org, '') FROM jl_queue AS q INDEXED BY jl_queue_claim_org_idx
            WHERE q.status = 'pending' AND coalesce(q.org, '') > orgs.org
            ORDER BY coalesce(q.org, '') LIMIT 1)
    FROM orgs WHERE orgs.org IS NOT NULL
)

-- name: fragment_claim_walk_by_org
-- The walk's index without a queue filter (queue_claim's variants without queues): each
-- org's jobs in claim order, an equality on jl_queue_claim_org_idx. Named, not left to the
-- planner: without statistics SQLite would walk jl_queue_claim_idx past other orgs' jobs.
INDEXED BY jl_queue_claim_org_idx

-- name: fragment_claim_walk_by_queue
-- Queue filter, the walk's index (queue_claim's variants with queues): jl_queue_claim_queue_idx,
-- the org filtered, so one org's claims by queue do not walk other queues' jobs (with several
-- orgs, a walk passes the other orgs' jobs of its queues). Named: without statistics SQLite
-- would walk jl_queue_claim_idx past other queues' jobs.
INDEXED BY jl_queue_claim_queue_idx

-- name: fragment_claim_queue_filter
-- Queue filter, the walk's condition (queue_claim's variants with queues): a job of one of the
-- queues asked for ('default' is no queue; ledger.core.events.DEFAULT_QUEUE).
AND coalesce(queue, 'default') IN (SELECT value FROM json_each(:queues))

-- name: fragment_claim_type_filter
-- Type filter (queue_claim's variants with types): a job of one of the types asked for, a
-- filter on each org's walk; a worker without a type list gets the variant without it.
AND job_type IN (SELECT value FROM json_each(:types))

-- name: fragment_claim_left_out
-- What the claim's limits refused (queue_claim): rows of full_types, of the (type, org) pairs
-- full_orgs (type, U+001F, org) and taken are left out, so a claim whose limits refused some
-- candidates asks again without them. Each list is tested only when not empty (an empty
-- json_each per org cost more than the walk itself).
AND (:full_types = '[]'
     OR job_type NOT IN (SELECT value FROM json_each(:full_types)))
AND (:full_orgs = '[]'
     OR (job_type || char(31) || coalesce(org, ''))
        NOT IN (SELECT value FROM json_each(:full_orgs)))
AND (:taken = '[]' OR job_id NOT IN (SELECT value FROM json_each(:taken)))

-- name: fragment_claim_not_paused
-- Pause (queue_claim): a job whose queue is paused stays pending (jl_queue_states' primary
-- key; only paused rows match). Checked in each walk, so a paused queue's jobs are not
-- counted against the limit.
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
                WHERE b.job_type = jl_queue.job_type AND b.next_token_at > :now
                  AND b.scope = d.rate_scope AND b.rate_limit = d.rate_limit
                  AND b.interval_us = d.rate_interval_us
                  AND (b.scope = 'type' OR b.org = coalesce(jl_queue.org, '')))

-- name: queue_claim
-- variants: types, queues
-- Due pending jobs in fair claim order (docs/operations.md, "Claim order"): each org's jobs
-- in claim order (priority DESC, run_at, enqueue order), taken round-robin across orgs (every
-- org's first job, then every org's second...). The orgs come from fragment_claim_orgs; each
-- org's jobs by an ordered walk of the index its fragment names, gathered as a JSON array
-- (SQLite has no LATERAL; an IN (subquery) per org measured 4x slower); +run_at stops a
-- skip-scan of the index. Each row carries its type's definition (the claim's limits, no
-- second query). Composed from the fragment_claim_* fragments above: four variants, one per
-- filter set (queries.py), each planned for its own filters.
WITH RECURSIVE
-- include: fragment_claim_orgs
, picked AS (
    SELECT j.key AS rank, j.value AS job_id FROM orgs, json_each((
        SELECT json_group_array(job_id) FROM (
            SELECT job_id FROM jl_queue
            -- include unless queues: fragment_claim_walk_by_org
            -- include if queues: fragment_claim_walk_by_queue
            WHERE status = 'pending' AND +run_at <= :now AND coalesce(org, '') = orgs.org
              -- include if queues: fragment_claim_queue_filter
              -- include if types: fragment_claim_type_filter
              -- include: fragment_claim_left_out
              -- include: fragment_claim_not_paused
              -- include: fragment_claim_rate_token
            ORDER BY priority DESC, run_at, enqueue_seq
            LIMIT :limit
        )
    )) AS j
)
SELECT q.job_id, q.enqueue_seq, q.state, d.state AS definition,
    d.stream_version AS definition_version,
    d.rate_limit IS NOT NULL AS rate_limited
FROM picked JOIN jl_queue AS q ON q.job_id = picked.job_id
LEFT JOIN jl_definitions AS d ON d.job_type = q.job_type
ORDER BY picked.rank, q.priority DESC, q.run_at, q.enqueue_seq
LIMIT :limit

-- name: queue_live_leases
-- Live leases per (type, org) of some job types (jl_queue_listing_idx): what the concurrency
-- limits count.
SELECT job_type, coalesce(org, '') AS org, count(*) AS n FROM jl_queue
WHERE status = 'leased' AND job_type IN (SELECT value FROM json_each(:types))
GROUP BY job_type, coalesce(org, '')

-- name: queue_expired_leases
-- Leased jobs whose lease ended strictly before now, oldest first (jl_queue_lease_idx).
-- INDEXED BY: without statistics SQLite would sort every pending/leased row.
SELECT job_id, enqueue_seq, state FROM jl_queue INDEXED BY jl_queue_lease_idx
WHERE status = 'leased' AND lease_expires_at < :now
ORDER BY lease_expires_at, enqueue_seq
LIMIT :limit

-- name: queue_find_idempotent
-- The job holding an idempotency key in its (job_type, org) namespace (jl_queue_idempotency_idx).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE job_type = :job_type AND coalesce(org, '') = :org
  AND idempotency_key = :idempotency_key

-- name: queue_find_live_subject
-- The live job of a sync subject, if any (jl_queue_live_subject_idx).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE source_id = :source_id AND uri = :uri AND status IN ('pending', 'leased')

-- name: queue_insert
-- A new job's row, its values in this column order (ledger.views.queue.COLUMNS).
INSERT INTO jl_queue (
    job_id, job_type, queue, org, status, stage, priority, run_at, enqueue_seq,
    lease_expires_at, run_number, attempt, worker_id, idempotency_key, source_id, uri,
    version, updated_at, state
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: queue_update
-- A job's row after more events (primary key); enqueue_seq never changes.
UPDATE jl_queue SET
    status = :status, stage = :stage, priority = :priority, run_at = :run_at,
    lease_expires_at = :lease_expires_at, run_number = :run_number,
    attempt = :attempt, worker_id = :worker_id, version = :version,
    updated_at = :updated_at, state = :state
WHERE job_id = :job_id

-- name: queue_counts
-- Jobs per status (jl_queue_listing_idx).
SELECT status, count(*) AS n FROM jl_queue GROUP BY status

-- name: definitions_all
-- Every job type's definition.
SELECT state, stream_version FROM jl_definitions ORDER BY job_type

-- name: definitions_get
-- Some job types' definitions (primary key).
SELECT state, stream_version FROM jl_definitions WHERE job_type IN (SELECT value FROM json_each(:job_types))

-- name: definitions_upsert
-- A job type's definition row after its events.
INSERT INTO jl_definitions (job_type, enabled, version, stream_version, state, rate_limit,
                            rate_interval_us, rate_scope)
VALUES (:job_type, :enabled, :version, :stream_version, :state,
        :rate_limit, :rate_interval_us, :rate_scope)
ON CONFLICT (job_type) DO UPDATE SET
    enabled = EXCLUDED.enabled, version = EXCLUDED.version,
    stream_version = EXCLUDED.stream_version, state = EXCLUDED.state,
    rate_limit = EXCLUDED.rate_limit, rate_interval_us = EXCLUDED.rate_interval_us,
    rate_scope = EXCLUDED.rate_scope

-- name: queue_leased_by_prefix
-- Leased jobs whose worker id starts with a prefix (boot reap of a restarted pool).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE status = 'leased' AND substr(worker_id, 1, length(:prefix)) = :prefix
ORDER BY enqueue_seq

-- name: rate_buckets_spend
-- A rate-charged lease spends one token: tat = max(tat, at) + interval, or at + interval
-- when the policy changed (a changed rate starts afresh) (primary key).
INSERT INTO jl_rate_buckets AS b (job_type, scope, org, rate_limit, interval_us, tat,
                                  next_token_at)
VALUES (:job_type, :scope, :org, :rate_limit, :interval_us,
        :at + :interval_us,
        :at + :interval_us - (:rate_limit - 1) * :interval_us)
ON CONFLICT (job_type, scope, org) DO UPDATE SET
    tat = CASE WHEN b.rate_limit = EXCLUDED.rate_limit AND b.interval_us = EXCLUDED.interval_us
              THEN max(b.tat, :at) ELSE :at END + EXCLUDED.interval_us,
    next_token_at = CASE WHEN b.rate_limit = EXCLUDED.rate_limit AND b.interval_us = EXCLUDED.interval_us
              THEN max(b.tat, :at) ELSE :at END + EXCLUDED.interval_us
        - (EXCLUDED.rate_limit - 1) * EXCLUDED.interval_us,
    rate_limit = EXCLUDED.rate_limit, interval_us = EXCLUDED.interval_us

-- name: rate_buckets_of_types
-- The buckets of some job types (primary key prefix).
SELECT job_type, scope, org, rate_limit, interval_us, tat, next_token_at FROM jl_rate_buckets
WHERE job_type IN (SELECT value FROM json_each(:job_types))

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
VALUES (:queue, :paused, :stream_version, :state)
ON CONFLICT (queue) DO UPDATE SET
    paused = EXCLUDED.paused, stream_version = EXCLUDED.stream_version, state = EXCLUDED.state

-- name: queue_states_get
-- One queue's state (primary key).
SELECT queue, paused, stream_version, state FROM jl_queue_states WHERE queue = :queue

-- name: queue_states_all
-- Every queue ever paused or resumed (a scan: a handful of rows).
SELECT queue, paused, stream_version, state FROM jl_queue_states ORDER BY queue

-- name: sync_state_upsert
-- Record an ingested result; a missing value keeps the stored one (never erases).
INSERT INTO jl_sync_state AS s (source_id, uri, revision, content_hash, last_seen_at,
                                last_ingested_at)
VALUES (:source_id, :uri, :revision, :content_hash, :last_seen_at,
        :last_ingested_at)
ON CONFLICT (source_id, uri) DO UPDATE SET
    revision = coalesce(EXCLUDED.revision, s.revision),
    content_hash = coalesce(EXCLUDED.content_hash, s.content_hash),
    last_seen_at = EXCLUDED.last_seen_at,
    last_ingested_at = EXCLUDED.last_ingested_at

-- name: sync_state_delete
-- Forget a deleted document (primary key).
DELETE FROM jl_sync_state WHERE source_id = :source_id AND uri = :uri

-- name: sync_state_of_source
-- Every row of one source (primary key prefix).
SELECT source_id, uri, revision, content_hash, last_seen_at, last_ingested_at
FROM jl_sync_state WHERE source_id = :source_id ORDER BY uri

-- name: dead_letters_insert
-- A job died.
INSERT INTO jl_dead_letters (job_id, job_type, org, source_id, uri, run_number, attempt,
                             code, dead_at, snapshot)
VALUES (:job_id, :job_type, :org, :source_id, :uri, :run_number,
        :attempt, :code, :dead_at, :snapshot)

-- name: dead_letters_delete
-- A dead job was requeued (primary key).
DELETE FROM jl_dead_letters WHERE job_id = :job_id

-- name: dead_letters_prune_subject
-- A sync subject was deleted: its dead jobs are moot (jl_dead_letters_subject_idx).
DELETE FROM jl_dead_letters WHERE source_id = :source_id AND uri = :uri

-- name: dead_letters_all
-- Every dead letter, oldest death first.
SELECT snapshot FROM jl_dead_letters ORDER BY dead_at, job_id

-- name: dead_letters_of_type
-- The dead letters of one job type, oldest death first.
SELECT snapshot FROM jl_dead_letters WHERE job_type = :job_type ORDER BY dead_at, job_id

-- name: events_of_streams
-- Every event of some streams, each stream in order (jl_events primary key).
SELECT originator_id, originator_version, topic, state FROM jl_events
WHERE originator_id IN (SELECT value FROM json_each(:originator_ids))
ORDER BY originator_id, originator_version

-- name: events_of_streams_in_log_order
-- Every event of some streams, in the log's order (notification id): how a run's timeline
-- interleaves its stream with its steps' jobs' streams. An event caused by another one
-- committed before it always has the higher id (the cause committed before the effect's
-- transaction could read it).
SELECT rowid AS notification_id, originator_id, originator_version, topic, state FROM jl_events
WHERE originator_id IN (SELECT value FROM json_each(:originator_ids))
ORDER BY rowid

-- name: events_insert
-- Append stored events (jl_events primary key); the rowid is the notification id.
INSERT INTO jl_events (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)

-- name: queue_get_many
-- Some jobs' folded states, read only (primary key).
SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE job_id IN (SELECT value FROM json_each(:job_ids))

-- name: meta_set
-- Write a marker value, replacing any (projection versions after a rebuild).
INSERT INTO jl_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: meta_all
-- Every marker value (schema and projection versions).
SELECT key, value FROM jl_meta ORDER BY key

-- name: events_after
-- The next stored events after a position, in notification order (jl_events rowid);
-- rebuild and verify page through the history with it.
SELECT rowid AS notification_id, originator_id, originator_version, topic, state
FROM jl_events
WHERE rowid > :position
ORDER BY rowid
LIMIT :limit

-- name: events_after_transactions
-- As events_after; the transaction half of a tail position is always 0 here (events_tail).
SELECT rowid AS notification_id, originator_id, originator_version, topic, state,
       0 AS transaction_id
FROM jl_events
WHERE rowid > :position
ORDER BY rowid
LIMIT :limit

-- name: events_positions_after
-- The ids of the events after a tail position (jl_events rowid).
SELECT rowid AS position FROM jl_events WHERE rowid > :position

-- name: events_count_after
-- How many events follow a tail position (jl_events rowid; one writer at a time, so tail order
-- is id order): a tracked view's lag.
SELECT count(*) AS n FROM jl_events WHERE rowid > :position

-- name: events_head
-- The newest notification id this transaction sees (0: none).
SELECT coalesce(max(rowid), 0) AS head FROM jl_events

-- name: events_tail
-- The next events after a tail position (jl_events rowid). One writer at a time: ids commit in
-- order, so every committed event is final and the transaction half is always 0: the same
-- read as events_after_transactions.
-- include: events_after_transactions

-- name: events_tail_head
-- The tail position of the last event, or none (jl_events rowid).
SELECT 0 AS transaction_id, rowid AS position FROM jl_events ORDER BY rowid DESC LIMIT 1

-- name: events_tail_position_of
-- The tail position of the event at a notification id, or none (jl_events rowid).
SELECT 0 AS transaction_id, rowid AS position FROM jl_events WHERE rowid = :position

-- name: events_frontier
-- One writer at a time: every committed event is final.
SELECT 0 AS xmin, 0 AS xmax

-- name: events_frontier_prime
-- Nothing to read: every committed event is final.
SELECT 0 AS sessions

-- name: events_pending_before
-- Every committed event is final: a catch-up that found none after its position is done.
SELECT 0 AS pending

-- name: events_snapshot
-- This transaction's mark for events_since: its newest id (ids commit in order).
SELECT CAST(coalesce(max(rowid), 0) AS TEXT) AS snapshot FROM jl_events

-- name: events_since
-- The events after the mark :since and after a notification id, in order (jl_events rowid).
SELECT rowid AS notification_id, originator_id, originator_version, topic, state
FROM jl_events
WHERE rowid > CAST(:since AS INTEGER) AND rowid > :position
ORDER BY rowid
LIMIT :limit

-- name: events_since_count
-- How many events come after the mark :since (jl_events rowid).
SELECT count(*) AS n FROM jl_events WHERE rowid > CAST(:since AS INTEGER)

-- name: tracking_init
-- A tracked projection's position row, at 0 if it has none yet.
INSERT INTO jl_tracking (name, position) VALUES (:name, 0) ON CONFLICT (name) DO NOTHING

-- name: tracking_lock
-- A tracked projection's position, locked until commit (one runner at a time); the
-- transaction half of a tail position is always 0 here (events_tail).
SELECT position, 0 AS transaction_id FROM jl_tracking WHERE name = :name

-- name: tracking_set
-- Record a tracked projection's position (with its rows, in one transaction).
INSERT INTO jl_tracking (name, position) VALUES (:name, :position)
ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position

-- name: tracking_all
-- Every tracked projection's position.
SELECT name, position, 0 AS transaction_id FROM jl_tracking ORDER BY name

-- name: audit_insert
-- Audit rows; an already-applied position is left as it is (re-delivery changes nothing).
INSERT INTO jl_audit (position, job_id, job_type, org, event, worker_id, run_number,
                      attempt, at, code, workflow_run, step_key)
VALUES (:position, :job_id, :job_type, :org, :event, :worker_id, :run_number, :attempt, :at,
        :code, :workflow_run, :step_key)
ON CONFLICT (position) DO NOTHING

-- name: workflow_run_origins
-- Runs' type and org (fixed by their submit), for the audit runner (primary key).
SELECT run_id, workflow_type, org FROM jl_workflow_runs
WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: queue_origins
-- Jobs' type, org and state (its workflow link: all fixed by the enqueue event), for the audit
-- runner (primary key).
SELECT job_id, job_type, org, state FROM jl_queue WHERE job_id IN (SELECT value FROM json_each(:job_ids))

-- name: queue_counts_by_type
-- Jobs per status and type (jl_queue_listing_idx).
SELECT status, job_type, count(*) AS n FROM jl_queue GROUP BY status, job_type

-- name: queue_oldest_due
-- The earliest run_at of a due pending job (jl_queue_claim_idx's rows).
SELECT min(run_at) AS run_at FROM jl_queue WHERE status = 'pending' AND run_at <= :now

-- name: audit_throughput
-- Terminal-ish events per name since a time (jl_audit_event_idx).
SELECT event, count(*) AS n FROM jl_audit
WHERE event IN ('job_succeeded', 'job_failed', 'job_dead_lettered') AND at >= :since
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
WHERE s.event = 'job_succeeded' AND s.at >= :since

-- name: workflow_run_get
-- A run's row (primary key); its release lock is already held.
SELECT submitted_steps, header FROM jl_workflow_runs WHERE run_id = :run_id

-- name: workflow_steps_get
-- Some steps of a run (primary key).
SELECT state, dependents FROM jl_workflow_steps
WHERE run_id = :run_id AND step_key IN (SELECT value FROM json_each(:step_keys))

-- name: workflow_steps_of_run
-- Every step of a run, in its order (primary key prefix).
SELECT state, dependents FROM jl_workflow_steps WHERE run_id = :run_id ORDER BY position

-- name: workflow_run_upsert
-- A run's row after its events.
INSERT INTO jl_workflow_runs (run_id, workflow_type, org, idempotency_key, status, result_step, step_count, submitted_steps, counts, recovered_from, submitted_at, updated_at, finished_at, version, header)
VALUES (:run_id, :workflow_type, :org, :idempotency_key, :status, :result_step, :step_count, :submitted_steps, :counts, :recovered_from, :submitted_at, :updated_at, :finished_at, :version, :header)
ON CONFLICT (run_id) DO UPDATE SET
    status = EXCLUDED.status, step_count = EXCLUDED.step_count, submitted_steps = EXCLUDED.submitted_steps, counts = EXCLUDED.counts, updated_at = EXCLUDED.updated_at, finished_at = EXCLUDED.finished_at, version = EXCLUDED.version, header = EXCLUDED.header

-- name: workflow_step_upsert
-- A step's row after its run's events.
INSERT INTO jl_workflow_steps (run_id, step_key, position, kind, stage, status, pending, job_id, code, released_at, finished_at, dependents, state)
VALUES (:run_id, :step_key, :position, :kind, :stage, :status, :pending, :job_id, :code, :released_at, :finished_at, :dependents, :state)
ON CONFLICT (run_id, step_key) DO UPDATE SET
    status = EXCLUDED.status, pending = EXCLUDED.pending, job_id = EXCLUDED.job_id, code = EXCLUDED.code, released_at = EXCLUDED.released_at, finished_at = EXCLUDED.finished_at, dependents = EXCLUDED.dependents, state = EXCLUDED.state

-- name: workflow_run_find_idempotent
-- The run of an idempotency key (jl_workflow_runs_idempotency_idx).
SELECT run_id FROM jl_workflow_runs
WHERE workflow_type = :workflow_type AND coalesce(org, '') = :org
    AND idempotency_key = :idempotency_key

-- name: workflow_run_exists
-- Whether a run exists (primary key).
SELECT run_id FROM jl_workflow_runs WHERE run_id = :run_id

-- name: workflow_runs_page
-- A page of runs in submit order after a cursor, filtered (jl_workflow_runs_listing_idx).
SELECT run_id, workflow_type, org, idempotency_key, status, result_step, step_count,
    counts, recovered_from, submitted_at, updated_at, finished_at, version, header
FROM jl_workflow_runs
WHERE (:workflow_type IS NULL OR workflow_type = :workflow_type)
    AND (:status IS NULL OR status = :status)
    AND (:org IS NULL OR org = :org)
    AND (submitted_at, run_id) > (:after_at, :after_id)
ORDER BY submitted_at, run_id
LIMIT :limit

-- name: workflow_run_row
-- One run's row, for the reader (primary key).
SELECT run_id, workflow_type, org, idempotency_key, status, result_step, step_count,
    counts, recovered_from, submitted_at, updated_at, finished_at, version, header
FROM jl_workflow_runs WHERE run_id = :run_id

-- name: workflow_step_of_job
-- The step a job runs (jl_workflow_steps_job_idx).
SELECT run_id, step_key FROM jl_workflow_steps WHERE job_id = :job_id

-- name: workflow_live_step_jobs
-- The jobs of a run's enqueued steps (primary key prefix).
SELECT job_id FROM jl_workflow_steps
WHERE run_id = :run_id AND status = 'enqueued' AND job_id IS NOT NULL
ORDER BY job_id

-- name: tokens_upsert
-- A token's row after its events (primary key).
INSERT INTO jl_tokens (token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version)
VALUES (:token_id, :org, :role, :label, :secret_hash, :created_at, :revoked_at, :stream_version)
ON CONFLICT (token_id) DO UPDATE SET
    revoked_at = EXCLUDED.revoked_at, stream_version = EXCLUDED.stream_version

-- name: tokens_all
-- Every token, oldest first (a scan: a handful of rows).
SELECT token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version FROM jl_tokens ORDER BY created_at, token_id

-- name: tokens_get
-- One token by id (primary key).
SELECT token_id, org, role, label, secret_hash, created_at, revoked_at, stream_version FROM jl_tokens WHERE token_id = :token_id

-- name: dead_letters_of_org
-- One org's dead letters (of one job type, if given), oldest death first (a scan: the view
-- holds only the dead jobs).
SELECT snapshot FROM jl_dead_letters WHERE org = :org AND (:job_type IS NULL OR job_type = :job_type) ORDER BY dead_at, job_id

-- name: queue_counts_by_type_of_org
-- One org's jobs per status and type (a scan of jl_queue, as queue_counts_by_type).
SELECT status, job_type, count(*) AS n FROM jl_queue WHERE org = :org GROUP BY status, job_type

-- name: audit_throughput_of_org
-- One org's terminal-ish events per name since a time (jl_audit_event_idx, org filtered).
SELECT event, count(*) AS n FROM jl_audit
WHERE event IN ('job_succeeded', 'job_failed', 'job_dead_lettered') AND at >= :since
    AND org = :org
GROUP BY event

-- name: queue_oldest_due_of_org
-- The earliest run_at of one org's due pending job (jl_queue_claim_idx's rows, org filtered).
SELECT min(run_at) AS run_at FROM jl_queue
WHERE status = 'pending' AND run_at <= :now AND org = :org

-- name: audit_run_times_of_org
-- One org's successes since a time with their attempt's lease time (as audit_run_times).
SELECT s.job_type, s.at - l.at AS micros FROM jl_audit AS s
JOIN jl_audit AS l ON l.job_id = s.job_id AND l.event = 'job_leased'
    AND l.run_number = s.run_number AND l.attempt = s.attempt AND l.position < s.position
WHERE s.event = 'job_succeeded' AND s.at >= :since AND s.org = :org

-- name: schedules_upsert
-- A schedule's row after its events (primary key).
INSERT INTO jl_schedules (name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state)
VALUES (:name, :status, :cron, :tz, :job_type, :org, :next_slot, :last_slot, :last_job_id, :stream_version, :state)
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
SELECT name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state FROM jl_schedules WHERE name = :name

-- name: schedules_due
-- The active schedules whose next slot has come, soonest first (jl_schedules_due).
SELECT name, status, cron, tz, job_type, org, next_slot, last_slot, last_job_id, stream_version, state FROM jl_schedules
WHERE next_slot IS NOT NULL AND next_slot <= :now
ORDER BY next_slot, name
LIMIT :limit

-- name: source_polls_upsert
-- A source's poll row after its events (primary key).
INSERT INTO jl_source_polls (source, last_poll_at, last_result, failures, breaker_until, stream_version, state)
VALUES (:source, :last_poll_at, :last_result, :failures, :breaker_until, :stream_version, :state)
ON CONFLICT (source) DO UPDATE SET
    last_poll_at = EXCLUDED.last_poll_at, last_result = EXCLUDED.last_result,
    failures = EXCLUDED.failures, breaker_until = EXCLUDED.breaker_until,
    stream_version = EXCLUDED.stream_version, state = EXCLUDED.state

-- name: source_polls_all
-- Every polled source, by name (a scan: one row per source).
SELECT source, last_poll_at, last_result, failures, breaker_until, stream_version, state FROM jl_source_polls ORDER BY source

-- name: source_polls_get
-- One source's polls (primary key).
SELECT source, last_poll_at, last_result, failures, breaker_until, stream_version, state FROM jl_source_polls WHERE source = :source

-- name: schedules_counts
-- Schedules by status, for stats (a scan: a handful of rows).
SELECT status, count(*) AS n FROM jl_schedules GROUP BY status

-- name: schedules_counts_of_org
-- One org's schedules by status, for stats (a scan: a handful of rows).
SELECT status, count(*) AS n FROM jl_schedules WHERE org = :org GROUP BY status

-- name: schedules_next
-- The next slot of any active schedule, and whose (jl_schedules_due).
SELECT name, next_slot FROM jl_schedules WHERE next_slot IS NOT NULL
ORDER BY next_slot, name
LIMIT 1

-- name: schedules_next_of_org
-- One org's next slot of an active schedule, and whose (a scan of the due index).
SELECT name, next_slot FROM jl_schedules WHERE next_slot IS NOT NULL AND org = :org
ORDER BY next_slot, name
LIMIT 1

-- name: joined_write_lock
-- A write of no row, to take the database's write lock inside an application's transaction
-- (what BEGIN IMMEDIATE does for our own; ledger.store.sqlite.joined). No index: no row.
UPDATE jl_meta SET value = value WHERE 0
