"""The worker pool: claim in batches, run handlers, complete in batches.

Shaped like River's producer → executor → completer: one producer task claims as many due jobs
as there are free slots (plus a prefetch allowance) in one transaction and queues them; N
worker tasks take jobs off that queue and run their handlers; a :class:`BatchCompleter`
records the outcomes many to a transaction; a :class:`Heartbeater` renews every held lease in
one transaction; a periodic reaper pass fails expired leases.

Shutdown (:meth:`WorkerPool.stop`) lets in-flight jobs finish and releases claimed jobs that
never started. If the caller's grace runs out (``stop(grace_s=…)``, or the caller cancels
``stop()``), workers are cancelled and each in-flight job is released through a shielded,
tracked task that a second cancellation cannot strand (:meth:`drain_pending_releases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from ledger.api.ledger import Completion, FailureReport, Ledger, Outcome
from ledger.core import decide
from ledger.core.errors import LedgerError
from ledger.core.events import Failure, FailureKind
from ledger.core.state import JobState, Lease
from ledger.maintenance.reaper import Reaper, ReaperConfig
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.handlers import (
    INVALID_OUTPUT_CODE,
    NOT_REGISTERED_CODE,
    HandlerSpec,
    JobContext,
    Registry,
    Result,
    TransientError,
    classify,
)
from ledger.runtime.heartbeater import Heartbeater
from ledger.runtime.wakeup import Wakeup
from projections.runners.follower import Follower

log = logging.getLogger(__name__)

PREFETCH_WINDOW_S = 0.05
"""Claimed-but-waiting work the pool aims to hold, in seconds of handler time."""
PREFETCH_CAP_PER_WORKER = 10
INITIAL_HANDLER_ESTIMATE_S = 0.05
HANDLER_ESTIMATE_WEIGHT = 0.05


def process_worker_id(pool_name: str) -> str:
    """``<pool>@<host>:<pid>``: one id per process, so a restarted pool can recognise the
    claims its dead predecessor on this host left behind."""
    return f"{pool_name}@{socket.gethostname()}:{os.getpid()}"


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


@dataclass
class PoolStats:
    """What the pool has done since it started."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    fenced_out: int = 0
    released: int = 0


@dataclass
class Health:
    status: Literal["ok", "degraded"]
    reasons: list[str] = field(default_factory=list)


FOLLOWER_MIN_POLL_S = 0.25
"""The projection follower looks at the head at least this long apart (a look that finds
nothing new is one read; on SQLite it is the only way to see other processes' commits)."""


