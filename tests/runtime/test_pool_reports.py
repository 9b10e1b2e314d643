"""Pools report themselves into ``jl_pools``; the reader judges their health at its clock;
the ledger-wide metrics render from a reader (real databases, the fake clock)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families

from ledger import FakeClock, Ledger
from ledger.api.metrics import render_ledger_metrics
from ledger.api.pools import STALE_INTERVALS, PoolReport, assess_pools
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool

INTERVAL_S = 5.0


def _registry() -> Registry:
    registry = Registry()

    @registry.handler("t")
    async def handle(ctx: JobContext) -> None:
        return None

    return registry


async def _report_of(ledger: Ledger, pool: WorkerPool) -> PoolReport:
    """The pool's row, once its reporter's first pass (run at start, on its own thread) has
    written it."""
    for _ in range(1000):
        reports = [r for r in ledger.pools() if r.pool_id == pool.worker_id]
        if reports:
            return reports[0]
        await asyncio.sleep(0.01)  # another thread's write: wait for it to land
    raise AssertionError("the pool never reported")


async def test_a_pool_reports_itself_goes_stale_by_the_clock_and_removes_its_row(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A started pool's row is stamped by the ledger's clock; silent past three intervals it
    counts dead (judged at the clock's now); a stopped pool leaves no row."""
    ledger.define("t")
    pool = WorkerPool(ledger, _registry(), concurrency=3, report_interval_s=INTERVAL_S)
    await pool.start()
    try:
        report = await _report_of(ledger, pool)
        assert report.last_seen_at == clock.now() and report.started_at == clock.now()
        assert (report.status, report.reasons, report.concurrency) == ("ok", [], 3)
        assert report.interval_s == INTERVAL_S and report.host == pool.host
        assert ledger.health().status == "ok"
        clock.advance(STALE_INTERVALS * INTERVAL_S)
        assert ledger.health().status == "ok"  # exactly three intervals: still alive
        clock.advance(0.001)
        judged = ledger.health()
        assert judged.status == "degraded" and judged.live_pools == 0
        assert judged.reasons[0] == "no live worker pool"
        assert f"pool {pool.worker_id} silent for 15.0s" in judged.reasons[1]
    finally:
        await pool.stop()
    assert ledger.pools() == []


async def test_a_degraded_pool_reports_its_reasons(ledger: Ledger, clock: FakeClock) -> None:
    """A pool whose breaker is open reports itself degraded, and the ledger's health names
    it with the pool's reasons."""
    ledger.define("t")
    breaker = CircuitBreaker(clock, threshold=1, cooldown_s=60)
    breaker.record_failure("t")
    pool = WorkerPool(ledger, _registry(), breaker=breaker, report_interval_s=INTERVAL_S)
    await pool.start()
    try:
        report = await _report_of(ledger, pool)
        assert report.status == "degraded"
        assert report.reasons == [pool.health().reasons[0]]
        assert "circuit breaker open for 't'" in report.reasons[0]
        judged = ledger.health()
        assert judged.reasons == [f"pool {pool.worker_id} degraded: {report.reasons[0]}"]
    finally:
        await pool.stop()


def test_no_pools_is_degraded_and_one_live_ok_pool_is_ok() -> None:
    """The pure judgement: nothing reporting is degraded; a fresh ok report is ok."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert assess_pools([], now).reasons == ["no live worker pool"]
    fresh = PoolReport(
        pool_id="p@h:1",
        host="h",
        pid=1,
        name="p",
        started_at=now,
        last_seen_at=now - timedelta(seconds=1),
        interval_s=1.0,
        concurrency=1,
        in_flight=0,
        status="ok",
        reasons=[],
        version="x",
    )
    judged = assess_pools([fresh], now)
    assert (judged.status, judged.reasons, judged.live_pools) == ("ok", [], 1)


def test_the_ledger_wide_metrics_render_the_ledgers_counts(ledger: Ledger) -> None:
    """render_ledger_metrics parses as Prometheus text; jobs by status and type equal the
    queue's counts; with no pool reporting, health is 0."""
    ledger.define("t")
    ledger.define("u")
    for _ in range(3):
        ledger.enqueue("t")
    ledger.enqueue("u")
    cancelled = ledger.enqueue("u").job_id
    assert cancelled is not None
    ledger.cancel(cancelled)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(render_ledger_metrics(ledger).decode())
        for s in family.samples
    }
    assert samples[("jobledger_jobs", (("status", "pending"), ("type", "t")))] == 3
    assert samples[("jobledger_jobs", (("status", "pending"), ("type", "u")))] == 1
    assert samples[("jobledger_jobs", (("status", "cancelled"), ("type", "u")))] == 1
    assert samples[("jobledger_jobs", (("status", "succeeded"), ("type", "t")))] == 0
    jobs = sum(v for (name, _), v in samples.items() if name == "jobledger_jobs")
    assert jobs == sum(ledger.counts().values()) == 5
    assert samples[("jobledger_projection_lag_events", (("projection", "audit"),))] >= 0
    assert samples[("jobledger_pools", (("state", "ok"),))] == 0
    assert samples[("jobledger_health_ok", ())] == 0
