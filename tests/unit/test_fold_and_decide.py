"""The pure core: evolve/fold and the decisions, with no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import decide, lost_attempts
from ledger.core import state as state_module
from ledger.core.errors import (
    DefinitionNotFoundError,
    InvalidRequestError,
    InvalidTransitionError,
    LeaseOwnerMismatchError,
    LedgerError,
)
from ledger.core.events import (
    JOB_EVENTS,
    JobDeadLettered,
    JobEvent,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobRetryScheduled,
    JobStageChanged,
    JobTypeDefined,
)
from ledger.core.requests import MAX_PAYLOAD_BYTES, normalise_request
from ledger.core.state import IllegalTransitionError, JobState, Lease, evolve, fold
from ledger.core.values import (
    BackoffPolicy,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobDefinition,
    JobStatus,
    Stage,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITION = JobDefinition(job_type="t", backoff=BackoffPolicy(base_s=10, max_s=100, jitter=0))


def enqueued(**request: object) -> tuple[JobState, list[JobEvent]]:
    req = normalise_request(EnqueueRequest(job_type="t", **request))  # type: ignore[arg-type]
    event = decide.decide_enqueue(uuid4(), req, DEFINITION, T0)
    state = evolve(None, event)
    return state, [event]


def leased(state: JobState, worker: str = "w", at: datetime = T0) -> JobState:
    return evolve(state, decide.decide_lease(state, worker, 30, at))


def test_enqueue_resolves_unset_fields_from_the_definition() -> None:
    """priority, max_attempts, timeout and backoff come from the job type unless requested."""
    state, _ = enqueued()
    assert (state.priority, state.max_attempts, state.timeout_s) == (100, 8, 900.0)
    assert state.backoff == DEFINITION.backoff
    assert state.run_at == T0
    assert state.status is JobStatus.PENDING and state.stage == Stage.QUEUED
    assert (state.run_number, state.attempt, state.version) == (1, 0, 1)


def test_enqueue_keeps_the_request_verbatim_and_resolves_delay() -> None:
    """The request is kept as asked; delay_s resolves to run_at = now + delay."""
    state, _ = enqueued(priority=5, delay_s=30.0, max_attempts=2)
    assert state.request.priority == 5 and state.request.max_attempts == 2
    assert state.request.run_at is None and state.request.delay_s == 30.0
    assert state.run_at == T0 + timedelta(seconds=30)


def test_enqueue_of_an_unknown_or_disabled_type_fails_with_the_stable_code() -> None:
    """job.definition_not_found_or_disabled for both cases."""
    request = EnqueueRequest(job_type="t")
    with pytest.raises(DefinitionNotFoundError) as unknown:
        decide.decide_enqueue(uuid4(), request, None, T0)
    assert unknown.value.code == "job.definition_not_found_or_disabled"
    disabled = JobDefinition(job_type="t", enabled=False)
    with pytest.raises(DefinitionNotFoundError, match="disabled"):
        decide.decide_enqueue(uuid4(), request, disabled, T0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"job_type": ""}, "job_type"),
        ({"job_type": "t", "payload": ["not", "an", "object"]}, "JSON object"),
        ({"job_type": "t", "payload": {"x": "y" * (MAX_PAYLOAD_BYTES + 1)}}, "limit"),
        ({"job_type": "t", "priority": 2**40}, "priority"),
        ({"job_type": "t", "max_attempts": 0}, "max_attempts"),
        ({"job_type": "t", "timeout_s": 0.0}, "timeout_s"),
        ({"job_type": "t", "delay_s": -1.0}, "delay_s"),
        ({"job_type": "t", "delay_s": 1.0, "run_at": T0}, "not both"),
        ({"job_type": "t", "run_at": datetime(2026, 1, 1)}, "time zone"),
        ({"job_type": "t", "idempotency_key": ""}, "idempotency_key"),
    ],
)
def test_bad_requests_are_refused_before_any_decision(
    fields: dict[str, object], message: str
) -> None:
    """Malformed fields raise InvalidRequestError naming the field."""
    with pytest.raises(InvalidRequestError, match=message):
        normalise_request(EnqueueRequest(**fields))  # type: ignore[arg-type]


def test_lease_increments_the_attempt_and_counts_as_first_heartbeat() -> None:
    """A claim sets attempt+1, the worker, the lease expiry and last_heartbeat_at."""
    state = leased(enqueued()[0], "w1")
    assert state.status is JobStatus.LEASED and state.stage == Stage.CLAIMED
    assert (state.attempt, state.worker_id) == (1, "w1")
    assert state.lease_expires_at == T0 + timedelta(seconds=30)
    assert state.last_heartbeat_at == T0


def test_a_job_scheduled_for_later_is_not_claimable_yet() -> None:
    """decide_lease refuses a job whose run_at is in the future."""
    state, _ = enqueued(delay_s=5.0)
    with pytest.raises(InvalidTransitionError):
        decide.decide_lease(state, "w", 30, T0)
    assert decide.decide_lease(state, "w", 30, T0 + timedelta(seconds=5)).attempt == 1


def test_progress_and_stage_do_not_extend_the_lease_or_count_as_heartbeats() -> None:
    """Only job_heartbeated moves lease_expires_at and last_heartbeat_at."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    later = T0 + timedelta(seconds=10)
    events = decide.decide_progress(
        state, state.lease, later, stage="running", done=1, total=4, checkpoint={"page": 2}
    )
    assert [type(e) for e in events] == [JobStageChanged, JobProgressed]
    after = fold(events, state)
    assert after is not None
    assert after.lease_expires_at == state.lease_expires_at
    assert after.last_heartbeat_at == T0
    assert (after.progress_done, after.progress_total, after.checkpoint) == (1, 4, {"page": 2})
    beat = evolve(after, decide.decide_heartbeat(after, state.lease, 30, later))
    assert beat.last_heartbeat_at == later
    assert beat.lease_expires_at == later + timedelta(seconds=30)


