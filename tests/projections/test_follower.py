"""Following the head: the follower keeps the audit view caught up while writers run.

Real time only where the behaviour is about real time (a follower waking on new events), with
generous bounds; everything else is checked against the stored history.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from projection_helpers import raw, reset_tracking

from ledger import Completion, EnqueueRequest, Ledger
from ledger.runtime.handlers import Registry
from ledger.runtime.pool import WorkerPool
from projections.follower import Follower

BOUND_S = 10.0
CONSOLE_SCRIPT = str(Path(sys.executable).with_name("jobledger"))


def audit_position(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.tracking().get("audit", 0)


def job_event_count(url: str) -> int:
    """Events of job streams (the audit view's rows): all events minus definition events."""
    [(total,)] = raw(url, "SELECT count(*) FROM jl_events")
    [(definition_events,)] = raw(url, "SELECT coalesce(sum(stream_version), 0) FROM jl_definitions")
    return int(total) - int(definition_events)


def wait_until(condition: Callable[[], bool], bound_s: float = BOUND_S) -> float:
    """Seconds until ``condition()`` held; fails the test after ``bound_s``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > bound_s:
            pytest.fail(f"not within {bound_s} s")
        time.sleep(0.005)
    return time.monotonic() - started


def audit_lag(ledger: Ledger) -> int:
    """Events the audit view has yet to apply. Not ``head - audit_position``: on PostgreSQL
    the last event in tail order need not be the newest id (a writer that took its
    transaction id first and appended last), so that difference may never reach 0."""
    return ledger.audit_lag()


def wait_caught_up(ledger: Ledger, stall_s: float = BOUND_S) -> None:
    """Until the audit view has applied every event; fails only if it stops moving for
    ``stall_s`` (a stuck follower), not because a loaded machine made the catch-up slow."""
    lag, moved_at = audit_lag(ledger), time.monotonic()
    while lag > 0:
        time.sleep(0.005)
        now_lag = audit_lag(ledger)
        if now_lag != lag:
            lag, moved_at = now_lag, time.monotonic()
        elif time.monotonic() - moved_at > stall_s:
            pytest.fail(f"the audit view stalled {lag} events behind for {stall_s} s")


@contextmanager
def following(follower: Follower) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=follower.run)
    thread.start()
    try:
        yield thread
    finally:
        follower.stop()
        thread.join(timeout=BOUND_S)
        assert not thread.is_alive()


def write_some(url: str, rounds: int, claimed: list[int] | None = None) -> None:
    """``rounds`` of 5 enqueues and a claim of up to 4 that succeed; the jobs each claim got
    appended to ``claimed`` (under concurrent claims PostgreSQL may hand one fewer than asked:
    a row another claim locked or changed meanwhile is skipped, not replaced)."""
    with Ledger.open(url, pool_size=2) as ledger:
        for _ in range(rounds):
            ledger.enqueue_many([EnqueueRequest(job_type="t")] * 5)
            jobs = ledger.claim("w", limit=4, lease_s=60)
            ledger.succeed_many([Completion(lease=j.lease) for j in jobs if j.lease])
            if claimed is not None:
                claimed.append(len(jobs))


def test_followers_keep_audit_caught_up_under_concurrent_writes(db_url: str) -> None:
    """Two followers and two writers at once: the audit view ends with exactly one row per
    job event (none lost, none twice) and verifies clean."""
    with Ledger.open(db_url, auto_define=True) as ledger:
        ledger.define("t")
        first = Follower(ledger.store, poll_s=0.05)
        second = Follower(ledger.store, poll_s=0.05)
        with following(first), following(second):
            claimed: list[int] = []
            writers = [
                threading.Thread(target=write_some, args=(db_url, 15, claimed)) for _ in range(2)
            ]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join()
            head = ledger.store.head_position()
            wait_caught_up(ledger)
        assert first.stats.errors == second.stats.errors == 0
        # Each event was applied once, by one follower or the other (definitions included).
        assert first.stats.applied + second.stats.applied == head
        [(rows, distinct)] = raw(db_url, "SELECT count(*), count(DISTINCT position) FROM jl_audit")
        assert len(claimed) == 2 * 15 and all(n <= 4 for n in claimed)
        assert rows == distinct == job_event_count(db_url) == 2 * 15 * 5 + 2 * sum(claimed)
        assert ledger.projections().verify(["audit"]).clean


def test_a_follower_wakes_on_a_commit_long_before_its_poll_interval(db_url: str) -> None:
    """With a 60 s poll interval, a new event reaches the audit view within seconds: LISTEN /
    NOTIFY on PostgreSQL (the commit is another process's as far as the server knows), the
    store's commit listeners on SQLite (same process)."""
    with Ledger.open(db_url, auto_define=True) as ledger:
        follower = Follower(ledger.store, poll_s=60.0)
        with following(follower):
            wait_until(lambda: follower.stats.passes >= 1)
            ledger.enqueue("t")
            waited = wait_until(lambda: audit_lag(ledger) == 0)
        assert waited < 5.0


def test_a_failing_batch_is_retried_and_nothing_is_skipped(db_url: str) -> None:
    """While the audit table is gone every batch fails (and rolls back); the follower reports
    the error and keeps trying; once the table is back it applies every event from its
    recorded position."""
    with Ledger.open(db_url, auto_define=True) as ledger:
        ledger.enqueue_many([EnqueueRequest(job_type="t")] * 3)
        raw(db_url, "ALTER TABLE jl_audit RENAME TO jl_audit_away")
        follower = Follower(ledger.store, poll_s=0.02)
        with following(follower):
            wait_until(lambda: follower.stats.errors >= 2)
            assert follower.stats.last_error is not None
            assert follower.stats.last_error.startswith("store.")
            assert audit_position(ledger) == 0
            raw(db_url, "ALTER TABLE jl_audit_away RENAME TO jl_audit")
            ledger.enqueue("t")
            wait_until(lambda: audit_lag(ledger) == 0)
        assert follower.stats.last_error is None
        [(rows,)] = raw(db_url, "SELECT count(*) FROM jl_audit")
        assert rows == 4
        assert ledger.projections().verify(["audit"]).clean


def test_a_worker_pool_keeps_audit_current_and_can_be_told_not_to(db_url: str) -> None:
    """A running pool follows the head (its health stays ok); with follow_projections=False
    the audit view is left where it was."""
    registry = Registry()

    @registry.handler("t")
    async def handle(ctx: object) -> None:
        return None

    async def run(follow: bool) -> int:
        with Ledger.open(db_url) as ledger:
            pool = WorkerPool(
                ledger, registry, concurrency=2, poll_interval_s=0.05, follow_projections=follow
            )
            await pool.start()
            try:
                ledger.enqueue_many([EnqueueRequest(job_type="t")] * 10)
                done = lambda: ledger.counts().get("succeeded", 0) == 10  # noqa: E731
                await asyncio.to_thread(wait_until, done)
                if follow:
                    await asyncio.to_thread(wait_until, lambda: audit_lag(ledger) == 0)
                    assert pool.health().status == "ok"
            finally:
                await pool.stop()
            return audit_position(ledger)

    position = asyncio.run(run(follow=True))
    assert position > 0
    raw(db_url, "DELETE FROM jl_audit")
    reset_tracking(db_url)
    assert asyncio.run(run(follow=False)) == 0


def test_cli_follow_prints_passes_and_stops_on_sigterm(db_url: str) -> None:
    """``jobledger projections follow`` as a real process: it applies what is there, then
    what is appended while it runs, and exits 0 on SIGTERM."""
    with Ledger.open(db_url, auto_define=True) as ledger:
        ledger.enqueue_many([EnqueueRequest(job_type="t")] * 4)
        process = subprocess.Popen(
            [CONSOLE_SCRIPT, "--db", db_url, "projections", "follow", "--poll", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert process.stdout is not None
            # the type's definition event and the four jobs' enqueue events
            assert process.stdout.readline().startswith("audit: applied 5 events")
            ledger.enqueue("t")
            assert process.stdout.readline().startswith("audit: applied 1 events; position")
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=BOUND_S)
    assert process.returncode == 0, err
    assert "stopped after" in err
    assert "applied 6 events" in err
