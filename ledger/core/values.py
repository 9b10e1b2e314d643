"""The values the events carry: a job's status and stage, a failure and its kind, a sync
subject, the retry and rate policies, a job type's definition, an enqueue request as asked,
and the workflow step a job runs.

Each is immutable and compared by value, and travels inside an event
(:mod:`ledger.core.events`) or a job's state: changing one's fields changes the stored events'
schema (a new event version plus an upcaster, never an edit). The event catalogue re-exports
them, so ``from ledger.core.events import JobDefinition`` still works.

This module is pure: no store, driver or clock.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
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


class WorkflowLink(_Value, frozen=True):
    """The workflow step a job runs: set by the release that enqueued it, never by a caller."""

    run_id: UUID
    step_key: str