def test_running_stage_records_the_start_time_only_the_first_time() -> None:
    """started_at is the first stage_changed(running) of the attempt."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    t1, t2, t3 = (T0 + timedelta(seconds=s) for s in (1, 2, 3))
    state = fold(decide.decide_progress(state, state.lease, t1, stage="running"), state)
    assert state is not None
    state = fold(decide.decide_progress(state, state.lease, t2, stage="parsing"), state)
    assert state is not None
    state = fold(decide.decide_progress(state, state.lease, t3, stage="running"), state)
    assert state is not None and state.started_at == t1


def test_fence_rejects_another_worker_another_attempt_and_an_expired_lease() -> None:
    """Every worker write presents (job, run, attempt, worker) and needs a live lease."""
    state = leased(enqueued()[0], "w1")
    lease = state.lease
    assert lease is not None
    wrong = [
        Lease(lease.job_id, lease.run_number, lease.attempt, "w2"),
        Lease(lease.job_id, lease.run_number, lease.attempt + 1, "w1"),
        Lease(lease.job_id, lease.run_number + 1, lease.attempt, "w1"),
    ]
    for bad in wrong:
        with pytest.raises(LeaseOwnerMismatchError) as caught:
            decide.decide_succeed(state, bad, T0)
        assert caught.value.code == "job.lease_owner_mismatch"
    assert state.lease_expires_at is not None
    decide.check_fence(state, lease, state.lease_expires_at)  # equal: still live
    with pytest.raises(LeaseOwnerMismatchError, match="expired"):
        decide.check_fence(state, lease, state.lease_expires_at + timedelta(microseconds=1))


def test_retryable_failure_schedules_a_retry_with_backoff_keeping_the_attempt() -> None:
    """failed then retry_scheduled at now + backoff(attempt); attempt counter kept."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    failure = Failure(kind=FailureKind.RETRYABLE, code="x", message="blip")
    events = decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5)
    assert [type(e) for e in events] == [JobFailed, JobRetryScheduled]
    after = fold(events, state)
    assert after is not None
    assert after.status is JobStatus.PENDING and after.attempt == 1
    assert after.run_at == T0 + timedelta(seconds=10)
    assert after.last_error == failure and after.worker_id is None


