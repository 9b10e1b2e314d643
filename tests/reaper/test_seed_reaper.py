"""An equivalent of each test in runledger's reaper tests
(seeds/runledger_queue_reaper_errors), on the event-sourced ledger.

Where the seed expires leases and edits execution markers with UPDATE statements, these move
the injectable clock and record real events: history is never edited.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
from reaper_helpers import plant_conflicting_dead_letter

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.events import (
    JobDeadLettered,
    JobEnqueued,
    JobFailed,
    JobLeased,
    JobReapDeferred,
    JobRetryScheduled,
)
from ledger.core.values import DeferralCause
from ledger.maintenance.reaper import Reaper, ReaperConfig

LOCK_TIMEOUT_MESSAGE = "canceling statement due to lock timeout"
"""PostgreSQL's message for SQLSTATE 55P03 (lock_not_available) after ``lock_timeout``."""


def event_types(ledger: Ledger, job_id: object) -> list[type[object]]:
    return [type(r.event) for r in ledger.history(job_id)]  # type: ignore[arg-type]


def failure_flags(ledger: Ledger, job_id: object) -> tuple[object, object]:
    events = [r.event for r in ledger.history(job_id)]  # type: ignore[arg-type]
    failed = next(e for e in events if isinstance(e, JobFailed))
    dead = next(e for e in events if isinstance(e, JobDeadLettered))
    return failed.started_without_renewal_heartbeat, dead.started_without_renewal_heartbeat


