-- The sources read (GET /api/v1/sources): the sync-state view by source, and the jobs of
-- each source from jl_queue. The sync-state view has no org: an org's reads keep only the
-- (source, uri) subjects whose every job in jl_queue is of that org (docs/http.md), found by
-- one grouped scan of jl_queue (no index holds every job by subject; the live-subject index
-- holds only live ones).

-- name: sources_summary
-- Each source of the sync-state view: its URIs and its last ingestion (primary key order).
SELECT source_id, count(*) AS uris, max(last_ingested_at) AS last_ingested_at
FROM jl_sync_state GROUP BY source_id ORDER BY source_id

-- name: sources_summary_of_org
-- As sources_summary, of the subjects only one org's jobs touched (a scan of jl_queue).
SELECT s.source_id, count(*) AS uris, max(s.last_ingested_at) AS last_ingested_at
FROM jl_sync_state s
JOIN (SELECT source_id, uri FROM jl_queue WHERE source_id IS NOT NULL
      GROUP BY source_id, uri
      HAVING min(coalesce(org, '')) = :org AND max(coalesce(org, '')) = :org) q
  ON q.source_id = s.source_id AND q.uri = s.uri
GROUP BY s.source_id ORDER BY s.source_id

-- name: source_job_counts
-- Jobs with a sync subject per source and status (a scan of jl_queue).
SELECT source_id, status, count(*) AS n FROM jl_queue
WHERE source_id IS NOT NULL AND (:source_id IS NULL OR source_id = :source_id)
GROUP BY source_id, status

-- name: source_job_counts_of_org
-- One org's jobs with a sync subject per source and status (a scan of jl_queue).
SELECT source_id, status, count(*) AS n FROM jl_queue
WHERE source_id IS NOT NULL AND org = :org AND (:source_id IS NULL OR source_id = :source_id)
GROUP BY source_id, status

-- name: sync_state_of_source_of_org
-- One source's rows of the subjects only one org's jobs touched (a scan of jl_queue).
SELECT s.source_id, s.uri, s.revision, s.content_hash, s.last_seen_at, s.last_ingested_at
FROM jl_sync_state s
JOIN (SELECT uri FROM jl_queue WHERE source_id = :source_id
      GROUP BY uri
      HAVING min(coalesce(org, '')) = :org AND max(coalesce(org, '')) = :org) q
  ON q.uri = s.uri
WHERE s.source_id = :source_id ORDER BY s.uri
