"""Decisions: pure functions from (current state, command, now) to the events to append.

Each returns events or raises a :class:`~ledger.core.errors.LedgerError` with a stable code. They
never read a clock, a random source or a store: the shell passes ``now`` and any random draw
in, which is what lets ``replay --check`` re-run them over recorded history. What a caller
sends is validated by :mod:`ledger.core.requests`; this module holds only the transitions.
The decisions for an attempt that ends without its worker (an expired lease, a dead process)
are in :mod:`ledger.core.lost_attempts`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from ledger.core.backoff import retry_delay
from ledger.core.errors import (
    DefinitionNotFoundError,
    InvalidRequestError,
    InvalidTransitionError,
    JobCancelledError,
    LeaseOwnerMismatchError,
)
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
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
)
from ledger.core.limits import (
    MAX_LEASE_S,
    check_count,
    check_name,
    check_reason,
    check_seconds,
    check_subject_text,
)
from ledger.core.requests import aware, check_failure, check_output
from ledger.core.state import JobState, Lease
from ledger.core.values import (
    JSON,
    EnqueueRequest,
    Failure,
    HandlerStop,
    JobDefinition,
    JobStatus,
    RateLimit,
    Stage,
)

# --- enqueue --------------------------------------------------------------------------------


def decide_enqueue(
    job_id: UUID,
    request: EnqueueRequest,
    definition: JobDefinition | None,
    now: datetime,
    actor: str | None = None,
) -> JobEnqueued:
    """Resolve a (normalised) request against its job type's definition; ``actor`` (checked
    by the caller) names who asked, if anyone says."""
    if definition is None or not definition.enabled:
        state = "disabled" if definition is not None else "not defined"
        raise DefinitionNotFoundError(f"job type {request.job_type!r} is {state}")
    if request.run_at is not None:
        run_at = request.run_at
    elif request.delay_s is not None:
        run_at = now + timedelta(seconds=request.delay_s)
    else:
        run_at = now
    return JobEnqueued(
        at=now,
        job_id=job_id,
        request=request,
        definition_version=definition.version,
        priority=request.priority if request.priority is not None else definition.default_priority,
        run_at=run_at,
        max_attempts=request.max_attempts or definition.max_attempts,
        timeout_s=request.timeout_s or definition.default_timeout_s,
        backoff=definition.backoff,
        workflow=None,
        actor=actor,
    )


# --- worker writes (fenced) -----------------------------------------------------------------


def decide_lease(
    state: JobState,
    worker_id: str,
    lease_s: float,
    now: datetime,
    *,
    rate: RateLimit | None = None,
) -> JobLeased:
    """Claim a pending, due job for ``worker_id`` until ``now + lease_s``
    (``0 < lease_s <= MAX_LEASE_S``), spending a token of ``rate`` (its type's rate limit,
    where it has one and the claim found it a token)."""
    check_name(worker_id, "worker_id")
    lease_s = check_seconds(lease_s, "lease_s", most=MAX_LEASE_S)
    if state.status is not JobStatus.PENDING or state.run_at > now:
        raise InvalidTransitionError(f"job {state.job_id} is not claimable")
    return JobLeased(
        at=now,
        run_number=state.run_number,
        attempt=state.attempt + 1,
        worker_id=worker_id,
        lease_expires_at=now + timedelta(seconds=lease_s),
        rate=rate,
    )


def check_fence(state: JobState, lease: Lease, now: datetime) -> None:
    """Raise LeaseOwnerMismatchError unless ``lease`` is the job's live lease at ``now``;
    its :class:`JobCancelledError` form if the job was cancelled under this very lease (the
    handler holding it should stop)."""
    if state.status is not JobStatus.LEASED:
        if _cancelled_under(state, lease):
            raise JobCancelledError(f"job {state.job_id} was cancelled: stop its handler")
        raise LeaseOwnerMismatchError(f"job {state.job_id} is {state.status}, not leased")
    current = (state.run_number, state.attempt, state.worker_id)
    presented = (lease.run_number, lease.attempt, lease.worker_id)
    if current != presented:
        raise LeaseOwnerMismatchError(
            f"job {state.job_id} is leased to run {current[0]} attempt {current[1]} "
            f"worker {current[2]!r}, not run {presented[0]} attempt {presented[1]} "
            f"worker {presented[2]!r}"
        )
    if state.lease_expires_at is None or now > state.lease_expires_at:
        raise LeaseOwnerMismatchError(f"the lease on job {state.job_id} has expired")


def _cancelled_under(state: JobState, lease: Lease) -> bool:
    """Whether ``state`` is a cancel that ended ``lease``'s attempt (a cancel keeps the
    attempt's run, attempt and worker)."""
    return state.status is JobStatus.CANCELLED and (
        state.run_number,
        state.attempt,
        state.worker_id,
    ) == (lease.run_number, lease.attempt, lease.worker_id)