def test_handler_not_before_can_delay_a_retry_but_never_hasten_it() -> None:
    """next_run_at = max(now + backoff, not_before)."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    failure = Failure(kind=FailureKind.RETRYABLE, code="x", message="later")
    late = T0 + timedelta(hours=1)
    events = decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5, not_before=late)
    retry = events[1]
    assert isinstance(retry, JobRetryScheduled) and retry.next_run_at == late
    assert retry.delay_s == 3600.0
    early = T0 + timedelta(seconds=1)
    events = decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5, not_before=early)
    retry = events[1]
    assert isinstance(retry, JobRetryScheduled)
    assert retry.next_run_at == T0 + timedelta(seconds=10)


@pytest.mark.parametrize("kind", [FailureKind.TERMINAL, FailureKind.PANICKED])
def test_terminal_and_panicked_failures_dead_letter_at_once(kind: FailureKind) -> None:
    """Non-retryable kinds dead-letter whatever attempts remain."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    failure = Failure(kind=kind, code="x", message="no")
    events = decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5)
    assert isinstance(events[1], JobDeadLettered)
    after = fold(events, state)
    assert after is not None and after.status is JobStatus.DEAD


def test_max_attempts_one_dies_on_the_first_retryable_failure() -> None:
    """attempt >= max_attempts dead-letters even a retryable failure."""
    state = leased(enqueued(max_attempts=1)[0])
    assert state.lease is not None
    failure = Failure(kind=FailureKind.TIMEOUT, code="job.timeout_exceeded", message="slow")
    events = decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5)
    after = fold(events, state)
    assert after is not None and after.status is JobStatus.DEAD and after.attempt == 1
    assert after.payload == {} and after.last_error == failure


def test_release_returns_the_job_without_consuming_the_attempt() -> None:
    """job_released: leased -> pending, attempt - 1, last error untouched."""
    state = leased(enqueued()[0])
    assert state.lease is not None
    failure = Failure(kind=FailureKind.RETRYABLE, code="x", message="first")
    state = fold(decide.decide_fail(state, state.lease, T0, failure, jitter_draw=0.5), state)
    assert state is not None
    state = leased(state, "w2", T0 + timedelta(seconds=10))
    assert state.lease is not None and state.attempt == 2
    released = evolve(state, decide.decide_release(state, state.lease, T0, "shutdown"))
    assert released.status is JobStatus.PENDING
    assert released.attempt == 1 and released.worker_id is None
    assert released.last_error == failure


def test_cancel_and_requeue_start_a_new_run() -> None:
    """Cancel ends a live job; requeue of a dead/cancelled job starts run 2 at attempt 0."""
    state = leased(enqueued()[0])
    cancelled = evolve(state, decide.decide_cancel(state, T0, "operator"))
    assert cancelled.status is JobStatus.CANCELLED and cancelled.lease is None
    with pytest.raises(InvalidTransitionError):
        decide.decide_cancel(cancelled, T0, "again")
    requeued = evolve(cancelled, decide.decide_requeue(cancelled, T0, "retry it"))
    assert (requeued.status, requeued.run_number, requeued.attempt) == (JobStatus.PENDING, 2, 0)
    with pytest.raises(InvalidTransitionError):
        decide.decide_requeue(requeued, T0, "not dead")


def test_reap_only_takes_leases_that_ended_strictly_before_now() -> None:
    """lease_expires_at == now is not expired; a microsecond later it is."""
    state = leased(enqueued()[0])
    assert state.lease_expires_at is not None
    assert not lost_attempts.lease_is_expired(state, state.lease_expires_at)
    later = state.lease_expires_at + timedelta(microseconds=1)
    events = lost_attempts.decide_reap(state, later, retry_delay_s=60)
    failed = events[0]
    assert isinstance(failed, JobFailed)
    assert failed.failure.kind is FailureKind.LEASE_EXPIRED
    assert failed.failure.code == "job.lease_expired"
    assert isinstance(events[1], JobRetryScheduled) and events[1].delay_s == 60


