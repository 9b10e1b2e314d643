"""The release lock on PostgreSQL: two prerequisites of one fan-in step that end in two
transactions at once release it exactly once; ``complete`` fails fast while another writer
holds it; and the reaper seed's deferred-row scenario on a real workflow run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from store_helpers import assert_history_holds, ext, job, spec, statuses

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.events import (
    JobEnqueued,
    JobFailed,
    JobLeased,
    JobReapDeferred,
    JobRetryScheduled,
)
from ledger.core.workflows.errors import ReleaseConflictError
from ledger.core.workflows.events import WorkflowStepReleased
from ledger.core.workflows.ids import release_lock_key, step_job_id
from ledger.core.workflows.status import RunStatus
from ledger.maintenance.reaper import Reaper, ReaperConfig

WAIT_S = 10.0


def _advisory_waiters(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return int(row[0]) if row else 0


def _until(predicate: Callable[[], bool]) -> None:
    """Wait (on an event, not a sleep) until ``predicate`` holds, at most WAIT_S."""
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if predicate():
            return
        pause.wait(0.01)
    raise AssertionError("condition not reached")


def _hold_release_lock(url: str, run_id: UUID) -> psycopg.Connection[Any]:
    holder = psycopg.connect(url)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", [release_lock_key(run_id)])
    return holder


def test_two_prerequisites_ending_at_once_release_the_fan_in_step_exactly_once(
    pg_url: str, clock: FakeClock
) -> None:
    """a and b succeed in two threads released together by a barrier, both waiting on the
    run's release lock (held meanwhile, so both are inside their transactions): the second
    sees the first's pending count, d is released once, its job enqueued once."""
    with Ledger.open(pg_url, clock=clock) as ledger:
        ledger.define("work")
        run = ledger.workflows.submit(spec(job("a"), job("b"), job("d", "a", "b"))).run_id
        claims = {state.job_id: state for state in ledger.claim("w", limit=2, lease_s=600)}
        assert set(claims) == {step_job_id(run, "a"), step_job_id(run, "b")}
        holder = _hold_release_lock(pg_url, run)
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def succeed(job_id: UUID) -> None:
            try:
                lease = claims[job_id].lease
                assert lease is not None
                barrier.wait(WAIT_S)
                ledger.succeed(lease, output={"from": str(job_id)})
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=succeed, args=(job_id,)) for job_id in claims]
        for thread in threads:
            thread.start()
        _until(lambda: _advisory_waiters(pg_url) == 2)
        holder.rollback()
        holder.close()
        for thread in threads:
            thread.join(WAIT_S)
        assert errors == []
        events = [r.event for r in ledger.workflows.history(run)]
        releases = [e for e in events if isinstance(e, WorkflowStepReleased) and e.step_key == "d"]
        assert len(releases) == 1
        d_job = step_job_id(run, "d")
        assert [type(r.event) for r in ledger.history(d_job)] == [JobEnqueued]
        assert statuses(ledger, run) == {"a": "succeeded", "b": "succeeded", "d": "enqueued"}
        assert_history_holds(ledger)


def test_complete_and_append_fail_fast_while_another_writer_holds_the_release_lock(
    pg_url: str, clock: FakeClock
) -> None:
    """``complete`` and ``append`` try the lock: held elsewhere, each is
    workflow.release_conflict at once, and nothing is written; once free, they go through."""
    with Ledger.open(pg_url, clock=clock) as ledger:
        run = ledger.workflows.submit(spec(ext("gate"))).run_id
        version = ledger.workflows.handle(run).view().version
        holder = _hold_release_lock(pg_url, run)
        with pytest.raises(ReleaseConflictError) as raised:
            ledger.workflows.complete_step(run, "gate", True)
        assert raised.value.code == "workflow.release_conflict"
        with pytest.raises(ReleaseConflictError):
            ledger.workflows.append_steps(run, [ext("later", "gate")], "grow")
        assert ledger.workflows.handle(run).view().version == version
        holder.rollback()
        holder.close()
        ledger.workflows.complete_step(run, "gate", True)
        assert ledger.workflows.handle(run).status() is RunStatus.SUCCEEDED
        assert_history_holds(ledger)


