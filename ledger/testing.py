"""Helpers for testing code that enqueues and handles jobs (as River ships ``rivertest``).

Use a real ledger (an SQLite file is enough), a :class:`FakeClock` to move time, and one of
these to work the queue with your registry::

    from ledger import Ledger
    from ledger.testing import FakeClock, drain

    from myapp.jobs import registry  # your Registry of handlers


    async def test_a_welcome_email_is_sent(tmp_path):
        clock = FakeClock()
        url = f"sqlite:///{tmp_path}/ledger.db"
        with Ledger.open(url, create=True, clock=clock, auto_define=True) as ledger:
            job = ledger.enqueue("email.welcome", {"to": "ada@example.com"})
            stats = await drain(ledger, registry)
            assert stats.succeeded == 1
            assert job.output() == {"sent_to": "ada@example.com"}

            flaky = ledger.enqueue("email.welcome", {"to": "down@example.com"})
            await drain(ledger, registry)  # say the handler raised TransientError:
            assert flaky.status() == "pending"  # a retry is scheduled …
            clock.advance(3600)  # … and due once the clock has moved past its backoff
            assert (await drain(ledger, registry)).claimed == 1

:func:`drain` is deterministic: one job at a time on the calling task, every outcome recorded
before it returns, so a test can assert right after it. :func:`run_until_idle` runs a real
:class:`~ledger.runtime.pool.WorkerPool` (concurrent slots, batched completions, the
definitions synced from the registry) until nothing is due, which is what a test of
concurrency or of the pool's own settings wants. Both take the pool's settings as keyword
arguments (``types=``, ``lease_s=``, ``concurrency=`` …, see
:class:`~ledger.runtime.config.PoolConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from ledger.api.ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.state import JobState
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


async def run_until_idle(
    ledger: Ledger,
    registry: Registry,
    *,
    breaker: CircuitBreaker | None = None,
    resources: Mapping[str, Any] | None = None,
    **settings: Unpack[PoolSettings],
) -> PoolStats:
    """Start a :class:`WorkerPool`, let it work until nothing is due, buffered, running or
    held, and stop it; its stats. The pool syncs the definitions from ``registry`` first
    (unless ``define_types=False``)."""
    pool = WorkerPool(ledger, registry, breaker=breaker, resources=resources, **settings)
    return await pool.run_until_idle()


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


__all__ = ["FakeClock", "drain", "run_until_idle", "sync_definitions", "work_job"]
