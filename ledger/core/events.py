"""The event catalogue: every fact the ledger records.

Events are past-tense facts named ``Job<Participle>``. Each has a stable stored ``name`` (never
a Python path) and a schema ``version``; the pair forms the stored topic ``name.vN`` (see
:mod:`ledger.core.codec`). Changing a field means a new version plus an upcaster, never an edit:
old events stay readable forever. ``docs/events.md`` documents each one. The values events
carry (statuses, failures, subjects, policies, definitions, requests) are in
:mod:`ledger.core.values`.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar
from uuid import UUID

import msgspec

from ledger.core.values import (
    DEFAULT_QUEUE,
    JSON,
    BackoffPolicy,
    DeferralCause,
    EnqueueRequest,
    Failure,
    FailureKind,
    HandlerStop,
    JobDefinition,
    JobStatus,
    RateLimit,
    Stage,
    Subject,
    SubjectOp,
    WorkflowLink,
    queue_of,
)

__all__ = [  # noqa: RUF022 (the catalogue in file order, then the values re-exported)
    "Event",
    "JobTypeDefined",
    "JobTypeUpdated",
    "JobEvent",
    "JobEnqueued",
    "JobLeased",
    "JobHeartbeated",
    "JobStageChanged",
    "JobProgressed",
    "JobSucceeded",
    "JobFailed",
    "JobRetryScheduled",
    "JobDeadLettered",
    "JobReapDeferred",
    "JobReleased",
    "JobCancelled",
    "JobHandlerStopped",
    "JobRequeued",
    "DEFINITION_EVENTS",
    "JOB_EVENTS",
    "ALL_EVENTS",
    # The values the events carry (ledger.core.values), importable from here as the docs
    # and code written before the split import them.
    "DEFAULT_QUEUE",
    "JSON",
    "BackoffPolicy",
    "DeferralCause",
    "EnqueueRequest",
    "Failure",
    "FailureKind",
    "HandlerStop",
    "JobDefinition",
    "JobStatus",
    "RateLimit",
    "Stage",
    "Subject",
    "SubjectOp",
    "WorkflowLink",
    "queue_of",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of every stored event. ``at`` is when it happened, by the ledger's clock.

    Every field is stored, defaults included: were defaults omitted, changing a default in
    code would silently change the meaning of events already stored."""

    name: ClassVar[str]
    version: ClassVar[int] = 1

    at: datetime


# --- job definitions (stream: one per job type) ---------------------------------------------


class JobTypeDefined(Event, frozen=True):
    """A job type comes into being: (none) -> defined."""

    name = "job_type_defined"
    definition: JobDefinition


class JobTypeUpdated(Event, frozen=True, omit_defaults=True):
    """A job type's definition changes (including enable/disable): defined -> defined.

    ``actor`` names who changed it where a caller says so (the HTTP API's token); it is the
    one field left out of the stored map when unset (``omit_defaults``: ``definition`` has no
    default), so an update without one is stored exactly as before it existed. Its default,
    ``None`` ("no one named"), must never change."""

    name = "job_type_updated"
    definition: JobDefinition
    actor: str | None = None


# --- jobs (stream: one per job) -------------------------------------------------------------


class JobEvent(Event, frozen=True):
    """Base of the events in a job's stream."""


class JobEnqueued(JobEvent, frozen=True, omit_defaults=True):
    """A job is accepted: (none) -> pending. Carries the request verbatim and its resolution,
    and (v2) the workflow step it runs, if a run's release enqueued it.

    ``actor`` names who enqueued it where a caller says so (the HTTP API's token). It is the
    only field with a default, so it is the only one ``omit_defaults`` leaves out of the
    stored map when unset: an enqueue without an actor is stored byte for byte as before the
    field existed, and older readers of ``job_enqueued.v2`` ignore the key when it is there.
    Its default, ``None`` ("no one named"), must never change. ``workflow`` has no default
    for that reason (it is always stored, ``nil`` included)."""

    name = "job_enqueued"
    version = 2
    job_id: UUID
    request: EnqueueRequest
    definition_version: int
    priority: int
    run_at: datetime
    max_attempts: int
    timeout_s: float
    backoff: BackoffPolicy
    workflow: WorkflowLink | None
    actor: str | None = None


class JobLeased(JobEvent, frozen=True, omit_defaults=True):
    """A worker claims the job: pending -> leased. Counts as the attempt's first heartbeat.

    ``rate`` is the rate limit the lease spent a token of (its type's, read in the claim's
    transaction), the one field ``omit_defaults`` leaves out when unset: a lease of an
    unlimited type is stored byte for byte as before the field existed. Its default,
    ``None``, must never change."""

    name = "job_leased"
    run_number: int
    attempt: int
    worker_id: str
    lease_expires_at: datetime
    rate: RateLimit | None = None


class JobHeartbeated(JobEvent, frozen=True):
    """The lease holder renews its lease: leased -> leased."""

    name = "job_heartbeated"
    run_number: int
    attempt: int
    worker_id: str
    lease_expires_at: datetime


