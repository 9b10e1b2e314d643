"""The worker slots: each takes claimed jobs from the producer and runs them one at a time.

A slot never starts a handler on a lease that has ended or is about to (checked against the
ledger's clock right before the start; see :data:`ledger.runtime.claims.START_MARGIN`), nor
before the history records the start (:mod:`ledger.runtime.starts`: fenced, so a lease lost
meanwhile is not started either), and nothing a job does ends the slot: the executor turns
every failure around a handler into an outcome, and a failure to hand that outcome on is
logged and leaves the lease to expire for the reaper.
"""

from __future__ import annotations

import asyncio
import logging
from uuid import UUID

from ledger.api.ledger import Outcome
from ledger.clock import Clock
from ledger.core.state import JobState
from ledger.core.values import Stage
from ledger.runtime.claims import Claims
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.executor import Executor, KnownState
from ledger.runtime.health import PoolStats
from ledger.runtime.pool_metrics import PoolMetrics, Timer
from ledger.runtime.producer import Producer
from ledger.runtime.releases import Releaser
from ledger.runtime.starts import StartRecorder

log = logging.getLogger(__name__)


class WorkerSlots:
    """What every worker task of a pool runs (:meth:`work`); the pool starts ``concurrency``
    tasks of it."""

    def __init__(
        self,
        producer: Producer,
        *,
        claims: Claims,
        executor: Executor,
        completer: BatchCompleter,
        starts: StartRecorder,
        releaser: Releaser,
        clock: Clock,
        stats: PoolStats,
        metrics: PoolMetrics,
        yield_between_jobs: bool = False,
    ) -> None:
        self._metrics = metrics
        self._producer = producer
        self._claims = claims
        self._executor = executor
        self._starts = starts
        self._releaser = releaser
        self._completer = completer
        self._clock = clock
        self.stats = stats
        self._yield_between_jobs = yield_between_jobs

    async def work(self) -> None:
        """Run jobs until the producer says stop (``None``)."""
        while (job := await self._producer.next_job()) is not None:
            if not self._claims.start(job.job_id, self._clock.now()):
                self._expired_before_start(job)
                continue
            running = await self._record_start(job)
            if running is None:
                continue
            started = self._producer.job_started()
            try:
                timer = Timer.start()
                known = KnownState(running)
                outcome = await self._executor.execute(job, known)
                self._metrics.job_ran(job.job_type, timer.seconds())
                await self._record(outcome, job.job_type, known.state)
            except Exception:
                # Recording failed (the executor itself never raises but for shutdown):
                # the slot lives on; the job's lease is left to expire for the reaper.
                log.exception("worker slot could not record job %s", job.job_id)
                self._claims.forget(job.job_id)
            finally:
                self._producer.job_ended(started)
            # With batch turns, let the other tasks run between jobs: a handler that never
            # suspends (and a buffer that never makes get() wait) would otherwise let one slot
            # run the whole buffer dry before the producer sees the room it freed, so every
            # turn came when every slot was already idle (measured: each claimed 110 of 110).
            # Without turns it measured no faster and cost more claims (bench/README.md).
            if self._yield_between_jobs:
                await asyncio.sleep(0)

    async def _record_start(self, job: JobState) -> JobState | None:
        """Record the handler's start before calling it (:mod:`ledger.runtime.starts`): the
        job's state after it (what the outcome is decided on first, without a read), or
        ``None`` if it must not start: the fence refused (the lease is gone) or the write
        failed (the job is then released, unstarted). Cancelled meanwhile, it is released."""
        assert job.lease is not None
        if job.stage == Stage.RUNNING:
            return job  # recorded by the claim that handed it to a waiting slot
        try:
            running = await self._starts.started(job)
            if running is not None:
                return running
            log.warning("job %s: lease lost before its handler started; dropped", job.job_id)
            self._claims.forget(job.job_id)
        except asyncio.CancelledError:
            await self._releaser.release_shielded(job.lease)
            raise
        except Exception:
            log.exception("job %s: its start could not be recorded; released", job.job_id)
            await self._releaser.release(job.lease)
        self._producer.room_freed()
        return None

    def _expired_before_start(self, job: JobState) -> None:
        """A buffered job whose lease ended, or nearly, before a slot took it (the process
        was paused, renewals are not landing): its handler is not started and nothing is
        written (the fence would refuse it; the reaper or another worker owns the job now)."""
        self.stats.expired_before_start += 1
        log.warning(
            "job %s: lease expired or about to before it started (held until %s); "
            "dropped unstarted",
            job.job_id,
            job.lease_expires_at,
        )

    async def _record(self, outcome: Outcome, job_type: str, running: JobState) -> None:
        """Hand the outcome to the completer, with the state the job's last write left (its
        start's or its last report's: the completer decides on it first, without a read; a
        write of another since, a lease renewal, has moved the job on, and then it is
        read); the lease stays held (so the pool is not idle) until the outcome is recorded
        or refused, but is no longer renewed."""
        job_id = outcome.lease.job_id
        self._claims.finished(job_id)
        timer = Timer.start()
        if self._completer.running:
            self._completer.hand_over(
                outcome, lambda _: self._forget(job_id, job_type, timer), known=running
            )
        else:
            try:
                await self._completer.flush_now([outcome])
            finally:
                self._forget(job_id, job_type, timer)

    def _forget(self, job_id: UUID, job_type: str, timer: Timer) -> None:
        """The job's outcome is recorded (or given up): its lease no longer takes room."""
        self._metrics.outcome_settled(job_type, timer.seconds())
        self._claims.forget(job_id)
        self._producer.room_freed()
