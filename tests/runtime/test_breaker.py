"""The circuit breaker is per job type (defect 6 of issue 12), tested through a running pool:
a failing type stops only its own claims, its jobs wait unclaimed, it is logged and visible in
health, and its threshold and cooldown are settings."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

import pytest

from ledger import BackoffPolicy, EnqueueRequest, FakeClock, JobStatus, Ledger
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.handlers import JobContext, Registry, TransientError
from ledger.runtime.pool import WorkerPool


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait (bounded) until ``check()`` holds; the pool runs meanwhile."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def attempts(ledger: Ledger, ids: list[UUID]) -> list[int]:
    states = [ledger.get(job_id) for job_id in ids]
    return sorted((s.attempt for s in states if s is not None), reverse=True)


async def test_one_failing_type_opens_only_its_own_breaker(
    sync_ledger: Ledger, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Type A fails: after 3 failures only A stops being claimed (its other jobs stay pending
    at attempt 0) while B flows; after the cooldown one failure reopens it at once; then a
    success closes it and A flows again. Opening and closing are logged; health shows A."""
    registry = Registry()
    a_is_down = True

    @registry.handler("A")
    async def flaky(ctx: JobContext) -> str:
        if a_is_down:
            raise TransientError("downstream of A is down")
        return "a"

    @registry.handler("B")
    async def healthy(ctx: JobContext) -> str:
        return "b"

    sync_ledger.define("A", backoff=BackoffPolicy(base_s=600.0, max_s=600.0, jitter=0.0))
    sync_ledger.define("B")
    a_ids = [
        job_id
        for job_id in [
            e.job_id
            for e in sync_ledger.enqueue_many(
                [EnqueueRequest(job_type="A", priority=200) for _ in range(6)]
            )
        ]
        if job_id is not None
    ]
    b_ids = [
        e.job_id for e in sync_ledger.enqueue_many([EnqueueRequest(job_type="B") for _ in range(4)])
    ]
    breaker = CircuitBreaker(clock, threshold=3, cooldown_s=60)
    pool = WorkerPool(
        sync_ledger,
        registry,
        concurrency=1,
        prefetch=0,
        poll_interval_s=0.02,
        reaper_interval_s=0,
        breaker=breaker,
    )
    caplog.set_level(logging.INFO, logger="ledger.runtime")
    await pool.start()
    try:
        await until(lambda: sync_ledger.counts().get("succeeded", 0) == 4)
        await pool.wait_until_idle()
        assert all(sync_ledger.get(b).status is JobStatus.SUCCEEDED for b in b_ids if b)  # type: ignore[union-attr]
        assert attempts(sync_ledger, a_ids) == [1, 1, 1, 0, 0, 0]
        health = pool.health()
        assert health.status == "degraded" and list(health.open_breakers) == ["A"]
        assert health.open_breakers["A"] == clock.now() + breaker.cooldown
        assert any("'A'" in r and "opened" in r for r in caplog.messages)

        clock.advance(60)  # cooldown over: A may be claimed again, and fails once more
        await until(lambda: attempts(sync_ledger, a_ids) == [1, 1, 1, 1, 0, 0])
        await pool.wait_until_idle()
        assert attempts(sync_ledger, a_ids) == [1, 1, 1, 1, 0, 0]  # reopened at once
        assert list(pool.health().open_breakers) == ["A"]

        a_is_down = False
        clock.advance(60)
        await until(lambda: sync_ledger.counts().get("succeeded", 0) == 6)
        await pool.wait_until_idle()
        assert pool.health().status == "ok" and pool.health().open_breakers == {}
        assert any("'A'" in r and "closed" in r for r in caplog.messages)
    finally:
        await pool.stop()


