"""The worker pool: wires the runtime's pieces together and owns their lifecycle.

Shaped like River's client: a :class:`~ledger.runtime.producer.Producer` claims due jobs in
batches and buffers them; ``concurrency`` worker slots take them one at a time and run them
through the :class:`~ledger.runtime.executor.Executor`; a
:class:`~ledger.runtime.completer.BatchCompleter` records the outcomes many to a transaction,
or hands them to the producer's next claim to record in its transaction (batch turns,
:mod:`ledger.runtime.batch_turns`); a :class:`~ledger.runtime.heartbeater.Heartbeater` renews every
held lease in one transaction from a thread of its own (which also watches the event loop,
:mod:`ledger.runtime.loop_watch`, and has the handlers of jobs cancelled under their lease
stopped, :mod:`ledger.runtime.cancellation`); a periodic reaper pass fails expired leases,
and on PostgreSQL a watchdog ends a session frozen inside a write that blocks the other
writers; optionally a thread keeps the tracked views current. The pool itself only starts
and stops these: :mod:`ledger.runtime.pool_parts` builds the pieces and wires them to each
other, :mod:`ledger.runtime.pool_maintenance` holds the maintenance services, and
:mod:`ledger.runtime.boot_reap` the worker id and the boot reap.

Threads (:mod:`ledger.runtime.threads`): sync handlers run on a lane of ``concurrency``
threads of their own, every database call of the pool on another lane; neither is asyncio's
default executor. A slot never starts a handler on a lease that has already ended (a pool
paused past its leases drops those jobs unstarted) and survives whatever its handler does.

Start (:meth:`WorkerPool.start`) first ends the claims a dead process of the same pool on this
host left (the boot reap, :meth:`Ledger.boot_reap <ledger.api.ledger.Ledger.boot_reap>`):
released if their handler had not started, failed as ``worker_lost`` if it had (a slot records
each start before calling the handler, :mod:`ledger.runtime.starts`).

Shutdown (:meth:`WorkerPool.stop`) lets in-flight jobs finish and releases claimed jobs that
never started. If the caller's grace runs out (``stop(grace_s=…)``, or the caller cancels
``stop()``), workers are cancelled and each in-flight job is released through a shielded,
tracked task that a second cancellation cannot strand.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Unpack

from ledger.api.ledger import Ledger
from ledger.api.pools import PoolReport
from ledger.maintenance.runner import ServiceStats
from ledger.runtime.boot_reap import boot_reap, process_worker_id
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.config import PoolConfig, PoolSettings
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.executor import HANDLER_CALL
from ledger.runtime.follower_thread import FollowerThread
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.health import Health, PoolStats, assess
from ledger.runtime.heartbeater import Heartbeater
from ledger.runtime.loop_watch import LoopWatch
from ledger.runtime.pool_maintenance import PoolMaintenance
from ledger.runtime.pool_metrics import PoolMetrics
from ledger.runtime.pool_parts import PoolParts
from ledger.runtime.releases import Releaser
from ledger.runtime.source_poller import with_source_polls
from ledger.store.frozen_writers import FrozenWriter

MAINTENANCE_PASS_WAIT_S = 5.0
"""How long a pool stopped at once waits for a maintenance pass still running before the
store it uses may be closed (a chain witness pass ends after its batch in progress)."""

try:
    _VERSION = version("jobledger")
except PackageNotFoundError:  # run from a source tree that was never installed
    _VERSION = "unknown"


class WorkerPool:
    """Runs the handlers of ``registry`` over ``ledger``'s jobs on the running event loop.

    Settings come as a :class:`PoolConfig`, as keyword arguments (the same names), or both
    (the keywords win). ``breaker`` may be shared between pools; ``resources`` reach every
    handler as ``ctx.resources``.
    """

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        config: PoolConfig | None = None,
        *,
        breaker: CircuitBreaker | None = None,
        resources: Mapping[str, Any] | None = None,
        **settings: Unpack[PoolSettings],
    ) -> None:
        self.config = config = PoolConfig.of(config, settings)
        self._ledger = ledger
        self._registry = registry = with_source_polls(registry, ledger)
        self.worker_id = process_worker_id(config.name, config.host)
        self.stats = PoolStats()
        self.metrics = PoolMetrics(enabled=config.metrics)
        """This pool's Prometheus instruments (:mod:`ledger.runtime.pool_metrics`)."""
        self.host = config.host or socket.gethostname()
        self._started_at: datetime | None = None
        self._parts = PoolParts(
            ledger,
            registry,
            config,
            worker_id=self.worker_id,
            stats=self.stats,
            metrics=self.metrics,
            breaker=breaker,
            resources=resources or {},
            report_now=self._report_now,
        )
        self._maintenance = PoolMaintenance(
            ledger,
            config,
            metrics=self.metrics,
            report=self._report,
            on_frozen_writers_ended=self._frozen_writers_ended,
        )
        self._follower = (
            FollowerThread(ledger, poll_interval_s=config.poll_interval_s, io=self._parts.io)
            if config.follow_projections
            else None
        )
        self._started = False
        self._workers: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()

    # --- public state -----------------------------------------------------------------------

    @property
    def types(self) -> list[str]:
        """The job types this pool claims."""
        return self._parts.claims.types

    @property
    def prefetch(self) -> int:
        return self._parts.producer.prefetch

    @property
    def live_workers(self) -> int:
        """Worker tasks still alive (a crashed or cancelled one no longer counts)."""
        return sum(1 for task in self._workers if not task.done())

    @property
    def breaker(self) -> CircuitBreaker:
        """The per-job-type circuit breaker this pool claims by."""
        return self._parts.breaker

    @property
    def breaker_open(self) -> bool:
        """Whether the breaker of any type this pool claims is open."""
        return any(t in self._parts.claims.types for t in self._parts.breaker.open_types())

    @property
    def busy_handler_threads(self) -> int:
        """Sync handlers running on this pool's handler threads now (after :meth:`stop`:
        handlers that never returned, whose jobs were released or timed out)."""
        return self._parts.handler_threads.busy

    @property
    def last_loop_block(self) -> str | None:
        """The last time the event loop was seen blocked, for how long and by which handler
        (``None``: never; :mod:`ledger.runtime.loop_watch`)."""
        last = self._parts.loop_blocks.last
        return None if last is None else last.describe()

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    @property
    def in_flight(self) -> int:
        """Jobs this pool holds a lease on: buffered, running, or being recorded."""
        return len(self._parts.claims)

    @property
    def maintenance_stats(self) -> dict[str, ServiceStats]:
        """How each maintenance service's passes went (empty before :meth:`start`)."""
        return self._maintenance.stats

    def health(self) -> Health:
        """``ok``, or ``degraded`` with the reasons (dead workers, open breakers and until
        when, sync handler threads still held by ended jobs, the follower)."""
        follower_problem = None
        if self._follower is not None:
            follower_problem = self._follower.problem(running=self._started)
        parts = self._parts
        return assess(
            started=self._started,
            live_workers=self.live_workers,
            concurrency=self.config.concurrency,
            open_breakers=parts.breaker.open_types(),
            follower_problem=follower_problem,
            stuck_handler_threads=max(0, parts.handler_threads.busy - parts.producer.in_flight),
            loop_block=parts.loop_blocks.reason(),
        )

    # --- internal hooks the tests reach for (tests/runtime) ----------------------------------

    @property
    def _releaser(self) -> Releaser:
        return self._parts.releaser

    @property
    def _heartbeater(self) -> Heartbeater:
        return self._parts.heartbeater

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Boot-reap this pool's dead predecessors' claims, then start everything."""
        if self._started:
            raise RuntimeError("WorkerPool already started")
        self._started = True
        self._stop_requested.clear()
        parts = self._parts
        if self.config.define_types:
            apply = self.config.apply_definitions
            await parts.io.run(sync_definitions, self._ledger, self._registry, apply=apply)
        await boot_reap(self._ledger, parts.io, self.worker_id)
        await parts.wakeup.start()
        parts.completer.start()
        parts.heartbeater.start(
            LoopWatch(
                asyncio.get_running_loop(),
                handler_call=HANDLER_CALL,
                on_blocked=parts.loop_blocks.seen,
                on_answered=parts.loop_blocks.ended,
            )
        )
        self._workers = [
            asyncio.create_task(parts.slots.work(), name=f"jobledger-worker-{i}")
            for i in range(self.config.concurrency)
        ]
        self._tasks = [parts.producer.start()]
        self._started_at = self._ledger.clock.now()
        maintaining = self._maintenance.start(self._stop_requested)
        if maintaining is not None:
            self._tasks.append(maintaining)
        if self._follower is not None:
            self._follower.start()

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop claiming, let in-flight jobs finish (up to ``grace_s``), flush, release.

        Cancelling ``stop()`` itself (e.g. ``asyncio.wait_for(pool.stop(), t)``) is the same
        as running out of grace: in-flight jobs are cancelled and released before it returns.
        """
        if not self._started:
            return
        self._stop_requested.set()
        producer = self._parts.producer
        producer.stop()
        # Shielded: cancelling stop() must not cancel the producer mid-claim. Its claim runs
        # on an I/O thread that a cancel cannot stop; the claimed jobs would then be leased
        # in the database with no one left to release them (observed when a second signal
        # came while the maintenance passes were still ending).
        ending = asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await asyncio.shield(ending)
            await producer.give_back_buffered(self._parts.releaser.release)
            producer.close_slots(len(self._workers))
            finishing = asyncio.gather(*self._workers, return_exceptions=True)
            if grace_s is None:
                await finishing
            else:
                try:
                    await asyncio.wait_for(asyncio.shield(finishing), grace_s)
                except TimeoutError:
                    await self._cancel_workers()
        except asyncio.CancelledError:
            for task in self._tasks[1:]:
                task.cancel()  # the maintenance runner: a pass in progress is not waited for...
            await asyncio.gather(self._tasks[0], return_exceptions=True)  # its last claim
            await self._cancel_workers()
            await self._shut_down()
            # ...by the runner; but the store it uses is closed after this returns, so wait
            # (bounded) for the pass to end (services with a stop() end theirs early).
            await self._maintenance.wait_for_passes(self._parts.io, MAINTENANCE_PASS_WAIT_S)
            raise
        await self._shut_down()

    async def run_until_idle(self) -> PoolStats:
        """Burst mode: start, work until nothing is due and nothing is in flight, stop."""
        await self.start()
        try:
            await self.wait_until_idle()
        finally:
            await self.stop()
        return self.stats

    async def wait_until_idle(self) -> None:
        """Return once a claim made after this call found nothing claimable (nothing due, or
        only types whose breaker is open) while nothing was buffered, running or held."""
        await self._parts.producer.wait_until_idle()

    async def _cancel_workers(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        await self._parts.releaser.wait_for_pending()

    async def _shut_down(self) -> None:
        parts = self._parts
        await parts.starts.close()
        await parts.completer.close()
        await parts.heartbeater.stop()
        await parts.wakeup.stop()
        await parts.producer.give_back_buffered(parts.releaser.release)
        if self._follower is not None:
            await self._follower.stop()
        await self._maintenance.remove_report(parts.io, self.worker_id)
        parts.handler_threads.shutdown()
        parts.io.shutdown()
        self._started = False

    # --- what the maintenance services report -----------------------------------------------

    def _report_now(self) -> None:
        """Write this pool's report at once (from the heartbeat thread, while the loop that
        runs the reporter's service is blocked), so `jobledger pools` shows the block."""
        self._maintenance.report_now()

    def _report(self, now: datetime) -> PoolReport:
        """This pool as its reporter writes it into ``jl_pools``."""
        health = self.health()
        return PoolReport(
            pool_id=self.worker_id,
            host=self.host,
            pid=os.getpid(),
            name=self.config.name,
            started_at=self._started_at or now,
            last_seen_at=now,
            interval_s=self.config.report_interval_s,
            concurrency=self.config.concurrency,
            in_flight=self.in_flight,
            status=health.status,
            reasons=list(health.reasons),
            version=_VERSION,
        )

    def _frozen_writers_ended(self, ended: list[FrozenWriter]) -> None:
        self.stats.frozen_writers_ended += len(ended)


__all__ = [
    "Health",
    "JobContext",
    "PoolConfig",
    "PoolStats",
    "Registry",
    "WorkerPool",
    "process_worker_id",
]
