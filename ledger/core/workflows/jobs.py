"""Where a run meets its jobs: the ``job_enqueued`` of a released step, and what each job
event means for the step it runs (:func:`step_outcome`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import NamedTuple
from uuid import UUID

from ledger.core.events import (
    JobCancelled,
    JobDeadLettered,
    JobEnqueued,
    JobEvent,
    JobRequeued,
    JobSucceeded,
)
from ledger.core.state import JobState
from ledger.core.values import JSON, EnqueueRequest, Failure, WorkflowLink
from ledger.core.workflows.spec import JobStep, StepResolution


def step_enqueued(
    run_id: UUID,
    job_id: UUID,
    step: JobStep,
    *,
    resolution: StepResolution,
    org: str | None,
    now: datetime,
) -> JobEnqueued:
    """A released job step's job: its request is what the step asked (unset stays unset),
    its settings the ones frozen at submit, due at once. No definition is read: whether the
    type is enabled was decided at submit."""
    request = EnqueueRequest(
        job_type=step.job_type,
        payload=step.payload,
        priority=step.priority,
        max_attempts=step.max_attempts,
        timeout_s=step.timeout_s,
        org=org,
        queue=step.queue,
    )
    return JobEnqueued(
        at=now,
        job_id=job_id,
        request=request,
        definition_version=resolution.definition_version,
        priority=resolution.priority,
        run_at=now,
        max_attempts=resolution.max_attempts,
        timeout_s=resolution.timeout_s,
        backoff=resolution.backoff,
        workflow=WorkflowLink(run_id=run_id, step_key=step.key),
    )


class Outcome(StrEnum):
    """What a job event does to its step."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"


class StepOutcome(NamedTuple):
    """A job event read for its step: the outcome and what the step keeps of it."""

    outcome: Outcome
    attempt: int = 0
    output: JSON | None = None
    failure: Failure | None = None
    reason: str = ""


def step_outcome(event: JobEvent, job: JobState) -> StepOutcome | None:
    """The step outcome of ``event`` (``job``: the job's state after it), or ``None`` for
    events that leave the run as it is: all but an end or a requeue. A claim, heartbeat,
    stage, progress, ``job_failed``, retry or hand-back changes no step in the run's stream
    (the step shows ``running``, its attempt and retries from its job), so a claim of a
    step's job costs what a plain job's claim costs: no run is read, locked or appended to."""
    if isinstance(event, JobSucceeded):
        return StepOutcome(Outcome.SUCCEEDED, attempt=event.attempt, output=event.output)
    if isinstance(event, JobDeadLettered):
        return StepOutcome(Outcome.FAILED, attempt=event.attempt, failure=event.failure)
    if isinstance(event, JobCancelled):
        return StepOutcome(Outcome.CANCELLED, reason=event.reason)
    if isinstance(event, JobRequeued):
        return StepOutcome(Outcome.REQUEUED, reason=event.reason)
    return None
