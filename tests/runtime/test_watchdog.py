"""The pool's watchdog: a pool stalled behind a frozen PostgreSQL writer recovers on its own.

A real process is frozen (SIGSTOP) in the middle of a write, holding the events table's lock
(:mod:`frozen_writer`); a pool's claim waits behind it. The pool's watchdog ends the frozen
session within its bound, the claim goes on, the job runs, and the pool counts and logs what
it ended. On SQLite (and with ``watchdog_interval_s=0``) a pool runs no watchdog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack

import pytest
from frozen_writer import frozen_writer, lock_waiters, session_of, wait_for

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.maintenance.watchdog import Watchdog
from ledger.runtime.config import PoolConfig
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool

IDLE_S = 2.0
"""The ledger's idle-in-transaction timeout: the watchdog's bound is half, its interval a
quarter."""
RECOVERY_SLACK_S = 4.0
"""Beyond bound + interval, what the recovery may take on a loaded 2-core host."""


def _registry() -> Registry:
    registry = Registry()

    @registry.handler("t")
    async def work(ctx: JobContext) -> None:
        return None

    return registry


@pytest.mark.postgres
async def test_a_pool_stalled_behind_a_frozen_writer_recovers_through_its_watchdog(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool whose claim waits behind a writer frozen mid-pipeline ends that session within
    half its ledger's idle bound (plus an interval), then claims and runs the job; the session
    is counted in its stats and logged."""
    with Ledger.open(pg_url, idle_in_transaction_s=IDLE_S) as ledger:
        ledger.define("t")
        [job_id] = [e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="t")])]
        pool = WorkerPool(
            ledger, _registry(), concurrency=1, reaper_interval_s=0, define_types=False
        )
        async with AsyncExitStack() as stack:
            # Unwound last to first: the frozen child is killed before the pool is stopped,
            # so a pool still stalled (no watchdog) fails the test instead of hanging it.
            stack.push_async_callback(pool.stop)
            stack.enter_context(
                caplog.at_level(logging.WARNING, logger="ledger.maintenance.watchdog")
            )
            frozen = stack.enter_context(frozen_writer(pg_url, "mid-pipeline", idle_s=3600.0))
            started = time.monotonic()
            await pool.start()
            await asyncio.to_thread(
                wait_for, "the pool's claim waiting", lambda: len(lock_waiters(pg_url)) == 1
            )
            await asyncio.wait_for(pool.wait_until_idle(), 30)
            took = time.monotonic() - started
            assert session_of(pg_url, frozen.backend_pid) is None
        job = ledger.get(job_id)
        assert job is not None and job.status is JobStatus.SUCCEEDED
    assert pool.stats.frozen_writers_ended == 1
    bound = IDLE_S / 2
    assert took < bound + bound / 2 + RECOVERY_SLACK_S, took
    [line] = [r.getMessage() for r in caplog.records if r.name == "ledger.maintenance.watchdog"]
    assert line.startswith(f"ended session {frozen.backend_pid} (active,")


@pytest.mark.postgres
def test_the_watchdog_s_bound_and_interval_follow_the_ledger(pg_url: str) -> None:
    """By default the watchdog ends a session silent for half the ledger's idle-in-transaction
    timeout, and looks every quarter of it; a pool built with ``watchdog_interval_s=0`` runs
    none."""
    with Ledger.open(pg_url, idle_in_transaction_s=IDLE_S) as ledger:
        watchdog = Watchdog(ledger)
        assert watchdog.enabled
        assert (watchdog.silent_s, watchdog.interval_s) == (IDLE_S / 2, IDLE_S / 4)
    assert PoolConfig(watchdog_interval_s=0).watchdog_config() is None
    with pytest.raises(ValueError, match="watchdog_interval_s"):
        PoolConfig(watchdog_interval_s=-1)


def test_on_sqlite_there_is_no_watchdog_to_run(sqlite_url: str) -> None:
    """A frozen SQLite writer keeps the database's one write lock and nothing can take it
    back: the watchdog is off there, and a pass ends nothing."""
    with Ledger.open(sqlite_url) as ledger:
        watchdog = Watchdog(ledger)
        assert not watchdog.enabled
        assert watchdog.run_once() == []
