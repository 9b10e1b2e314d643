"""The reaper pass's transaction (:meth:`ledger.api.ledger.Ledger.reap`).

One unit of work takes up to ``limit`` leased jobs whose lease ended strictly before now,
oldest expiry first, skipping rows another transaction holds (``SKIP LOCKED``) — so any number
of processes may reap at once without reaping a job twice — and fails each as decided by
:func:`ledger.core.reaping.plan_reaps`.

Each job is reaped in isolation: the batch is first tried in one savepoint (errors are rare),
and if that fails, again one savepoint per job, so an error (a lock timeout, a constraint)
rolls back that job's reap alone and the rest of the batch commits. The failed job is then
*deferred*, as history: a ``job_reap_deferred`` event, appended in a savepoint of its own
after the failed one, pushes its lease out by the retry delay and records the error. The
deferral lives in the job's lease, so every reaper — another object, another process — skips
the job until the pushed-out lease expires, and the next pass after that tries again
(runledger pushes the lease out in the row; here the event explains the row's change).
"""

from __future__ import annotations

from datetime import datetime

from ledger.clock import Clock
from ledger.core.errors import LedgerError
from ledger.core.reaping import (
    DeferredError,
    PlannedReap,
    ReaperConfig,
    ReapReport,
    decide_reap_deferral,
    deferral_cause,
    deferred_error,
    plan_reaps,
    reap_report,
)
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import JOBS


def reap(
    store: Store, clock: Clock, config: ReaperConfig, *, now: datetime | None = None
) -> ReapReport:
    """One pass (see the module docstring). ``now``: the pass's time for every reading;
    by default the clock is read for the expiry and (once the rows are locked) the events'
    stamps."""

    def reading() -> datetime:
        return now if now is not None else clock.now()

    with store.unit_of_work() as uow:
        expired = uow.expired_leases(reading(), config.limit)
        if not expired:
            return ReapReport(0, [], 0, [])
        # No events-table lock: the expired rows are locked (FOR UPDATE), so their histories
        # cannot change before commit, and appends need no lock to stay in order.
        if config.lock_timeout_s is not None:
            uow.set_lock_timeout(config.lock_timeout_s)
        histories = uow.histories([state.job_id for state in expired])
        stamped = reading()
        planned = plan_reaps(expired, histories, stamped, retry_delay_s=config.retry_delay_s)
        done, errors = _append_each_in_isolation(uow, planned, stamped, config.retry_delay_s)
    return reap_report(done, errors, error_sample=config.error_sample)


def _append_each_in_isolation(
    uow: UnitOfWork, planned: list[PlannedReap], now: datetime, retry_delay_s: float
) -> tuple[list[PlannedReap], list[DeferredError]]:
    """Append the planned reaps; those that fail are rolled back alone and deferred."""
    try:
        # Errors are rare: try the whole batch in one savepoint first...
        with uow.savepoint():
            uow.append([JOBS.change(p.state.job_id, p.events) for p in planned])
        return planned, []
    except LedgerError:
        pass
    # ...and only then one savepoint per job, to find and defer the failing ones.
    done: list[PlannedReap] = []
    errors: list[DeferredError] = []
    for item in planned:
        try:
            with uow.savepoint():
                uow.append([JOBS.change(item.state.job_id, item.events)])
        except LedgerError as error:
            errors.append(_defer(uow, item, error, now, retry_delay_s))
            continue
        done.append(item)
    return done, errors


def _defer(
    uow: UnitOfWork, item: PlannedReap, error: LedgerError, now: datetime, retry_delay_s: float
) -> DeferredError:
    """Record the deferral of a job whose reap was rolled back, in its own savepoint. If even
    that fails, the job is left expired (nothing appended) and the next pass retries it."""
    cause = deferral_cause(error)
    deferral = decide_reap_deferral(item.state, now, retry_delay_s=retry_delay_s, cause=cause)
    try:
        with uow.savepoint():
            uow.append([JOBS.change(item.state.job_id, [deferral])])
    except LedgerError:
        return deferred_error(item.state, cause, None)
    return deferred_error(item.state, cause, deferral.lease_expires_at)