def test_seed_reaper_reports_legacy_direct_running_without_renewal_heartbeat(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Running recorded after the claim, no renewal since: the flag is true in the report,
    in job_failed and in job_dead_lettered; the dead letter's payload is reported."""
    ledger.define("reaper.direct_running", max_attempts=1)
    payload = {"case": "direct-running-no-renewal"}
    job_id = ledger.enqueue("reaper.direct_running", payload).job_id
    [claim] = ledger.claim("worker-direct-running-no-renewal", lease_s=30)
    assert claim.lease is not None
    clock.advance(0.005)
    running = ledger.progress(claim.lease, stage="running")
    assert running.stage == "running"
    assert running.last_heartbeat_at is not None and running.started_at is not None
    assert running.last_heartbeat_at < running.started_at
    clock.advance(40)

    report = Reaper(ledger, ReaperConfig(limit=1, retry_delay_s=60)).run_once()

    assert report.processed == 1
    [dead] = report.dead_lettered
    assert dead.job_id == job_id and dead.payload == payload
    [reaped] = report.reaped
    assert reaped.failure.code == "job.lease_expired"
    assert reaped.disposition == "dead_lettered"
    assert reaped.started_without_renewal_heartbeat is True
    assert failure_flags(ledger, job_id) == (True, True)


def test_seed_reaper_treats_equal_heartbeat_and_execution_started_as_without_renewal(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A heartbeat stamped at the very instant running started is not a renewal."""
    ledger.define("reaper.equal_heartbeat", max_attempts=1)
    job_id = ledger.enqueue("reaper.equal_heartbeat", {"case": "equal-heartbeat-started"}).job_id
    [claim] = ledger.claim("worker-equal-heartbeat-started", lease_s=30)
    assert claim.lease is not None
    clock.advance(1)
    equal_at = clock.now()
    ledger.progress(claim.lease, stage="running")
    beat = ledger.heartbeat(claim.lease, lease_s=30)
    assert beat.last_heartbeat_at == equal_at == beat.started_at
    clock.advance(40)

    report = Reaper(ledger, ReaperConfig(limit=1, retry_delay_s=60)).run_once()

    assert report.processed == 1
    assert [d.job_id for d in report.dead_lettered] == [job_id]
    assert len(report.reaped) == 1
    assert report.reaped[0].job_id == job_id
    assert report.reaped[0].started_without_renewal_heartbeat is True
    assert failure_flags(ledger, job_id) == (True, True)


def test_seed_reaper_does_not_treat_progress_after_heartbeat_as_started_without_renewal(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Running, then a renewal heartbeat, then progress: the flag is false."""
    ledger.define("reaper.heartbeat_progress", max_attempts=1)
    job_id = ledger.enqueue("reaper.heartbeat_progress", {"case": "heartbeat-then-progress"}).job_id
    [claim] = ledger.claim("worker-heartbeat-then-progress", lease_s=30)
    assert claim.lease is not None
    ledger.progress(claim.lease, stage="running")
    clock.advance(1)
    ledger.heartbeat(claim.lease, lease_s=30)
    clock.advance(0.005)
    ledger.progress(claim.lease, done=1, total=10)
    clock.advance(40)

    report = Reaper(ledger, ReaperConfig(limit=1, retry_delay_s=60)).run_once()

    assert report.processed == 1 and len(report.dead_lettered) == 1
    assert report.reaped[0].job_id == job_id
    assert report.reaped[0].started_without_renewal_heartbeat is False
    assert failure_flags(ledger, job_id) == (False, False)


def test_seed_expired_lease_reaper_reports_deferred_row_error_and_continues_batch(
    pg_url: str, clock: FakeClock
) -> None:
    """One job's reap needs a lock another transaction holds (dead-lettering writes the
    dead-letter view, locked by a maintenance transaction): with a short lock timeout it is
    deferred with SQLSTATE 55P03 and its message, as a job_reap_deferred event that pushes
    its lease out by the retry delay; the healthy job is reaped. A second reaper in another
    ledger (another process, as far as the database can tell) skips the deferred job until
    the pushed-out lease expires, then reaps it."""
    with Ledger.open(pg_url, clock=clock) as ledger, Ledger.open(pg_url, clock=clock) as other:
        ledger.define("reaper.deferred", max_attempts=1)
        ledger.define("reaper.healthy", max_attempts=3)
        failed_id = ledger.enqueue("reaper.deferred", {"case": "row-error"}).job_id
        healthy_id = ledger.enqueue("reaper.healthy", {"case": "healthy-row"}).job_id
        [failed_claim] = ledger.claim(
            "worker-reaper-row-error", types=["reaper.deferred"], lease_s=10
        )
        clock.advance(10)
        [healthy_claim] = ledger.claim(
            "worker-reaper-healthy", types=["reaper.healthy"], lease_s=10
        )
        clock.advance(20)  # both expired; the failed job's lease ended first

        reaper = Reaper(ledger, ReaperConfig(limit=2, retry_delay_s=60, lock_timeout_s=0.1))
        with psycopg.connect(pg_url) as holder:
            holder.execute("LOCK TABLE jl_dead_letters IN SHARE MODE")
            report = reaper.run_once()
            holder.rollback()

        assert report.processed == 1, "the healthy row is still processed"
        assert report.dead_lettered == []
        assert report.deferred_error_count == 1
        [deferred] = report.deferred_errors
        assert deferred.job_id == failed_id
        assert (deferred.run_number, deferred.attempt) == (
            failed_claim.run_number,
            failed_claim.attempt,
        )
        assert deferred.code == "store.busy"
        assert deferred.sqlstate == "55P03"
        # The store names the database, then PostgreSQL's own words (and the statement).
        assert deferred.message.splitlines()[0].endswith(f": {LOCK_TIMEOUT_MESSAGE}")
        pushed_to = clock.now() + timedelta(seconds=60)
        assert deferred.deferred_until == pushed_to

        # The deferral is history: an event with the error, and the lease pushed out.
        assert event_types(ledger, failed_id) == [JobEnqueued, JobLeased, JobReapDeferred]
        deferral = ledger.history(failed_id)[-1].event  # type: ignore[arg-type]
        assert isinstance(deferral, JobReapDeferred)
        assert deferral.cause == DeferralCause(
            code="store.busy", message=deferred.message, sqlstate="55P03"
        )
        assert (deferral.worker_id, deferral.delay_s) == (failed_claim.worker_id, 60.0)
        assert deferral.lease_expires_at == pushed_to
        deferred_job = other.get(failed_id)  # type: ignore[arg-type]
        assert deferred_job is not None and deferred_job.status is JobStatus.LEASED
        assert deferred_job.attempt == failed_claim.attempt
        assert deferred_job.worker_id == failed_claim.worker_id
        assert deferred_job.lease_expires_at == pushed_to

        # Every reaper sees it: a new Reaper over another ledger skips the job until the
        # pushed-out lease has expired (a lease ending exactly now is live)...
        second = Reaper(other, ReaperConfig(limit=2, retry_delay_s=60))
        assert second.run_once().processed == 0
        clock.advance(60)
        assert second.run_once().processed == 0
        # ...and reaps it once it has.
        clock.advance(0.001)
        assert [d.job_id for d in second.run_once().dead_lettered] == [failed_id]

        healthy = ledger.get(healthy_id)  # type: ignore[arg-type]
        assert healthy is not None and healthy.status is JobStatus.PENDING
        assert healthy.attempt == healthy_claim.attempt
        assert healthy.lease_expires_at is None
        assert event_types(ledger, healthy_id) == [
            JobEnqueued,
            JobLeased,
            JobFailed,
            JobRetryScheduled,
        ]
        assert ledger.projections().verify().clean
        assert [f for j in (failed_id, healthy_id) for f in ledger.replay_check(j).findings] == []


def test_a_constraint_error_defers_only_its_job(ledger: Ledger, clock: FakeClock) -> None:
    """Per-job savepoints on both backends: a job whose dead-letter row already exists (a
    hand-made conflict) is deferred with the constraint's code; the batch goes on."""
    ledger.define("t", max_attempts=1)
    broken = ledger.enqueue("t", {"n": 1}).job_id
    fine = ledger.enqueue("t", {"n": 2}).job_id
    ledger.claim("w", limit=2, lease_s=1)
    clock.advance(5)
    assert broken is not None
    plant_conflicting_dead_letter(ledger, broken)
    report = Reaper(ledger, ReaperConfig(limit=10)).run_once()
    assert report.processed == 1 and [r.job_id for r in report.reaped] == [fine]
    [deferred] = report.deferred_errors
    assert deferred.job_id == broken and deferred.code == "store.concurrency_conflict"
    assert deferred.sqlstate in ("23505", "SQLITE_CONSTRAINT_PRIMARYKEY")
    assert "jl_dead_letters" in deferred.message
    assert event_types(ledger, broken) == [JobEnqueued, JobLeased, JobReapDeferred]


def test_two_reapers_racing_reap_each_job_exactly_once(pg_url: str, clock: FakeClock) -> None:
    """Real concurrency on PostgreSQL: SKIP LOCKED splits the expired jobs between them."""
    with Ledger.open(pg_url, clock=clock) as ledger:
        ledger.define("t")
        from ledger import EnqueueRequest

        ids = [
            e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(40)])
        ]
        ledger.claim("w", limit=40, lease_s=1)
    clock.advance(5)
    ledgers = [Ledger.open(pg_url, clock=clock, pool_size=1) for _ in range(2)]
    barrier = threading.Barrier(2)
    processed: list[int] = []

    def reap(opened: Ledger) -> None:
        barrier.wait(timeout=10)
        processed.append(Reaper(opened, ReaperConfig(limit=40)).run_once().processed)

    threads = [threading.Thread(target=reap, args=(opened,)) for opened in ledgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    try:
        assert sum(processed) == 40 and len(processed) == 2
        for job_id in ids:
            assert event_types(ledgers[0], job_id).count(JobFailed) == 1
    finally:
        for opened in ledgers:
            opened.close()
