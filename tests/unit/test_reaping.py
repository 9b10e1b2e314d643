"""The reaper's pure half (ledger/core/reaping.py): reaps, deferrals and the report, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import msgspec
import pytest

from ledger.core import decide, lost_attempts
from ledger.core.codec import Record
from ledger.core.errors import DatabaseBusyError, InvalidTransitionError
from ledger.core.events import JobEvent, JobFailed, JobHeartbeated
from ledger.core.reaping import (
    ReaperConfig,
    decide_reap_deferral,
    deferral_cause,
    deferred_error,
    plan_reaps,
    reap_report,
)
from ledger.core.state import IllegalTransitionError, JobState, evolve
from ledger.core.values import DeferralCause, EnqueueRequest, JobDefinition

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def leased_job(
    *, max_attempts: int, running: bool = False, payload: dict[str, object] | None = None
) -> tuple[JobState, list[Record]]:
    """A job leased at T0 for 30 s (optionally running since T0 + 1 s) and its history."""
    definition = JobDefinition(job_type="t", max_attempts=max_attempts)
    request = EnqueueRequest(job_type="t", payload=payload or {})  # type: ignore[arg-type]
    events: list[JobEvent] = [decide.decide_enqueue(uuid4(), request, definition, T0)]
    state = evolve(None, events[0])
    events.append(decide.decide_lease(state, "w", 30, T0))
    state = evolve(state, events[-1])
    if running:
        assert state.lease is not None
        later = T0 + timedelta(seconds=1)
        for event in decide.decide_progress(state, state.lease, later, stage="running"):
            events.append(event)
            state = evolve(state, event)
    records = [Record(state.job_id, n, e) for n, e in enumerate(events, start=1)]
    return state, records


AFTER_EXPIRY = T0 + timedelta(seconds=31)


def test_a_job_with_attempts_left_is_retried_after_the_fixed_delay() -> None:
    """lease_expired, then a retry at now + retry_delay_s (no backoff, no jitter)."""
    state, history = leased_job(max_attempts=3)
    [planned] = plan_reaps([state], {state.job_id: history}, AFTER_EXPIRY, retry_delay_s=45)
    report = reap_report([planned], [], error_sample=20)
    [reaped] = report.reaped
    assert reaped.disposition == "retry_scheduled" and reaped.payload is None
    assert reaped.next_run_at == AFTER_EXPIRY + timedelta(seconds=45)
    assert reaped.failure.code == "job.lease_expired"
    assert (reaped.worker_id, reaped.attempt, reaped.max_attempts) == ("w", 1, 3)
    assert report.processed == 1 and report.dead_lettered == []


def test_a_job_out_of_attempts_is_dead_lettered_with_its_payload() -> None:
    """The last attempt's expiry dead-letters the job; the report carries the payload."""
    state, history = leased_job(max_attempts=1, payload={"lost": True})
    [planned] = plan_reaps([state], {state.job_id: history}, AFTER_EXPIRY, retry_delay_s=45)
    [dead] = reap_report([planned], [], error_sample=20).dead_lettered
    assert dead.disposition == "dead_lettered" and dead.next_run_at is None
    assert dead.payload == {"lost": True}


def test_the_renewal_diagnostic_comes_from_history_and_is_recorded_in_the_events() -> None:
    """Running with no heartbeat since: the flag is true in the plan and in job_failed."""
    bare, bare_history = leased_job(max_attempts=3, running=True)
    idle, idle_history = leased_job(max_attempts=3)
    histories = {bare.job_id: bare_history, idle.job_id: idle_history}
    planned = plan_reaps([bare, idle], histories, AFTER_EXPIRY, retry_delay_s=1)
    assert [p.started_without_renewal_heartbeat for p in planned] == [True, False]
    failed = planned[0].events[0]
    assert isinstance(failed, JobFailed) and failed.started_without_renewal_heartbeat is True


