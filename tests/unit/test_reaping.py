"""The reaper's pure half (ledger/core/reaping.py) and its deferral memory, with no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from ledger.api.reaping import DeferredJobs
from ledger.core import decide
from ledger.core.codec import Record
from ledger.core.errors import DatabaseBusyError, InvalidTransitionError
from ledger.core.events import EnqueueRequest, JobDefinition, JobEvent, JobFailed
from ledger.core.reaping import (
    ReaperConfig,
    deferred_error,
    plan_reaps,
    reap_report,
)
from ledger.core.state import JobState, evolve

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
    errors = [deferred_error(state, error, until) for _ in range(5)]
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


def test_deferred_jobs_are_skipped_until_their_time_has_come() -> None:
    """A job deferred until T is active strictly before T and forgotten at T."""
    memory = DeferredJobs()
    job_id, until = UUID(int=1), T0 + timedelta(seconds=60)
    memory.defer(job_id, until)
    assert memory.active(until - timedelta(microseconds=1)) == [job_id]
    assert memory.active(until) == []
    assert memory.active(T0) == [], "forgotten for good, not only hidden"