class JobStageChanged(JobEvent, frozen=True):
    """The lease holder reports a new stage: leased -> leased. Not a heartbeat."""

    name = "job_stage_changed"
    run_number: int
    attempt: int
    stage: str


class JobProgressed(JobEvent, frozen=True):
    """The lease holder reports progress and/or a checkpoint: leased -> leased. Not a heartbeat."""

    name = "job_progressed"
    run_number: int
    attempt: int
    done: int | None = None
    total: int | None = None
    checkpoint: JSON | None = None


class JobSucceeded(JobEvent, frozen=True):
    """The attempt succeeded: leased -> succeeded. Revision/hash are the *result's*."""

    name = "job_succeeded"
    run_number: int
    attempt: int
    worker_id: str
    output: JSON | None = None
    revision: str | None = None
    content_hash: str | None = None


class JobFailed(JobEvent, frozen=True):
    """The attempt failed: leased -> leased. Always followed, in the same commit, by
    :class:`JobRetryScheduled` or :class:`JobDeadLettered`."""

    name = "job_failed"
    run_number: int
    attempt: int
    worker_id: str
    failure: Failure
    started_without_renewal_heartbeat: bool | None = None


class JobRetryScheduled(JobEvent, frozen=True):
    """A failed attempt will be retried: leased -> pending, not before ``next_run_at``.

    v2 records ``not_before``: the earliest retry time the failure asked for (a handler's
    ``TransientError(not_before=…)``; ``None``: none), so decision replay can tell a handler's
    later retry from a delay no policy allows. A v1 event did not record it and is read with
    ``not_before = next_run_at`` ("whatever was chosen was asked for"): v1 histories are
    judged only on the lower bound, as before."""

    name = "job_retry_scheduled"
    version = 2
    run_number: int
    attempt: int
    delay_s: float
    next_run_at: datetime
    started_without_renewal_heartbeat: bool | None = None
    not_before: datetime | None = None


class JobDeadLettered(JobEvent, frozen=True):
    """The job gives up: leased -> dead. Payload and checkpoint stay in the job's state."""

    name = "job_dead_lettered"
    run_number: int
    attempt: int
    failure: Failure
    started_without_renewal_heartbeat: bool | None = None


class JobReapDeferred(JobEvent, frozen=True):
    """The reaper failed to reap an expired lease and pushes it out instead: leased -> leased.

    Its writes for the job (``job_failed`` and the outcome) raised ``cause`` and were rolled
    back alone; this event, appended in its own savepoint after them, sets
    ``lease_expires_at = at + delay_s`` (the reaper's retry delay), so every reaper — in any
    process — skips the job until then and tries again after. Not a heartbeat: the lease
    holder did not renew anything (``last_heartbeat_at`` is kept); its fenced writes are
    accepted again meanwhile, since the job was never taken from it."""

    name = "job_reap_deferred"
    run_number: int
    attempt: int
    worker_id: str
    delay_s: float
    lease_expires_at: datetime
    cause: DeferralCause


class JobReleased(JobEvent, frozen=True):
    """The worker hands the job back unfinished: leased -> pending; the attempt is not consumed."""

    name = "job_released"
    run_number: int
    attempt: int
    worker_id: str
    reason: str


class JobCancelled(JobEvent, frozen=True):
    """An operator cancels the job: pending | leased -> cancelled."""

    name = "job_cancelled"
    run_number: int
    reason: str


class JobHandlerStopped(JobEvent, frozen=True):
    """The handler of a cancelled job's attempt has stopped: cancelled -> cancelled.

    A fact about the worker, not a transition: the job stays cancelled. Recorded in place of
    the outcome its worker would have recorded, so the history says when (``at``) the side
    effects of the cancelled attempt ended and how: ``cancelled`` (the pool cancelled an async
    handler's task), ``raised`` (the handler raised, e.g. the
    :class:`~ledger.core.errors.JobCancelledError` of its next progress report) or
    ``returned`` (it ran to the end regardless).
    """

    name = "job_handler_stopped"
    run_number: int
    attempt: int
    worker_id: str
    how: HandlerStop


class JobRequeued(JobEvent, frozen=True):
    """An operator starts a new run: dead | cancelled -> pending, ``run_number`` + 1."""

    name = "job_requeued"
    run_number: int
    reason: str


DEFINITION_EVENTS: tuple[type[Event], ...] = (JobTypeDefined, JobTypeUpdated)
JOB_EVENTS: tuple[type[JobEvent], ...] = (
    JobEnqueued,
    JobLeased,
    JobHeartbeated,
    JobStageChanged,
    JobProgressed,
    JobSucceeded,
    JobFailed,
    JobRetryScheduled,
    JobDeadLettered,
    JobReleased,
    JobCancelled,
    JobRequeued,
    JobReapDeferred,
    JobHandlerStopped,
)
ALL_EVENTS: tuple[type[Event], ...] = DEFINITION_EVENTS + JOB_EVENTS
