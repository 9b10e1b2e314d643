"""The measured phases of ``jobledger bench``: bulk enqueue, processing by a fresh
:class:`WorkerPool`, and wake-up latency of the idle pool (see :mod:`cli.bench`).

Everything timed here reads ``time.perf_counter`` (durations, never moments) and the pool's
in-memory counters, so that watching the run adds no load to the database it measures.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from .errors import CliError
from ledger.api.ledger import Ledger
from ledger.core.values import EnqueueRequest
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool

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
        ids.extend(enqueued.job_id for enqueued in ledger.enqueue_many(requests))
    return ids, time.perf_counter() - started


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
    job_id = ledger.enqueue(BENCH_TYPE, {"sample": sample}).job_id
    committed = time.perf_counter()
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
