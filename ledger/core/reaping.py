"""The reaper's pure half: its configuration, the per-job decision and the pass report.

A reaper pass fails every expired lease it takes as ``lease_expired`` (``job.lease_expired``):
retried after a fixed delay, or dead-lettered when its attempts are used up. A job whose reap
fails is deferred: :func:`decide_reap_deferral` pushes its lease out by the same delay, as a
``job_reap_deferred`` event, so every reaper skips it until then.
``started_without_renewal_heartbeat`` is derived from the job's history
(:func:`ledger.core.diagnostics.started_without_renewal_heartbeat`) and recorded in the events.
The transaction that takes the leases and appends these events is
:func:`ledger.jobs.reaping.reap`; the service that runs passes on an interval is
:class:`ledger.maintenance.reaper.Reaper`.

The *boot reap* (:func:`plan_boot_reap`) is the other way a lease ends without its holder: a
pool starting on a host finds the claims a dead process of the same pool left, lease expired
or not. A claim whose handler never started is released (its attempt not consumed); one whose
handler had started (:func:`ledger.core.decide.handler_started`) is failed as ``worker_lost``
and spends its attempt, since its handler may be what killed the process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID

import msgspec

from ledger.core import decide, lost_attempts
from ledger.core.codec import Record
from ledger.core.diagnostics import started_without_renewal_heartbeat
from ledger.core.errors import InvalidTransitionError, LedgerError
from ledger.core.events import (
    JobDeadLettered,
    JobEvent,
    JobFailed,
    JobReapDeferred,
    JobRetryScheduled,
)
from ledger.core.limits import check_setting_seconds
from ledger.core.state import JobState
from ledger.core.values import JSON, DeferralCause, Failure

Disposition = Literal["retry_scheduled", "dead_lettered"]


@dataclass(frozen=True)
class ReaperConfig:
    limit: int = 500
    """Expired leases taken per pass."""
    retry_delay_s: float = 60.0
    """Fixed delay before a reaped job runs again; also how far a deferred job's lease is
    pushed out (every reaper skips it that long)."""
    lock_timeout_s: float | None = None
    """How long one job's writes may wait for a lock (PostgreSQL) before it is deferred."""
    error_sample: int = 20
    """Deferred errors reported in full per pass (the count is always exact)."""
    interval_s: float = 30.0
    """How often a maintenance runner runs a pass (not used by a single pass)."""

    def __post_init__(self) -> None:
        if self.limit < 1 or self.retry_delay_s < 0 or self.error_sample < 0:
            raise ValueError("ReaperConfig needs limit >= 1, retry_delay_s >= 0, error_sample >= 0")
        if self.lock_timeout_s is not None and self.lock_timeout_s <= 0:
            raise ValueError("lock_timeout_s must be positive (None: wait as long as it takes)")
        if self.interval_s <= 0:
            raise ValueError("interval_s must be positive")
        check_setting_seconds(self.retry_delay_s, "retry_delay_s", zero=True)
        check_setting_seconds(self.interval_s, "interval_s")
        if self.lock_timeout_s is not None:
            check_setting_seconds(self.lock_timeout_s, "lock_timeout_s")


class ReapedLease(msgspec.Struct, frozen=True):
    """One expired lease the pass failed, and what became of the job."""

    job_id: UUID
    job_type: str
    org: str | None
    run_number: int
    attempt: int
    max_attempts: int
    worker_id: str | None
    checkpoint: JSON | None
    failure: Failure
    disposition: Disposition
    next_run_at: datetime | None
    payload: dict[str, JSON] | None
    """Set for dead-lettered jobs, so the report carries what was lost."""
    started_without_renewal_heartbeat: bool


class DeferredError(msgspec.Struct, frozen=True):
    """A job the pass could not reap: its reap was rolled back, and its lease pushed out."""

    job_id: UUID
    run_number: int
    attempt: int
    code: str
    message: str
    sqlstate: str | None
    deferred_until: datetime | None
    """The pushed-out lease's end (the ``job_reap_deferred`` event's); ``None`` when that
    event could not be appended either: the job stays expired and the next pass retries it."""


class ReapReport(msgspec.Struct):
    processed: int
    reaped: list[ReapedLease]
    deferred_error_count: int
    deferred_errors: list[DeferredError]

    @property
    def dead_lettered(self) -> list[ReapedLease]:
        """The reaped leases whose job is now dead (with their payloads)."""
        return [r for r in self.reaped if r.disposition == "dead_lettered"]


class PlannedReap(msgspec.Struct, frozen=True):
    """The events that reap one expired lease, decided before any is appended."""

    state: JobState
    events: list[JobEvent]
    started_without_renewal_heartbeat: bool


