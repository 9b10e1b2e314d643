"""Decision replay on real ledgers: clean on histories the current code made, and each kind
of alteration reported at exactly the altered event (both backends)."""

from __future__ import annotations

import json
from datetime import timedelta
from uuid import UUID

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from replay_helpers import (
    RETRYABLE,
    append_events,
    insert_raw_events,
    invoke,
    make_histories,
)

from ledger import BackoffPolicy, FailureKind, FakeClock, Ledger
from ledger.core.events import JobDeadLettered, JobFailed, JobHeartbeated, JobRetryScheduled
from ledger.core.lost_attempts import LEASE_EXPIRED_CODE
from ledger.core.replay_findings import ReplayFinding, ReplaySummary
from ledger.core.values import Failure


@pytest.fixture
def histories(db_url: str, clock: FakeClock) -> dict[str, UUID]:
    with Ledger.open(db_url, clock=clock) as ledger:
        return make_histories(ledger, clock, db_url)


@pytest.fixture
def typed(db_url: str, clock: FakeClock) -> None:
    """Only job type ``r`` defined, as :func:`make_histories` defines it."""
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define(
            "r", max_attempts=4, backoff=BackoffPolicy(base_s=5.0, max_s=60.0, jitter=0.5)
        )


def check_all(url: str, batch_size: int = 2) -> ReplaySummary:
    summary = ReplaySummary()
    with Ledger.open(url) as ledger:
        for checked in ledger.replay_check_all(batch_size=batch_size):
            summary.add(checked)
    return summary


def test_histories_made_by_the_current_code_replay_clean(
    db_url: str, histories: dict[str, UUID]
) -> None:
    """Every job, every command (jittered retries, reaps, dead letters, requeues, releases,
    cancels, not_before, auto-define, a changed definition): no finding, job by job and in
    batches smaller than the ledger."""
    summary = check_all(db_url)
    assert summary.findings == []
    assert summary.jobs == len(histories)
    with Ledger.open(db_url) as ledger:
        assert summary.events == sum(len(ledger.history(j)) for j in histories.values())
        for job_id in histories.values():
            assert ledger.replay_check(job_id).findings == []
    result = invoke(db_url, "replay", "--check", "--all", "--batch", "3", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["jobs"], report["findings"]) == (len(histories), [])
    assert result.stderr == ""  # progress per batch only on a terminal
    one_type = invoke(db_url, "replay", "--check", "--all", "--type", "auto.t", "--json")
    assert (json.loads(one_type.stdout)["jobs"], one_type.exit_code) == (1, 0)


def only_finding(url: str, job_id: UUID) -> ReplayFinding:
    with Ledger.open(url) as ledger:
        [finding] = ledger.replay_check(job_id).findings
    assert finding.job_id == job_id
    return finding


def leased_job(ledger: Ledger, max_attempts: int | None = None) -> tuple[UUID, int]:
    """A job of type ``r`` (backoff 5 s ± 50 %) claimed once; its id and attempt."""
    job_id = ledger.enqueue("r", {}, max_attempts=max_attempts).job_id
    assert job_id is not None
    [job] = ledger.claim("w1", types=["r"], lease_s=30)
    assert job.job_id == job_id
    return job_id, job.attempt


def failed(ledger: Ledger, job_id: UUID, failure: Failure = RETRYABLE) -> JobFailed:
    state = ledger.get(job_id)
    assert state is not None and state.worker_id is not None
    return JobFailed(
        at=ledger.clock.now(),
        run_number=state.run_number,
        attempt=state.attempt,
        worker_id=state.worker_id,
        failure=failure,
    )


