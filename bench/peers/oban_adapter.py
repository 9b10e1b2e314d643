"""oban-py (package ``oban``), measured for ``bench/compare.py`` (see ``harness``).

oban-py needs Python >= 3.12, so this script runs from its own virtual environment
(bench/.venv-oban, made by compare.py), never the project's.

The knobs (``--settings``): ``concurrency``, the queue's limit in ``Oban(queues={queue: D})``:
the producer fetches as many jobs as the limit has room for, so it is the declared claim
depth; ``pool``, the connection pool's size (``Oban.create_pool`` defaults to 10).

Fixed for every configuration (fastest documented; see bench/COMPARE.md):
- schema: ``oban.schema.install``;
- bulk enqueue: ``Oban.enqueue_many`` — oban-py's documented bulk insert (one transaction; the
  open-source version runs one INSERT per job inside it, bulk COPY is an Oban Pro feature);
  args ``{"i": i}``;
- worker: producer defaults (5 ms fetch debounce, LISTEN/NOTIFY wake-up on insert; finished
  jobs are acknowledged in batches, one transaction per batch); uvloop, as the ``oban start``
  CLI uses.
oban keeps each job as one row of ``oban_jobs``, updated in place (state 'completed' at the
end): the job's state, and no rows of past transitions. ``oban_leaders`` and
``oban_producers`` are UNLOGGED tables of its own (leadership and producer heartbeats, no
jobs).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import harness
import probe
import uvloop
from oban import Oban, worker
from oban.schema import install

SYSTEM = "oban-py"
QUEUE = "bench"
FINISHED_SQL = "SELECT count(*) FROM oban_jobs WHERE state = 'completed'"
UNFINISHED_SQL = "SELECT count(*) FROM oban_jobs WHERE state <> 'completed'"
STATE_ROWS_SQL = "SELECT count(*) FROM oban_jobs"
# A fetch sets attempted_at and an ack batch sets completed_at to now(), the transaction's
# start, the same for every job in it: the timestamps name the transactions and order them.
# At equal times the ends sort first, so the peak is never overstated.
DEPTH_SQL = probe.DepthSql(
    claims="SELECT count(*) FROM oban_jobs WHERE attempted_at IS NOT NULL GROUP BY attempted_at",
    flushes="SELECT count(*) FROM oban_jobs WHERE completed_at IS NOT NULL GROUP BY completed_at",
    leases="""
        SELECT at, delta FROM (
            SELECT attempted_at AS at, 1 AS delta FROM oban_jobs WHERE attempted_at IS NOT NULL
            UNION ALL
            SELECT completed_at, -1 FROM oban_jobs WHERE completed_at IS NOT NULL
        ) steps ORDER BY at, delta
    """,
)
TALLY = harness.Tally()


@worker(queue=QUEUE)
class Noop:
    async def process(self, job: Any) -> None:
        TALLY.hit()


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    concurrency, pool_size = int(args.settings["concurrency"]), int(args.settings["pool"])
    figures = probe.Probe.open(args.url)
    pool = await Oban.create_pool(args.url, min_size=pool_size, max_size=pool_size)
    try:
        await install(pool)
        oban = Oban(pool=pool, queues={QUEUE: concurrency})

        jobs = [Noop.new(harness.payload(i)) for i in range(args.n)]
        figures.before_enqueue()
        start = harness.timed()
        await oban.enqueue_many(jobs)
        enqueue_s = harness.timed() - start
        figures.after_enqueue()

        harness.analyze(args.url)
        finished = harness.DbCounter(args.url, FINISHED_SQL)
        await finished.open()
        figures.before_process()
        start = harness.timed()
        await oban.start()
        try:
            await harness.drain(TALLY, args.n, finished.count)
            process_s = harness.timed() - start
            figures.after_process()
        finally:
            await oban.stop()
            await finished.close()
    finally:
        await pool.close()

    done = harness.scalar(args.url, FINISHED_SQL)
    harness.verify(SYSTEM, args.n, done, harness.scalar(args.url, UNFINISHED_SQL))
    return harness.Measurement(
        system=SYSTEM,
        version=version("oban"),
        n=args.n,
        enqueue_s=enqueue_s,
        process_s=process_s,
        steady_s=TALLY.steady_s(args.n),
        finished=done,
        handled=TALLY.value,
        history_rows=0,  # the job row is updated in place: see the module docstring
        state_rows=harness.scalar(args.url, STATE_ROWS_SQL),
        probe=figures.as_json(),
        depth=probe.depth(args.url, DEPTH_SQL),
        settings={
            "enqueue": "Oban.enqueue_many (one transaction)",
            "worker": f"queues={{'{QUEUE}': {concurrency}}}, producer defaults",
            "event_loop": "uvloop (as `oban start`)",
            "pool": pool_size,
        },
    )


if __name__ == "__main__":
    harness.emit(uvloop.run(run(harness.parse_args())))