def decide_handler_stopped(
    state: JobState, lease: Lease, now: datetime, how: HandlerStop
) -> JobHandlerStopped:
    """Record that the handler holding ``lease`` stopped after its job was cancelled under
    it; refused (:class:`LeaseOwnerMismatchError`) for any other lease or state."""
    if not _cancelled_under(state, lease):
        raise LeaseOwnerMismatchError(
            f"job {state.job_id} was not cancelled under run {lease.run_number} attempt "
            f"{lease.attempt} worker {lease.worker_id!r}"
        )
    return JobHandlerStopped(
        at=now,
        run_number=lease.run_number,
        attempt=lease.attempt,
        worker_id=lease.worker_id,
        how=how,
    )


def decide_heartbeat(
    state: JobState, lease: Lease, lease_s: float, now: datetime
) -> JobHeartbeated:
    """Renew the lease until ``now + lease_s`` (``0 < lease_s <= MAX_LEASE_S``)."""
    check_fence(state, lease, now)
    lease_s = check_seconds(lease_s, "lease_s", most=MAX_LEASE_S)
    return JobHeartbeated(
        at=now,
        run_number=lease.run_number,
        attempt=lease.attempt,
        worker_id=lease.worker_id,
        lease_expires_at=now + timedelta(seconds=lease_s),
    )


def decide_progress(
    state: JobState,
    lease: Lease,
    now: datetime,
    *,
    stage: str | None = None,
    done: int | None = None,
    total: int | None = None,
    checkpoint: JSON | None = None,
) -> list[JobEvent]:
    """Record a stage change and/or progress. Neither extends the lease.

    ``done`` and ``total`` are whole numbers below 2**63, and ``done <= total`` after the
    call (a count the call leaves out is the one recorded before: ``total`` reported once,
    then ``done`` alone, is still held to it); a checkpoint is a JSON value within
    :mod:`ledger.core.limits`' bounds."""
    check_fence(state, lease, now)
    if stage is not None:
        check_name(stage, "stage")
    for count, what in ((done, "done"), (total, "total")):
        if count is not None:
            check_count(count, f"progress {what}")
    done_after = state.progress_done if done is None else done
    total_after = state.progress_total if total is None else total
    if done_after is not None and total_after is not None and done_after > total_after:
        raise InvalidRequestError(
            f"progress done ({done_after}) is more than total ({total_after})"
            + ("" if done is not None and total is not None else ", as recorded before")
        )
    if checkpoint is not None:
        check_output(checkpoint, "checkpoint")
    events: list[JobEvent] = []
    if stage is not None and stage != state.stage:
        events.append(
            JobStageChanged(at=now, run_number=lease.run_number, attempt=lease.attempt, stage=stage)
        )
    if done is not None or total is not None or checkpoint is not None:
        events.append(
            JobProgressed(
                at=now,
                run_number=lease.run_number,
                attempt=lease.attempt,
                done=done,
                total=total,
                checkpoint=checkpoint,
            )
        )
    return events


def decide_succeed(
    state: JobState,
    lease: Lease,
    now: datetime,
    *,
    output: JSON | None = None,
    revision: str | None = None,
    content_hash: str | None = None,
) -> JobSucceeded:
    """Finish the attempt successfully. ``output`` must be JSON within the bounds of
    :mod:`ledger.core.limits` (1 MiB, 64 levels)."""
    check_fence(state, lease, now)
    check_output(output)
    for value, what in ((revision, "revision"), (content_hash, "content_hash")):
        if value is not None:
            check_subject_text(value, what)  # stored in the subject's sync-state row
    return JobSucceeded(
        at=now,
        run_number=lease.run_number,
        attempt=lease.attempt,
        worker_id=lease.worker_id,
        output=output,
        revision=revision,
        content_hash=content_hash,
    )


