"""Cancelling a running job stops its handler (issue 28, item 2): an async handler's task is
cancelled once the pool hears of it (the cancel's NOTIFY on PostgreSQL, the heartbeat's
fenced answer everywhere), a sync handler sees ``ctx.cancelled`` and its next report raises
``job.cancelled``, and the history records when the handler stopped."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any
from uuid import UUID

import pytest

from ledger import FakeClock, JobCancelledError, JobStatus, LeaseOwnerMismatchError, Ledger
from ledger.core.events import JobHandlerStopped
from ledger.core.values import HandlerStop
from ledger.runtime.handlers import JobContext, Registry, SyncJobContext
from ledger.runtime.pool import WorkerPool

WAIT_S = 20.0


def _names(ledger: Ledger, job_id: UUID) -> list[str]:
    return [type(record.event).name for record in ledger.history(job_id)]


def _stopped(ledger: Ledger, job_id: UUID) -> JobHandlerStopped:
    found = [r.event for r in ledger.history(job_id) if isinstance(r.event, JobHandlerStopped)]
    assert len(found) == 1
    return found[0]


def _assert_clean(ledger: Ledger, job_ids: list[UUID]) -> None:
    assert ledger.projections().verify().clean
    assert [f for job in job_ids for f in ledger.replay_check(job).findings] == []


async def _until(condition: Any, what: str) -> None:
    """Wait on the loop until ``condition()`` (the pool's writes land on its own threads)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_cancel_stops_a_running_async_handler_and_records_when(
    db_url: str, clock: FakeClock
) -> None:
    """An async handler's task is cancelled after its job is cancelled (its side effect never
    happens), the slot runs the next job, and `job_handler_stopped` (how: cancelled) follows
    `job_cancelled` in a history that verifies and replays clean."""
    registry = Registry()
    started = asyncio.Event()
    stopped = asyncio.Event()
    side_effects: list[str] = []

    @registry.handler("slow")
    async def slow(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # the work that takes long
            side_effects.append("written")
        except asyncio.CancelledError:
            stopped.set()
            raise

    @registry.handler("next")
    async def after(ctx: JobContext) -> str:
        return "ran"

    with Ledger.open(db_url, clock=clock, pool_size=4) as ledger:
        ledger.define("slow")
        ledger.define("next")
        job_id = ledger.enqueue("slow").job_id
        assert job_id is not None
        # On PostgreSQL the interval is an hour: only the cancel's NOTIFY can make the pool
        # renew (and hear the fence's answer) within this test. SQLite has no notifications:
        # the next renewal answers.
        interval = 3600.0 if ledger.store.has_notifications else 0.05
        pool = WorkerPool(
            ledger,
            registry,
            concurrency=1,
            lease_s=60,
            heartbeat_interval_s=interval,
            poll_interval_s=0.05,
            reaper_interval_s=0,
        )
        await pool.start()
        try:
            await asyncio.wait_for(started.wait(), WAIT_S)
            await asyncio.to_thread(ledger.cancel, job_id, reason="not wanted")
            await asyncio.wait_for(stopped.wait(), WAIT_S)
            await _until(lambda: "job_handler_stopped" in _names(ledger, job_id), "the stop")
            next_id = ledger.enqueue("next").job_id
            assert next_id is not None
            await _until(
                lambda: ledger.get(next_id).status is JobStatus.SUCCEEDED,  # type: ignore[union-attr]
                "the next job",
            )
        finally:
            await pool.stop(grace_s=5)  # a handler never stopped must fail the test, not hang it
        assert side_effects == []
        assert pool.stats.handlers_cancelled == 1
        assert _names(ledger, job_id)[-2:] == ["job_cancelled", "job_handler_stopped"]
        stop = _stopped(ledger, job_id)
        assert stop.how is HandlerStop.CANCELLED
        state = ledger.get(job_id)
        assert state is not None and state.status is JobStatus.CANCELLED
        assert state.reason == "not wanted"
        _assert_clean(ledger, [job_id, next_id])


async def test_a_sync_handler_sees_ctx_cancelled_and_its_next_progress_raises(
    db_url: str, clock: FakeClock
) -> None:
    """A sync handler sees `ctx.cancelled` turn true within one heartbeat interval of the
    cancel; its next `ctx.progress()` raises JobCancelledError (`job.cancelled`, a
    LeaseOwnerMismatchError) without writing; its stop is recorded (how: raised)."""
    registry = Registry()
    started = threading.Event()
    seen: dict[str, Any] = {}

    @registry.handler("sync")
    def sync(ctx: SyncJobContext) -> None:
        ctx.progress(done=1, total=3)
        assert not ctx.cancelled
        started.set()
        deadline = time.monotonic() + WAIT_S
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)  # a step of the handler's own work
        seen["cancelled"] = ctx.cancelled
        try:
            ctx.progress(done=2, total=3)
        except JobCancelledError as raised:
            seen["raised"] = raised
            raise

    with Ledger.open(db_url, clock=clock, pool_size=4) as ledger:
        ledger.define("sync")
        job_id = ledger.enqueue("sync").job_id
        assert job_id is not None
        pool = WorkerPool(
            ledger,
            registry,
            concurrency=1,
            lease_s=60,
            heartbeat_interval_s=0.05,
            poll_interval_s=0.05,
            reaper_interval_s=0,
        )
        await pool.start()
        try:
            assert await asyncio.to_thread(started.wait, WAIT_S)
            await asyncio.to_thread(ledger.cancel, job_id)
            await _until(lambda: "job_handler_stopped" in _names(ledger, job_id), "the stop")
        finally:
            await pool.stop(grace_s=5)  # a handler never stopped must fail the test, not hang it
        assert seen["cancelled"] is True
        raised = seen["raised"]
        assert isinstance(raised, LeaseOwnerMismatchError)
        assert raised.code == "job.cancelled"
        names = _names(ledger, job_id)
        assert names.count("job_progressed") == 1  # the report after the cancel wrote nothing
        assert names[-2:] == ["job_cancelled", "job_handler_stopped"]
        assert _stopped(ledger, job_id).how is HandlerStop.RAISED
        _assert_clean(ledger, [job_id])


def test_a_cancelled_jobs_late_outcome_becomes_the_stop_and_nothing_else(
    ledger: Ledger,
) -> None:
    """finish_many records a cancelled job's success as `job_handler_stopped` (how:
    returned) and not its output; a single `succeed` under that lease still raises."""
    from ledger.jobs.outcomes import Completion

    ledger.define("t")
    job_id = ledger.enqueue("t").job_id
    assert job_id is not None
    (job,) = ledger.claim("w", limit=1)
    assert job.lease is not None
    ledger.cancel(job_id)
    result = ledger.finish_many([Completion(job.lease, output="late")])
    assert result.rejected == {}
    assert [s.status for s in result.accepted] == [JobStatus.CANCELLED]
    assert _stopped(ledger, job_id).how is HandlerStop.RETURNED
    state = ledger.get(job_id)
    assert state is not None and state.output is None  # the output was not recorded
    with pytest.raises(LeaseOwnerMismatchError):
        ledger.succeed(job.lease)  # a single write still raises (job.cancelled)
    _assert_clean(ledger, [job_id])
