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
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import random
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from uuid import UUID

import click
import psycopg

from cli.database import Settings, describe
from cli.errors import CliError, RefusedError
from cli.render import echo_json, fields, json_option, table
from ledger.api.ledger import Ledger
from ledger.core.events import EnqueueRequest, JobStatus
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool
from ledger.store.config import is_postgres

BENCH_TYPE = "jobledger.bench.noop"
WAKEUP_SAMPLES = 30
IDLE_S = (0.01, 0.05)
"""Idle time before each wake-up sample, drawn at random so that the samples do not phase-lock
with the pool's poll interval or its batch completer."""
POLL_S = 0.005
"""How often the bench looks at the pool's in-memory counters (no database load)."""
STALL_S = 60.0
"""No job finished for this long: give up (a lost lease would come back only after minutes)."""
WAKEUP_TIMEOUT_S = 10.0
LEDGER_POOL = 4
VERIFY_BATCH = 5_000
WAKEUP = "(idle pool: enqueue commit to handler start)"
# Fresh planner statistics after a bulk insert (untimed), as bench/compare.py does: without
# them the claim query is planned from an empty table's statistics and crawls until
# autovacuum analyses the table. A maintenance statement, not a ledger query.
ANALYZE_QUEUE = "ANALYZE jl_queue"


class JobsLostError(CliError):
    """A bench job did not succeed: the figures would be wrong, so none are printed."""

    exit_code = 1


class BenchHandler:
    """The no-op handler; a wake-up sample job also records when it started."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}
        self.sample_started = asyncio.Event()

    async def __call__(self, ctx: JobContext) -> None:
        sample = ctx.payload.get("sample")
        if isinstance(sample, int):
            self.started[sample] = time.perf_counter()
            self.sample_started.set()


@dataclass
class BenchReport:
    """What one run measured, and the facts needed to read it."""

    database: str
    backend: str
    backend_version: str
    cores: int | None
    load_average: list[float]
    python: str
    jobledger: str
    n: int
    concurrency: int
    chunk: int
    follow_projections: bool
    """Whether the timed pool also kept the audit view caught up, from a thread."""
    analyzed: bool
    leftover_jobs: int
    """Bench jobs of an interrupted earlier run, worked (untimed) before this one's."""
    enqueue_s: float
    enqueue_jobs_per_s: float
    process_s: float
    process_jobs_per_s: float
    process_events: int
    process_events_per_s: float
    events_per_job: float
    wakeup_samples: int
    wakeup_p50_ms: float
    wakeup_p95_ms: float
    succeeded: int


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sample, as compare.py's."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


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


def enqueue(ledger: Ledger, n: int, chunk: int) -> tuple[list[UUID], float]:
    """Enqueue the N bulk jobs in transactions of ``chunk``; their ids and the seconds taken.

    Building the requests is timed too, as in compare.py: an application pays for it as well.
    """
    ids: list[UUID] = []
    started = time.perf_counter()
    for first in range(0, n, chunk):
        requests = [
            EnqueueRequest(job_type=BENCH_TYPE, payload={"i": i})
            for i in range(first, min(first + chunk, n))
        ]
        ids.extend(job_id for job_id in ledger.enqueue_many(requests) if job_id is not None)
    return ids, time.perf_counter() - started


def analyze_postgres(url: str) -> str:
    """Run ``ANALYZE jl_queue``; return the server's version string."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ANALYZE_QUEUE)
            return conn.info.parameter_status("server_version") or "unknown"
    except psycopg.Error as exc:
        raise RefusedError(f"{ANALYZE_QUEUE} failed: {exc}") from None


@dataclass
class Processing:
    seconds: float
    events: int
    latencies_ms: list[float]
    sample_ids: list[UUID]


async def until_succeeded(pool: WorkerPool, target: int, advance: Callable[[int], None]) -> None:
    """Wait until this pool has recorded ``target`` successes (committed: the completer counts
    after its transaction). Reads in-memory counters only, so it adds no database load."""
    seen = pool.stats.succeeded
    changed = time.perf_counter()
    while seen < target:
        await asyncio.sleep(POLL_S)
        if pool.stats.dead:
            raise JobsLostError(f"{pool.stats.dead:,} bench job(s) ended dead")
        now_seen = pool.stats.succeeded
        if now_seen != seen:
            advance(now_seen - seen)
            seen, changed = now_seen, time.perf_counter()
        elif time.perf_counter() - changed > STALL_S:
            raise JobsLostError(
                f"no bench job finished for {STALL_S:g}s; {seen:,} of {target:,} succeeded"
            )


async def until_counted(ledger: Ledger, succeeded: int) -> None:
    """Wait until the ledger's own count of succeeded jobs reaches ``succeeded``."""
    deadline = time.perf_counter() + STALL_S
    while (await asyncio.to_thread(ledger.counts)).get("succeeded", 0) < succeeded:
        if time.perf_counter() > deadline:
            raise JobsLostError(
                f"the pool recorded every bench job but the ledger counts fewer than {succeeded:,} "
                "succeeded jobs"
            )
        await asyncio.sleep(POLL_S)


def enqueue_sample(ledger: Ledger, sample: int) -> tuple[UUID, float]:
    """Enqueue one wake-up sample job; its id and when its transaction had committed."""
    job_id = ledger.enqueue(BENCH_TYPE, {"sample": sample})
    committed = time.perf_counter()
    assert job_id is not None, "a job without a sync subject is always enqueued"
    return job_id, committed


async def started_at(handler: BenchHandler, sample: int) -> float:
    """When the handler started wake-up sample ``sample``."""
    while sample not in handler.started:
        handler.sample_started.clear()
        await handler.sample_started.wait()
    return handler.started[sample]