def test_a_lease_ending_exactly_now_is_not_reaped() -> None:
    """Expired means strictly before now: planning a live lease is refused."""
    state, history = leased_job(max_attempts=3)
    with pytest.raises(InvalidTransitionError):
        plan_reaps([state], {state.job_id: history}, T0 + timedelta(seconds=30), retry_delay_s=1)


def test_the_report_samples_deferred_errors_but_counts_them_all() -> None:
    """error_sample caps the listed errors; deferred_error_count stays exact."""
    state, _ = leased_job(max_attempts=3)
    until = AFTER_EXPIRY + timedelta(seconds=60)
    error = DatabaseBusyError("lock timeout", sqlstate="55P03")
    errors = [deferred_error(state, deferral_cause(error), until) for _ in range(5)]
    report = reap_report([], errors, error_sample=2)
    assert report.deferred_error_count == 5 and len(report.deferred_errors) == 2
    first = report.deferred_errors[0]
    assert (first.code, first.sqlstate, first.deferred_until) == ("store.busy", "55P03", until)
    assert (first.run_number, first.attempt) == (state.run_number, state.attempt)


@pytest.mark.parametrize(
    "fields",
    [
        {"limit": 0},
        {"retry_delay_s": -1},
        {"error_sample": -1},
        {"lock_timeout_s": 0},
        {"interval_s": 0},
    ],
)
def test_reaper_config_refuses_nonsense(fields: dict[str, float]) -> None:
    """A limit below 1, negative delays or samples, a zero lock timeout or interval."""
    with pytest.raises(ValueError):
        ReaperConfig(**fields)  # type: ignore[arg-type]


BUSY = DeferralCause(code="store.busy", message="lock timeout", sqlstate="55P03")


def test_a_deferral_pushes_the_lease_out_by_the_retry_delay_and_is_not_a_heartbeat() -> None:
    """job_reap_deferred keeps the lease its holder's (run, attempt, worker), moves only its
    end to now + delay, keeps last_heartbeat_at, and records the error."""
    state, _ = leased_job(max_attempts=3)
    deferral = decide_reap_deferral(state, AFTER_EXPIRY, retry_delay_s=60, cause=BUSY)
    after = evolve(state, deferral)
    assert (deferral.run_number, deferral.attempt, deferral.worker_id) == (1, 1, "w")
    assert deferral.cause == BUSY and deferral.delay_s == 60
    assert after.lease_expires_at == AFTER_EXPIRY + timedelta(seconds=60)
    assert after.last_heartbeat_at == state.last_heartbeat_at == T0
    assert after.status is state.status and after.lease == state.lease
    assert not lost_attempts.lease_is_expired(after, AFTER_EXPIRY + timedelta(seconds=60))


def test_only_an_expired_lease_is_deferred() -> None:
    """A lease ending exactly now is live: deferring it is refused, as reaping it is."""
    state, _ = leased_job(max_attempts=3)
    with pytest.raises(InvalidTransitionError):
        decide_reap_deferral(state, T0 + timedelta(seconds=30), retry_delay_s=60, cause=BUSY)


def test_a_deferral_must_name_the_current_execution() -> None:
    """The fold refuses a deferral of another attempt (a corrupt history)."""
    state, _ = leased_job(max_attempts=3)
    deferral = decide_reap_deferral(state, AFTER_EXPIRY, retry_delay_s=60, cause=BUSY)
    wrong = msgspec.structs.replace(deferral, attempt=2)
    with pytest.raises(IllegalTransitionError, match="attempt 2"):
        evolve(state, wrong)


def test_the_lease_holder_can_renew_a_deferred_lease() -> None:
    """The job was never taken from its worker: its heartbeat passes the fence again."""
    state, _ = leased_job(max_attempts=3)
    after = evolve(state, decide_reap_deferral(state, AFTER_EXPIRY, retry_delay_s=60, cause=BUSY))
    assert after.lease is not None
    beat = decide.decide_heartbeat(after, after.lease, 30, AFTER_EXPIRY + timedelta(seconds=1))
    assert isinstance(beat, JobHeartbeated)
