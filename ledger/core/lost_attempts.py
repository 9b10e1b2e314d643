"""Decisions for an attempt its worker can no longer end, pure as :mod:`ledger.core.decide`'s.

Two ways an attempt ends without its worker: its lease expires (the reaper,
:func:`decide_reap`: failed as ``lease_expired``), or its process died while it held the claim
(the boot reap of a restarted pool on the same host, :func:`ledger.core.reaping.plan_boot_reap`:
a claim whose handler never started is released, :func:`decide_release_stale`; one whose
handler had started is failed as ``worker_lost``, :func:`decide_worker_lost`). Neither is
fenced, since they act on the job and not on a lease, and neither draws a random number, so
``replay --check`` recomputes their delays exactly.
"""

from __future__ import annotations

from datetime import datetime

from ledger.core.decide import failure_outcome, handler_started
from ledger.core.errors import InvalidTransitionError
from ledger.core.events import JobEvent, JobFailed, JobReleased
from ledger.core.state import JobState
from ledger.core.values import Failure, FailureKind, JobStatus

LEASE_EXPIRED_CODE = "job.lease_expired"
WORKER_LOST_CODE = "job.worker_lost"


def lease_is_expired(state: JobState, now: datetime) -> bool:
    """Expired means strictly before ``now``; a lease ending exactly now is still live."""
    return (
        state.status is JobStatus.LEASED
        and state.lease_expires_at is not None
        and state.lease_expires_at < now
    )


def decide_reap(
    state: JobState,
    now: datetime,
    *,
    retry_delay_s: float,
    started_without_renewal_heartbeat: bool | None = None,
) -> list[JobEvent]:
    """Fail an expired lease as ``lease_expired``: a fixed-delay retry, or a dead letter."""
    if not lease_is_expired(state, now):
        raise InvalidTransitionError(f"the lease on job {state.job_id} has not expired")
    assert state.worker_id is not None
    failure = Failure(
        kind=FailureKind.LEASE_EXPIRED,
        code=LEASE_EXPIRED_CODE,
        message=f"lease held by {state.worker_id} expired at "
        f"{state.lease_expires_at.isoformat() if state.lease_expires_at else '?'}",
    )
    return _lost_attempt(state, now, failure, retry_delay_s, started_without_renewal_heartbeat)


def decide_release_stale(state: JobState, now: datetime, reason: str) -> JobReleased:
    """Release a claim left by a dead process (boot reap): its attempt is not consumed.

    The boot reap releases only claims whose handler never started
    (:func:`ledger.core.reaping.plan_boot_reap`); this decision does not refuse a started
    one, since histories recorded before that rule released those too and must still replay."""
    if state.status is not JobStatus.LEASED or state.worker_id is None:
        raise InvalidTransitionError(f"job {state.job_id} is {state.status}, not leased")
    return JobReleased(
        at=now,
        run_number=state.run_number,
        attempt=state.attempt,
        worker_id=state.worker_id,
        reason=reason,
    )


def decide_worker_lost(
    state: JobState, now: datetime, *, started_without_renewal_heartbeat: bool | None = None
) -> list[JobEvent]:
    """Fail an attempt whose handler had started when its process died (boot reap), as
    ``worker_lost`` (``job.worker_lost``): it spends the attempt, so a handler that kills its
    worker every time ends dead after ``max_attempts`` instead of looping. Retried after the
    job's own backoff at its mid-point (no random draw, so replay recomputes it exactly):
    growing delays space out the crashes."""
    if state.status is not JobStatus.LEASED or state.worker_id is None:
        raise InvalidTransitionError(f"job {state.job_id} is {state.status}, not leased")
    if not handler_started(state):
        raise InvalidTransitionError(
            f"job {state.job_id}'s handler never started: its claim is released, not failed"
        )
    failure = Failure(
        kind=FailureKind.WORKER_LOST,
        code=WORKER_LOST_CODE,
        message=f"worker {state.worker_id} died while the handler ran (stage {state.stage})",
    )
    return _lost_attempt(state, now, failure, None, started_without_renewal_heartbeat)


def _lost_attempt(
    state: JobState,
    now: datetime,
    failure: Failure,
    fixed_delay_s: float | None,
    started_without_renewal_heartbeat: bool | None,
) -> list[JobEvent]:
    """An attempt its worker can no longer end (its lease expired, its process died): the
    failure, then a retry or a dead letter, with no random draw so that replay recomputes
    the delay exactly (``fixed_delay_s``, else the job's backoff at its mid-point)."""
    assert state.worker_id is not None
    return [
        JobFailed(
            at=now,
            run_number=state.run_number,
            attempt=state.attempt,
            worker_id=state.worker_id,
            failure=failure,
            started_without_renewal_heartbeat=started_without_renewal_heartbeat,
        ),
        failure_outcome(
            state,
            now,
            failure,
            jitter_draw=0.5,
            not_before=None,
            fixed_delay_s=fixed_delay_s,
            started_without_renewal_heartbeat=started_without_renewal_heartbeat,
        ),
    ]
