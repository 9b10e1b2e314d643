"""PgQueuer, measured for ``bench/compare.py`` (see ``harness`` for the protocol).

Two configurations (``--variant``), both with PgQueuer's fastest documented settings
(see bench/COMPARE.md):
- ``capped``: at most C jobs in flight in the process (``max_concurrent_tasks=C``), the same
  concurrency the other systems get. PgQueuer requires ``max_concurrent_tasks >= 2 x
  batch_size``, so the batch is the largest allowed: C // 2. (The other documented cap, a
  per-entrypoint ``concurrency_limit=C``, enforced in SQL, measured slower here.)
- ``unbounded``: no in-flight cap (``max_concurrent_tasks=None``, PgQueuer's default): the
  manager keeps dequeuing while earlier jobs run. The issue asks for this configuration too.
  Batch size 25, the value of the docs' performance-tuning example ("increase batch_size when
  jobs are short-lived"); ``--batch`` overrides it. Larger batches are faster still, because
  a batch is as many jobs started at once (see bench/COMPARE.md for the sweep).

Common to both: bulk enqueue with ``Queries.enqueue`` given lists (one INSERT … unnest for the
whole batch); the asyncpg driver on a dedicated connection for the QueueManager (the docs'
advice: "Always use a direct asyncpg connection (not a pool) for the QueueManager"); the
uvloop event loop, as PgQueuer's own ``pgq run`` CLI uses.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import asyncpg
import harness
import uvloop
from pgqueuer import PgQueuer
from pgqueuer.models import Job
from pgqueuer.queries import Queries

SYSTEM = "pgqueuer"
ENTRYPOINT = "noop"
VARIANTS = ("capped", "unbounded")
# Completed jobs leave the queue table and are logged as 'successful' in pgqueuer_log.
FINISHED_SQL = "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
UNFINISHED_SQL = "SELECT count(*) FROM pgqueuer"
HISTORY_SQL = "SELECT count(*) FROM pgqueuer_log"
# Bulk enqueue in one call: PgQueuer's batch insert is a single statement over arrays.
ENQUEUE_CHUNK = 1_000_000
# The docs' performance-tuning example ("await pgq.run(batch_size=25, …)").
UNBOUNDED_BATCH = 25


def run_settings(args: harness.AdapterArgs) -> dict[str, Any]:
    """Keyword arguments of ``PgQueuer.run`` for the variant."""
    if args.variant == "capped":
        batch = max(1, args.concurrency // 2)
        return {"batch_size": batch, "max_concurrent_tasks": max(args.concurrency, 2 * batch)}
    return {"batch_size": args.batch or UNBOUNDED_BATCH, "max_concurrent_tasks": None}


async def enqueue(url: str, n: int) -> float:
    conn = await asyncpg.connect(url)
    try:
        queries = Queries.from_asyncpg_connection(conn)
        await queries.install()
        start = harness.timed()
        for first in range(0, n, ENQUEUE_CHUNK):
            size = min(ENQUEUE_CHUNK, n - first)
            await queries.enqueue([ENTRYPOINT] * size, [b""] * size, [0] * size)
        return harness.timed() - start
    finally:
        await conn.close()


async def process(args: harness.AdapterArgs, tally: harness.Tally) -> float:
    conn = await asyncpg.connect(args.url)
    pgq = PgQueuer.from_asyncpg_connection(conn)

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        tally.hit()

    finished = harness.DbCounter(args.url, FINISHED_SQL)
    await finished.open()
    start = harness.timed()
    worker = asyncio.create_task(
        pgq.run(dequeue_timeout=timedelta(seconds=30), **run_settings(args))
    )
    try:
        await harness.drain(tally, args.n, finished.count)
        return harness.timed() - start
    finally:
        # PgQueuer's documented stop: set the shutdown event; run() returns after draining.
        pgq.shutdown.set()
        await worker
        await finished.close()
        await conn.close()


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    tally = harness.Tally()
    enqueue_s = await enqueue(args.url, args.n)
    harness.analyze(args.url)
    process_s = await process(args, tally)

    done = harness.scalar(args.url, FINISHED_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    settings = run_settings(args)
    return harness.Measurement(
        system=SYSTEM,
        variant=args.variant,
        version=version("pgqueuer"),
        n=args.n,
        concurrency=args.concurrency,
        enqueue_s=enqueue_s,
        process_s=process_s,
        finished=done,
        handled=tally.value,
        history_rows=harness.scalar(args.url, HISTORY_SQL),
        settings={
            "enqueue": "Queries.enqueue(lists) (one statement)",
            "driver": "asyncpg, dedicated connection",
            "event_loop": "uvloop (as `pgq run`)",
            **settings,
        },
    )


if __name__ == "__main__":
    harness.emit(uvloop.run(run(harness.parse_args(VARIANTS))))
