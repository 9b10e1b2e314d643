"""Fenced worker writes on both backends: heartbeat, progress, success, failure, release."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger import (
    Completion,
    EnqueueRequest,
    Failure,
    FailureKind,
    FakeClock,
    JobStatus,
    Lease,
    LeaseOwnerMismatchError,
    Ledger,
)
from ledger.core.state import JobState

TRANSIENT = Failure(kind=FailureKind.RETRYABLE, code="downstream.unavailable", message="blip")


def claim_one(ledger: Ledger, worker: str = "w", **kwargs: object) -> tuple[JobState, Lease]:
    [job] = ledger.claim(worker, **kwargs)  # type: ignore[arg-type]
    assert job.lease is not None
    return job, job.lease


def test_heartbeat_extends_the_lease_and_records_the_time(
    defined: Ledger, clock: FakeClock
) -> None:
    """A heartbeat moves lease_expires_at to now + lease and last_heartbeat_at to now."""
    defined.enqueue("t")
    _, lease = claim_one(defined, lease_s=30)
    clock.advance(20)
    beat = defined.heartbeat(lease, lease_s=30)
    assert beat.last_heartbeat_at == clock.now()
    assert beat.lease_expires_at == clock.now() + timedelta(seconds=30)


def test_progress_stage_and_checkpoint_do_not_extend_the_lease(
    defined: Ledger, clock: FakeClock
) -> None:
    """Progress is recorded but the lease and heartbeat time stay as they were."""
    defined.enqueue("t")
    job, lease = claim_one(defined)
    clock.advance(5)
    after = defined.progress(lease, stage="running", done=2, total=10, checkpoint={"page": 2})
    assert after.lease_expires_at == job.lease_expires_at
    assert after.last_heartbeat_at == job.last_heartbeat_at
    assert after.started_at == clock.now()
    assert (after.stage, after.progress_done, after.progress_total) == ("running", 2, 10)
    assert after.checkpoint == {"page": 2}


def test_success_records_output_and_result_revision(defined: Ledger) -> None:
    """succeed: status succeeded, stage completed, output and the result's revision/hash."""
    defined.enqueue("t")
    _, lease = claim_one(defined)
    done = defined.succeed(lease, output={"doc": "d1"}, revision="e1", content_hash="m1")
    assert (done.status, done.stage, done.output) == (
        JobStatus.SUCCEEDED,
        "completed",
        {"doc": "d1"},
    )
    assert (done.result_revision, done.result_content_hash) == ("e1", "m1")
    assert done.lease_expires_at is None and done.finished_at is not None


def test_expired_lease_fences_out_every_worker_write(defined: Ledger, clock: FakeClock) -> None:
    """Past its expiry (not yet reaped) the old lease can neither heartbeat nor finish."""
    defined.enqueue("t")
    _, lease = claim_one(defined, lease_s=10)
    clock.advance(10)
    defined.heartbeat(lease, lease_s=10)  # expiry == now is still live
    clock.advance(10.000001)
    before = defined.store.head_position()
    for write in (
        lambda: defined.heartbeat(lease),
        lambda: defined.progress(lease, done=1),
        lambda: defined.succeed(lease),
        lambda: defined.fail(lease, TRANSIENT),
        lambda: defined.release(lease),
    ):
        with pytest.raises(LeaseOwnerMismatchError):
            write()
    assert defined.store.head_position() == before


def test_a_lost_claim_makes_the_old_workers_writes_no_ops(
    defined: Ledger, clock: FakeClock
) -> None:
    """Reaped and re-claimed by B: A's succeed/fail/heartbeat are rejected, nothing appended."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    _, lease_a = claim_one(defined, "worker-A", lease_s=10)
    clock.advance(11)
    [reaped] = defined.reap_expired(retry_delay_s=0)
    assert reaped.status is JobStatus.PENDING
    job_b, lease_b = claim_one(defined, "worker-B")
    before = defined.store.head_position()
    with pytest.raises(LeaseOwnerMismatchError) as caught:
        defined.succeed(lease_a, output={"from": "A"})
    assert caught.value.code == "job.lease_owner_mismatch"
    with pytest.raises(LeaseOwnerMismatchError):
        defined.fail(lease_a, TRANSIENT)
    with pytest.raises(LeaseOwnerMismatchError):
        defined.heartbeat(lease_a)
    assert defined.store.head_position() == before
    assert defined.get(job_id) == job_b
    assert defined.succeed(lease_b).worker_id == "worker-B"


def test_a_cancelled_job_rejects_its_workers_writes(defined: Ledger) -> None:
    """Cancel of a leased job: the worker's completion is fenced out."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    _, lease = claim_one(defined)
    defined.cancel(job_id, reason="operator")
    with pytest.raises(LeaseOwnerMismatchError, match="cancelled"):
        defined.succeed(lease)
    state = defined.get(job_id)
    assert state is not None and state.status is JobStatus.CANCELLED


def test_batch_heartbeat_renews_every_live_lease_and_reports_the_lost_ones(
    defined: Ledger, clock: FakeClock
) -> None:
    """heartbeat_many: one transaction, one event per job, rejected leases reported per job."""
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(3)])
    jobs = defined.claim("w", limit=3, lease_s=10)
    leases = [job.lease for job in jobs if job.lease is not None]
    defined.cancel(leases[1].job_id)
    clock.advance(5)
    before = defined.store.head_position()
    result = defined.heartbeat_many(leases, lease_s=10)
    assert {s.job_id for s in result.accepted} == {leases[0].job_id, leases[2].job_id}
    assert list(result.rejected) == [leases[1].job_id]
    # A cancel under the lease: the fence's refusal in its own form (job.cancelled).
    assert isinstance(result.rejected[leases[1].job_id], LeaseOwnerMismatchError)
    assert result.rejected[leases[1].job_id].code == "job.cancelled"
    assert defined.store.head_position() == before + 2
    for state in result.accepted:
        assert state.lease_expires_at == clock.now() + timedelta(seconds=10)


def test_batch_success_records_each_and_appends_nothing_for_fenced_ones(
    defined: Ledger, clock: FakeClock
) -> None:
    """succeed_many commits the valid completions; a stale one is rejected with no event."""
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(4)])
    jobs = defined.claim("w", limit=4)
    leases = [job.lease for job in jobs if job.lease is not None]
    stale = Lease(leases[3].job_id, 1, 1, "someone-else")
    before = defined.store.head_position()
    result = defined.succeed_many(
        [Completion(lease, output={"i": i}) for i, lease in enumerate(leases[:3])]
        + [Completion(stale)]
    )
    assert len(result.accepted) == 3 and list(result.rejected) == [stale.job_id]
    assert defined.store.head_position() == before + 3
    assert defined.counts() == {"succeeded": 3, "leased": 1}
