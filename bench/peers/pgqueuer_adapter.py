"""PgQueuer, measured for ``bench/compare.py`` (see ``harness`` for the protocol).

The knobs (``--settings``) are the two that decide its claim depth, both arguments of
``PgQueuer.run``:
- ``batch_size``: jobs per dequeue statement, and the size of the completion-log buffer
  (PgQueuer flushes its status log every ``batch_size`` completions or on a timer);
- ``max_concurrent_tasks``: a hard cap on this worker's picked jobs, enforced in the dequeue
  statement (it counts the worker's picked rows, so jobs whose completion is still buffered
  count too): the declared claim depth. PgQueuer requires it to be at least twice the batch.
  ``None`` (PgQueuer's default) is uncapped: the manager keeps dequeuing batch after batch
  while earlier jobs run, so a backlog is leased as fast as it can be dequeued.
The docs' performance-tuning page shows ``batch_size=25`` and advises to "increase
``batch_size`` when jobs are short-lived"; compare.py's ``--sweep`` tries 5 to 110, capped and
uncapped. (The other documented cap, a per-entrypoint ``concurrency_limit``, enforced in SQL
across workers, measured slower here and is not used.)

Fixed for every configuration: bulk enqueue with ``Queries.enqueue`` given lists (one INSERT …
unnest for the whole batch), each job's payload the JSON bytes of ``{"i": i}``; the asyncpg
driver on a dedicated connection for the QueueManager (the docs' advice: "Always use a direct
asyncpg connection (not a pool) for the QueueManager"); the uvloop event loop, as PgQueuer's
own ``pgq run`` CLI uses.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import asyncpg
import harness
import probe
import uvloop
from pgqueuer import PgQueuer
from pgqueuer.models import Job
from pgqueuer.queries import Queries

SYSTEM = "pgqueuer"
ENTRYPOINT = "noop"
# Completed jobs leave the queue table and are logged as 'successful' in pgqueuer_log, which
# also holds a 'queued' and a 'picked' row per job: three rows of past transitions.
FINISHED_SQL = "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
UNFINISHED_SQL = "SELECT count(*) FROM pgqueuer"
HISTORY_SQL = "SELECT count(*) FROM pgqueuer_log"
STATE_ROWS_SQL = "SELECT count(*) FROM pgqueuer"
# The dequeue statement logs its picks in the same statement and the status buffer logs a
# flush in one INSERT, both on the QueueManager's one connection: log ids are in commit order,
# and ``created`` (``now()``, the transaction's start) names the transaction. Not xmin: the
# periodic log aggregation (every ~30 s) updates the rows it folds into the statistics.
DEPTH_SQL = probe.DepthSql(
    claims="SELECT count(*) FROM pgqueuer_log WHERE status = 'picked' GROUP BY created",
    flushes="SELECT count(*) FROM pgqueuer_log WHERE status = 'successful' GROUP BY created",
    leases="""
        SELECT id, CASE status WHEN 'picked' THEN 1 ELSE -1 END
        FROM pgqueuer_log WHERE status IN ('picked', 'successful') ORDER BY id
    """,
)
# Bulk enqueue in one call: PgQueuer's batch insert is a single statement over arrays.
ENQUEUE_CHUNK = 1_000_000


def run_settings(args: harness.AdapterArgs) -> dict[str, Any]:
    """Keyword arguments of ``PgQueuer.run``."""
    return {
        "batch_size": int(args.settings["batch_size"]),
        "max_concurrent_tasks": args.settings.get("max_concurrent_tasks"),
    }


async def enqueue(url: str, n: int) -> float:
    conn = await asyncpg.connect(url)
    try:
        queries = Queries.from_asyncpg_connection(conn)
        await queries.install()
        payloads = [json.dumps(harness.payload(i)).encode() for i in range(n)]
        start = harness.timed()
        for first in range(0, n, ENQUEUE_CHUNK):
            size = min(ENQUEUE_CHUNK, n - first)
            await queries.enqueue([ENTRYPOINT] * size, payloads[first : first + size], [0] * size)
        return harness.timed() - start
    finally:
        await conn.close()


async def process(args: harness.AdapterArgs, tally: harness.Tally, figures: probe.Probe) -> float:
    conn = await asyncpg.connect(args.url)
    pgq = PgQueuer.from_asyncpg_connection(conn)

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        tally.hit()

    finished = harness.DbCounter(args.url, FINISHED_SQL)
    await finished.open()
    figures.before_process()
    start = harness.timed()
    worker = asyncio.create_task(
        pgq.run(dequeue_timeout=timedelta(seconds=30), **run_settings(args))
    )
    try:
        await harness.drain(tally, args.n, finished.count)
        process_s = harness.timed() - start
        figures.after_process()
        return process_s
    finally:
        # PgQueuer's documented stop: set the shutdown event; run() returns after draining.
        pgq.shutdown.set()
        await worker
        await finished.close()
        await conn.close()


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    tally = harness.Tally()
    figures = probe.Probe.open(args.url)
    figures.before_enqueue()
    enqueue_s = await enqueue(args.url, args.n)
    figures.after_enqueue()
    harness.analyze(args.url)
    process_s = await process(args, tally, figures)

    done = harness.scalar(args.url, FINISHED_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    return harness.Measurement(
        system=SYSTEM,
        version=version("pgqueuer"),
        n=args.n,
        enqueue_s=enqueue_s,
        process_s=process_s,
        steady_s=tally.steady_s(args.n),
        finished=done,
        handled=tally.value,
        # The 'queued', 'picked' and 'successful' rows; a finished job has no queue row left.
        history_rows=harness.scalar(args.url, HISTORY_SQL),
        state_rows=harness.scalar(args.url, STATE_ROWS_SQL),
        probe=figures.as_json(),
        depth=probe.depth(args.url, DEPTH_SQL),
        settings={
            "enqueue": "Queries.enqueue(lists) (one statement)",
            "driver": "asyncpg, dedicated connection",
            "event_loop": "uvloop (as `pgq run`)",
            **run_settings(args),
        },
    )


if __name__ == "__main__":
    harness.emit(uvloop.run(run(harness.parse_args())))
