"""Workflow decisions: pure functions from (run state, command, now) to a
:class:`~ledger.core.workflows.release.Decision` — the run's events, the jobs to enqueue and
the jobs to cancel — or a typed error with a stable ``workflow.*`` code.

Like :mod:`ledger.core.decide`, they read no clock, store or random source: the store calls
them inside the unit of work that holds the run's release lock, and ``replay --check`` can
call them again over the recorded history. Job ids are derived from (run, step), so a
replayed release names the same job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobEvent
from ledger.core.limits import check_name, check_reason
from ledger.core.requests import check_output
from ledger.core.state import JobState
from ledger.core.values import JSON, JobDefinition
from ledger.core.workflows.errors import (
    JOB_CANCELLED,
    RUN_CANCELLED,
    AppendConflictError,
    CompletionConflictError,
    StepNotExternalError,
    StepNotFoundError,
    WorkflowIdempotencyConflictError,
    WorkflowTransitionError,
)
from ledger.core.workflows.events import (
    ReusedStep,
    WorkflowCancelled,
    WorkflowExternalStepCompleted,
    WorkflowRecovered,
    WorkflowStepCancelled,
    WorkflowStepFailed,
    WorkflowStepsAppended,
    WorkflowStepSucceeded,
    WorkflowSubmitted,
)
from ledger.core.workflows.graph import descendants
from ledger.core.workflows.jobs import Outcome, step_outcome
from ledger.core.workflows.release import Decision, RunChange
from ledger.core.workflows.spec import (
    StepKind,
    StepRequest,
    WorkflowRequest,
    canonical,
    same_request,
)
from ledger.core.workflows.state import RunState, StepState
from ledger.core.workflows.status import RunStatus, StepStatus
from ledger.core.workflows.validation import (
    normalise_request,
    normalise_steps,
    resolve_steps,
    validate_request,
)

# --- submit, repeat, recover ------------------------------------------------------------


def decide_submit(
    run_id: UUID,
    request: WorkflowRequest,
    definitions: Mapping[str, JobDefinition],
    now: datetime,
) -> Decision:
    """Accept a run: validate and resolve it (``definitions``: at least every job step's
    type that exists), submit it, and release its root steps at once."""
    request, resolutions = validate_request(request, definitions)
    change = RunChange.submit(
        WorkflowSubmitted(at=now, run_id=run_id, request=request, resolutions=resolutions)
    )
    change.settle(change.state.steps)
    change.roll_up()
    return change.decision()


def check_repeat(existing: RunState, request: WorkflowRequest) -> None:
    """A submit whose idempotency key names ``existing``: the same run if ``request`` asks
    the same (canonically), else WorkflowIdempotencyConflictError."""
    existing.require_complete()
    if not same_request(existing.request, normalise_request(request)):
        raise WorkflowIdempotencyConflictError(
            f"idempotency key {request.idempotency_key!r} was used for run {existing.run_id} "
            "with another request"
        )


def decide_recover(
    run_id: UUID,
    source: RunState,
    *,
    from_step: str,
    reason: str,
    request_key: str,
    now: datetime,
) -> Decision:
    """A new run of ``source``'s steps (appended ones included, with their frozen settings)
    that re-runs ``from_step`` and everything downstream of it, and reuses the outputs of
    the source's other succeeded steps. ``run_id`` is
    :func:`~ledger.core.workflows.ids.recovery_run_id` of the source and ``request_key``.
    The source must be finished: recovering a live run would run its steps twice."""
    check_reason(reason)
    check_name(request_key, "request_key")
    if not source.status.is_finished:
        raise WorkflowTransitionError(
            f"run {source.run_id} is {source.status}; recover a finished run"
        )
    source.require_complete()
    if from_step not in source.steps:
        raise StepNotFoundError(f"run {source.run_id} has no step {from_step!r}")
    rerun = descendants(source.dependents, [from_step]) | {from_step}
    reused = tuple(
        ReusedStep(key=key, output=step.output, source_job_id=step.job_id)
        for key, step in source.steps.items()
        if step.status is StepStatus.SUCCEEDED and key not in rerun
    )
    steps = tuple(step.request for step in source.steps.values())
    request = WorkflowRequest(
        workflow_type=source.request.workflow_type,
        steps=steps,
        org=source.request.org,
        metadata=source.request.metadata,
        result_step=source.request.result_step,
    )
    resolutions = tuple(
        step.resolution for step in source.steps.values() if step.resolution is not None
    )
    change = RunChange.submit(
        WorkflowSubmitted(at=now, run_id=run_id, request=request, resolutions=resolutions)
    )
    change.emit(
        WorkflowRecovered(
            at=now,
            source_run_id=source.run_id,
            from_step=from_step,
            reason=reason,
            request_key=request_key,
            reused=reused,
        )
    )
    change.settle(change.state.steps)
    change.roll_up()
    return change.decision()


def check_recovery_repeat(
    existing: RunState, source_run_id: UUID, from_step: str, reason: str
) -> None:
    """A recovery whose request key names ``existing``: the same recovery if it asks the
    same, else WorkflowIdempotencyConflictError."""
    recovered = existing.recovered
    if recovered is None or (recovered.source_run_id, recovered.from_step, recovered.reason) != (
        source_run_id,
        from_step,
        reason,
    ):
        raise WorkflowIdempotencyConflictError(
            f"request key made run {existing.run_id}, a recovery that asked for something else"
        )


# --- what a step's job did ---------------------------------------------------------------


def decide_job_event(
    state: RunState, step_key: str, job_id: UUID, event: JobEvent, job: JobState
) -> Decision:
    """Record the end of the job a step runs (``job``: its state after ``event``):
    succeeded, dead-lettered -> failed, cancelled; the ended step then releases or cancels
    its dependents. Any other job event (a claim, a retry, a hand-back) changes nothing in
    the run. A job cancelled because its step already was (a run cancel) changes nothing."""
    step = _step(state, step_key)
    if step.job_id != job_id:
        raise WorkflowTransitionError(f"job {job_id} does not run step {step_key!r}")
    read = step_outcome(event, job)
    change = RunChange(state, event.at)
    if read is None:
        return change.decision()
    if read.outcome is Outcome.CANCELLED and step.status is StepStatus.CANCELLED:
        return change.decision()
    if read.outcome is Outcome.REQUEUED:
        raise WorkflowTransitionError(
            f"job {job_id} runs step {step_key!r} of run {state.run_id}: recover the run "
            "from the step instead of requeueing its job"
        )
    at = event.at
    if read.outcome is Outcome.SUCCEEDED:
        change.emit(
            WorkflowStepSucceeded(at=at, step_key=step_key, job_id=job_id, output=read.output)
        )
        change.ended(step_key)
    elif read.outcome is Outcome.FAILED:
        assert read.failure is not None  # a dead letter always carries its failure
        change.emit(
            WorkflowStepFailed(at=at, step_key=step_key, job_id=job_id, failure=read.failure)
        )
        change.ended(step_key)
    else:
        change.emit(
            WorkflowStepCancelled(
                at=at, step_key=step_key, job_id=job_id, code=JOB_CANCELLED, reason=read.reason
            )
        )
        change.ended(step_key)
    return change.decision()


# --- operators and the outside -------------------------------------------------------------


def decide_complete_external(
    state: RunState,
    step_key: str,
    succeeded: bool,
    now: datetime,
    *,
    output: JSON | None = None,
    reason: str = "",
) -> Decision:
    """Complete a waiting external step as succeeded or failed (an output only on success).
    The identical completion again changes nothing; a different one is a conflict."""
    step = _step(state, step_key)
    if step.kind is not StepKind.EXTERNAL:
        raise StepNotExternalError(f"step {step_key!r} is a job step; it ends with its job")
    check_reason(reason)
    check_output(output)
    if output is not None and not succeeded:
        raise InvalidRequestError("a failed completion carries no output")
    change = RunChange(state, now)
    if step.status in (StepStatus.SUCCEEDED, StepStatus.FAILED):
        previous = (step.status is StepStatus.SUCCEEDED, step.output, step.reason)
        if previous == (succeeded, output, reason):
            return change.decision()
        raise CompletionConflictError(
            f"step {step_key!r} was completed as {step.status} already, with another "
            "outcome, output or reason (a repeat must be the identical completion)"
        )
    if step.status is not StepStatus.WAITING_FOR_EXTERNAL:
        raise WorkflowTransitionError(f"step {step_key!r} is {step.status}, not waiting")
    change.emit(
        WorkflowExternalStepCompleted(
            at=now, step_key=step_key, succeeded=succeeded, output=output, reason=reason
        )
    )
    change.ended(step_key)
    return change.decision()


def decide_cancel(state: RunState, reason: str, now: datetime) -> Decision:
    """Cancel a live run: every step not yet ended is cancelled, its live job with it;
    nothing is released after. Cancelling a cancelled run changes nothing."""
    check_reason(reason)
    change = RunChange(state, now)
    if state.status is RunStatus.CANCELLED:
        return change.decision()
    if state.status.is_finished:
        raise WorkflowTransitionError(f"run {state.run_id} is {state.status}; nothing to cancel")
    state.require_complete()
    change.emit(WorkflowCancelled(at=now, reason=reason))
    for key, step in state.steps.items():
        if step.status.is_terminal:
            continue
        if step.job_id is not None and step.status is StepStatus.ENQUEUED:
            change.cancel_jobs.append(step.job_id)
        change.emit(
            WorkflowStepCancelled(
                at=now, step_key=key, job_id=step.job_id, code=RUN_CANCELLED, reason=reason
            )
        )
    return change.decision()


def decide_append(
    state: RunState,
    mutation_key: str,
    steps: Sequence[StepRequest],
    definitions: Mapping[str, JobDefinition],
    now: datetime,
) -> Decision:
    """Add steps to a live run (they may depend on its steps and on each other). The same
    ``mutation_key`` with the same steps again changes nothing; with others it is
    ``workflow.append_conflicting_retry``. New steps whose prerequisites have all ended are
    released (or cancelled as unsatisfied) at once."""
    check_name(mutation_key, "mutation_key")
    state.require_complete()
    change = RunChange(state, now)
    recorded = state.appends.get(mutation_key)
    existing = {key: [d.step for d in step.request.depends_on] for key, step in state.steps.items()}
    if recorded is not None:
        asked = normalise_steps(
            steps, {k: v for k, v in existing.items() if k not in _keys(recorded)}
        )
        if canonical(asked) == canonical(recorded):
            return change.decision()
        raise AppendConflictError(f"mutation key {mutation_key!r} appended other steps")
    if state.status.is_finished:
        raise WorkflowTransitionError(f"run {state.run_id} is {state.status}; append to a live run")
    new = normalise_steps(steps, existing)
    resolutions = resolve_steps(new, definitions)
    change.emit(
        WorkflowStepsAppended(at=now, mutation_key=mutation_key, steps=new, resolutions=resolutions)
    )
    change.settle(step.key for step in new)
    change.roll_up()
    return change.decision()


def _keys(steps: Sequence[StepRequest]) -> set[str]:
    return {step.key for step in steps}


def _step(state: RunState, key: str) -> StepState:
    step = state.step(key)
    if step is None:
        raise StepNotFoundError(f"run {state.run_id} has no step {key!r}")
    return step