def test_a_retry_delay_no_policy_allows_is_the_finding(
    db_url: str, histories: dict[str, UUID], clock: FakeClock
) -> None:
    """A retry 1 ms after attempt 1 of a 5 s ± 50 % policy: backoff.out_of_bounds at the
    job_retry_scheduled, and nothing else in the ledger."""
    with Ledger.open(db_url, clock=clock) as ledger:
        job_id, attempt = leased_job(ledger)
        failure = failed(ledger, job_id)
        retry = JobRetryScheduled(
            at=failure.at,
            run_number=1,
            attempt=attempt,
            delay_s=0.001,
            next_run_at=failure.at + timedelta(milliseconds=1),
        )
        versions = append_events(ledger, job_id, [failure, retry])
    finding = only_finding(db_url, job_id)
    assert (finding.version, finding.topic, finding.rule) == (
        versions[1],
        "job_retry_scheduled",
        "backoff.out_of_bounds",
    )
    assert "[2.5, 7.5]" in finding.expected and "delay_s=0.001" in finding.recorded
    assert check_all(db_url).findings == [finding]

    result = invoke(db_url, "replay", "--check", str(job_id))
    assert result.exit_code == 3, result.output
    assert f"job {job_id} event {versions[1]} job_retry_scheduled: backoff.out_of_bounds" in (
        result.stdout
    )
    assert result.stderr.startswith("error: replay.findings: 1 event(s)")


@pytest.mark.usefixtures("typed")
def test_a_dead_letter_with_attempts_left_is_the_finding(db_url: str, clock: FakeClock) -> None:
    """A retryable failure of attempt 1 of 4 recorded as a dead letter."""
    with Ledger.open(db_url, clock=clock) as ledger:
        job_id, attempt = leased_job(ledger)
        failure = failed(ledger, job_id)
        dead = JobDeadLettered(
            at=failure.at, run_number=1, attempt=attempt, failure=failure.failure
        )
        versions = append_events(ledger, job_id, [failure, dead])
    finding = only_finding(db_url, job_id)
    assert (finding.version, finding.topic, finding.rule) == (
        versions[1],
        "job_dead_lettered",
        "outcome.dead_letter_with_attempts_left",
    )
    assert finding.expected.startswith("job_retry_scheduled (attempt 1 of 4")


@pytest.mark.usefixtures("typed")
def test_a_retry_past_max_attempts_is_the_finding(db_url: str, clock: FakeClock) -> None:
    """Attempt 1 of 1 retried (with a delay the policy allows) instead of dead-lettered."""
    with Ledger.open(db_url, clock=clock) as ledger:
        job_id, attempt = leased_job(ledger, max_attempts=1)
        failure = failed(ledger, job_id)
        retry = JobRetryScheduled(
            at=failure.at,
            run_number=1,
            attempt=attempt,
            delay_s=5.0,
            next_run_at=failure.at + timedelta(seconds=5),
        )
        versions = append_events(ledger, job_id, [failure, retry])
    finding = only_finding(db_url, job_id)
    assert (finding.version, finding.topic, finding.rule) == (
        versions[1],
        "job_retry_scheduled",
        "outcome.retry_past_max_attempts",
    )
    assert finding.expected.startswith("job_dead_lettered (attempt 1 of 1")


@pytest.mark.usefixtures("typed")
def test_a_reap_of_a_live_lease_is_the_finding(db_url: str, clock: FakeClock) -> None:
    """A lease_expired failure recorded 10 s into a 30 s lease: reap.lease_live at the
    job_failed."""
    with Ledger.open(db_url, clock=clock) as ledger:
        job_id, attempt = leased_job(ledger)
        state = ledger.get(job_id)
        assert state is not None and state.lease_expires_at is not None
        clock.advance(10)
        reaped = failed(
            ledger,
            job_id,
            Failure(
                kind=FailureKind.LEASE_EXPIRED,
                code=LEASE_EXPIRED_CODE,
                message=f"lease held by w1 expired at {state.lease_expires_at.isoformat()}",
            ),
        )
        reaped = msgspec.structs.replace(reaped, started_without_renewal_heartbeat=False)
        retry = JobRetryScheduled(
            at=reaped.at,
            run_number=1,
            attempt=attempt,
            delay_s=60.0,
            next_run_at=reaped.at + timedelta(seconds=60),
            started_without_renewal_heartbeat=False,
        )
        versions = append_events(ledger, job_id, [reaped, retry])
    finding = only_finding(db_url, job_id)
    assert (finding.version, finding.topic, finding.rule) == (
        versions[0],
        "job_failed",
        "reap.lease_live",
    )
    assert state.lease_expires_at.isoformat() in finding.expected


