"""procrastinate, measured for ``bench/compare.py`` (see ``harness`` for the protocol).

Settings (the fastest documented ones for a no-op async task; see bench/COMPARE.md):
- bulk enqueue: ``Task.batch_defer_async`` — one INSERT … SELECT unnest(…) for the whole batch;
- worker: ``App.run_worker_async(concurrency=C)`` with LISTEN/NOTIFY on (the default), so idle
  sub-workers wake on notification instead of the 5 s poll;
- ``delete_jobs="never"`` (the default): "successful"/"always" delete the job *and* its
  ``procrastinate_events`` history (ON DELETE CASCADE), which would leave nothing to verify
  the run against and no history to report;
- a connection pool of C + 2 (psycopg_pool's default is 4, fewer than the C sub-workers that
  each hold a connection to record a job's end; +2 for the fetcher and the listener).
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import version
from typing import Any

import harness
import procrastinate

SYSTEM = "procrastinate"
QUEUE = "bench"
FINISHED_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
UNFINISHED_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
HISTORY_SQL = "SELECT count(*) FROM procrastinate_events"


def make_app(args: harness.AdapterArgs, tally: harness.Tally) -> tuple[procrastinate.App, Any]:
    pool = args.concurrency + 2
    connector = procrastinate.PsycopgConnector(conninfo=args.url, min_size=pool, max_size=pool)
    app = procrastinate.App(connector=connector)

    @app.task(name="noop", queue=QUEUE)
    async def noop(i: int) -> None:
        tally.hit()

    return app, noop


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    tally = harness.Tally()
    app, noop = make_app(args, tally)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()

        start = harness.timed()
        await noop.batch_defer_async(*({"i": i} for i in range(args.n)))
        enqueue_s = harness.timed() - start

        harness.analyze(args.url)
        finished = harness.DbCounter(args.url, FINISHED_SQL)
        await finished.open()

        start = harness.timed()
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=[QUEUE],
                concurrency=args.concurrency,
                install_signal_handlers=False,
                delete_jobs="never",
            )
        )
        try:
            await harness.drain(tally, args.n, finished.count)
            process_s = harness.timed() - start
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
        variant=args.variant,
        version=version("procrastinate"),
        n=args.n,
        concurrency=args.concurrency,
        enqueue_s=enqueue_s,
        process_s=process_s,
        finished=done,
        handled=tally.value,
        history_rows=harness.scalar(args.url, HISTORY_SQL),
        settings={
            "enqueue": "Task.batch_defer_async (one statement)",
            "worker": f"run_worker_async(concurrency={args.concurrency}, listen_notify=True)",
            "delete_jobs": "never",
            "pool": args.concurrency + 2,
        },
    )


if __name__ == "__main__":
    harness.emit(asyncio.run(run(harness.parse_args())))
