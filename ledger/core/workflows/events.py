"""The events of a workflow run: one stream per run (its originator id is the run id).

Past-tense facts named ``Workflow<Participle>`` with stable stored names (``workflow_*``) and
versions, registered in the codec beside the job events. The run's state is a fold of its
own stream alone (:mod:`ledger.core.workflows.state`): the submitted event carries the
whole frozen spec, a recovery carries the outputs it reuses, and each step event carries
what the step's job did, so nothing outside the stream is needed to replay a run.

Each docstring names the transition, of the step (``blocked -> enqueued``) or of the run.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from ledger.core.events import Event
from ledger.core.values import JSON, Failure
from ledger.core.workflows.spec import StepRequest, StepResolution, WorkflowRequest
from ledger.core.workflows.status import RunStatus


class ReusedStep(msgspec.Struct, frozen=True, kw_only=True):
    """A step a recovery does not re-run: it counts as succeeded with the source's output."""

    key: str
    output: JSON | None
    source_job_id: UUID | None
    """The job that produced the output in the source run (``None``: an external step)."""


class WorkflowEvent(Event, frozen=True):
    """Base of the events in a workflow run's stream."""


class WorkflowSubmitted(WorkflowEvent, frozen=True):
    """A run is accepted: (none) -> running, every step blocked. Carries the request as
    asked (normalised) and each job step's frozen resolution."""

    name = "workflow_submitted"
    run_id: UUID
    request: WorkflowRequest
    resolutions: tuple[StepResolution, ...]


class WorkflowRecovered(WorkflowEvent, frozen=True):
    """The run re-runs ``source_run_id`` from ``from_step``: right after its submit, the
    reused steps blocked -> succeeded with the source's outputs."""

    name = "workflow_recovered"
    source_run_id: UUID
    from_step: str
    reason: str
    request_key: str
    reused: tuple[ReusedStep, ...]


class WorkflowStepReleased(WorkflowEvent, frozen=True):
    """Nothing holds the step back any more: blocked -> enqueued (a job step, its job
    enqueued in the same commit) or blocked -> waiting_for_external (``job_id`` None)."""

    name = "workflow_step_released"
    step_key: str
    job_id: UUID | None


class WorkflowStepSucceeded(WorkflowEvent, frozen=True):
    """The step's job succeeded: enqueued -> succeeded, with its output. (The run's stream
    records only what can release or end something: a claim, a retry or a hand-back of the
    step's job is the job's own history, read from it when the step is shown.)"""

    name = "workflow_step_succeeded"
    step_key: str
    job_id: UUID
    output: JSON | None = None


class WorkflowStepFailed(WorkflowEvent, frozen=True):
    """The step's job was dead-lettered: enqueued -> failed."""

    name = "workflow_step_failed"
    step_key: str
    job_id: UUID
    failure: Failure


class WorkflowStepCancelled(WorkflowEvent, frozen=True):
    """The step will not run (on): blocked | enqueued | waiting_for_external ->
    cancelled. ``code`` says why: ``workflow.dependency_unsatisfied``,
    ``workflow.run_cancelled`` or ``workflow.job_cancelled``."""

    name = "workflow_step_cancelled"
    step_key: str
    job_id: UUID | None
    code: str
    reason: str


class WorkflowExternalStepCompleted(WorkflowEvent, frozen=True):
    """Someone completed an external step: waiting_for_external -> succeeded | failed.
    ``succeeded`` tells which; ``output`` only on success."""

    name = "workflow_external_step_completed"
    step_key: str
    succeeded: bool
    output: JSON | None = None
    reason: str = ""


class WorkflowStepsAppended(WorkflowEvent, frozen=True):
    """A live run grows: new steps, blocked. ``mutation_key`` makes a repeat a no-op."""

    name = "workflow_steps_appended"
    mutation_key: str
    steps: tuple[StepRequest, ...]
    resolutions: tuple[StepResolution, ...]


class WorkflowCancelled(WorkflowEvent, frozen=True):
    """An operator cancels the run: running | waiting_for_external -> cancelled. Its live
    steps' cancels follow in the same commit; nothing is released after it."""

    name = "workflow_cancelled"
    reason: str


class WorkflowStatusChanged(WorkflowEvent, frozen=True):
    """The run's roll-up of its steps changed: running <-> waiting_for_external, or
    -> succeeded (with ``result``, the result step's output) | completed_with_errors."""

    name = "workflow_status_changed"
    status: RunStatus
    result: JSON | None = None


WORKFLOW_EVENTS: tuple[type[WorkflowEvent], ...] = (
    WorkflowSubmitted,
    WorkflowRecovered,
    WorkflowStepReleased,
    WorkflowStepSucceeded,
    WorkflowStepFailed,
    WorkflowStepCancelled,
    WorkflowExternalStepCompleted,
    WorkflowStepsAppended,
    WorkflowCancelled,
    WorkflowStatusChanged,
)