def test_seed_expired_lease_reaper_defers_a_workflow_row_on_release_conflict(
    pg_url: str, clock: FakeClock
) -> None:
    """The seed's scenario on a real run: the reap of a step's expired job must take its
    run's release lock (here the job is at its last attempt, so the reap dead-letters it and
    fails the step: only ends touch the run), which another transaction holds; with the
    reaper's 100 ms lock timeout that row is deferred with workflow.release_conflict and
    SQLSTATE 55P03, its lease pushed out as a job_reap_deferred event, and the healthy row
    in the same batch is reaped. Once the lock is free and the pushed-out lease ends, a
    reaper reaps it and the run records the failure."""
    with Ledger.open(pg_url, clock=clock) as ledger, Ledger.open(pg_url, clock=clock) as other:
        ledger.define("reaper.workflow", max_attempts=1)
        ledger.define("reaper.healthy", max_attempts=3)
        run = ledger.workflows.submit(
            spec(job("step", job_type="reaper.workflow"), workflow_type="reaper.deferred")
        ).run_id
        failed_id = step_job_id(run, "step")
        healthy_id = ledger.enqueue("reaper.healthy", {"case": "healthy-row"}).job_id
        [failed_claim] = ledger.claim("worker-row-error", types=["reaper.workflow"], lease_s=10)
        clock.advance(10)
        [healthy_claim] = ledger.claim("worker-healthy", types=["reaper.healthy"], lease_s=10)
        clock.advance(20)

        reaper = Reaper(ledger, ReaperConfig(limit=2, retry_delay_s=60, lock_timeout_s=0.1))
        holder = _hold_release_lock(pg_url, run)
        report = reaper.run_once()
        holder.rollback()
        holder.close()

        assert report.processed == 1, "the healthy row is still processed"
        assert report.dead_lettered == []
        assert report.deferred_error_count == 1
        [deferred] = report.deferred_errors
        assert deferred.job_id == failed_id
        assert (deferred.run_number, deferred.attempt) == (
            failed_claim.run_number,
            failed_claim.attempt,
        )
        assert deferred.code == "workflow.release_conflict"
        # The run's own words for the conflict (the seed's error_message).
        assert deferred.message == f"run {run}'s release lock is held past the lock timeout"
        assert deferred.sqlstate == "55P03"
        pushed_to = clock.now() + timedelta(seconds=60)
        assert deferred.deferred_until == pushed_to
        assert [type(r.event) for r in ledger.history(failed_id)] == [
            JobEnqueued,
            JobLeased,
            JobReapDeferred,
        ]
        deferred_job = other.get(failed_id)
        assert deferred_job is not None and deferred_job.status is JobStatus.LEASED
        assert deferred_job.attempt == failed_claim.attempt
        assert deferred_job.worker_id == failed_claim.worker_id
        assert deferred_job.lease_expires_at == pushed_to
        healthy = other.get(healthy_id)
        assert healthy is not None and healthy.status is JobStatus.PENDING
        assert healthy.attempt == healthy_claim.attempt
        assert healthy.lease_expires_at is None
        assert [type(r.event) for r in ledger.history(healthy_id)] == [
            JobEnqueued,
            JobLeased,
            JobFailed,
            JobRetryScheduled,
        ]
        assert statuses(ledger, run) == {"step": "running"}

        clock.advance(60.001)
        second = Reaper(other, ReaperConfig(limit=2, retry_delay_s=60))
        assert [d.job_id for d in second.run_once().dead_lettered] == [failed_id]
        assert statuses(ledger, run) == {"step": "failed"}
        assert ledger.workflows.handle(run).status() is RunStatus.COMPLETED_WITH_ERRORS
        assert_history_holds(ledger)
