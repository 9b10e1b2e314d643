"""A worker never starts a handler on a lease it already lost (defect 5 of issue 12): a
prefetched job whose lease expired while it waited (a pool paused by SIGSTOP, a long handler
ahead of it) is dropped from the buffer, counted and logged, and nothing is written for it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from uuid import UUID

import pytest

from ledger import EnqueueRequest, FakeClock, JobStatus, Ledger
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool


@dataclass
class BlockedSlot:
    """One slot running a job that waits on ``gate``, two more prefetched behind it, and no
    lease renewal (a pool "paused" for as long as the test moves the clock)."""

    pool: WorkerPool
    ids: list[UUID | None]
    gate: asyncio.Event
    first_started: asyncio.Event
    started: list[UUID]


def blocked_slot(ledger: Ledger) -> BlockedSlot:
    registry = Registry()
    gate, first_started = asyncio.Event(), asyncio.Event()
    started: list[UUID] = []

    @registry.handler("p")
    async def handler(ctx: JobContext) -> str:
        started.append(ctx.id)
        first_started.set()
        await gate.wait()
        return "ok"

    ledger.define("p")
    ids = [e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="p") for _ in range(3)])]
    pool = WorkerPool(
        ledger, registry, concurrency=1, prefetch=2, lease_s=10,
        heartbeat_interval_s=3600,  # no renewal while "paused"
        reaper_interval_s=0, poll_interval_s=0.02,
    )  # fmt: skip
    return BlockedSlot(pool, ids, gate, first_started, started)


async def test_prefetched_jobs_whose_leases_expired_are_dropped_not_started(
    sync_ledger: Ledger, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """One slot, two jobs prefetched behind a blocked one; the clock passes every lease, the
    reaper takes them and another worker claims them: when the slot frees, neither prefetched
    job's handler starts, the pool counts them, and the new owner's leases are untouched."""
    slot = blocked_slot(sync_ledger)
    pool, ids, gate, first_started, started = (
        slot.pool, slot.ids, slot.gate, slot.first_started, slot.started
    )  # fmt: skip
    await pool.start()
    try:
        await asyncio.wait_for(first_started.wait(), 10)
        assert pool.stats.claimed == 3  # one running, two buffered
        clock.advance(11)  # every lease of the pool is now past its end
        reaped = await asyncio.to_thread(sync_ledger.reap_expired, retry_delay_s=0)
        assert len(reaped) == 3
        taken = await asyncio.to_thread(sync_ledger.claim, "worker-B", limit=3, lease_s=60)
        assert len(taken) == 3
        head = sync_ledger.store.head_position()
        with caplog.at_level(logging.WARNING, logger="ledger.runtime"):
            gate.set()

            async def buffer_worked_off() -> None:
                while pool.stats.expired_before_start + len(started) < 3:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(buffer_worked_off(), 10)
        assert started == [ids[0]]
        assert pool.stats.expired_before_start == 2
        assert sum("dropped unstarted" in r.getMessage() for r in caplog.records) == 2
        await pool.stop()
        assert sync_ledger.store.head_position() == head  # the first job's outcome was fenced
        for job_id in ids:
            assert job_id is not None
            state = sync_ledger.get(job_id)
            assert state is not None and state.status is JobStatus.LEASED
            assert state.worker_id == "worker-B"
    finally:
        gate.set()
        await pool.stop()


async def test_a_lease_too_near_its_end_is_not_started(
    sync_ledger: Ledger, clock: FakeClock
) -> None:
    """Prefetched jobs whose leases have under a quarter left (renewals have not landed) are
    not started although not yet expired; a job with more left is."""
    slot = blocked_slot(sync_ledger)
    pool, ids, gate, first_started, started = (
        slot.pool, slot.ids, slot.gate, slot.first_started, slot.started
    )  # fmt: skip
    await pool.start()
    try:
        await asyncio.wait_for(first_started.wait(), 10)
        clock.advance(8)  # 2 s of 10 left: under the quarter, not expired
        gate.set()
        while pool.stats.expired_before_start + len(started) < 3:
            await asyncio.sleep(0.01)
        assert started == [ids[0]] and pool.stats.expired_before_start == 2
    finally:
        gate.set()
        await pool.stop()