def test_illegal_transitions_are_refused_by_the_fold() -> None:
    """evolve refuses events that cannot follow the state (a corrupt history)."""
    state, _ = enqueued()
    with pytest.raises(IllegalTransitionError):
        evolve(
            None, JobHeartbeated(at=T0, run_number=1, attempt=1, worker_id="w", lease_expires_at=T0)
        )
    with pytest.raises(IllegalTransitionError):
        evolve(
            state,
            JobHeartbeated(at=T0, run_number=1, attempt=1, worker_id="w", lease_expires_at=T0),
        )
    with pytest.raises(IllegalTransitionError):
        evolve(state, JobLeased(at=T0, run_number=1, attempt=3, worker_id="w", lease_expires_at=T0))


def test_every_job_event_has_its_transition_and_nothing_else_folds() -> None:
    """The fold's table holds every job event; a job-type event is refused as no job event."""
    assert set(state_module._APPLY) == set(JOB_EVENTS)
    defined = JobTypeDefined(at=T0, definition=JobDefinition(job_type="t"))
    with pytest.raises(IllegalTransitionError, match="not a job event: JobTypeDefined"):
        evolve(None, defined)  # type: ignore[arg-type]


# --- property: no sequence of decisions yields an illegal state --------------------------

COMMANDS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "enqueue",
                "lease",
                "heartbeat",
                "progress",
                "succeed",
                "fail",
                "release",
                "cancel",
                "requeue",
                "reap",
                "advance",
            ]
        ),
        st.integers(min_value=0, max_value=4),
        st.sampled_from(list(FailureKind)),
        st.floats(min_value=0, max_value=0.999),
    ),
    max_size=60,
)


def _apply(
    command: str, state: JobState, index: int, kind: FailureKind, *, draw: float, now: datetime
) -> list[JobEvent]:
    lease = state.lease or Lease(state.job_id, state.run_number, state.attempt, "w")
    if command == "lease":
        return [decide.decide_lease(state, f"w{index}", 30, now)]
    if command == "heartbeat":
        return [decide.decide_heartbeat(state, lease, 30, now)]
    if command == "progress":
        return decide.decide_progress(state, lease, now, stage="running", done=index)
    if command == "succeed":
        return [decide.decide_succeed(state, lease, now, output={"i": index})]
    if command == "fail":
        return decide.decide_fail(
            state, lease, now, Failure(kind=kind, code="c", message="m"), jitter_draw=draw
        )
    if command == "release":
        return [decide.decide_release(state, lease, now, "r")]
    if command == "cancel":
        return [decide.decide_cancel(state, now, "c")]
    if command == "requeue":
        return [decide.decide_requeue(state, now, "q")]
    if command == "reap":
        return lost_attempts.decide_reap(state, now, retry_delay_s=5)
    raise AssertionError(command)


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_no_sequence_of_decisions_yields_an_illegal_state(
    commands: list[tuple[str, int, FailureKind, float]],
) -> None:
    """Random command sequences: every decided event folds; invariants hold throughout."""
    now = T0
    histories: dict[UUID, list[JobEvent]] = {}
    states: dict[UUID, JobState] = {}
    for command, index, kind, draw in commands:
        if command == "advance":
            now += timedelta(seconds=index * 20)
            continue
        if command == "enqueue" or not states:
            request = EnqueueRequest(job_type="t", max_attempts=index + 1)
            event = decide.decide_enqueue(uuid4(), request, DEFINITION, now)
            states[event.job_id] = evolve(None, event)
            histories[event.job_id] = [event]
            continue
        job_id = list(states)[index % len(states)]
        try:
            events = _apply(command, states[job_id], index, kind, draw=draw, now=now)
        except LedgerError:
            continue
        for event in events:
            states[job_id] = evolve(states[job_id], event)
        histories[job_id].extend(events)

    for job_id, state in states.items():
        assert fold(histories[job_id]) == state
        assert state.version == len(histories[job_id])
        assert 0 <= state.attempt <= state.max_attempts
        if state.status is JobStatus.LEASED:
            assert state.worker_id is not None and state.lease_expires_at is not None
        else:
            assert state.lease_expires_at is None
        if state.status is JobStatus.PENDING:
            assert state.worker_id is None
        if state.status in (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED):
            assert state.finished_at is not None
