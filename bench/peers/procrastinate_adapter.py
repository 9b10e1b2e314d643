"""procrastinate, measured for ``bench/compare.py`` (see ``harness`` for the protocol).

Settings (the fastest documented ones for a no-op async task; see bench/COMPARE.md):
- bulk enqueue: ``Task.batch_defer_async`` — one INSERT … SELECT unnest(…) for the whole batch;
- worker: ``App.run_worker_async(concurrency=D)`` (``--settings``) with LISTEN/NOTIFY on (the
  default), so idle sub-workers wake on notification instead of the 5 s poll. Each sub-worker
  fetches one job at a time and records its end before it fetches the next, so the
  concurrency is the claim depth: at most D jobs leased, one per claim, one per completion;
- ``delete_jobs="never"`` (the default): "successful"/"always" delete the job *and* its
  ``procrastinate_events`` history (ON DELETE CASCADE), which would leave nothing to verify
  the run against and no history to report;
- a connection pool (``pool`` in ``--settings``; compare.py gives D + 2, at most 32 so that a
  deep configuration does not take the shared server's connections): psycopg_pool's default
  of 4 is fewer than the sub-workers that each take a connection to record a job's end; +2
  for the fetcher and the listener.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import version
from typing import Any

import harness
import probe
import procrastinate

SYSTEM = "procrastinate"
QUEUE = "bench"
FINISHED_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
UNFINISHED_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
# 'deferred', 'started' and 'succeeded' rows: the past transitions; the job row is its state.
HISTORY_SQL = "SELECT count(*) FROM procrastinate_events"
STATE_ROWS_SQL = "SELECT count(*) FROM procrastinate_jobs"
# The events are written by triggers in the fetch and finish transactions (xmin names them);
# ids come from a sequence at insert, close to commit order across the pool's connections.
DEPTH_SQL = probe.DepthSql(
    claims="SELECT count(*) FROM procrastinate_events WHERE type = 'started' GROUP BY xmin",
    flushes="SELECT count(*) FROM procrastinate_events WHERE type = 'succeeded' GROUP BY xmin",
    leases="""
        SELECT id, CASE type WHEN 'started' THEN 1 ELSE -1 END
        FROM procrastinate_events WHERE type IN ('started', 'succeeded') ORDER BY id
    """,
)


def make_app(args: harness.AdapterArgs, tally: harness.Tally) -> tuple[procrastinate.App, Any]:
    pool = int(args.settings["pool"])
    connector = procrastinate.PsycopgConnector(conninfo=args.url, min_size=pool, max_size=pool)
    app = procrastinate.App(connector=connector)

    @app.task(name="noop", queue=QUEUE)
    async def noop(i: int) -> None:
        tally.hit()

    return app, noop


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    concurrency = int(args.settings["concurrency"])
    tally = harness.Tally()
    figures = probe.Probe.open(args.url)
    app, noop = make_app(args, tally)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()

        figures.before_enqueue()
        start = harness.timed()
        await noop.batch_defer_async(*(harness.payload(i) for i in range(args.n)))
        enqueue_s = harness.timed() - start
        figures.after_enqueue()

        harness.analyze(args.url)
        finished = harness.DbCounter(args.url, FINISHED_SQL)
        await finished.open()

        figures.before_process()
        start = harness.timed()
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=[QUEUE],
                concurrency=concurrency,
                install_signal_handlers=False,
                delete_jobs="never",
            )
        )
        try:
            await harness.drain(tally, args.n, finished.count)
            process_s = harness.timed() - start
            figures.after_process()
        finally:
            # procrastinate documents cancelling the worker task as the way to stop it
            # gracefully when it runs inside a bigger application.
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            await finished.close()

    done = harness.scalar(args.url, FINISHED_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    return harness.Measurement(
        system=SYSTEM,
        version=version("procrastinate"),
        n=args.n,
        enqueue_s=enqueue_s,
        process_s=process_s,
        steady_s=tally.steady_s(args.n),
        finished=done,
        handled=tally.value,
        history_rows=harness.scalar(args.url, HISTORY_SQL),
        state_rows=harness.scalar(args.url, STATE_ROWS_SQL),
        probe=figures.as_json(),
        depth=probe.depth(args.url, DEPTH_SQL),
        settings={
            "enqueue": "Task.batch_defer_async (one statement)",
            "worker": f"run_worker_async(concurrency={concurrency}, listen_notify=True)",
            "delete_jobs": "never",
            "pool": int(args.settings["pool"]),
        },
    )


if __name__ == "__main__":
    harness.emit(asyncio.run(run(harness.parse_args())))
