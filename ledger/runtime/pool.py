"""The worker pool: wires the runtime's pieces together and owns their lifecycle.

Shaped like River's client: a :class:`~ledger.runtime.producer.Producer` claims due jobs in
batches and buffers them; ``concurrency`` worker slots take them one at a time and run them
through the :class:`~ledger.runtime.executor.Executor`; a
:class:`~ledger.runtime.completer.BatchCompleter` records the outcomes many to a transaction,
or hands them to the producer's next claim to record in its transaction (batch turns,
:mod:`ledger.runtime.turns`); a :class:`~ledger.runtime.heartbeater.Heartbeater` renews every
held lease in one transaction from a thread of its own (which also watches the event loop,
:mod:`ledger.runtime.loop_watch`, and has the handlers of jobs cancelled under their lease
stopped, :mod:`ledger.runtime.cancellation`); a periodic reaper pass fails expired leases,
and on PostgreSQL a watchdog ends a session frozen inside a write that blocks the other
writers; optionally a thread keeps the tracked views current. The pool itself only starts
and stops these.

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
import logging
import os
import socket
from collections.abc import Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Unpack
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.api.pools import PoolReport
from ledger.core.state import JobState
from ledger.maintenance.archiver import Archiver
from ledger.maintenance.pool_reporter import PoolReporter
from ledger.maintenance.reaper import Reaper
from ledger.maintenance.runner import Service, ServiceRunner, ServiceStats
from ledger.maintenance.scheduler import Scheduler
from ledger.maintenance.watchdog import Watchdog
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.claims import Claims
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.config import PoolConfig, PoolSettings
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.executor import HANDLER_CALL, Executor
from ledger.runtime.follower_thread import FollowerThread
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.health import Health, PoolStats, assess
from ledger.runtime.heartbeater import Heartbeater
from ledger.runtime.loop_watch import LoopBlocks, LoopWatch
from ledger.runtime.metrics import PoolMetrics
from ledger.runtime.producer import Producer
from ledger.runtime.releases import Releaser
from ledger.runtime.slots import WorkerSlots
from ledger.runtime.source_poller import with_source_polls
from ledger.runtime.starts import StartRecorder
from ledger.runtime.threads import ThreadLane
from ledger.runtime.turns import BatchTurns
from ledger.runtime.wakeup import Wakeup
from ledger.store.frozen_writers import FrozenWriter

log = logging.getLogger(__name__)

try:
    _VERSION = version("jobledger")
except PackageNotFoundError:  # run from a source tree that was never installed
    _VERSION = "unknown"


def process_worker_id(pool_name: str, host: str | None = None) -> str:
    """``<pool>@<host>:<pid>``: one id per process, so a restarted pool can recognise the
    claims its dead predecessor on this host left behind (``host``: the host id, by default
    the hostname; see :attr:`PoolConfig.host`)."""
    return f"{pool_name}@{host or socket.gethostname()}:{os.getpid()}"


def _pid_alive(worker_id: str) -> bool:
    pid_text = worker_id.rpartition(":")[2]
    if not pid_text.isdigit():
        return True  # not ours to judge
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        registry = with_source_polls(registry, ledger)
        self._registry = registry
        self.worker_id = process_worker_id(config.name, config.host)
        self.stats = PoolStats()
        self.metrics = PoolMetrics(enabled=config.metrics)
        """This pool's Prometheus instruments (:mod:`ledger.runtime.metrics`)."""
        self.host = config.host or socket.gethostname()
        self._started_at: datetime | None = None
        self._breaker = breaker or CircuitBreaker(
            ledger.clock,
            threshold=config.breaker_threshold,
            cooldown_s=config.breaker_cooldown_s,
        )
        self._io = ThreadLane(config.io_threads, "jobledger-io")
        self._handler_threads = ThreadLane(max(1, config.concurrency), "jobledger-handler")
        lease_lengths = registry.lease_lengths(config.lease_s)
        self._claims = Claims(
            ledger,
            self.worker_id,
            types=config.claimed_types(registry),
            queues=config.queues,
            lease_s=lease_lengths,
            stats=self.stats,
            on_claimed=self.metrics.claim_finished,
        )
        self._releaser = Releaser(ledger, self._claims, self.stats, self._io)
        self._wakeup = Wakeup(ledger, on_cancelled=self._renew_now)
        self._executor = Executor(
            ledger,
            registry,
            breaker=self._breaker,
            releaser=self._releaser,
            lease_s=lease_lengths,
            resources=resources or {},
            handler_threads=self._handler_threads,
            io_threads=self._io,
        )
        self._completer = BatchCompleter(
            ledger,
            lease_s=lease_lengths,
            max_batch=config.completion_batch,
            max_delay_s=config.completion_delay_s,
            on_recorded=self._recorded,
            io=self._io,
            defer_to=lambda: self._producer.expects_turn,
            hold_s=config.turn_hold_s,
            nothing_else_coming=lambda: self._producer.blocked_on_outcomes,
        )
        turns = BatchTurns(self._claims, self._completer, self._io) if config.batch_turns else None
        self._producer = Producer(
            self._claims,
            concurrency=config.concurrency,
            prefetch=config.prefetch,
            poll_interval_s=config.poll_interval_s,
            breaker=self._breaker,
            wakeup=self._wakeup,
            io=self._io,
            turns=turns,
            on_blocked=self._completer.nudge,
            start_every_claim=not config.exact_starts,
        )
        self._heartbeater = Heartbeater(
            ledger,
            lambda: self._claims.renewable(ledger.clock.now()),
            lease_s=lease_lengths,
            interval_s=config.heartbeat_interval(lease_lengths),
            on_lost=self._lease_lost,
            io=self._io,
            on_renewed=self._renewed,
            on_cancelled=self._job_cancelled,
        )
        self._loop_blocks = LoopBlocks(
            ledger.clock, self.stats, self.metrics, report_now=self._report_now
        )
        self._starts = StartRecorder(
            ledger,
            self._io,
            lease_lengths,
            could_ask=lambda: (
                config.concurrency - self._producer.in_flight - self._producer.waiting_slots
            ),
        )
        self._slots = WorkerSlots(
            self._producer,
            claims=self._claims,
            executor=self._executor,
            completer=self._completer,
            starts=self._starts,
            releaser=self._releaser,
            clock=ledger.clock,
            stats=self.stats,
            metrics=self.metrics,
            yield_between_jobs=config.batch_turns,
        )
        self._reaper = Reaper(ledger, config.reaper_config(), on_pass=self.metrics.reaper_passed)
        archiver_config = config.archiver_config()
        self._archiver = None if archiver_config is None else Archiver(ledger, archiver_config)
        reporter_config = config.reporter_config()
        self._reporter = (
            PoolReporter(ledger, self._report, reporter_config)
            if reporter_config is not None
            else None
        )
        scheduler_config = config.scheduler_config()
        self._scheduler = (
            Scheduler(ledger, scheduler_config) if scheduler_config is not None else None
        )
        self._runner: ServiceRunner | None = None
        watchdog_config = config.watchdog_config()
        self._watchdog = (
            Watchdog(ledger, watchdog_config, on_ended=self._frozen_writers_ended)
            if watchdog_config is not None
            else None
        )
        self._follower = (
            FollowerThread(ledger, poll_interval_s=config.poll_interval_s, io=self._io)
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
        return self._claims.types

    @property
    def prefetch(self) -> int:
        return self._producer.prefetch

    @property
    def live_workers(self) -> int:
        """Worker tasks still alive (a crashed or cancelled one no longer counts)."""
        return sum(1 for task in self._workers if not task.done())

    @property
    def breaker(self) -> CircuitBreaker:
        """The per-job-type circuit breaker this pool claims by."""
        return self._breaker

    @property
    def breaker_open(self) -> bool:
        """Whether the breaker of any type this pool claims is open."""
        return any(t in self._claims.types for t in self._breaker.open_types())

    @property
    def busy_handler_threads(self) -> int:
        """Sync handlers running on this pool's handler threads now (after :meth:`stop`:
        handlers that never returned, whose jobs were released or timed out)."""
        return self._handler_threads.busy

    @property
    def last_loop_block(self) -> str | None:
        """The last time the event loop was seen blocked, for how long and by which handler
        (``None``: never; :mod:`ledger.runtime.loop_watch`)."""
        last = self._loop_blocks.last
        return None if last is None else last.describe()

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    @property
    def in_flight(self) -> int:
        """Jobs this pool holds a lease on: buffered, running, or being recorded."""
        return len(self._claims)

    @property
    def maintenance_stats(self) -> dict[str, ServiceStats]:
        """How each maintenance service's passes went (empty before :meth:`start`)."""
        return dict(self._runner.stats) if self._runner is not None else {}

    def health(self) -> Health:
        """``ok``, or ``degraded`` with the reasons (dead workers, open breakers and until
        when, sync handler threads still held by ended jobs, the follower)."""
        follower_problem = None
        if self._follower is not None:
            follower_problem = self._follower.problem(running=self._started)
        return assess(
            started=self._started,
            live_workers=self.live_workers,
            concurrency=self.config.concurrency,
            open_breakers=self._breaker.open_types(),
            follower_problem=follower_problem,
            stuck_handler_threads=max(0, self._handler_threads.busy - self._producer.in_flight),
            loop_block=self._loop_blocks.reason(),
        )

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Boot-reap this pool's dead predecessors' claims, then start everything."""
        if self._started:
            raise RuntimeError("WorkerPool already started")
        self._started = True
        self._stop_requested.clear()
        if self.config.define_types:
            apply = self.config.apply_definitions
            await self._io.run(sync_definitions, self._ledger, self._registry, apply=apply)
        reaped = await self._io.run(
            self._ledger.boot_reap, self.worker_id.rpartition(":")[0] + ":", alive=_pid_alive
        )
        if reaped.released:
            log.info(
                "boot reap released %d unstarted claims of a dead process", len(reaped.released)
            )
        for lost in reaped.lost:
            log.warning(
                "boot reap: job %s (%s) was running when its process died: attempt %d of %d "
                "failed as worker_lost, now %s",
                lost.job_id,
                lost.job_type,
                lost.attempt,
                lost.max_attempts,
                lost.status,
            )
        await self._wakeup.start()
        self._completer.start()
        self._heartbeater.start(
            LoopWatch(
                asyncio.get_running_loop(),
                handler_call=HANDLER_CALL,
                on_blocked=self._loop_blocks.seen,
                on_answered=self._loop_blocks.ended,
            )
        )
        self._workers = [
            asyncio.create_task(self._slots.work(), name=f"jobledger-worker-{i}")
            for i in range(self.config.concurrency)
        ]
        self._tasks = [self._producer.start()]
        self._started_at = self._ledger.clock.now()
        services = self._maintenance_services()
        if services:
            self._runner = ServiceRunner(services)
            maintain = self._runner.run(self._stop_requested)
            self._tasks.append(asyncio.create_task(maintain, name="jobledger-maintenance"))
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
        self._producer.stop()
        # Shielded: cancelling stop() must not cancel the producer mid-claim. Its claim runs
        # on an I/O thread that a cancel cannot stop; the claimed jobs would then be leased
        # in the database with no one left to release them (observed when a second signal
        # came while the maintenance passes were still ending).
        ending = asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await asyncio.shield(ending)
            await self._producer.give_back_buffered(self._releaser.release)
            self._producer.close_slots(len(self._workers))
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
                task.cancel()  # the maintenance runner: a pass in progress is not waited for
            await asyncio.gather(self._tasks[0], return_exceptions=True)  # its last claim
            await self._cancel_workers()
            await self._shut_down()
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
        await self._producer.wait_until_idle()

    async def _cancel_workers(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        await self._releaser.wait_for_pending()

    async def _shut_down(self) -> None:
        await self._starts.close()
        await self._completer.close()
        await self._heartbeater.stop()
        await self._wakeup.stop()
        await self._producer.give_back_buffered(self._releaser.release)
        if self._follower is not None:
            await self._follower.stop()
        if self._reporter is not None:
            await self._remove_report(self._reporter)
        self._handler_threads.shutdown()
        self._io.shutdown()
        self._started = False

    # --- what the heartbeater reports -------------------------------------------------------

    def _recorded(self, state: JobState) -> None:
        self.stats.count_recorded(state)
        self.metrics.outcome_recorded(state)

    def _renewed(self, states: list[JobState]) -> None:
        self._claims.renewed(states)
        self.metrics.leases_renewed(states)

    def _lease_lost(self, job_id: UUID) -> None:
        self._claims.forget(job_id)
        self.stats.fenced_out += 1

    def _renew_now(self) -> None:
        """Another process cancelled leased jobs: renew at once, and the fence's answer
        says which of ours to stop."""
        self._heartbeater.poke()

    def _job_cancelled(self, job_id: UUID) -> None:
        """The fence says ``job_id`` was cancelled under our lease: stop its handler."""
        if self._executor.cancel(job_id):
            self.stats.handlers_cancelled += 1

    def _report_now(self) -> None:
        """Write this pool's report at once (from the heartbeat thread, while the loop that
        runs the reporter's service is blocked), so `jobledger pools` shows the block."""
        if self._reporter is None:
            return
        try:
            self._reporter.run_once()
        except Exception:
            log.warning("could not report the blocked loop", exc_info=True)

    # --- maintenance ------------------------------------------------------------------------

    def _maintenance_services(self) -> list[Service]:
        """The reporter, the reaper and the scheduler (unless their intervals are 0), the
        archiver (only if asked for) and the watchdog (where the store can end frozen
        writers). The runner runs each pass on a thread of its own (never the loop's, nor the
        executor handlers use), logs a failed pass and keeps the interval;
        so a reaper blocked behind a frozen writer's lock does not hold up the watchdog."""
        services: list[Service] = []
        if self._reporter is not None:
            services.append(self._reporter)
        if self.config.reaper_interval_s > 0:
            services.append(self._reaper)
        if self._archiver is not None:
            services.append(self._archiver)
        if self._scheduler is not None:
            services.append(self._scheduler)
        if self._watchdog is not None and self._watchdog.enabled:
            services.append(self._watchdog)
        return services

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

    async def _remove_report(self, reporter: PoolReporter) -> None:
        """Delete this pool's row as it stops; a failure only leaves it to go stale."""
        try:
            await self._io.run(reporter.remove, self.worker_id)
        except Exception:
            log.warning("could not remove pool %s's report", self.worker_id, exc_info=True)

    def _frozen_writers_ended(self, ended: list[FrozenWriter]) -> None:
        self.stats.frozen_writers_ended += len(ended)


__all__ = ["Health", "JobContext", "PoolConfig", "PoolStats", "Registry", "WorkerPool"]