def failure_outcome(
    state: JobState,
    now: datetime,
    failure: Failure,
    *,
    jitter_draw: float,
    not_before: datetime | None,
    fixed_delay_s: float | None,
    started_without_renewal_heartbeat: bool | None,
) -> JobRetryScheduled | JobDeadLettered:
    """What follows a failed attempt: a dead letter once the failure is not retryable or the
    attempts are used up, else a retry after ``fixed_delay_s`` or the job's backoff at
    ``jitter_draw``, never before ``not_before`` (shared with
    :mod:`ledger.core.lost_attempts`, whose attempts end without their worker)."""
    gives_up = not failure.kind.is_retryable or state.attempt >= state.max_attempts
    if gives_up:
        return JobDeadLettered(
            at=now,
            run_number=state.run_number,
            attempt=state.attempt,
            failure=failure,
            started_without_renewal_heartbeat=started_without_renewal_heartbeat,
        )
    if fixed_delay_s is not None:
        delay = fixed_delay_s
    else:
        delay = retry_delay(state.backoff, state.attempt, jitter_draw)
    next_run_at = now + timedelta(seconds=delay)
    if not_before is not None and not_before > next_run_at:
        # A handler may push its retry later, never earlier than the policy allows.
        next_run_at = not_before
        delay = (next_run_at - now).total_seconds()
    return JobRetryScheduled(
        at=now,
        run_number=state.run_number,
        attempt=state.attempt,
        delay_s=delay,
        next_run_at=next_run_at,
        started_without_renewal_heartbeat=started_without_renewal_heartbeat,
        not_before=not_before,
    )


def decide_fail(
    state: JobState,
    lease: Lease,
    now: datetime,
    failure: Failure,
    *,
    jitter_draw: float,
    not_before: datetime | None = None,
) -> list[JobEvent]:
    """Record a failed attempt, then a retry (backoff) or a dead letter.

    The failure's code is refused unless it is a safe code; its message is normalised, never
    refused, since a worker's failure must always be recordable: cut to 8 KiB, NUL and lone
    surrogates spelled as escapes (:func:`~ledger.core.requests.check_failure`)."""
    check_fence(state, lease, now)
    failure = check_failure(failure)
    if not_before is not None:
        not_before = aware(not_before, "not_before")
    return [
        JobFailed(
            at=now,
            run_number=lease.run_number,
            attempt=lease.attempt,
            worker_id=lease.worker_id,
            failure=failure,
        ),
        failure_outcome(
            state,
            now,
            failure,
            jitter_draw=jitter_draw,
            not_before=not_before,
            fixed_delay_s=None,
            started_without_renewal_heartbeat=None,
        ),
    ]


def decide_release(state: JobState, lease: Lease, now: datetime, reason: str) -> JobReleased:
    """Hand the job back unfinished; the attempt is not consumed."""
    check_fence(state, lease, now)
    check_reason(reason)
    return JobReleased(
        at=now,
        run_number=lease.run_number,
        attempt=lease.attempt,
        worker_id=lease.worker_id,
        reason=reason,
    )


# --- the start of a handler -----------------------------------------------------------------


def handler_started(state: JobState) -> bool:
    """Whether the current attempt's handler had started: the pool records the stage
    ``running`` (``job_stage_changed``) before it calls a handler, and a handler may report
    any stage of its own after; a claim alone leaves the stage ``claimed``."""
    return state.started_at is not None or state.stage != Stage.CLAIMED


def start_with_lease(leased: JobLeased) -> JobStageChanged:
    """The stage ``running`` recorded with the lease itself, in the claim's transaction, for
    a job the claimer starts at once (a worker slot is waiting for it): the claim's commit is
    then the start's evidence, and no second transaction is needed
    (:func:`decide_start` does the same later, for a job that waited)."""
    return JobStageChanged(
        at=leased.at, run_number=leased.run_number, attempt=leased.attempt, stage=Stage.RUNNING
    )


def decide_start(state: JobState, lease: Lease, now: datetime) -> list[JobEvent]:
    """The pool is about to call the handler of ``lease``: record the stage ``running``
    (fenced, so a lease lost meanwhile is refused and the handler is not started). Nothing
    if the stage is ``running`` already."""
    return decide_progress(state, lease, now, stage=Stage.RUNNING)


# --- operators (not fenced: they act on the job, not on a lease) ----------------------------


def decide_cancel(state: JobState, now: datetime, reason: str) -> JobCancelled:
    """Cancel a pending or leased job; its worker's later writes fail the fence."""
    check_reason(reason)
    if not state.status.is_live:
        raise InvalidTransitionError(f"job {state.job_id} is {state.status}; only live jobs cancel")
    return JobCancelled(at=now, run_number=state.run_number, reason=reason)


def decide_requeue(
    state: JobState, now: datetime, reason: str, *, live_subject_job: UUID | None = None
) -> JobRequeued:
    """Start a new run of a dead or cancelled job, unless its sync subject already has a
    live job (``live_subject_job``): a subject has at most one live job."""
    check_reason(reason)
    if state.status not in (JobStatus.DEAD, JobStatus.CANCELLED):
        raise InvalidTransitionError(
            f"job {state.job_id} is {state.status}; only dead or cancelled jobs requeue"
        )
    if live_subject_job is not None:
        raise InvalidTransitionError(
            f"job {state.job_id}'s subject has a live job, {live_subject_job}; requeue it "
            "once that one has ended"
        )
    return JobRequeued(at=now, run_number=state.run_number + 1, reason=reason)
