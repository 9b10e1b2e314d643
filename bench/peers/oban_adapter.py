"""oban-py (package ``oban``), measured for ``bench/compare.py`` (see ``harness``).

oban-py needs Python >= 3.12, so this script runs from its own virtual environment
(bench/.venv-oban, made by compare.py), never the project's.

Settings (fastest documented; see bench/COMPARE.md):
- schema: ``oban.schema.install``;
- bulk enqueue: ``Oban.enqueue_many`` — oban-py's documented bulk insert (one transaction; the
  open-source version runs one INSERT per job inside it, bulk COPY is an Oban Pro feature);
- worker: ``Oban(queues={queue: C})`` then ``start()``; producer defaults (5 ms fetch
  debounce, LISTEN/NOTIFY wake-up on insert); uvloop, as the ``oban start`` CLI uses;
- a connection pool of C + 2 (``Oban.create_pool`` defaults to 10).
oban keeps each finished job as a row of ``oban_jobs`` (state 'completed'); no event log.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import harness
import uvloop
from oban import Oban, worker
from oban.schema import install

SYSTEM = "oban-py"
QUEUE = "bench"
FINISHED_SQL = "SELECT count(*) FROM oban_jobs WHERE state = 'completed'"
UNFINISHED_SQL = "SELECT count(*) FROM oban_jobs WHERE state <> 'completed'"
HISTORY_SQL = "SELECT count(*) FROM oban_jobs"
TALLY = harness.Tally()


@worker(queue=QUEUE)
class Noop:
    async def process(self, job: Any) -> None:
        TALLY.hit()


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    pool_size = args.concurrency + 2
    pool = await Oban.create_pool(args.url, min_size=pool_size, max_size=pool_size)
    try:
        await install(pool)
        oban = Oban(pool=pool, queues={QUEUE: args.concurrency})

        start = harness.timed()
        await oban.enqueue_many([Noop.new({"i": i}) for i in range(args.n)])
        enqueue_s = harness.timed() - start

        harness.analyze(args.url)
        finished = harness.DbCounter(args.url, FINISHED_SQL)
        await finished.open()
        start = harness.timed()
        await oban.start()
        try:
            await harness.drain(TALLY, args.n, finished.count)
            process_s = harness.timed() - start
        finally:
            await oban.stop()
            await finished.close()
    finally:
        await pool.close()

    done = harness.scalar(args.url, FINISHED_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    return harness.Measurement(
        system=SYSTEM,
        variant=args.variant,
        version=version("oban"),
        n=args.n,
        concurrency=args.concurrency,
        enqueue_s=enqueue_s,
        process_s=process_s,
        finished=done,
        handled=TALLY.value,
        history_rows=harness.scalar(args.url, HISTORY_SQL),
        settings={
            "enqueue": "Oban.enqueue_many (one transaction)",
            "worker": f"queues={{'{QUEUE}': {args.concurrency}}}, producer defaults",
            "event_loop": "uvloop (as `oban start`)",
            "pool": pool_size,
        },
    )


if __name__ == "__main__":
    harness.emit(uvloop.run(run(harness.parse_args())))