def test_breaker_counts_each_type_apart_and_reopens_on_one_failure_after_cooldown() -> None:
    """Failures of one type never open another's breaker; past the cooldown one failure
    reopens it; a success closes it and clears its count."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock, threshold=2, cooldown_s=5)
    breaker.record_failure("x")
    breaker.record_failure("y")
    assert breaker.open_types() == {}
    breaker.record_failure("x")
    assert breaker.open_types() == {"x": clock.now() + breaker.cooldown}
    clock.advance(5)
    assert breaker.open_types() == {}  # half-open: x may be claimed again
    breaker.record_failure("x")
    assert list(breaker.open_types()) == ["x"]
    breaker.record_success("x")
    assert breaker.open_types() == {} and breaker.consecutive_failures("x") == 0
    assert breaker.consecutive_failures("y") == 1


async def test_the_pool_builds_its_breaker_from_its_config(sync_ledger: Ledger) -> None:
    """WorkerPool(breaker_threshold=…, breaker_cooldown_s=…) sets its own breaker."""
    pool = WorkerPool(sync_ledger, Registry(), breaker_threshold=2, breaker_cooldown_s=7.5)
    assert (pool.breaker.threshold, pool.breaker.cooldown.total_seconds()) == (2, 7.5)


def test_an_open_breaker_logs_its_opening_once(caplog: pytest.LogCaptureFixture) -> None:
    """Failures of jobs claimed before the breaker opened restart its cooldown without logging
    the opening again: one warning per opening (the demo printed one per failure)."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock, threshold=2, cooldown_s=60)
    with caplog.at_level(logging.WARNING, logger="ledger.runtime.breaker"):
        for _ in range(5):
            breaker.record_failure("t")
            clock.advance(1)
    openings = [r for r in caplog.records if "circuit breaker opened" in r.getMessage()]
    assert len(openings) == 1
    assert breaker.open_types() == {"t": clock.now() - timedelta(seconds=1) + timedelta(seconds=60)}
    clock.advance(61)
    breaker.record_failure("t")  # after the cooldown: a new opening, logged
    openings = [r for r in caplog.records if "circuit breaker opened" in r.getMessage()]
    assert len(openings) == 2


async def test_a_half_open_breaker_sends_one_probe_not_a_slot_full(
    sync_ledger: Ledger, clock: FakeClock
) -> None:
    """With 4 free slots, a half-open type gets one probe job per cooldown, not four: a
    downstream still down costs one attempt per cooldown. The probe's success closes the
    breaker and the type flows again at full width."""
    registry = Registry()
    down = True
    running = 0
    widest = 0

    @registry.handler("A")
    async def flaky(ctx: JobContext) -> str:
        nonlocal running, widest
        running += 1
        widest = max(widest, running)
        try:
            await asyncio.sleep(0.01)
            if down:
                raise TransientError("downstream of A is down")
            return "a"
        finally:
            running -= 1

    sync_ledger.define("A", backoff=BackoffPolicy(base_s=600.0, max_s=600.0, jitter=0.0))
    ids = [
        job_id
        for job_id in [
            e.job_id
            for e in sync_ledger.enqueue_many([EnqueueRequest(job_type="A") for _ in range(12)])
        ]
        if job_id is not None
    ]
    # Threshold 1: the first failure opens it, so no refill claim can slip in before it
    # opens, and exactly the first claim's 4 jobs are attempted.
    breaker = CircuitBreaker(clock, threshold=1, cooldown_s=60)
    pool = WorkerPool(
        sync_ledger, registry, concurrency=4, prefetch=0, poll_interval_s=0.02,
        reaper_interval_s=0, breaker=breaker,
    )  # fmt: skip
    await pool.start()
    try:
        await until(lambda: sum(attempts(sync_ledger, ids)) == 4)
        await pool.wait_until_idle()
        assert breaker.is_open("A") and sum(attempts(sync_ledger, ids)) == 4
        for tried in (5, 6):  # each cooldown: exactly one more attempt, the probe
            clock.advance(60)
            await until(lambda tried=tried: sum(attempts(sync_ledger, ids)) == tried)  # type: ignore[misc]
            await pool.wait_until_idle()
            assert sum(attempts(sync_ledger, ids)) == tried and breaker.is_open("A")
        down = False
        clock.advance(60)
        await until(lambda: sync_ledger.counts().get("succeeded", 0) == 6)
        await pool.wait_until_idle()
        assert not breaker.is_open("A") and widest == 4
    finally:
        await pool.stop()


def test_a_probe_that_never_reports_lets_another_go_after_a_cooldown() -> None:
    """A probe whose job never reports (lease lost, pool stopped) does not wedge the type:
    one cooldown later another probe may go; a terminal failure frees it at once."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock, threshold=1, cooldown_s=10)
    breaker.record_failure("x")
    assert breaker.claimable(["x", "y"]) == (["y"], [])
    clock.advance(10)
    assert breaker.claimable(["x"]) == ([], ["x"])
    breaker.probe_claimed("x")
    assert breaker.claimable(["x"]) == ([], [])
    clock.advance(10)
    assert breaker.claimable(["x"]) == ([], ["x"])
    breaker.probe_claimed("x")
    breaker.record_ended("x")
    assert breaker.claimable(["x"]) == ([], ["x"])
