"""``jobledger bench``: jobledger's own throughput and wake-up latency on the configured database.

For users sizing a deployment: the figures ``bench/compare.py`` measures for jobledger, without
the peers, on the database the CLI is pointed at. Three phases, on jobs of the dedicated type
``jobledger.bench.noop``:

1. bulk enqueue of N jobs with :meth:`Ledger.enqueue_many`, ``--chunk`` jobs per transaction;
2. a :class:`WorkerPool` with a no-op async handler works them, timed from ``pool.start()``
   until the ledger counts all N as succeeded; events/s is the ``head_position()`` delta;
3. with the pool idle, single jobs are enqueued one at a time (in this process) and timed
   from the enqueue's commit to the handler's start.

History is never deleted, so every bench job and its events stay in the database: the command
says so before it writes, and refuses a database that already holds other work unless told.

Here: the command, its guard and its check that every job succeeded; the phases are
:mod:`cli.bench_phases`, the report :mod:`cli.bench_report`; the driver calls (server version,
``ANALYZE``) :mod:`ledger.store.server`.
"""

from __future__ import annotations

import asyncio
import os
import platform
from collections import Counter
from dataclasses import asdict
from importlib.metadata import version
from uuid import UUID

import click

from .bench_phases import (
    BENCH_TYPE,
    WAKEUP_SAMPLES,
    JobsLostError,
    enqueue,
    finish_leftovers,
    process,
)
from .bench_report import BenchReport, percentile, text_report
from .database import Settings, describe
from .errors import RefusedError
from .progress import progress_file
from .render import echo_json, json_option
from ledger.api.ledger import Ledger
from ledger.core.errors import StoreError
from ledger.core.values import JobStatus
from ledger.store.config import is_postgres
from ledger.store.server import analyze_queue, server_version

LEDGER_POOL = 4
VERIFY_BATCH = 5_000


def refuse_other_work(ledger: Ledger, url: str, writes: int) -> None:
    """Refuse a database holding jobs that may be of other types than the bench's.

    Every job's type is defined (enqueue refuses an undefined one) and definitions are never
    deleted, so "some jobs, and other types defined" catches every database with other jobs.
    It errs on the safe side: earlier bench jobs next to other types that have no jobs yet are
    refused too (the ledger has no count per type to tell them apart).
    """
    jobs = sum(ledger.counts().values())
    others = sorted(d.job_type for d in ledger.definitions() if d.job_type != BENCH_TYPE)
    if not jobs or not others:
        return
    shown = ", ".join(others[:3]) + (", …" if len(others) > 3 else "")
    raise RefusedError(
        f"{describe(url)} already holds {jobs:,} jobs and job types other than {BENCH_TYPE} "
        f"({shown}); the bench would add {writes:,} jobs to its history for good. "
        "Pass --yes to run it there anyway"
    )


def statuses(ledger: Ledger, ids: list[UUID]) -> Counter[str]:
    """How many of ``ids`` are in each status (``missing``: no such job), a few thousand
    jobs per read."""
    found: Counter[str] = Counter()
    for first in range(0, len(ids), VERIFY_BATCH):
        batch = ids[first : first + VERIFY_BATCH]
        states = ledger.get_many(batch)
        found.update(
            states[job_id].status.value if job_id in states else "missing" for job_id in batch
        )
    return found


def verify(ledger: Ledger, ids: list[UUID], sample_ids: list[UUID]) -> int:
    """Fail loudly unless every bench job of this run succeeded; how many bulk jobs did."""
    bulk = statuses(ledger, ids)
    found = bulk + statuses(ledger, sample_ids)
    succeeded = found.pop(JobStatus.SUCCEEDED.value, 0)
    if found:
        others = ", ".join(f"{count:,} {status}" for status, count in sorted(found.items()))
        raise JobsLostError(
            f"bench jobs lost: {succeeded:,} of {len(ids) + len(sample_ids):,} succeeded ({others})"
        )
    return bulk[JobStatus.SUCCEEDED.value]


@click.command()
@click.option(
    "--n",
    "n",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Jobs to enqueue and process.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="The worker pool's concurrency.",
)
@click.option(
    "--chunk",
    type=click.IntRange(min=1),
    default=5_000,
    show_default=True,
    help="Jobs per enqueue_many transaction.",
)
@click.option("--yes", is_flag=True, help="Run even on a database that holds other work.")
@click.option(
    "--projections/--no-projections",
    "follow_projections",
    default=False,
    show_default=True,
    help="Let the timed pool also keep the audit view caught up from a thread (to measure "
    "what that costs).",
)
@json_option
@click.pass_obj
def bench(
    settings: Settings,
    *,
    n: int,
    concurrency: int,
    chunk: int,
    yes: bool,
    follow_projections: bool,
    as_json: bool,
) -> None:
    """Measure enqueue, processing and wake-up on the database (the jobs stay in its history)."""
    url = settings.url
    writes = n + WAKEUP_SAMPLES
    with Ledger.open(url, create=True, pool_size=LEDGER_POOL) as ledger:
        if not yes:
            refuse_other_work(ledger, url, writes)
        click.echo(
            f"bench: writing {writes:,} {BENCH_TYPE} jobs and their events to {describe(url)} "
            "(history is kept for good)",
            err=True,
        )
        load = [round(value, 2) for value in os.getloadavg()]
        ledger.define(BENCH_TYPE)
        leftovers = asyncio.run(finish_leftovers(ledger, concurrency))
        ids, enqueue_s = enqueue(ledger, n, chunk)
        try:
            analyzed = analyze_queue(url)
        except StoreError as exc:
            raise RefusedError(exc.message) from None  # the statement and the driver's words
        server = server_version(url)
        # Progress is for people, so it goes to stderr: stdout stays the result (or JSON).
        with click.progressbar(
            length=n, label="processing", file=progress_file(), show_pos=True
        ) as bar:
            run = asyncio.run(process(ledger, n, concurrency, bar.update, follow_projections))
        succeeded = verify(ledger, ids, run.sample_ids)
    report = BenchReport(
        database=describe(url),
        backend="postgresql" if is_postgres(url) else "sqlite",
        backend_version=server,
        cores=os.cpu_count(),
        load_average=load,
        python=platform.python_version(),
        jobledger=version("jobledger"),
        n=n,
        concurrency=concurrency,
        chunk=chunk,
        follow_projections=follow_projections,
        analyzed=analyzed,
        leftover_jobs=leftovers,
        enqueue_s=round(enqueue_s, 4),
        enqueue_jobs_per_s=round(n / enqueue_s, 1),
        process_s=round(run.seconds, 4),
        process_jobs_per_s=round(n / run.seconds, 1),
        process_events=run.events,
        process_events_per_s=round(run.events / run.seconds, 1),
        events_per_job=round(run.events / n, 3),
        wakeup_samples=len(run.latencies_ms),
        wakeup_p50_ms=round(percentile(run.latencies_ms, 50), 3),
        wakeup_p95_ms=round(percentile(run.latencies_ms, 95), 3),
        succeeded=succeeded,
    )
    if as_json:
        echo_json(asdict(report))
    else:
        click.echo(text_report(report))
