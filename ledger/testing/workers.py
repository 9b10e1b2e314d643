"""Working the queue from a test: :func:`drain` (one job at a time on the calling task),
:func:`work_job` (one claimed job), :func:`run_until_idle` (a real pool until nothing is due).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, Unpack

from ledger.api.ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.state import JobState
from ledger.core.values import JobStatus
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.claims import Claims
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.config import PoolConfig, PoolSettings
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.executor import Executor
from ledger.runtime.handlers import Registry
from ledger.runtime.health import PoolStats
from ledger.runtime.pool import WorkerPool, process_worker_id
from ledger.runtime.releases import Releaser
from ledger.runtime.source_poller import with_source_polls
from ledger.runtime.threads import ThreadLane


async def drain(
    ledger: Ledger,
    registry: Registry,
    *,
    breaker: CircuitBreaker | None = None,
    resources: Mapping[str, Any] | None = None,
    **settings: Unpack[PoolSettings],
) -> PoolStats:
    """Work the queue one job at a time until nothing is due; what was done (``claimed`` is
    how many jobs ran).

    Runs on the calling task, starts no task of its own and records each outcome before it
    claims the next, so what a handler raises is recorded (or, for ``KeyboardInterrupt`` and
    friends, propagates to the test) exactly as a worker would. It does not wait for an open
    ``breaker`` (it does feed it) and does not sync definitions: define the types, or open the
    ledger with ``auto_define=True``, or call :func:`sync_definitions` first. A job that
    becomes due only later (a retry's backoff) is left for the next call, after
    ``clock.advance``.
    """
    worker = _OneAtATime(ledger, registry, breaker, resources, PoolConfig.of(None, settings))
    try:
        while jobs := await worker.claim():
            await worker.work(jobs[0])
    finally:
        worker.close()
    return worker.stats


async def work_job(
    ledger: Ledger,
    registry: Registry,
    job: JobState,
    *,
    breaker: CircuitBreaker | None = None,
    resources: Mapping[str, Any] | None = None,
    **settings: Unpack[PoolSettings],
) -> JobState | None:
    """Run one already claimed ``job`` (its lease decides whose outcome it is) and record the
    outcome now; the job's new state, or ``None`` if the ledger refused it (the lease was
    reaped, cancelled or re-claimed meanwhile: nothing is appended then)."""
    worker = _OneAtATime(ledger, registry, breaker, resources, PoolConfig.of(None, settings))
    try:
        return await worker.work(job)
    finally:
        worker.close()


MAX_CLOCK_ADVANCES = 10_000
"""How often :func:`run_until_idle` moves the clock at most before it gives up (a handler that
always asks to be retried soon would otherwise keep it going for ever)."""


async def run_until_idle(
    ledger: Ledger,
    registry: Registry,
    *,
    breaker: CircuitBreaker | None = None,
    resources: Mapping[str, Any] | None = None,
    advance_clock: bool = False,
    **settings: Unpack[PoolSettings],
) -> PoolStats:
    """Start a :class:`WorkerPool`, let it work until nothing is due, buffered, running or
    held, and stop it; its stats. The pool syncs the definitions from ``registry`` first
    (unless ``define_types=False``).

    With ``advance_clock`` (the ledger's clock must be a :class:`FakeClock`), a job of the
    registry's types still pending with a later ``run_at`` (a retry's backoff, a delayed
    enqueue) is then waited for: the clock jumps to the earliest such ``run_at`` and a new pool
    works again, until no such job is left; the stats are the sums over the pools. Pending jobs
    already due that no pool claimed (a paused queue, a full concurrency limit) never move
    the clock.
    """
    if not advance_clock:
        pool = WorkerPool(ledger, registry, breaker=breaker, resources=resources, **settings)
        return await pool.run_until_idle()
    clock = ledger.clock
    if not isinstance(clock, FakeClock):
        raise TypeError("run_until_idle(advance_clock=True) needs a ledger on a FakeClock")
    total = PoolStats()
    for _ in range(MAX_CLOCK_ADVANCES):
        pool = WorkerPool(ledger, registry, breaker=breaker, resources=resources, **settings)
        _add(total, await pool.run_until_idle())
        later = await asyncio.to_thread(_next_run_at, ledger, registry.job_types(), clock.now())
        if later is None:
            return total
        clock.set(later)
    raise RuntimeError(f"jobs still waiting after {MAX_CLOCK_ADVANCES} moves of the clock")


def _next_run_at(ledger: Ledger, job_types: list[str], now: datetime) -> datetime | None:
    """The earliest ``run_at`` after ``now`` of a pending job of ``job_types``."""
    earliest: datetime | None = None
    for job_type in job_types:
        cursor: int | None = None
        while True:
            page = ledger.jobs(statuses=[JobStatus.PENDING], job_type=job_type, cursor=cursor)
            for listed in page.jobs:
                run_at = listed.state.run_at
                if run_at > now and (earliest is None or run_at < earliest):
                    earliest = run_at
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    return earliest


def _add(total: PoolStats, stats: PoolStats) -> None:
    for field in fields(PoolStats):
        setattr(total, field.name, getattr(total, field.name) + getattr(stats, field.name))


class _OneAtATime:
    """The runtime's claim → execute → record path without the pool's concurrency, batching
    or background tasks (its threads, one lane for the handler and one for its own I/O as in
    the pool, are let go by :meth:`close`)."""

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        breaker: CircuitBreaker | None,
        resources: Mapping[str, Any] | None,
        config: PoolConfig,
    ) -> None:
        self.stats = PoolStats()
        registry = with_source_polls(registry, ledger)  # as a pool serves it
        self._io = ThreadLane(1, "jobledger-testing-io")
        self._handler_threads = ThreadLane(1, "jobledger-handler")
        lease_lengths = registry.lease_lengths(config.lease_s)
        self._claims = Claims(
            ledger,
            process_worker_id(config.name),
            types=config.claimed_types(registry),
            lease_s=lease_lengths,
            stats=self.stats,
        )
        self._executor = Executor(
            ledger,
            registry,
            breaker=breaker
            or CircuitBreaker(
                ledger.clock,
                threshold=config.breaker_threshold,
                cooldown_s=config.breaker_cooldown_s,
            ),
            releaser=Releaser(ledger, self._claims, self.stats, self._io),
            lease_s=lease_lengths,
            resources=resources or {},
            handler_threads=self._handler_threads,
            io_threads=self._io,
        )
        self._completer = BatchCompleter(ledger, on_recorded=self.stats.count_recorded, io=self._io)

    async def claim(self) -> list[JobState]:
        return await self._io.run(self._claims.claim, 1)

    async def work(self, job: JobState) -> JobState | None:
        outcome = await self._executor.execute(job)
        self._claims.forget(job.job_id)
        [state] = await self._completer.flush_now([outcome])
        return state

    def close(self) -> None:
        self._handler_threads.shutdown()
        self._io.shutdown()


__all__ = ["drain", "run_until_idle", "sync_definitions", "work_job"]
