"""An async handler that blocks the event loop (issue 28, item 4): the other jobs' leases
are renewed from the heartbeat thread meanwhile, so none spends an extra attempt, and the
block is seen and the handler that caused it named in the log and the pool's report."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from ledger import EnqueueRequest, FakeClock, JobStatus, Ledger
from ledger.jobs.outcomes import BatchResult
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool

LEASE_S = 30.0
OTHERS = 19
WAIT_S = 20.0


class Beats:
    """Counts the pool's lease renewals (each a batched transaction), so the blocking
    handler can wait for the heartbeat thread instead of sleeping a guessed time."""

    def __init__(self, ledger: Ledger) -> None:
        self.count = 0
        self._changed = threading.Condition()
        renew = ledger.heartbeat_many

        def counted(*args: Any, **kwargs: Any) -> BatchResult:
            result = renew(*args, **kwargs)
            with self._changed:
                self.count += 1
                self._changed.notify_all()
            return result

        ledger.heartbeat_many = counted  # type: ignore[method-assign]

    def wait_past(self, seen: int) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count > seen, timeout=5.0)


async def _until(condition: Any, what: Any) -> None:
    """Wait for ``condition()``; ``what()`` says what was awaited, and how far it got."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what()}"
        await asyncio.sleep(0.02)  # the pool's writes land on its own threads


async def test_a_handler_blocking_the_loop_costs_the_other_jobs_no_attempt(
    db_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """20 jobs held at once; one async handler blocks the loop (time.sleep) while the clock
    moves twice past the lease: the 19 others still succeed at attempt 1 with no failure in
    their histories, and the log and the pool's report name the blocking handler."""
    registry = Registry()
    started = 0
    returned = 0
    all_started = asyncio.Event()
    release = asyncio.Event()
    reasons_while_blocked: list[str] = []
    with Ledger.open(db_url, clock=clock, pool_size=6) as ledger:
        beats = Beats(ledger)
        pool: WorkerPool | None = None

        @registry.handler("other")
        async def other(ctx: JobContext) -> None:
            nonlocal started, returned
            started += 1
            if started == OTHERS:
                all_started.set()
            await release.wait()
            returned += 1

        @registry.handler("blocker")
        async def blocker(ctx: JobContext) -> None:
            nonlocal returned
            await all_started.wait()
            # The mistake: blocking calls in an async def. The loop stands still while the
            # ledger's clock moves 60 s (twice the lease), one renewal at a time.
            try:
                assert pool is not None
                for _ in range(3):
                    seen = beats.count
                    clock.advance(LEASE_S * 2 / 3)
                    beats.wait_past(seen)  # a blocking wait: the point of the test
                deadline = time.monotonic() + WAIT_S
                while getattr(pool.stats, "loop_blocks", 0) == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)  # still blocking the loop, until the watch sees it
                while time.monotonic() < deadline:
                    reasons_while_blocked[:] = _reasons(ledger, pool)
                    if reasons_while_blocked:
                        break
                    time.sleep(0.02)  # the report is written from the heartbeat thread
            finally:
                release.set()
            returned += 1

        ledger.define("other")
        ledger.define("blocker")
        enqueued = ledger.enqueue_many([EnqueueRequest(job_type="other") for _ in range(OTHERS)])
        other_ids = [job.job_id for job in enqueued if job.job_id is not None]
        blocker_id = ledger.enqueue("blocker").job_id
        assert blocker_id is not None and len(other_ids) == OTHERS
        all_ids = [*other_ids, blocker_id]
        pool = WorkerPool(
            ledger,
            registry,
            concurrency=OTHERS + 1,
            prefetch=0,
            lease_s=LEASE_S,
            heartbeat_interval_s=0.05,
            poll_interval_s=0.05,
            reaper_interval_s=0.05,  # an expired lease would be reaped at once
            report_interval_s=0.1,
        )
        caplog.set_level(logging.WARNING)
        await pool.start()
        try:
            await _until(
                lambda: returned == OTHERS + 1 and _all_succeeded(ledger, all_ids),
                lambda: (
                    f"every handler to return ({returned} did) and every job to succeed "
                    f"({ledger.counts()}; {pool.in_flight} leases held)"
                ),
            )
            report_reasons = await _reasons_reported(ledger, pool)
        finally:
            await pool.stop(grace_s=5)

        for job_id in all_ids:
            state = ledger.get(job_id)
            names = [type(r.event).name for r in ledger.history(job_id)]
            assert state is not None
            assert (state.status, state.attempt) == (JobStatus.SUCCEEDED, 1), (job_id, names)
            assert "job_failed" not in names, (job_id, names)

        assert pool.stats.loop_blocks == 1
        named = f"the async handler of job type 'blocker' (job {blocker_id})"
        assert pool.last_loop_block is not None and named in pool.last_loop_block
        assert "test_blocked_loop.py" in pool.last_loop_block
        assert " in blocker" in pool.last_loop_block
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(named in w and "has been blocked" in w for w in warnings), warnings
        assert any(named in r and "was blocked" in r for r in report_reasons), report_reasons
        assert any(
            named in reason and "has been blocked" in reason for reason in reasons_while_blocked
        ), reasons_while_blocked