def plan_reaps(
    expired: Sequence[JobState],
    histories: Mapping[UUID, Sequence[Record]],
    now: datetime,
    *,
    retry_delay_s: float,
) -> list[PlannedReap]:
    """Decide the reap of each expired lease (in the given order) from its job's history."""
    planned = []
    for state in expired:
        bare = bool(started_without_renewal_heartbeat(histories[state.job_id]).value)
        events = lost_attempts.decide_reap(
            state, now, retry_delay_s=retry_delay_s, started_without_renewal_heartbeat=bare
        )
        planned.append(PlannedReap(state, events, bare))
    return planned


class BootReap(msgspec.Struct, frozen=True):
    """What a boot reap did with a dead process's claims: their new states."""

    released: list[JobState]
    """Claims whose handler never started, back to pending without spending the attempt."""
    lost: list[JobState]
    """Attempts whose handler had started, failed as ``worker_lost``: pending again (after
    the job's backoff) or, with their attempts used up, dead."""


def plan_boot_reap(
    held: Sequence[JobState],
    histories: Mapping[UUID, Sequence[Record]],
    now: datetime,
    reason: str,
) -> list[tuple[UUID, list[JobEvent]]]:
    """Decide the end of each claim a dead process held (see the module docstring)."""
    changes: list[tuple[UUID, list[JobEvent]]] = []
    for state in held:
        if decide.handler_started(state):
            bare = bool(started_without_renewal_heartbeat(histories[state.job_id]).value)
            events = lost_attempts.decide_worker_lost(
                state, now, started_without_renewal_heartbeat=bare
            )
        else:
            events = [lost_attempts.decide_release_stale(state, now, reason)]
        changes.append((state.job_id, events))
    return changes


def reaped_lease(planned: PlannedReap) -> ReapedLease:
    """What the report says of a reap that was appended."""
    state = planned.state
    failed, outcome = planned.events
    assert isinstance(failed, JobFailed)
    assert isinstance(outcome, JobRetryScheduled | JobDeadLettered)
    dead = isinstance(outcome, JobDeadLettered)
    return ReapedLease(
        job_id=state.job_id,
        job_type=state.job_type,
        org=state.org,
        run_number=state.run_number,
        attempt=state.attempt,
        max_attempts=state.max_attempts,
        worker_id=state.worker_id,
        checkpoint=state.checkpoint,
        failure=failed.failure,
        disposition="dead_lettered" if dead else "retry_scheduled",
        next_run_at=None if dead else outcome.next_run_at,  # type: ignore[union-attr]
        payload=state.payload if dead else None,
        started_without_renewal_heartbeat=planned.started_without_renewal_heartbeat,
    )


def deferral_cause(error: LedgerError) -> DeferralCause:
    """The error a failed reap raised, as the deferral event records it."""
    return DeferralCause(code=error.code, message=error.message, sqlstate=error.sqlstate)


def decide_reap_deferral(
    state: JobState, now: datetime, *, retry_delay_s: float, cause: DeferralCause
) -> JobReapDeferred:
    """Defer the reap of an expired lease: push it out to ``now + retry_delay_s``.

    Only an expired lease is deferred (the pass took the job because it was), and the lease
    stays its holder's: same run, attempt and worker."""
    if not lost_attempts.lease_is_expired(state, now):
        raise InvalidTransitionError(f"the lease on job {state.job_id} has not expired")
    assert state.worker_id is not None
    return JobReapDeferred(
        at=now,
        run_number=state.run_number,
        attempt=state.attempt,
        worker_id=state.worker_id,
        delay_s=retry_delay_s,
        lease_expires_at=now + timedelta(seconds=retry_delay_s),
        cause=cause,
    )


def deferred_error(state: JobState, cause: DeferralCause, until: datetime | None) -> DeferredError:
    """What the report says of a job whose reap failed and was rolled back (``until``: the
    deferral's pushed-out lease, ``None`` if the deferral was not recorded)."""
    return DeferredError(
        job_id=state.job_id,
        run_number=state.run_number,
        attempt=state.attempt,
        code=cause.code,
        message=cause.message,
        sqlstate=cause.sqlstate,
        deferred_until=until,
    )


def reap_report(
    done: Sequence[PlannedReap], errors: Sequence[DeferredError], *, error_sample: int
) -> ReapReport:
    """The pass report: every reap appended, and a sample of the deferred errors."""
    reaped = [reaped_lease(planned) for planned in done]
    return ReapReport(
        processed=len(reaped),
        reaped=reaped,
        deferred_error_count=len(errors),
        deferred_errors=list(errors[:error_sample]),
    )
