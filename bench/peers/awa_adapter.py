"""awa-pg (Python SDK of the awa queue; Rust core via PyO3), measured for ``bench/compare.py``.

Settings (fastest documented; see bench/COMPARE.md):
- schema: ``migrate()`` then ``install_queue_storage()`` — the queue-storage engine that fresh
  0.6 installs use and that ``enqueue_many_copy`` requires;
- bulk enqueue: ``AsyncClient.enqueue_many_copy`` — COPY straight into queue storage, the
  README's path "for high-volume Python producers";
- worker: ``AsyncClient.start([(queue, C)])`` — hard-reserved mode, C workers on one queue,
  runtime defaults otherwise (poll_interval 200 ms is only the fallback: LISTEN/NOTIFY wakes
  it). awa's own benchmark harness lowers the poll and lease-rotation intervals to 50 ms; on
  this machine that was slower (740 vs 800-920 jobs/s at N=20,000), so the defaults stay;
- a connection pool (``max_connections``) of C + 2, like the other peers (default 10).

awa keeps no per-job event log: a finished job is one terminal record (a completion receipt
batch, or a done entry). The ``awa.jobs`` / ``awa.terminal_jobs`` views take minutes to count
20,000 jobs, so completions are counted in the tables underneath them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib.metadata import version

import awa
import harness

SYSTEM = "awa-pg"
QUEUE = "bench"
KIND = "noop"
# Live poll while draining: cheap sums (a batch row carries its completed_count).
FINISHED_SQL = """
SELECT (SELECT coalesce(sum(completed_count), 0) FROM awa.receipt_completion_batches)
     + (SELECT count(*) FROM awa.done_entries WHERE state = 'completed')
"""
# Final check: distinct job ids, tombstoned (superseded) receipts excluded.
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


@dataclass
class Noop:
    i: int


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    tally = harness.Tally()
    client = awa.AsyncClient(args.url, max_connections=args.concurrency + 2)
    await client.migrate()
    await client.install_queue_storage()

    @client.task(Noop, kind=KIND, queue=QUEUE)
    async def noop(job: awa.Job[Noop]) -> None:
        tally.hit()

    start = harness.timed()
    await client.enqueue_many_copy([Noop(i) for i in range(args.n)], kind=KIND, queue=QUEUE)
    enqueue_s = harness.timed() - start

    harness.analyze(args.url)
    finished = harness.DbCounter(args.url, FINISHED_SQL)
    await finished.open()
    start = harness.timed()
    await client.start([(QUEUE, args.concurrency)])
    try:
        await harness.drain(tally, args.n, finished.count)
        process_s = harness.timed() - start
    finally:
        await client.shutdown()
        await finished.close()
        await client.close()

    done = harness.scalar(args.url, VERIFY_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    return harness.Measurement(
        system=SYSTEM,
        variant=args.variant,
        version=version("awa-pg"),
        n=args.n,
        concurrency=args.concurrency,
        enqueue_s=enqueue_s,
        process_s=process_s,
        finished=done,
        handled=tally.value,
        # One terminal record per finished job; no event history is kept.
        history_rows=done,
        settings={
            "storage": "queue storage (install_queue_storage)",
            "enqueue": "enqueue_many_copy (COPY)",
            "worker": f"start([('{QUEUE}', {args.concurrency})]), runtime defaults",
            "pool": args.concurrency + 2,
        },
    )


if __name__ == "__main__":
    harness.emit(asyncio.run(run(harness.parse_args())))
