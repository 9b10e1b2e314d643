"""The event catalogue: every fact the ledger records.

Events are past-tense facts named ``Job<Participle>``. Each has a stable stored ``name`` (never
a Python path) and a schema ``version``; the pair forms the stored topic ``name.vN`` (see
:mod:`ledger.core.codec`). Changing a field means a new version plus an upcaster, never an edit:
old events stay readable forever. ``docs/events.md`` documents each one.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar
from uuid import UUID

import msgspec

JSON = Any
"""A JSON value (object, array, string, number, bool or null)."""


class JobStatus(StrEnum):
    """Where a job is in its life. Terminal: succeeded, dead, cancelled."""

    PENDING = "pending"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def is_live(self) -> bool:
        return self in (JobStatus.PENDING, JobStatus.LEASED)


class FailureKind(StrEnum):
    """Why an attempt failed. Retryable kinds: retryable, timeout, lease_expired, worker_lost.

    ``worker_lost``: the attempt's handler had started when its worker process died (found by
    the boot reap of a restarted pool of the same host); the handler may have killed it."""

    RETRYABLE = "retryable"
    TERMINAL = "terminal"
    TIMEOUT = "timeout"
    PANICKED = "panicked"
    LEASE_EXPIRED = "lease_expired"
    WORKER_LOST = "worker_lost"

    @property
    def is_retryable(self) -> bool:
        return self in _RETRYABLE_KINDS


_RETRYABLE_KINDS = frozenset(
    (FailureKind.RETRYABLE, FailureKind.TIMEOUT, FailureKind.LEASE_EXPIRED, FailureKind.WORKER_LOST)
)


class HandlerStop(StrEnum):
    """How the handler of a cancelled job's attempt stopped (:class:`JobHandlerStopped`)."""

    CANCELLED = "cancelled"
    """The pool cancelled the async handler's task."""
    RAISED = "raised"
    """The handler raised (its next report after the cancel raises ``job.cancelled``)."""
    RETURNED = "returned"
    """The handler ran to its end regardless; its outcome was not recorded."""


class SubjectOp(StrEnum):
    """What a sync-subject job does to its ``(source_id, uri)``."""

    UPSERT = "upsert"
    DELETE = "delete"


class Stage:
    """Stages with a meaning to the ledger. Handlers may report any other stage name."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    COMPLETED = "completed"


class _Value(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of immutable value objects that travel inside events.

    Values, events (:class:`Event`) and job states are not tracked by Python's cycle
    collector (msgspec's ``gc=False``): they hold only JSON values and each other, which
    cannot form a cycle, and a bulk enqueue makes several per job (the collector's passes
    over them were about a quarter of its client CPU, measured). A caller that puts a
    request inside its own payload makes a cycle that leaks (the payload is refused)."""


class Subject(_Value, frozen=True):
    """The external thing a sync job is about: one document of one source."""

    source_id: str
    uri: str
    op: SubjectOp = SubjectOp.UPSERT
    revision: str | None = None


class Failure(_Value, frozen=True):
    """One failed attempt: its kind, a stable code and a human message."""

    kind: FailureKind
    code: str
    message: str


class DeferralCause(_Value, frozen=True):
    """Why the reaper could not reap a job: the error its rolled-back writes raised."""

    code: str
    """The ledger error's stable code (``store.busy`` for a lock timeout)."""
    message: str
    sqlstate: str | None = None
    """The database's error code, where it gave one (PostgreSQL ``55P03``, SQLite's name)."""


class BackoffPolicy(_Value, frozen=True):
    """Exponential backoff: ``min(base_s * 2**(attempt-1), max_s)`` times ``1 ± jitter``."""

    base_s: float = 2.0
    max_s: float = 3600.0
    jitter: float = 0.25


class RateLimit(_Value, frozen=True):
    """At most ``limit`` leases per ``period_s`` for one job type, or (``per_org``) for each
    (job type, org): a token bucket of ``limit`` tokens refilled at ``limit / period_s``
    (:mod:`ledger.core.rates`). In a definition it is the policy; in a ``job_leased`` it is
    the policy that lease was charged under, so the buckets are a fold of the leases."""

    limit: int
    period_s: float
    per_org: bool = False


class JobDefinition(_Value, frozen=True):
    """How jobs of one type are run, unless an enqueue request says otherwise.

    ``rate`` is ``UNSET`` (never stored, so a definition without a rate keeps the bytes it
    had before the field existed) unless the type is rate limited."""

    job_type: str
    version: int = 1
    max_attempts: int = 8
    default_timeout_s: float = 900.0
    default_priority: int = 100
    enabled: bool = True
    backoff: BackoffPolicy = BackoffPolicy()
    # The concurrency limits (docs/operations.md, "Concurrency limits"): UNSET, never None,
    # when there is none, so the field is left out of the stored map and a definition without
    # limits is stored byte for byte as before the fields existed.
    concurrency: int | msgspec.UnsetType = msgspec.UNSET
    """At most this many leases of the type alive at once, across every process."""
    per_org_concurrency: int | msgspec.UnsetType = msgspec.UNSET
    """At most this many leases of the type alive at once per org (no org is one org)."""
    resource: str | msgspec.UnsetType = msgspec.UNSET
    """A named resource the type's jobs share with other types' (``resource_limit``)."""
    resource_limit: int | msgspec.UnsetType = msgspec.UNSET
    """At most this many leases alive at once of all the types naming ``resource``; types
    naming one resource with different limits are held to the smallest."""
    rate: RateLimit | msgspec.UnsetType = msgspec.UNSET


DEFAULT_QUEUE = "default"
"""The queue of a job enqueued without one (``queue=None``): claims and listings by queue name
it so, and a job enqueued to ``"default"`` is in the same queue. (The SQL spells it too, in
the claim-by-queue index's expression ``coalesce(queue, 'default')``.)"""


def queue_of(queue: str | None) -> str:
    """The queue a job's requested ``queue`` puts it in."""
    return DEFAULT_QUEUE if queue is None else queue


class EnqueueRequest(_Value, frozen=True, kw_only=False):
    """An enqueue request exactly as the caller made it (unset fields stay ``None``).

    Kept verbatim in :class:`JobEnqueued` so that an idempotent repeat is compared with what
    was *asked*, not with what defaults resolved it to. Positional construction is allowed
    (for the queue view's packed blob, see :class:`~ledger.core.state.JobState`); the stored
    form of events is unaffected.
    """

    job_type: str
    payload: dict[str, JSON] = {}
    priority: int | None = None
    run_at: datetime | None = None
    delay_s: float | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    org: str | None = None
    queue: str | None = None
    idempotency_key: str | None = None
    subject: Subject | None = None


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


class WorkflowLink(_Value, frozen=True):
    """The workflow step a job runs: set by the release that enqueued it, never by a caller."""

    run_id: UUID
    step_key: str


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
