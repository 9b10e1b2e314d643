"""awa-pg (Python SDK of the awa queue; Rust core via PyO3), measured for ``bench/compare.py``.

The knobs (``--settings``), all keys of the queue dict ``AsyncClient.start`` takes:
- ``max_workers``: jobs of the queue running at once (hard-reserved mode). A claim takes at
  most as many jobs as there are free worker permits, so this is the declared claim depth;
- ``claimers``: dispatcher/claimer loops sharing those permits ("benchmark 2 or 4 before
  raising it further", says ``start``'s docstring for hot queue-storage queues);
- ``claim_batch_size``: most jobs one claim takes (``None``: awa's default, 512, i.e. as many
  as there are free permits);
- ``pool``: the client's connection pool (``max_connections``; its default is 10).

Fixed for every configuration (fastest documented; see bench/COMPARE.md):
- schema: ``migrate()`` then ``install_queue_storage()`` — the queue-storage engine that fresh
  0.6 installs use and that ``enqueue_many_copy`` requires;
- bulk enqueue: ``AsyncClient.enqueue_many_copy`` — COPY straight into queue storage, the
  README's path "for high-volume Python producers"; args ``{"i": i}``;
- runtime defaults otherwise (poll_interval 200 ms is only the fallback: LISTEN/NOTIFY wakes
  it). awa's own benchmark harness lowers the poll and lease-rotation intervals to 50 ms; on
  this machine that was slower (740 vs 800-920 jobs/s at N=20,000), so the defaults stay.

awa keeps no per-job event log. Queue storage appends a ready entry per job and a lease claim
per attempt into ring partitions that rotation truncates once drained, and records a finished
job as one entry of a completion receipt batch (or a done entry): that terminal record is the
job's state, so its history rows are 0 and its state rows 1 — until a queue-ring prune
reclaims the drained segment with its terminal records and keeps only their count in a
rollup (ADR-026; seen here under load, seconds after a drain). Depth figures then cover the
receipts still there, and the jobs pruned are counted from the rollup. The ``awa.jobs`` /
``awa.terminal_jobs`` views take minutes to count 20,000 jobs, so completions are counted in
the tables underneath them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import awa
import harness
import probe

SYSTEM = "awa-pg"
QUEUE = "bench"
KIND = "noop"
# Jobs whose terminal records a queue-ring prune already reclaimed: awa then keeps only their
# count (ADR-026), in one of two rollup tables (GREATEST: never counted twice).
PRUNED_SQL = """
SELECT GREATEST(
    (SELECT coalesce(sum(pruned_completed_count), 0) FROM awa.queue_terminal_rollups),
    (SELECT coalesce(sum(pruned_completed_count), 0) FROM awa.queue_lanes))
"""
# Live poll while draining: cheap sums (a batch row carries its completed_count).
FINISHED_SQL = f"""
SELECT (SELECT coalesce(sum(completed_count), 0) FROM awa.receipt_completion_batches)
     + (SELECT count(*) FROM awa.done_entries WHERE state = 'completed')
     + ({PRUNED_SQL})
"""
# Final check: distinct job ids, tombstoned (superseded) receipts excluded; plus PRUNED_SQL.
VERIFY_SQL = """
SELECT count(DISTINCT job_id) FROM (
    SELECT item.job_id
    FROM awa.receipt_completion_batches batch
    CROSS JOIN LATERAL unnest(batch.job_ids, batch.run_leases) AS item(job_id, run_lease)
    WHERE NOT EXISTS (
        SELECT 1 FROM awa.receipt_completion_tombstones tomb
        WHERE tomb.ready_slot = batch.ready_slot
          AND tomb.ready_generation = batch.ready_generation
          AND tomb.job_id = item.job_id AND tomb.run_lease = item.run_lease)
    UNION ALL
    SELECT job_id FROM awa.done_entries WHERE state = 'completed'
) finished
"""
UNFINISHED_SQL = """
SELECT (SELECT count(*) FROM awa.leases)
     + (SELECT count(*) FROM awa.deferred_jobs)
     + (SELECT count(*) FROM awa.done_entries WHERE state <> 'completed')
     + (SELECT count(*) FROM awa.dlq_entries)
"""
# One row per claim query (its claimed_count) and per completion flush (a receipt batch). The
# leases: each job's attempt start (attempted_ats, clock time) and its batch's finalisation;
# at equal times the ends sort first, so the peak is never overstated.
DEPTH_SQL = probe.DepthSql(
    claims="SELECT claimed_count FROM awa.ready_claim_attempt_batches",
    flushes="SELECT completed_count FROM awa.receipt_completion_batches",
    leases="""
        SELECT at, delta FROM (
            SELECT unnest(attempted_ats) AS at, 1 AS delta FROM awa.receipt_completion_batches
            UNION ALL
            SELECT finalized_at, -completed_count FROM awa.receipt_completion_batches
        ) steps ORDER BY at, delta
    """,
)


@dataclass
class Noop:
    i: int


def queue_config(settings: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": QUEUE,
        "max_workers": int(settings["max_workers"]),
        "claimers": int(settings.get("claimers") or 1),
    }
    if settings.get("claim_batch_size"):
        config["claim_batch_size"] = int(settings["claim_batch_size"])
    return config


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    tally = harness.Tally()
    figures = probe.Probe.open(args.url)
    pool = int(args.settings["pool"])
    client = awa.AsyncClient(args.url, max_connections=pool)
    await client.migrate()
    await client.install_queue_storage()

    @client.task(Noop, kind=KIND, queue=QUEUE)
    async def noop(job: awa.Job[Noop]) -> None:
        tally.hit()

    jobs = [Noop(**harness.payload(i)) for i in range(args.n)]
    figures.before_enqueue()
    start = harness.timed()
    await client.enqueue_many_copy(jobs, kind=KIND, queue=QUEUE)
    enqueue_s = harness.timed() - start
    figures.after_enqueue()

    harness.analyze(args.url)
    finished = harness.DbCounter(args.url, FINISHED_SQL)
    await finished.open()
    config = queue_config(args.settings)
    figures.before_process()
    start = harness.timed()
    await client.start([config])
    try:
        await harness.drain(tally, args.n, finished.count)
        process_s = harness.timed() - start
        figures.after_process()
        depth = probe.depth(args.url, DEPTH_SQL)
        # Counted before the runtime stops; a prune may still have reclaimed a drained ring
        # slot's receipts, whose jobs are then counted in the rollups (PRUNED_SQL).
        records = harness.scalar(args.url, VERIFY_SQL)
        done = records + harness.scalar(args.url, PRUNED_SQL)
        unfinished = harness.scalar(args.url, UNFINISHED_SQL)
    finally:
        await client.shutdown()
        await finished.close()
        await client.close()

    harness.verify(SYSTEM, args.n, done, unfinished)
    return harness.Measurement(
        system=SYSTEM,
        version=version("awa-pg"),
        n=args.n,
        enqueue_s=enqueue_s,
        process_s=process_s,
        steady_s=tally.steady_s(args.n),
        finished=done,
        handled=tally.value,
        history_rows=0,  # no event log: see the module docstring
        state_rows=records,  # one terminal record per finished job, until a prune
        probe=figures.as_json(),
        depth=depth,
        settings={
            "storage": "queue storage (install_queue_storage)",
            "enqueue": "enqueue_many_copy (COPY)",
            "worker": f"start([{config}]), runtime defaults",
            "pool": pool,
        },
    )


if __name__ == "__main__":
    harness.emit(asyncio.run(run(harness.parse_args())))
