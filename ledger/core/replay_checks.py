"""Decision replay's per-command checks: infer the command behind one recorded event (or a
``job_failed`` + outcome pair), re-run the same pure decision with the recorded time, and
raise a :class:`~ledger.core.replay_findings.MismatchError` where the result differs.

The two inputs a history does not record are bounded instead: a worker failure's jitter draw
(the recorded retry delay must lie within the policy's bounds for that attempt, or end exactly
at the failure's recorded ``not_before``, ``job_retry_scheduled`` v2), and the lengths of leases
and the reaper's fixed delay (read back from the event itself, as is a reap deferral's).
Apart from the walk (:mod:`ledger.core.decision_replay`) so each command's rule reads on its
own. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import msgspec

from ledger.core import decide, diagnostics, lost_attempts
from ledger.core.backoff import delay_bounds
from ledger.core.codec import Record
from ledger.core.errors import LedgerError
from ledger.core.events import (
    JobCancelled,
    JobDeadLettered,
    JobEnqueued,
    JobEvent,
    JobFailed,
    JobHandlerStopped,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobReapDeferred,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
)
from ledger.core.reaping import decide_reap_deferral
from ledger.core.replay_findings import MismatchError, compare, describe, describe_value
from ledger.core.requests import normalise_request
from ledger.core.state import JobState, Lease
from ledger.core.values import EnqueueRequest, FailureKind, JobDefinition
from ledger.core.workflows.ids import step_job_id

DELAY_TOLERANCE_S = 1e-6
"""Slack on the backoff bounds: delays are floats, times are whole microseconds."""


def check_group(
    state: JobState | None,
    events: list[JobEvent],
    prefix: Sequence[Record],
    definitions: Sequence[tuple[datetime, JobDefinition]],
) -> None:
    """Check the events one command recorded (``events``) against the current decision,
    given the state before them and the events before them (``prefix``)."""
    first = events[0]
    if isinstance(first, JobEnqueued) and first.workflow is not None:
        _check_step_enqueue(first)
        return
    if isinstance(first, JobEnqueued):
        _check_enqueue(first, definitions)
        return
    assert state is not None  # the fold accepted the event, so the job exists
    if isinstance(first, JobFailed):
        if len(events) < 2:
            raise MismatchError(
                "group.failure_without_outcome",
                "job_failed followed, in the same command, by job_retry_scheduled or "
                "job_dead_lettered",
                describe(first, ["attempt", "failure"]),
            )
        if first.failure.kind is FailureKind.LEASE_EXPIRED:
            _check_reap(state, first, events[1], prefix)
        elif first.failure.kind is FailureKind.WORKER_LOST:
            _check_worker_lost(state, first, events[1], prefix)
        else:
            _check_worker_failure(state, first, events[1])
        return
    _check_single(state, first)


# --- running a decision ---------------------------------------------------------------------


def _refused(error: LedgerError, recorded: Sequence[JobEvent]) -> MismatchError:
    return MismatchError(
        "decision.refused",
        f"refused: {error}",
        " + ".join(describe(e) for e in recorded),
    )


def _decided(
    decision: Callable[[], Sequence[JobEvent] | JobEvent], recorded: Sequence[JobEvent]
) -> list[JobEvent]:
    try:
        produced = decision()
    except LedgerError as error:
        raise _refused(error, recorded) from None
    return [produced] if isinstance(produced, JobEvent) else list(produced)


def _lease_s(event: JobLeased | JobHeartbeated) -> float:
    # The lease length is an argument of the command, not recorded: read it back.
    return (event.lease_expires_at - event.at).total_seconds()


# --- enqueue --------------------------------------------------------------------------------


def _definition_candidates(
    definitions: Sequence[tuple[datetime, JobDefinition]], event: JobEnqueued
) -> list[JobDefinition]:
    """The definition in effect at the enqueue's time first, then any other of the version it
    names: an enqueue that does not serialise appends may read a definition committed just
    after its clock reading (PostgreSQL)."""
    in_effect = [d for at, d in definitions if at <= event.at]
    first = in_effect[-1:] if in_effect else []
    others = [
        d
        for _, d in definitions
        if d.version == event.definition_version and all(d is not f for f in first)
    ]
    return first + others


def _check_enqueue(
    event: JobEnqueued, definitions: Sequence[tuple[datetime, JobDefinition]]
) -> None:
    try:
        request = normalise_request(event.request)
    except LedgerError as error:
        raise _refused(error, [event]) from None
    candidates = _definition_candidates(definitions, event)
    if not candidates:
        raise MismatchError(
            "decision.refused",
            f"refused: job type {event.request.job_type!r} has no definition at {event.at}",
            describe(event),
        )
    first: MismatchError | None = None
    for definition in candidates:
        try:
            compare(_decided(_enqueue_decision(event, request, definition), [event]), [event])
            return
        except MismatchError as mismatch:
            first = first or mismatch
    assert first is not None
    raise first


def _check_step_enqueue(event: JobEnqueued) -> None:
    """A step's job is enqueued by its run's release, with the settings frozen at the run's
    submit (not the definitions at the time): here only its id is checked, derived from the
    run and the step. (The release itself is the run's, re-decided over the run's stream by
    :mod:`ledger.core.workflow_replay`.)"""
    link = event.workflow
    assert link is not None
    expected = step_job_id(link.run_id, link.step_key)
    if event.job_id != expected:
        raise MismatchError(
            "decision.differs",
            f"job_enqueued job_id={expected} (step {link.step_key!r} of run {link.run_id})",
            f"job_enqueued job_id={event.job_id}",
        )


def _enqueue_decision(
    event: JobEnqueued, request: EnqueueRequest, definition: JobDefinition
) -> Callable[[], JobEvent]:
    return lambda: decide.decide_enqueue(event.job_id, request, definition, event.at, event.actor)


# --- failures: a worker's, the reaper's -----------------------------------------------------


def _retry_expected(state: JobState, failure_kind: FailureKind) -> str:
    low, high = delay_bounds(state.backoff, state.attempt)
    why = (
        f"attempt {state.attempt} of {state.max_attempts}"
        if failure_kind.is_retryable
        else f"a {failure_kind} failure"
    )
    return f"job_retry_scheduled ({why}; delay_s in [{low:g}, {high:g}])"


def _check_worker_failure(state: JobState, failed: JobFailed, outcome: JobEvent) -> None:
    lease = Lease(state.job_id, failed.run_number, failed.attempt, failed.worker_id)
    not_before: datetime | None = None
    within_bounds = False
    if isinstance(outcome, JobRetryScheduled):
        low, high = delay_bounds(state.backoff, state.attempt)
        if outcome.next_run_at != failed.at + timedelta(seconds=outcome.delay_s):
            raise MismatchError(
                "backoff.inconsistent",
                f"next_run_at={(failed.at + timedelta(seconds=outcome.delay_s)).isoformat()}",
                describe(outcome, ["delay_s", "next_run_at"]),
                1,
            )
        bounds = (
            f"delay_s in [{low:g}, {high:g}] for attempt {state.attempt} "
            f"(backoff {describe_value(state.backoff)})"
        )
        if not math.isfinite(outcome.delay_s) or outcome.delay_s < low - DELAY_TOLERANCE_S:
            raise MismatchError(
                "backoff.out_of_bounds",
                bounds,
                describe(outcome, ["delay_s", "next_run_at"]),
                1,
            )
        not_before = outcome.not_before
        within_bounds = outcome.delay_s <= high + DELAY_TOLERANCE_S
        if not within_bounds and outcome.next_run_at != not_before:
            # Past the policy only as far as the failure's own not_before (recorded since
            # job_retry_scheduled v2; a v1 event reads as having asked for what it got).
            raise MismatchError(
                "backoff.out_of_bounds",
                f"{bounds}, or next_run_at = the failure's not_before "
                f"({not_before.isoformat() if not_before else 'none asked'})",
                describe(outcome, ["delay_s", "next_run_at", "not_before"]),
                1,
            )
    expected = _decided(
        lambda: decide.decide_fail(
            state, lease, failed.at, failed.failure, jitter_draw=0.5, not_before=not_before
        ),
        [failed, outcome],
    )
    want = expected[1]
    if isinstance(want, JobDeadLettered) and isinstance(outcome, JobRetryScheduled):
        rule = (
            "outcome.retry_past_max_attempts"
            if failed.failure.kind.is_retryable
            else "outcome.retry_of_permanent_failure"
        )
        raise MismatchError(
            rule,
            f"job_dead_lettered (attempt {state.attempt} of {state.max_attempts}, "
            f"failure kind {failed.failure.kind})",
            describe(outcome, ["attempt", "delay_s", "next_run_at"]),
            1,
        )
    if isinstance(want, JobRetryScheduled) and isinstance(outcome, JobDeadLettered):
        raise MismatchError(
            "outcome.dead_letter_with_attempts_left",
            _retry_expected(state, failed.failure.kind),
            describe(outcome, ["attempt", "failure"]),
            1,
        )
    if (
        isinstance(want, JobRetryScheduled)
        and isinstance(outcome, JobRetryScheduled)
        and within_bounds
    ):
        # Within the bounds, the recorded delay is the jitter draw's: take it as given.
        expected[1] = msgspec.structs.replace(
            want, delay_s=outcome.delay_s, next_run_at=outcome.next_run_at
        )
    compare(expected, [failed, outcome])


def _check_reap(
    state: JobState, failed: JobFailed, outcome: JobEvent, prefix: Sequence[Record]
) -> None:
    if not lost_attempts.lease_is_expired(state, failed.at):
        expires = state.lease_expires_at.isoformat() if state.lease_expires_at else "never"
        raise MismatchError(
            "reap.lease_live",
            f"no reap: the lease runs until {expires}, not strictly before {failed.at}",
            describe(failed, ["worker_id", "failure"]),
        )
    # The reaper's delay is its configuration, not recorded apart from the event: read back.
    delay = outcome.delay_s if isinstance(outcome, JobRetryScheduled) else 0.0
    flag = bool(diagnostics.started_without_renewal_heartbeat(prefix).value)
    expected = _decided(
        lambda: lost_attempts.decide_reap(
            state, failed.at, retry_delay_s=delay, started_without_renewal_heartbeat=flag
        ),
        [failed, outcome],
    )
    want = expected[1]
    if isinstance(want, JobDeadLettered) and isinstance(outcome, JobRetryScheduled):
        raise MismatchError(
            "outcome.retry_past_max_attempts",
            f"job_dead_lettered (attempt {state.attempt} of {state.max_attempts})",
            describe(outcome, ["attempt", "delay_s"]),
            1,
        )
    if isinstance(want, JobRetryScheduled) and isinstance(outcome, JobDeadLettered):
        raise MismatchError(
            "outcome.dead_letter_with_attempts_left",
            f"job_retry_scheduled (attempt {state.attempt} of {state.max_attempts})",
            describe(outcome, ["attempt", "failure"]),
            1,
        )
    compare(expected, [failed, outcome])


def _check_worker_lost(
    state: JobState, failed: JobFailed, outcome: JobEvent, prefix: Sequence[Record]
) -> None:
    """A boot reap's failure of an attempt whose handler had started: the same decision over
    the same state, its flag derived from the same history (no random draw to bound)."""
    flag = bool(diagnostics.started_without_renewal_heartbeat(prefix).value)
    expected = _decided(
        lambda: lost_attempts.decide_worker_lost(
            state, failed.at, started_without_renewal_heartbeat=flag
        ),
        [failed, outcome],
    )
    compare(expected, [failed, outcome])


def _check_reap_deferral(state: JobState, event: JobReapDeferred) -> None:
    """A deferral defers an expired lease only, and pushes it out by exactly its recorded
    delay (the reaper's retry delay, read back from the event as for a reap's retry)."""
    if not lost_attempts.lease_is_expired(state, event.at):
        expires = state.lease_expires_at.isoformat() if state.lease_expires_at else "never"
        raise MismatchError(
            "reap.lease_live",
            f"no deferral: the lease runs until {expires}, not strictly before {event.at}",
            describe(event, ["worker_id", "lease_expires_at"]),
        )
    pushed = ["delay_s", "lease_expires_at"]
    if not math.isfinite(event.delay_s) or event.delay_s < 0:
        raise MismatchError(
            "reap.deferral_delay", "delay_s finite and >= 0", describe(event, pushed)
        )
    if event.lease_expires_at != event.at + timedelta(seconds=event.delay_s):
        raise MismatchError(
            "reap.deferral_lease_push",
            f"lease_expires_at={(event.at + timedelta(seconds=event.delay_s)).isoformat()} "
            "(at + delay_s)",
            describe(event, pushed),
        )
    expected = _decided(
        lambda: decide_reap_deferral(
            state, event.at, retry_delay_s=event.delay_s, cause=event.cause
        ),
        [event],
    )
    compare(expected, [event])


# --- commands that record one event ---------------------------------------------------------


def _check_release(state: JobState, event: JobReleased) -> None:
    lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
    try:
        produced: JobEvent = decide.decide_release(state, lease, event.at, event.reason)
    except LedgerError:
        # Not a fenced release, then the boot reap's (a dead process's claim, not fenced).
        produced = _decided(
            lambda: lost_attempts.decide_release_stale(state, event.at, event.reason), [event]
        )[0]
    compare([produced], [event])


def _live_lease(state: JobState) -> Lease:
    lease = state.lease
    assert lease is not None  # the fold accepted a worker event, so the job is leased
    return lease


def _check_single(state: JobState, event: JobEvent) -> None:
    """Check an event that one command records alone."""
    at = event.at
    decision: Callable[[], Sequence[JobEvent] | JobEvent]
    if isinstance(event, JobLeased):
        # The rate is the claim's input (its type's policy then), like the worker id: the
        # buckets' own check is projections verify.
        decision = lambda: decide.decide_lease(  # noqa: E731
            state, event.worker_id, _lease_s(event), at, rate=event.rate
        )
    elif isinstance(event, JobHeartbeated):
        lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
        decision = lambda: decide.decide_heartbeat(state, lease, _lease_s(event), at)  # noqa: E731
    elif isinstance(event, JobStageChanged):
        live = _live_lease(state)
        decision = lambda: decide.decide_progress(state, live, at, stage=event.stage)  # noqa: E731
    elif isinstance(event, JobProgressed):
        progress_lease = _live_lease(state)
        decision = lambda: decide.decide_progress(  # noqa: E731
            state,
            progress_lease,
            at,
            done=event.done,
            total=event.total,
            checkpoint=event.checkpoint,
        )
    elif isinstance(event, JobSucceeded):
        lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
        decision = lambda: decide.decide_succeed(  # noqa: E731
            state,
            lease,
            at,
            output=event.output,
            revision=event.revision,
            content_hash=event.content_hash,
        )
    elif isinstance(event, JobReleased):
        _check_release(state, event)
        return
    elif isinstance(event, JobReapDeferred):
        _check_reap_deferral(state, event)
        return
    elif isinstance(event, JobCancelled):
        decision = lambda: decide.decide_cancel(state, at, event.reason)  # noqa: E731
    elif isinstance(event, JobHandlerStopped):
        stopped = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
        decision = lambda: decide.decide_handler_stopped(state, stopped, at, event.how)  # noqa: E731
    elif isinstance(event, JobRequeued):
        decision = lambda: decide.decide_requeue(state, at, event.reason)  # noqa: E731
    else:
        raise MismatchError(
            "group.orphan_outcome",
            "job_failed first, in the same command",
            describe(event, ["attempt"]),
        )
    compare(_decided(decision, [event]), [event])
