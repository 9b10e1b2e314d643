"""One fold: a job's state is ``fold(events)``, built by the pure :func:`evolve`.

The same ``evolve`` keeps the inline queue view current, rebuilds it from zero, answers
"what did this job look like at event N / at time T", and feeds the diagnostics. That is what
makes ``projections verify`` (live view == replayed view) an invariant and not a hope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from msgspec.structs import replace

from ledger.core.errors import LedgerError
from ledger.core.events import (
    Event,
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
    JobTypeDefined,
    JobTypeUpdated,
)
from ledger.core.values import (
    JSON,
    BackoffPolicy,
    EnqueueRequest,
    Failure,
    JobDefinition,
    JobStatus,
    Stage,
    Subject,
    WorkflowLink,
)


class IllegalTransitionError(LedgerError):
    """An event that cannot follow the state it is applied to: a bug or a corrupt history."""

    code = "history.illegal_transition"


class Lease(msgspec.Struct, frozen=True):
    """The fence of one execution: every worker write must present it."""

    job_id: UUID
    run_number: int
    attempt: int
    worker_id: str


class JobState(msgspec.Struct, frozen=True, gc=False):
    """A job as its history says it is after ``version`` events.

    Not keyword-only: the queue view's packed blob rebuilds it from its fields in order
    (:func:`ledger.views.queue.decode_state`), which positional construction does in C."""

    job_id: UUID
    request: EnqueueRequest
    definition_version: int
    priority: int
    max_attempts: int
    timeout_s: float
    backoff: BackoffPolicy
    enqueued_at: datetime
    run_at: datetime
    updated_at: datetime
    version: int
    status: JobStatus = JobStatus.PENDING
    stage: str = Stage.QUEUED
    run_number: int = 1
    attempt: int = 0
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    started_at: datetime | None = None
    progress_done: int | None = None
    progress_total: int | None = None
    checkpoint: JSON | None = None
    last_error: Failure | None = None
    retries: int = 0
    output: JSON | None = None
    result_revision: str | None = None
    result_content_hash: str | None = None
    finished_at: datetime | None = None
    reason: str | None = None
    workflow: WorkflowLink | None = None
    """The workflow step this job runs (from its ``job_enqueued``); last, so the queue view's
    packed blobs written before it still decode."""

    @property
    def job_type(self) -> str:
        return self.request.job_type

    @property
    def payload(self) -> dict[str, JSON]:
        return self.request.payload

    @property
    def org(self) -> str | None:
        return self.request.org

    @property
    def queue(self) -> str | None:
        return self.request.queue

    @property
    def idempotency_key(self) -> str | None:
        return self.request.idempotency_key

    @property
    def subject(self) -> Subject | None:
        return self.request.subject

    @property
    def lease(self) -> Lease | None:
        """The current execution's fence, if the job is leased."""
        if self.status is not JobStatus.LEASED or self.worker_id is None:
            return None
        return Lease(self.job_id, self.run_number, self.attempt, self.worker_id)


def _require(state: JobState | None, event: JobEvent, *allowed: JobStatus) -> JobState:
    if state is None:
        raise IllegalTransitionError(f"{event.name} before job_enqueued")
    if state.status not in allowed:
        raise IllegalTransitionError(f"{event.name} on a {state.status} job {state.job_id}")
    return state


def _require_execution(state: JobState, event: JobEvent, run_number: int, attempt: int) -> None:
    if (state.run_number, state.attempt) != (run_number, attempt):
        raise IllegalTransitionError(
            f"{event.name} for run {run_number} attempt {attempt} on job {state.job_id} "
            f"at run {state.run_number} attempt {state.attempt}"
        )


# --- one function per job event: (state, event, version after) -> state after ---------------