def _all_succeeded(ledger: Ledger, job_ids: list[UUID]) -> bool:
    states = ledger.get_many(job_ids)
    return all(state.status is JobStatus.SUCCEEDED for state in states.values())


def _reasons(ledger: Ledger, pool: WorkerPool) -> list[str]:
    """The reasons in the pool's row (``jobledger pools``) that name a blocked loop."""
    reports = [r for r in ledger.pools() if r.pool_id == pool.worker_id]
    return [reason for reason in (reports[0].reasons if reports else []) if "event loop" in reason]


async def _reasons_reported(ledger: Ledger, pool: WorkerPool) -> list[str]:
    """The blocked-loop reasons in the pool's row once its reporter wrote the block's end
    (or as they are after a wait, for the test's assertion to show)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        reasons = _reasons(ledger, pool)
        if any("was blocked" in reason for reason in reasons) or time.monotonic() > deadline:
            return reasons
        await asyncio.sleep(0.02)  # the reporter writes on its own thread


async def test_the_heartbeat_thread_renews_no_lease_past_its_jobs_timeout(
    sqlite_url: str, clock: FakeClock
) -> None:
    """While a handler blocks the loop past its own timeout_s (ledger clock), the heartbeat
    thread keeps renewing the other job's lease but never the blocking job's."""
    registry = Registry()
    other_started = asyncio.Event()
    release = asyncio.Event()
    with Ledger.open(sqlite_url, clock=clock, pool_size=4) as ledger:
        beats = Beats(ledger)

        @registry.handler("other")
        async def other(ctx: JobContext) -> None:
            other_started.set()
            await release.wait()

        @registry.handler("blocker")
        async def blocker(ctx: JobContext) -> None:
            await other_started.wait()
            try:
                for _ in range(2):
                    seen = beats.count
                    clock.advance(20)  # past the blocker's 10 s timeout at the first step
                    beats.wait_past(seen)  # blocking the loop, as in the test above
            finally:
                release.set()

        ledger.define("other")
        ledger.define("blocker")
        other_id = ledger.enqueue("other").job_id
        blocker_id = ledger.enqueue("blocker", timeout_s=10).job_id
        assert other_id is not None and blocker_id is not None
        pool = WorkerPool(
            ledger,
            registry,
            concurrency=2,
            prefetch=0,
            lease_s=LEASE_S,
            heartbeat_interval_s=0.05,
            poll_interval_s=0.05,
            reaper_interval_s=0,
        )
        await pool.start()
        try:
            await _until(lambda: _all_succeeded(ledger, [other_id]), lambda: f"{ledger.counts()}")
        finally:
            await pool.stop(grace_s=5)
        renewed_at = {
            job_id: [
                r.event.at for r in ledger.history(job_id) if r.event.name == "job_heartbeated"
            ]
            for job_id in (other_id, blocker_id)
        }
        leased_at = next(
            r.event.at for r in ledger.history(blocker_id) if r.event.name == "job_leased"
        )
        assert max(renewed_at[other_id]) - leased_at >= timedelta(seconds=40)
        assert all(at - leased_at <= timedelta(seconds=10) for at in renewed_at[blocker_id])
        state = ledger.get(blocker_id)
        assert state is not None and state.status is not JobStatus.SUCCEEDED  # fenced out