async def wakeup_latencies(
    ledger: Ledger, pool: WorkerPool, handler: BenchHandler, done: int
) -> tuple[list[float], list[UUID]]:
    """Milliseconds from each sample's enqueue commit to its handler's start, and the ids.

    Each sample waits until the previous one is recorded, then a random idle time, so the
    pool has found nothing to claim and sleeps: what is measured is its wake-up.
    """
    latencies: list[float] = []
    ids: list[UUID] = []
    for sample in range(WAKEUP_SAMPLES):
        await until_succeeded(pool, done + sample, lambda _: None)
        await asyncio.sleep(random.uniform(*IDLE_S))
        job_id, committed = await asyncio.to_thread(enqueue_sample, ledger, sample)
        ids.append(job_id)
        try:
            started = await asyncio.wait_for(started_at(handler, sample), WAKEUP_TIMEOUT_S)
        except TimeoutError:
            raise JobsLostError(
                f"wake-up sample job {job_id} did not start within {WAKEUP_TIMEOUT_S:g}s"
            ) from None
        latencies.append((started - committed) * 1000)
    await until_succeeded(pool, done + WAKEUP_SAMPLES, lambda _: None)
    return latencies, ids


def bench_pool(
    ledger: Ledger, concurrency: int, follow: bool = False
) -> tuple[WorkerPool, BenchHandler]:
    """A pool that works bench jobs only, with its defaults, and its handler."""
    handler = BenchHandler()
    registry = Registry()
    registry.handler(BENCH_TYPE)(handler)
    pool = WorkerPool(ledger, registry, concurrency=concurrency, follow_projections=follow)
    return pool, handler


async def finish_leftovers(ledger: Ledger, concurrency: int) -> int:
    """Work bench jobs an interrupted earlier run left due, untimed; how many there were.

    The timed pool would otherwise count them among this run's N, and the wake-up samples
    would queue behind them instead of meeting an idle pool.
    """
    pool, _ = bench_pool(ledger, concurrency)
    stats = await pool.run_until_idle()
    return stats.succeeded + stats.dead


async def process(
    ledger: Ledger, n: int, concurrency: int, advance: Callable[[int], None], follow: bool = False
) -> Processing:
    """Work the N bulk jobs with a fresh pool, timed; then sample its wake-up while idle."""
    pool, handler = bench_pool(ledger, concurrency, follow)
    succeeded_before = (await asyncio.to_thread(ledger.counts)).get("succeeded", 0)
    events_before = await asyncio.to_thread(ledger.store.head_position)
    started = time.perf_counter()
    await pool.start()
    try:
        await until_succeeded(pool, n, advance)
        await until_counted(ledger, succeeded_before + n)
        seconds = time.perf_counter() - started
        events = await asyncio.to_thread(ledger.store.head_position) - events_before
        latencies, sample_ids = await wakeup_latencies(ledger, pool, handler, n)
    finally:
        await pool.stop()
    return Processing(seconds, events, latencies, sample_ids)


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


def text_report(report: BenchReport) -> str:
    """The facts needed to read the figures, then the figures."""
    load = " ".join(f"{value:.2f}" for value in report.load_average)
    facts = [
        ("database", report.database),
        ("server", report.backend_version),
        (
            "machine",
            f"{report.cores} cores, load {load} before the run, Python {report.python}, "
            f"jobledger {report.jobledger}",
        ),
        (
            "run",
            f"{report.n:,} jobs, concurrency {report.concurrency}, enqueue in chunks of "
            f"{report.chunk:,}, {report.wakeup_samples} wake-up samples, audit followed: "
            f"{'yes' if report.follow_projections else 'no'}",
        ),
    ]
    if report.analyzed:
        facts.append(("note", "ANALYZE jl_queue ran after the enqueue phase (untimed)"))
    if report.leftover_jobs:
        facts.append(
            ("note", f"{report.leftover_jobs:,} jobs of an interrupted run worked first (untimed)")
        )
    rows = [
        [
            "bulk enqueue (enqueue_many)",
            f"{report.enqueue_jobs_per_s:,.0f} jobs/s ({report.enqueue_s:.2f}s)",
        ],
        [
            "processing, pool start to all succeeded",
            f"{report.process_jobs_per_s:,.0f} jobs/s ({report.process_s:.2f}s)",
        ],
        [
            "job events appended while processing",
            f"{report.process_events_per_s:,.0f} events/s ({report.events_per_job:.2f} per job)",
        ],
        [f"wake-up p50 {WAKEUP}", f"{report.wakeup_p50_ms:.2f} ms"],
        [f"wake-up p95 {WAKEUP}", f"{report.wakeup_p95_ms:.2f} ms"],
    ]
    total = report.succeeded + report.wakeup_samples
    return (
        f"{fields(facts)}\n\n{table(['FIGURE', 'VALUE'], rows)}\n\n"
        f"all {total:,} bench jobs succeeded"
    )


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
        postgres = is_postgres(url)
        if postgres:
            server = f"PostgreSQL {analyze_postgres(url)}"
        else:
            server = f"SQLite {sqlite3.sqlite_version}"
        # Progress is for people, so it goes to stderr: stdout stays the result (or JSON).
        with click.progressbar(length=n, label="processing", file=sys.stderr, show_pos=True) as bar:
            run = asyncio.run(process(ledger, n, concurrency, bar.update, follow_projections))
        succeeded = verify(ledger, ids, run.sample_ids)
    report = BenchReport(
        database=describe(url),
        backend="postgresql" if postgres else "sqlite",
        backend_version=server,
        cores=os.cpu_count(),
        load_average=load,
        python=platform.python_version(),
        jobledger=version("jobledger"),
        n=n,
        concurrency=concurrency,
        chunk=chunk,
        follow_projections=follow_projections,
        analyzed=postgres,
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
