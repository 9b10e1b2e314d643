"""Failure, retry, dead letter, release, cancel, requeue and reaping on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger import (
    BackoffPolicy,
    Failure,
    FailureKind,
    FakeClock,
    InvalidTransitionError,
    JobStatus,
    Ledger,
)
from ledger.core.events import (
    JobDeadLettered,
    JobFailed,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
)

TRANSIENT = Failure(kind=FailureKind.RETRYABLE, code="downstream.unavailable", message="blip")


def test_retryable_failures_back_off_exponentially_without_jitter(
    defined: Ledger, clock: FakeClock
) -> None:
    """Attempts 1, 2, 3 retry after 10, 20, 40 s (base 10, jitter 0), attempt kept."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    for attempt, delay in ((1, 10), (2, 20), (3, 40)):
        [job] = defined.claim("w")
        assert job.lease is not None and job.attempt == attempt
        failed = defined.fail(job.lease, TRANSIENT)
        assert failed.status is JobStatus.PENDING and failed.attempt == attempt
        assert failed.run_at == clock.now() + timedelta(seconds=delay)
        assert failed.last_error == TRANSIENT
        clock.advance(delay)
    retries = [r.event for r in defined.history(job_id) if isinstance(r.event, JobRetryScheduled)]
    assert [r.delay_s for r in retries] == [10, 20, 40]


def test_jittered_backoff_stays_within_its_bounds(ledger: Ledger, clock: FakeClock) -> None:
    """With jitter 0.25 the recorded delay is within base ± 25%."""
    ledger.define("j", backoff=BackoffPolicy(base_s=100, max_s=1000, jitter=0.25))
    ledger.enqueue("j")
    [job] = ledger.claim("w")
    assert job.lease is not None
    failed = ledger.fail(job.lease, TRANSIENT)
    delay = (failed.run_at - clock.now()).total_seconds()
    assert 75.0 <= delay <= 125.0


def test_max_attempts_one_dies_on_the_first_retryable_failure(defined: Ledger) -> None:
    """failed then dead_lettered; payload and checkpoint kept with the dead job."""
    job_id = defined.enqueue("t", {"doc": 1}, max_attempts=1).job_id
    assert job_id is not None
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.progress(job.lease, checkpoint={"page": 3})
    dead = defined.fail(job.lease, TRANSIENT)
    assert (dead.status, dead.attempt) == (JobStatus.DEAD, 1)
    assert dead.payload == {"doc": 1} and dead.checkpoint == {"page": 3}
    kinds = [type(r.event) for r in defined.history(job_id)][-2:]
    assert kinds == [JobFailed, JobDeadLettered]


@pytest.mark.parametrize("kind", [FailureKind.TERMINAL, FailureKind.PANICKED])
def test_terminal_failures_dead_letter_with_attempts_left(
    defined: Ledger, kind: FailureKind
) -> None:
    """terminal and panicked never retry."""
    defined.enqueue("t", max_attempts=5)
    [job] = defined.claim("w")
    assert job.lease is not None
    dead = defined.fail(job.lease, Failure(kind=kind, code="x.y", message="bad input"))
    assert dead.status is JobStatus.DEAD and dead.attempt == 1


def test_release_puts_the_job_back_at_once_without_consuming_the_attempt(
    defined: Ledger,
) -> None:
    """job_released: pending now, attempt - 1, last error untouched, claimable again."""
    job_id = defined.enqueue("t").job_id
    [job] = defined.claim("w")
    assert job.lease is not None
    released = defined.release(job.lease, reason="shutdown")
    assert (released.status, released.attempt, released.worker_id) == (JobStatus.PENDING, 0, None)
    assert job_id is not None
    assert isinstance(defined.history(job_id)[-1].event, JobReleased)
    [again] = defined.claim("w2")
    assert again.attempt == 1