def _enqueued(state: JobState | None, event: JobEnqueued, version: int) -> JobState:
    if state is not None:
        raise IllegalTransitionError(f"job {state.job_id} enqueued twice")
    at = event.at
    # Positional, in JobState's field order (job_id … version): msgspec then fills the fields
    # without matching keywords.
    return JobState(
        event.job_id,
        event.request,
        event.definition_version,
        event.priority,
        event.max_attempts,
        event.timeout_s,
        event.backoff,
        at,
        event.run_at,
        at,
        version,
        workflow=event.workflow,
    )


def _leased(state: JobState | None, event: JobLeased, version: int) -> JobState:
    s = _require(state, event, JobStatus.PENDING)
    if (event.run_number, event.attempt) != (s.run_number, s.attempt + 1):
        raise IllegalTransitionError(f"lease of job {s.job_id} skips an attempt")
    at = event.at
    return replace(
        s,
        status=JobStatus.LEASED,
        stage=Stage.CLAIMED,
        attempt=event.attempt,
        worker_id=event.worker_id,
        lease_expires_at=event.lease_expires_at,
        last_heartbeat_at=at,
        started_at=None,
        updated_at=at,
        version=version,
    )


def _heartbeated(state: JobState | None, event: JobHeartbeated, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    at = event.at
    return replace(
        s,
        lease_expires_at=event.lease_expires_at,
        last_heartbeat_at=at,
        updated_at=at,
        version=version,
    )


def _reap_deferred(state: JobState | None, event: JobReapDeferred, version: int) -> JobState:
    # Not a heartbeat: only the lease's end moves (last_heartbeat_at is kept).
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(s, lease_expires_at=event.lease_expires_at, updated_at=event.at, version=version)


def _stage_changed(state: JobState | None, event: JobStageChanged, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    at = event.at
    started = s.started_at
    if event.stage == Stage.RUNNING and started is None:
        started = at
    return replace(s, stage=event.stage, started_at=started, updated_at=at, version=version)


def _progressed(state: JobState | None, event: JobProgressed, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(
        s,
        progress_done=event.done if event.done is not None else s.progress_done,
        progress_total=event.total if event.total is not None else s.progress_total,
        checkpoint=event.checkpoint if event.checkpoint is not None else s.checkpoint,
        updated_at=event.at,
        version=version,
    )


def _succeeded(state: JobState | None, event: JobSucceeded, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    at = event.at
    return replace(
        s,
        status=JobStatus.SUCCEEDED,
        stage=Stage.COMPLETED,
        lease_expires_at=None,
        output=event.output,
        result_revision=event.revision,
        result_content_hash=event.content_hash,
        finished_at=at,
        updated_at=at,
        version=version,
    )


def _failed(state: JobState | None, event: JobFailed, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(s, last_error=event.failure, updated_at=event.at, version=version)


def _retry_scheduled(state: JobState | None, event: JobRetryScheduled, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(
        s,
        status=JobStatus.PENDING,
        stage=Stage.QUEUED,
        worker_id=None,
        lease_expires_at=None,
        run_at=event.next_run_at,
        retries=s.retries + 1,
        updated_at=event.at,
        version=version,
    )


def _dead_lettered(state: JobState | None, event: JobDeadLettered, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    at = event.at
    return replace(
        s,
        status=JobStatus.DEAD,
        lease_expires_at=None,
        last_error=event.failure,
        finished_at=at,
        updated_at=at,
        version=version,
    )


def _released(state: JobState | None, event: JobReleased, version: int) -> JobState:
    s = _require(state, event, JobStatus.LEASED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(
        s,
        status=JobStatus.PENDING,
        stage=Stage.QUEUED,
        attempt=s.attempt - 1,
        worker_id=None,
        lease_expires_at=None,
        started_at=None,
        updated_at=event.at,
        version=version,
    )


def _cancelled(state: JobState | None, event: JobCancelled, version: int) -> JobState:
    s = _require(state, event, JobStatus.PENDING, JobStatus.LEASED)
    if event.run_number != s.run_number:
        raise IllegalTransitionError(f"cancel of job {s.job_id} names another run")
    at = event.at
    return replace(
        s,
        status=JobStatus.CANCELLED,
        lease_expires_at=None,
        finished_at=at,
        reason=event.reason,
        updated_at=at,
        version=version,
    )


def _handler_stopped(state: JobState | None, event: JobHandlerStopped, version: int) -> JobState:
    """A fact about a cancelled attempt's worker: the status and all else stay."""
    s = _require(state, event, JobStatus.CANCELLED)
    _require_execution(s, event, event.run_number, event.attempt)
    return replace(s, updated_at=event.at, version=version)


def _requeued(state: JobState | None, event: JobRequeued, version: int) -> JobState:
    s = _require(state, event, JobStatus.DEAD, JobStatus.CANCELLED)
    if event.run_number != s.run_number + 1:
        raise IllegalTransitionError(f"requeue of job {s.job_id} skips a run")
    at = event.at
    return replace(
        s,
        status=JobStatus.PENDING,
        stage=Stage.QUEUED,
        run_number=event.run_number,
        attempt=0,
        worker_id=None,
        lease_expires_at=None,
        last_heartbeat_at=None,
        started_at=None,
        progress_done=None,
        progress_total=None,
        output=None,
        finished_at=None,
        run_at=at,
        reason=event.reason,
        updated_at=at,
        version=version,
    )


_Apply = Callable[[JobState | None, Any, int], JobState]

_APPLY: dict[type[JobEvent], _Apply] = {
    JobEnqueued: _enqueued,
    JobLeased: _leased,
    JobHeartbeated: _heartbeated,
    JobReapDeferred: _reap_deferred,
    JobStageChanged: _stage_changed,
    JobProgressed: _progressed,
    JobSucceeded: _succeeded,
    JobFailed: _failed,
    JobRetryScheduled: _retry_scheduled,
    JobDeadLettered: _dead_lettered,
    JobReleased: _released,
    JobCancelled: _cancelled,
    JobHandlerStopped: _handler_stopped,
    JobRequeued: _requeued,
}
"""Each job event's transition, by the event's exact class: one dict lookup on the hot path
(the fold of every append, rebuild and replay) instead of a chain of ``isinstance`` tests."""


def _apply_of(event: JobEvent) -> _Apply:
    """The transition of an event whose exact class is not in :data:`_APPLY` (a subclass of
    a job event applies as its base does); refused if it is no job event."""
    for cls in type(event).__mro__:
        apply = _APPLY.get(cls)
        if apply is not None:
            return apply
    raise IllegalTransitionError(f"not a job event: {type(event).__name__}")


def evolve(state: JobState | None, event: JobEvent) -> JobState:
    """Apply one event to a job's state. Pure; raises on an illegal transition."""
    if type(event) is JobEnqueued:
        # Every job's first event, the most folded of all: called directly, which is cheaper
        # than the lookup (and the version) the table's path costs.
        return _enqueued(state, event, 1)
    try:
        apply = _APPLY[type(event)]
    except KeyError:
        apply = _apply_of(event)
    return apply(state, event, 0 if state is None else state.version + 1)


def fold(events: Iterable[JobEvent], state: JobState | None = None) -> JobState | None:
    """Apply ``events`` in order, starting from ``state`` (``None``: from nothing)."""
    for event in events:
        state = evolve(state, event)
    return state


class DefinitionState(msgspec.Struct, frozen=True):
    """A job type's current definition and how many events made it."""

    definition: JobDefinition
    version: int


def evolve_definition(state: DefinitionState | None, event: Event) -> DefinitionState:
    """Apply one job-type event. Pure."""
    if isinstance(event, JobTypeDefined):
        if state is not None:
            raise IllegalTransitionError(f"job type {state.definition.job_type} defined twice")
        return DefinitionState(event.definition, 1)
    if isinstance(event, JobTypeUpdated):
        if state is None:
            raise IllegalTransitionError("job_type_updated before job_type_defined")
        return DefinitionState(event.definition, state.version + 1)
    raise IllegalTransitionError(f"not a definition event: {type(event).__name__}")