def test_an_illegal_transition_is_the_finding(
    db_url: str, histories: dict[str, UUID], clock: FakeClock
) -> None:
    """A heartbeat after the job succeeded (inserted without the fold, as a corrupt import
    would): history.illegal_transition at exactly that event; the check stops there."""
    job_id = histories["sync"]
    with Ledger.open(db_url, clock=clock) as ledger:
        done = ledger.get(job_id)
        assert done is not None and done.worker_id is not None
        beat = JobHeartbeated(
            at=clock.now(),
            run_number=done.run_number,
            attempt=done.attempt,
            worker_id=done.worker_id,
            lease_expires_at=clock.now() + timedelta(seconds=30),
        )
        [version] = insert_raw_events(ledger, job_id, [beat])
        assert len(ledger.history(job_id)) == version
    finding = only_finding(db_url, job_id)
    assert (finding.version, finding.topic, finding.rule) == (
        version,
        "job_heartbeated",
        "history.illegal_transition",
    )
    assert "job_heartbeated on a succeeded job" in finding.expected


@pytest.mark.usefixtures("typed")
def test_a_retry_later_than_the_policy_needs_the_failures_not_before(
    db_url: str, clock: FakeClock
) -> None:
    """job_retry_scheduled v2 records the failure's not_before: a retry an hour after
    attempt 1 of a 5 s ± 50 % policy is clean when it is exactly what the failure asked for,
    and backoff.out_of_bounds when nothing asked for it."""
    with Ledger.open(db_url, clock=clock) as ledger:
        asked_id, attempt = leased_job(ledger)
        failure = failed(ledger, asked_id)
        later = failure.at + timedelta(hours=1)
        asked = JobRetryScheduled(
            at=failure.at,
            run_number=1,
            attempt=attempt,
            delay_s=3600.0,
            next_run_at=later,
            not_before=later,
        )
        append_events(ledger, asked_id, [failure, asked])
        unasked_id, attempt = leased_job(ledger)
        failure = failed(ledger, unasked_id)
        unasked = msgspec.structs.replace(asked, at=failure.at, not_before=None)
        versions = append_events(ledger, unasked_id, [failure, unasked])
        assert ledger.replay_check(asked_id).findings == []
    finding = only_finding(db_url, unasked_id)
    assert (finding.version, finding.rule) == (versions[1], "backoff.out_of_bounds")
    assert "none asked" in finding.expected


def insert_v1(ledger: Ledger, job_id: UUID, fields: dict[str, object]) -> None:
    """Store a job_retry_scheduled as v1 wrote it (no not_before), without folding it."""
    with ledger.store.unit_of_work() as uow:
        state = uow.lock_jobs([job_id])[job_id]
        state_bytes = msgspec.msgpack.encode(fields)
        stored = StoredEvent(job_id, state.version + 1, "job_retry_scheduled.v1", state_bytes)
        uow._insert_stored_events([stored], positions_needed=False)


@pytest.mark.usefixtures("typed")
def test_a_v1_retry_event_reads_as_having_asked_for_its_time(db_url: str, clock: FakeClock) -> None:
    """A job_retry_scheduled stored as v1 (before not_before was recorded) upcasts with
    not_before = next_run_at: a late v1 retry is not a finding (v1 could not tell), an early
    one still is."""
    with Ledger.open(db_url, clock=clock) as ledger:
        job_ids = []
        for delay_s in (3600.0, 0.001):
            job_id, attempt = leased_job(ledger)
            failure = failed(ledger, job_id)
            fields = {
                "at": failure.at,
                "run_number": 1,
                "attempt": attempt,
                "delay_s": delay_s,
                "next_run_at": failure.at + timedelta(seconds=delay_s),
                "started_without_renewal_heartbeat": None,
            }
            append_events(ledger, job_id, [failure])
            insert_v1(ledger, job_id, fields)
            job_ids.append(job_id)
        late, early = job_ids
        [retry] = [r.event for r in ledger.history(late) if isinstance(r.event, JobRetryScheduled)]
        assert retry.not_before == retry.next_run_at
        assert ledger.replay_check(late).findings == []
        assert [f.rule for f in ledger.replay_check(early).findings] == ["backoff.out_of_bounds"]