def test_cancel_and_requeue_start_a_new_run(defined: Ledger) -> None:
    """cancel pending → cancelled; requeue → run 2, attempt 0, claimable; bad states refused."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    cancelled = defined.cancel(job_id, reason="not needed")
    assert cancelled.status is JobStatus.CANCELLED and cancelled.reason == "not needed"
    with pytest.raises(InvalidTransitionError) as caught:
        defined.cancel(job_id)
    assert caught.value.code == "job.invalid_transition"
    requeued = defined.requeue(job_id, reason="needed after all")
    assert (requeued.status, requeued.run_number, requeued.attempt) == (JobStatus.PENDING, 2, 0)
    assert isinstance(defined.history(job_id)[-1].event, JobRequeued)
    with pytest.raises(InvalidTransitionError):
        defined.requeue(job_id)
    [job] = defined.claim("w")
    assert (job.run_number, job.attempt) == (2, 1)


def test_requeue_of_a_dead_job_starts_a_fresh_run(defined: Ledger) -> None:
    """A dead job requeued gets run_number 2 and all its attempts again."""
    job_id = defined.enqueue("t", max_attempts=1).job_id
    assert job_id is not None
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.fail(job.lease, TRANSIENT)
    again = defined.requeue(job_id)
    assert (again.run_number, again.attempt, again.status) == (2, 0, JobStatus.PENDING)


def test_reaper_takes_only_leases_expired_strictly_before_now(
    defined: Ledger, clock: FakeClock
) -> None:
    """At expiry the lease is live; a microsecond later it is reaped with a fixed delay."""
    job_id = defined.enqueue("t").job_id
    defined.claim("w", lease_s=10)
    clock.advance(10)
    assert defined.reap_expired(retry_delay_s=60) == []
    clock.advance(0.000001)
    [reaped] = defined.reap_expired(retry_delay_s=60)
    assert reaped.job_id == job_id and reaped.status is JobStatus.PENDING
    assert reaped.run_at == clock.now() + timedelta(seconds=60)
    assert reaped.last_error is not None and reaped.last_error.code == "job.lease_expired"
    assert [type(r.event) for r in defined.history(job_id)][-2:] == [JobFailed, JobRetryScheduled]


def test_reaper_dead_letters_when_attempts_are_used_up(defined: Ledger, clock: FakeClock) -> None:
    """attempt >= max_attempts: the expired lease is dead-lettered as lease_expired."""
    defined.enqueue("t", max_attempts=1)
    defined.claim("w", lease_s=1)
    clock.advance(2)
    [dead] = defined.reap_expired()
    assert dead.status is JobStatus.DEAD
    assert dead.last_error is not None and dead.last_error.kind is FailureKind.LEASE_EXPIRED


def test_boot_reap_fails_a_started_attempt_as_worker_lost_and_releases_the_rest(
    defined: Ledger, clock: FakeClock
) -> None:
    """A dead process held two claims: the one whose start was recorded spends its attempt
    (worker_lost, retried after the job's backoff without jitter), the one still waiting is
    released free; the history replays clean."""
    started_id = defined.enqueue("t").job_id
    waiting_id = defined.enqueue("t").job_id
    started, waiting = defined.claim("pool@h:1", limit=2)
    assert started.lease is not None and waiting.lease is not None
    assert not defined.start_many([started.lease]).rejected
    clock.advance(1)

    reaped = defined.boot_reap("pool@h:", alive=lambda _: False)

    [lost], [released] = reaped.lost, reaped.released
    assert (lost.job_id, lost.status, lost.attempt) == (started_id, JobStatus.PENDING, 1)
    assert lost.last_error is not None and lost.last_error.code == "job.worker_lost"
    assert lost.last_error.kind is FailureKind.WORKER_LOST
    assert lost.run_at == clock.now() + timedelta(seconds=10)  # base 10 s, attempt 1
    assert (released.job_id, released.status, released.attempt) == (
        waiting_id,
        JobStatus.PENDING,
        0,
    )
    failed = [r.event for r in defined.history(started_id) if isinstance(r.event, JobFailed)]
    assert [f.started_without_renewal_heartbeat for f in failed] == [True]
    for job_id in (started_id, waiting_id):
        assert job_id is not None and defined.replay_check(job_id).findings == []


def test_boot_reap_dead_letters_a_started_attempt_that_was_the_last(
    defined: Ledger, clock: FakeClock
) -> None:
    """max_attempts 1 and the handler had started: the boot reap dead-letters the job as
    worker_lost, its lease expired or not."""
    job_id = defined.enqueue("t", max_attempts=1).job_id
    [job] = defined.claim("pool@h:1", lease_s=5)
    assert job.lease is not None
    defined.progress(job.lease, stage="rendering")  # a handler's own stage counts as started
    clock.advance(60)  # long past the lease

    [dead] = defined.release_claims_with_prefix("pool@h:", alive=lambda _: False)

    assert (dead.job_id, dead.status) == (job_id, JobStatus.DEAD)
    assert dead.last_error is not None and dead.last_error.code == "job.worker_lost"
    assert [type(r.event) for r in defined.history(job.job_id)][-2:] == [
        JobFailed,
        JobDeadLettered,
    ]
    assert defined.replay_check(job.job_id).findings == []


def test_start_is_fenced(defined: Ledger, clock: FakeClock) -> None:
    """start_many records stage running once per live lease and refuses a lease that has
    been taken back (the pool then does not start the handler)."""
    defined.enqueue("t")
    [job] = defined.claim("w", lease_s=5)
    assert job.lease is not None
    result = defined.start_many([job.lease])
    assert [s.stage for s in result.accepted] == ["running"] and not result.rejected
    assert not defined.start_many([job.lease]).rejected  # again: nothing appended
    assert len(defined.history(job.job_id)) == 3
    clock.advance(10)
    defined.reap_expired()
    assert job.job_id in defined.start_many([job.lease]).rejected


def test_claim_records_the_start_of_the_jobs_it_hands_to_waiting_slots(defined: Ledger) -> None:
    """claim(starting=1) of two jobs: the first is leased and started in the claim's
    transaction (a boot reap then spends its attempt), the second only leased (released free);
    both histories replay clean."""
    for _ in range(2):
        defined.enqueue("t")
    first, second = defined.claim("pool@h:1", limit=2, starting=1)
    assert (first.stage, second.stage) == ("running", "claimed")

    reaped = defined.boot_reap("pool@h:", alive=lambda _: False)

    assert [s.job_id for s in reaped.lost] == [first.job_id]
    assert [s.job_id for s in reaped.released] == [second.job_id]
    for job in (first, second):
        assert defined.replay_check(job.job_id).findings == []


def test_boot_reap_releases_a_dead_process_claims_without_consuming_attempts(
    defined: Ledger,
) -> None:
    """release_claims_with_prefix: a dead worker's jobs go back to pending, attempt not
    consumed; a live worker's and another pool's stay leased."""
    for _ in range(3):
        defined.enqueue("t")
    [dead] = defined.claim("ghost-1")
    defined.claim("ghost-2")  # same prefix, still alive
    defined.claim("other-pool")
    [released] = defined.release_claims_with_prefix(
        "ghost-", alive=lambda worker_id: worker_id != "ghost-1"
    )
    assert released.job_id == dead.job_id
    assert (released.status, released.attempt) == (JobStatus.PENDING, 0)
    assert defined.counts() == {"pending": 1, "leased": 2}
