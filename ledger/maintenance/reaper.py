"""The reaper: fails expired leases, one savepoint per job, with history-derived diagnostics.

A pass (:meth:`Reaper.run_once`) takes up to ``limit`` leased jobs whose lease ended strictly
before now, oldest expiry first, skipping rows another transaction holds — so any number of
processes may reap at once without reaping a job twice. Each job is failed as
``lease_expired`` (``job.lease_expired``): retried after a fixed delay, or dead-lettered when
its attempts are used up. ``started_without_renewal_heartbeat`` is computed from the job's
history and recorded in the events appended.

Each job is reaped in isolation: the batch is first tried in one savepoint (errors are rare),
and if that fails, again one savepoint per job, so an error (a lock timeout, a constraint)
rolls back that job alone, appends nothing for it, and is reported as a deferred error; the
rest of the batch commits. A deferred job is left as it is — its history unchanged and so its view
row unchanged — and this reaper skips it until the retry delay has passed. (runledger pushes
the lease out in the row instead; here no view row changes without an event explaining it.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID

import msgspec

from ledger.api.ledger import Ledger
from ledger.core import decide
from ledger.core.diagnostics import started_without_renewal_heartbeat
from ledger.core.errors import LedgerError
from ledger.core.events import (
    JSON,
    Failure,
    JobDeadLettered,
    JobEvent,
    JobFailed,
    JobRetryScheduled,
)
from ledger.core.state import JobState

Disposition = Literal["retry_scheduled", "dead_lettered"]


@dataclass(frozen=True)
class ReaperConfig:
    limit: int = 500
    """Expired leases taken per pass."""
    retry_delay_s: float = 60.0
    """Fixed delay before a reaped job runs again (also how long a deferred job is skipped)."""
    lock_timeout_s: float | None = None
    """How long one job's writes may wait for a lock (PostgreSQL) before it is deferred."""
    error_sample: int = 20
    """Deferred errors reported in full per pass (the count is always exact)."""

    def __post_init__(self) -> None:
        if self.limit < 1 or self.retry_delay_s < 0 or self.error_sample < 0:
            raise ValueError("ReaperConfig needs limit >= 1, retry_delay_s >= 0, error_sample >= 0")
        if self.lock_timeout_s is not None and self.lock_timeout_s <= 0:
            raise ValueError("lock_timeout_s must be positive (None: wait as long as it takes)")


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
    """A job the pass could not reap; nothing was appended for it."""

    job_id: UUID
    run_number: int
    attempt: int
    code: str
    message: str
    sqlstate: str | None
    deferred_until: datetime


class ReapReport(msgspec.Struct):
    processed: int
    reaped: list[ReapedLease]
    deferred_error_count: int
    deferred_errors: list[DeferredError]

    @property
    def dead_lettered(self) -> list[ReapedLease]:
        """The reaped leases whose job is now dead (with their payloads)."""
        return [r for r in self.reaped if r.disposition == "dead_lettered"]


class Reaper:
    """Runs reaper passes over one ledger. Safe to run in several processes at once."""

    def __init__(self, ledger: Ledger, config: ReaperConfig | None = None) -> None:
        self._ledger = ledger
        self.config = config or ReaperConfig()
        self._deferred: dict[UUID, datetime] = {}
        self._lock = threading.Lock()

    def run_once(self) -> ReapReport:
        """One pass; see the module docstring."""
        config = self.config
        with self._ledger.store.unit_of_work() as uow:
            expired = uow.expired_leases(
                self._ledger.clock.now(), config.limit, exclude=self._still_deferred()
            )
            if not expired:
                return ReapReport(0, [], 0, [])
            uow.serialise_appends()
            if config.lock_timeout_s is not None:
                uow.set_lock_timeout(config.lock_timeout_s)
            histories = uow.histories([state.job_id for state in expired])
            now = self._ledger.clock.now()
            planned = []
            for state in expired:
                diagnostic = bool(started_without_renewal_heartbeat(histories[state.job_id]).value)
                events = decide.decide_reap(
                    state,
                    now,
                    retry_delay_s=config.retry_delay_s,
                    started_without_renewal_heartbeat=diagnostic,
                )
                planned.append((state, events, diagnostic))
            errors: list[DeferredError] = []
            try:
                # Errors are rare: try the whole batch in one savepoint first...
                with uow.savepoint():
                    uow.append([(state.job_id, events) for state, events, _ in planned])
                done = planned
            except LedgerError:
                # ...and only then one savepoint per job, to find and defer the failing ones.
                done = []
                for state, events, diagnostic in planned:
                    try:
                        with uow.savepoint():
                            uow.append([(state.job_id, events)])
                    except LedgerError as error:
                        errors.append(self._defer(state, error, now))
                        continue
                    done.append((state, events, diagnostic))
            reaped = [
                _reaped_lease(state, events, diagnostic) for state, events, diagnostic in done
            ]
        return ReapReport(
            processed=len(reaped),
            reaped=reaped,
            deferred_error_count=len(errors),
            deferred_errors=errors[: config.error_sample],
        )

    def _still_deferred(self) -> list[UUID]:
        now = self._ledger.clock.now()
        with self._lock:
            for job_id in [j for j, until in self._deferred.items() if until <= now]:
                del self._deferred[job_id]
            return list(self._deferred)

    def _defer(self, state: JobState, error: LedgerError, now: datetime) -> DeferredError:
        until = now + timedelta(seconds=self.config.retry_delay_s)
        with self._lock:
            self._deferred[state.job_id] = until
        return DeferredError(
            job_id=state.job_id,
            run_number=state.run_number,
            attempt=state.attempt,
            code=error.code,
            message=error.message,
            sqlstate=error.sqlstate,
            deferred_until=until,
        )


def _reaped_lease(state: JobState, events: Sequence[JobEvent], started_bare: bool) -> ReapedLease:
    failed = events[0]
    outcome = events[1]
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
        started_without_renewal_heartbeat=started_bare,
    )
