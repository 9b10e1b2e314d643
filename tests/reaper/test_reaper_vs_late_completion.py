"""The reaper racing a worker's late completion (issue 12), on both backends.

The lease ends at ``T``. The worker's success is stamped at ``T`` by the shared fake clock (a
lease ending exactly now is live, so its fence holds by its own reading); the reaper's pass runs
at ``T + 1 µs`` (``now=``), when the lease has expired. Whichever transaction takes the job's
row first wins, and the other must lose cleanly: a reaped job's late success is fenced out
(``job.lease_owner_mismatch``, nothing appended), a succeeded job is not reaped. Each order is
pinned explicitly, then both are released together on real threads.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from uuid import UUID

import pytest

from ledger import EnqueueRequest, FakeClock, JobStatus, LeaseOwnerMismatchError, Ledger
from ledger.core.events import JobFailed, JobRetryScheduled, JobSucceeded
from ledger.core.state import JobState, Lease
from ledger.maintenance.reaper import Reaper, ReaperConfig

JOB_TYPE = "late"
LEASE_S = 10.0
JUST_AFTER = timedelta(microseconds=1)


def _leased(ledger: Ledger, count: int) -> list[Lease]:
    """``count`` jobs claimed together by one worker: their leases all end at the same T."""
    ledger.define(JOB_TYPE, max_attempts=3)
    ledger.enqueue_many([EnqueueRequest(job_type=JOB_TYPE) for _ in range(count)])
    claims = ledger.claim("default@host-a:1", limit=count, lease_s=LEASE_S)
    leases = [claim.lease for claim in claims]
    assert all(lease is not None for lease in leases) and len(leases) == count
    return leases  # type: ignore[return-value]


def _names(ledger: Ledger, job_id: UUID) -> list[str]:
    return [type(record.event).name for record in ledger.history(job_id)]


def _assert_clean(ledger: Ledger, job_ids: list[UUID]) -> None:
    assert ledger.projections().verify().clean
    assert [f for job in job_ids for f in ledger.replay_check(job).findings] == []


def test_when_the_reaper_wins_the_late_success_is_fenced_out(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Reaper first: the job is failed as lease_expired and retried; the success that follows
    raises job.lease_owner_mismatch and appends nothing."""
    [lease] = _leased(ledger, 1)
    clock.advance(LEASE_S)  # exactly T: the worker still holds a live lease by its clock

    report = Reaper(ledger, ReaperConfig(retry_delay_s=5)).run_once(now=clock.now() + JUST_AFTER)
    assert [r.job_id for r in report.reaped] == [lease.job_id]
    before = _names(ledger, lease.job_id)
    with pytest.raises(LeaseOwnerMismatchError) as refused:
        ledger.succeed(lease, output={"late": True})

    assert refused.value.code == "job.lease_owner_mismatch"
    assert _names(ledger, lease.job_id) == before
    assert before[-2:] == ["job_failed", "job_retry_scheduled"]
    state = ledger.get(lease.job_id)
    assert state is not None and state.status is JobStatus.PENDING and state.output is None
    _assert_clean(ledger, [lease.job_id])


def test_when_the_success_wins_the_reaper_skips_the_job(ledger: Ledger, clock: FakeClock) -> None:
    """Success first (stamped at T, when the lease is still live): the job is succeeded, and
    the reaper's pass an instant later finds nothing to reap and appends nothing."""
    [lease] = _leased(ledger, 1)
    clock.advance(LEASE_S)

    done = ledger.succeed(lease, output={"late": True})
    report = Reaper(ledger, ReaperConfig(retry_delay_s=5)).run_once(now=clock.now() + JUST_AFTER)

    assert done.status is JobStatus.SUCCEEDED
    assert (report.processed, report.deferred_error_count) == (0, 0)
    assert _names(ledger, lease.job_id)[-1] == "job_succeeded"
    _assert_clean(ledger, [lease.job_id])


def _outcome(ledger: Ledger, job_id: UUID) -> type[object]:
    """Which of the two won a job: its one job_succeeded or its one job_failed."""
    events = [record.event for record in ledger.history(job_id)]
    won = [type(e) for e in events if isinstance(e, JobSucceeded | JobFailed)]
    assert len(won) == 1, f"exactly one of success and reap, got {won}"
    return won[0]


def test_released_together_exactly_one_wins_each_job(db_url: str, clock: FakeClock) -> None:
    """A reaper pass and four workers' late successes over 24 expired leases, released by one
    barrier on real threads (each with its own ledger): every job is either succeeded (and
    not reaped) or reaped (and its success refused, nothing appended); the counts agree and
    the views and decision replay stay clean."""
    with Ledger.open(db_url, clock=clock) as setup:
        leases = _leased(setup, 24)
    clock.advance(LEASE_S)
    reaper_at = clock.now() + JUST_AFTER
    ledgers = [Ledger.open(db_url, clock=clock, pool_size=1) for _ in range(5)]
    barrier = threading.Barrier(5)
    reaped: list[UUID] = []
    succeeded: list[JobState] = []
    refused: list[Lease] = []
    errors: list[BaseException] = []

    def reap(opened: Ledger) -> None:
        barrier.wait(timeout=30)
        report = Reaper(opened, ReaperConfig(retry_delay_s=5)).run_once(now=reaper_at)
        reaped.extend(r.job_id for r in report.reaped)

    def complete(opened: Ledger, mine: list[Lease]) -> None:
        barrier.wait(timeout=30)
        for lease in mine:
            try:
                succeeded.append(opened.succeed(lease, output={"late": True}))
            except LeaseOwnerMismatchError:
                refused.append(lease)

    def guarded(target: object, *args: object) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)  # type: ignore[operator]
            except BaseException as error:  # reported below, not lost in the thread
                errors.append(error)

        return threading.Thread(target=run)

    threads = [guarded(reap, ledgers[0])]
    threads += [guarded(complete, ledgers[i + 1], leases[i::4]) for i in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == [] and not any(t.is_alive() for t in threads)
        ids = [lease.job_id for lease in leases]
        outcomes = {job_id: _outcome(ledgers[0], job_id) for job_id in ids}
        assert {j for j, won in outcomes.items() if won is JobFailed} == set(reaped)
        assert {s.job_id for s in succeeded} == {
            j for j, w in outcomes.items() if w is JobSucceeded
        }
        assert {lease.job_id for lease in refused} == set(reaped)
        assert len(reaped) + len(succeeded) == len(leases)
        for job_id in reaped:
            assert _names(ledgers[0], job_id)[-2:] == ["job_failed", "job_retry_scheduled"]
            retry = ledgers[0].history(job_id)[-1].event
            assert isinstance(retry, JobRetryScheduled) and retry.at == reaper_at
        _assert_clean(ledgers[0], ids)
    finally:
        for opened in ledgers:
            opened.close()