class WorkerPool:
    """Runs the handlers of ``registry`` over ``ledger``'s jobs on the running event loop."""

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        *,
        concurrency: int = 10,
        types: list[str] | None = None,
        name: str = "default",
        lease_s: float = 30.0,
        poll_interval_s: float = 1.0,
        prefetch: int | None = None,
        heartbeat_interval_s: float | None = None,
        reaper_interval_s: float = 30.0,
        reaper_retry_delay_s: float = 60.0,
        reaper_batch: int = 500,
        reaper_lock_timeout_s: float | None = 2.0,
        completion_batch: int = 200,
        completion_delay_s: float = 0.005,
        breaker: CircuitBreaker | None = None,
        define_types: bool = True,
        resources: Mapping[str, Any] | None = None,
        follow_projections: bool = False,
    ) -> None:
        if concurrency < 0:
            raise ValueError("concurrency must be >= 0")
        self._ledger = ledger
        self._registry = registry
        self.concurrency = concurrency
        self.types = types if types is not None else registry.job_types()
        self.worker_id = process_worker_id(name)
        self.lease_s = lease_s
        self.poll_interval_s = poll_interval_s
        self._fixed_prefetch = prefetch
        self._prefetch_cap = max(1, PREFETCH_CAP_PER_WORKER * concurrency)
        self._handler_s = INITIAL_HANDLER_ESTIMATE_S
        self.reaper_interval_s = reaper_interval_s
        self.reaper_retry_delay_s = reaper_retry_delay_s
        self.reaper_batch = reaper_batch
        # A reap blocked on a lock would hold the events-table lock and stall every writer:
        # give up on that job after reaper_lock_timeout_s (it is deferred, not lost).
        self._reaper = Reaper(
            ledger,
            ReaperConfig(
                limit=reaper_batch,
                retry_delay_s=reaper_retry_delay_s,
                lock_timeout_s=reaper_lock_timeout_s,
            ),
        )
        self.define_types = define_types
        self.resources: Mapping[str, Any] = resources or {}
        self._breaker = breaker or CircuitBreaker(ledger.clock)
        self._completion_batch = completion_batch
        self._completion_delay_s = completion_delay_s
        # Per-type lease lengths from the registry; the pool's lease_s for the rest.
        self._lease_lengths: dict[str, float] = {
            spec.job_type: spec.lease_s or lease_s for spec in registry.specs()
        }
        shortest = min([lease_s, *self._lease_lengths.values()])
        self._heartbeat_interval_s = heartbeat_interval_s or shortest / 3
        self.stats = PoolStats()
        # Optionally, the tracked views (audit) follow the head from a thread of this process.
        # Off by default: the follower's decoding competes with the handlers for the GIL
        # (measured: ~25% of a pool's throughput on 2 cores); one `jobledger projections
        # follow` process per deployment does the same work without that cost.
        self.follow_projections = follow_projections
        self._follower: Follower | None = None
        self._follower_thread: threading.Thread | None = None

        self._started = False
        self._stopping = False
        self._workers: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._queue: asyncio.Queue[JobState | None] = asyncio.Queue()
        self._held: dict[UUID, Lease] = {}
        self._in_flight = 0
        self._room = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._idle = asyncio.Event()
        self._pending_releases: set[asyncio.Task[None]] = set()
        self._wakeup = Wakeup(ledger)
        self._completer = BatchCompleter(
            ledger,
            max_batch=completion_batch,
            max_delay_s=completion_delay_s,
            on_recorded=self._count_outcome,
        )
        self._heartbeater = Heartbeater(
            ledger,
            lambda: list(self._held.values()),
            lease_s=self._lease_lengths,
            interval_s=self._heartbeat_interval_s,
            on_lost=self._lease_lost,
        )

    # --- public state -----------------------------------------------------------------------

    @property
    def live_workers(self) -> int:
        """Worker tasks still alive (a crashed or cancelled one no longer counts)."""
        return sum(1 for task in self._workers if not task.done())

    @property
    def breaker_open(self) -> bool:
        return self._breaker.is_open

    @property
    def breaker_consecutive_failures(self) -> int:
        return self._breaker.consecutive_failures

    def health(self) -> Health:
        """``ok``, or ``degraded`` with the reasons (dead workers, open breaker)."""
        reasons = []
        if self._started and self.live_workers < self.concurrency:
            reasons.append(f"{self.live_workers} of {self.concurrency} workers alive")
        if self._breaker.is_open:
            reasons.append(f"circuit breaker open until {self._breaker.reopens_at}")
        follower, thread = self._follower, self._follower_thread
        if follower is not None and follower.stats.last_error is not None:
            reasons.append(f"projection follower failing: {follower.stats.last_error}")
        elif self._started and thread is not None and not thread.is_alive():
            reasons.append("projection follower stopped")
        return Health("degraded" if reasons else "ok", reasons)

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Boot-reap this pool's dead predecessors' claims, then start everything."""
        if self._started:
            raise RuntimeError("WorkerPool already started")
        self._started = True
        self._stopping = False
        self._stop_requested.clear()
        if self.define_types:
            await asyncio.to_thread(self._define_types)
        released = await asyncio.to_thread(
            self._ledger.release_claims_with_prefix,
            self.worker_id.rpartition(":")[0] + ":",
            alive=_pid_alive,
        )
        if released:
            log.info("boot reap released %d claims of a dead process", len(released))
        await self._wakeup.start()
        self._completer.start()
        self._heartbeater.start()
        self._workers = [
            asyncio.create_task(self._work(), name=f"jobledger-worker-{i}")
            for i in range(self.concurrency)
        ]
        self._tasks = [asyncio.create_task(self._produce(), name="jobledger-producer")]
        if self.reaper_interval_s > 0:
            self._tasks.append(asyncio.create_task(self._reap(), name="jobledger-reaper"))
        if self.follow_projections:
            poll_s = max(FOLLOWER_MIN_POLL_S, self.poll_interval_s)
            self._follower = Follower(self._ledger.store, poll_s=poll_s)
            self._follower_thread = threading.Thread(
                target=self._follow,
                args=(self._follower,),
                name="jobledger-projections",
                daemon=True,  # a batch is one transaction: exiting mid-batch loses nothing
            )
            self._follower_thread.start()

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop claiming, let in-flight jobs finish (up to ``grace_s``), flush, release.

        Cancelling ``stop()`` itself (e.g. ``asyncio.wait_for(pool.stop(), t)``) is the same
        as running out of grace: in-flight jobs are cancelled and released before it returns.
        """
        if not self._started:
            return
        self._stopping = True
        self._stop_requested.set()
        self._wakeup.signal()
        self._room.set()
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._release_buffered()
            for _ in self._workers:
                self._queue.put_nowait(None)
            finishing = asyncio.gather(*self._workers, return_exceptions=True)
            if grace_s is None:
                await finishing
            else:
                try:
                    await asyncio.wait_for(asyncio.shield(finishing), grace_s)
                except TimeoutError:
                    await self._cancel_workers()
        except asyncio.CancelledError:
            await self._cancel_workers()
            await self._shut_down()
            raise
        await self._shut_down()

    async def _cancel_workers(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        await self.drain_pending_releases()

    async def _shut_down(self) -> None:
        await self._completer.close()
        await self._heartbeater.stop()
        await self._wakeup.stop()
        await self._release_buffered()
        await self._stop_follower()
        self._started = False

    @staticmethod
    def _follow(follower: Follower) -> None:
        try:
            follower.run()
        except Exception as exc:  # a bug, not a database error (those it retries)
            follower.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("projection follower stopped")

    async def _stop_follower(self) -> None:
        thread, self._follower_thread = self._follower_thread, None
        if self._follower is None or thread is None:
            return
        self._follower.stop()
        await asyncio.to_thread(thread.join)

    async def run_until_idle(self) -> PoolStats:
        """Burst mode: start, work until nothing is due and nothing is in flight, stop."""
        await self.start()
        try:
            while True:
                self._idle.clear()
                await self._idle.wait()
                if self._queue.empty() and self._in_flight == 0 and not self._held:
                    break
        finally:
            await self.stop()
        return self.stats

    async def drain_pending_releases(self, timeout: float | None = None) -> int:
        """Wait for orphaned releases (started by cancelled workers); how many landed."""
        pending = set(self._pending_releases)
        if not pending:
            return 0
        done, _ = await asyncio.wait(pending, timeout=timeout)
        return len(done)

    async def drain_once(self) -> int:
        """Work the queue on the calling task until nothing is due; returns jobs processed.

        A test helper: bypasses the breaker and the batching, so every outcome is recorded
        before it returns.
        """
        processed = 0
        while True:
            jobs = await asyncio.to_thread(self._claim, 1)
            if not jobs:
                return processed
            await self._process(jobs[0], record_now=True)
            processed += 1

    # --- producer ---------------------------------------------------------------------------

    def _claim(self, limit: int) -> list[JobState]:
        if not self.types:
            return []
        jobs = self._ledger.claim(
            self.worker_id, limit=limit, types=self.types, lease_s=self._lease_lengths
        )
        for job in jobs:
            assert job.lease is not None
            self._held[job.job_id] = job.lease
        self.stats.claimed += len(jobs)
        return jobs

    @property
    def prefetch(self) -> int:
        """How many claimed jobs may wait for a free worker.

        Fixed if given; otherwise enough to keep the workers busy for about
        ``PREFETCH_WINDOW_S`` at the handlers' recent pace: fast handlers get large claim
        batches (one transaction per batch is what makes throughput), slow ones hold few
        jobs back from other processes."""
        if self._fixed_prefetch is not None:
            return self._fixed_prefetch
        wanted = self.concurrency * PREFETCH_WINDOW_S / max(self._handler_s, 1e-6)
        return max(1, min(self._prefetch_cap, int(wanted)))

    def _room_for(self) -> int:
        return self.concurrency + self.prefetch - self._in_flight - self._queue.qsize()

    def _refill_at(self) -> int:
        return max(1, (self.concurrency + self.prefetch) // 2)

    def _observe(self, seconds: float) -> None:
        """Fold one handler duration into the moving estimate behind :attr:`prefetch`."""
        self._handler_s += HANDLER_ESTIMATE_WEIGHT * (seconds - self._handler_s)

    async def _produce(self) -> None:
        while not self._stopping:
            if self._breaker.is_open:
                await self._wakeup.wait(self.poll_interval_s)
                continue
            room = self._room_for()
            # Refill in batches: claiming the moment one slot frees up would make every
            # claim a one-job transaction. Wait for half the capacity to be free, unless
            # the queue has run dry and a worker would sit idle.
            if room <= 0 or (room < self._refill_at() and not self._queue.empty()):
                self._room.clear()
                await self._room.wait()
                continue
            try:
                jobs = await asyncio.to_thread(self._claim, room)
            except Exception as exc:
                log.warning("claim failed: %r (cause %r)", exc, exc.__cause__)
                await self._wakeup.wait(self.poll_interval_s)
                continue
            for job in jobs:
                self._queue.put_nowait(job)
            if not jobs:
                self._idle.set()
                await self._wakeup.wait(self.poll_interval_s)

    async def _release_buffered(self) -> None:
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if job is not None and job.lease is not None:
                await self._release(job.lease)

    # --- workers ----------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            job = await self._queue.get()
            if job is None:
                return
            self._in_flight += 1
            started = time.perf_counter()
            try:
                await self._process(job)
            finally:
                self._in_flight -= 1
                self._observe(time.perf_counter() - started)
                self._room.set()

    async def _process(self, job: JobState, *, record_now: bool = False) -> None:
        lease = job.lease
        assert lease is not None, "only leased jobs are processed"
        spec = self._registry.get(job.job_type)
        if spec is None:
            missing = Failure(
                kind=FailureKind.TERMINAL,
                code=NOT_REGISTERED_CODE,
                message=f"no handler is registered for job type {job.job_type!r}",
            )
            await self._record(FailureReport(lease, missing), record_now=record_now)
            return
        context = JobContext(
            job, lease, self._reporter(lease), asyncio.get_running_loop(), self.resources
        )
        try:
            value = await self._run_handler(spec, context, job.timeout_s)
        except asyncio.CancelledError:
            await self._release_shielded(lease)
            raise
        except BaseException as exc:
            failure = classify(exc)
            if failure is None:
                raise  # shutdown signals propagate; the job stays leased
            if failure.kind.is_retryable:
                self._breaker.record_failure()
            not_before = exc.not_before if isinstance(exc, TransientError) else None
            await self._record(FailureReport(lease, failure, not_before), record_now=record_now)
            return
        completion = _completion(lease, value)
        try:
            decide.check_output(completion.output)
        except LedgerError as invalid:
            # One bad output is that job's terminal failure; it must not sink the batch.
            failure = Failure(
                kind=FailureKind.TERMINAL, code=INVALID_OUTPUT_CODE, message=invalid.message
            )
            await self._record(FailureReport(lease, failure), record_now=record_now)
            return
        self._breaker.record_success()
        await self._record(completion, record_now=record_now)

    async def _run_handler(self, spec: HandlerSpec, context: JobContext, timeout_s: float) -> Any:
        # The job's own timeout: resolved at enqueue from the request or the definition
        # (which start() defines from the registry), so an enqueue's explicit value wins.
        # asyncio.timeout, not wait_for: no extra task, so exceptions reach us unchanged.
        async with asyncio.timeout(timeout_s):
            if spec.is_async:
                return await spec.function(context)
            return await asyncio.to_thread(spec.function, context)

    async def _record(self, outcome: Outcome, *, record_now: bool) -> None:
        self._held.pop(outcome.lease.job_id, None)
        if record_now or not self._completer.running:
            await self._completer.flush_now([outcome])
        else:
            self._completer.submit(outcome)

    def _count_outcome(self, state: JobState) -> None:
        status = state.status.value
        if status == "succeeded":
            self.stats.succeeded += 1
        elif status == "dead":
            self.stats.dead += 1
        elif status == "pending":
            self.stats.retried += 1

    def _reporter(self, lease: Lease) -> Any:
        async def report(kind: str, fields: dict[str, Any]) -> None:
            if kind == "heartbeat":
                await asyncio.to_thread(self._ledger.heartbeat, lease, lease_s=self._lease_lengths)
            else:
                await asyncio.to_thread(self._ledger.progress, lease, **fields)

        return report

    def _lease_lost(self, job_id: UUID) -> None:
        self._held.pop(job_id, None)
        self.stats.fenced_out += 1

    # --- release ----------------------------------------------------------------------------

    async def _release_shielded(self, lease: Lease) -> None:
        """Release from a cancelled worker: the release runs as its own tracked task, so a
        second cancellation of the worker cannot strand the claim."""
        task = asyncio.create_task(self._release(lease), name=f"jobledger-release-{lease.job_id}")
        self._pending_releases.add(task)
        task.add_done_callback(self._pending_releases.discard)
        await asyncio.shield(task)

    async def _release(self, lease: Lease) -> None:
        self._held.pop(lease.job_id, None)
        try:
            await asyncio.to_thread(self._ledger.release, lease, reason="released at shutdown")
            self.stats.released += 1
        except LedgerError as exc:
            log.info("did not release job %s: %s", lease.job_id, exc)

    # --- reaper and definitions -------------------------------------------------------------

    async def _reap(self) -> None:
        while not self._stopping:
            try:
                report = await asyncio.to_thread(self._reaper.run_once)
                if report.processed or report.deferred_error_count:
                    log.info(
                        "reaped %d expired leases (%d dead-lettered), %d deferred",
                        report.processed,
                        len(report.dead_lettered),
                        report.deferred_error_count,
                    )
            except Exception as exc:
                log.warning("reaper pass failed: %s", exc)
            await self._sleep_unless_stopping(self.reaper_interval_s)

    async def _sleep_unless_stopping(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_requested.wait(), seconds)

    def _define_types(self) -> None:
        for spec in self._registry.specs():
            current = self._ledger.definition(spec.job_type)
            overrides: dict[str, Any] = {}
            if spec.max_attempts is not None:
                overrides["max_attempts"] = spec.max_attempts
            if spec.timeout_s is not None:
                overrides["default_timeout_s"] = spec.timeout_s
            if spec.backoff is not None:
                overrides["backoff"] = spec.backoff
            if current is None:
                self._ledger.define(spec.job_type, **overrides)
            elif overrides:
                fields = {
                    "version": current.version,
                    "max_attempts": current.max_attempts,
                    "default_timeout_s": current.default_timeout_s,
                    "default_priority": current.default_priority,
                    "enabled": current.enabled,
                    "backoff": current.backoff,
                    **overrides,
                }
                self._ledger.define(spec.job_type, **fields)


def _completion(lease: Lease, value: object) -> Completion:
    if isinstance(value, Result):
        return Completion(lease, value.output, value.revision, value.content_hash)
    return Completion(lease, value)


__all__ = ["Health", "JobContext", "PoolStats", "Registry", "WorkerPool"]
