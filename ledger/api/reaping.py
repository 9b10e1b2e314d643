"""The reaper pass's transaction (:meth:`ledger.api.ledger.Ledger.reap`).

One unit of work takes up to ``limit`` leased jobs whose lease ended strictly before now,
oldest expiry first, skipping rows another transaction holds (``SKIP LOCKED``) — so any number
of processes may reap at once without reaping a job twice — and fails each as decided by
:func:`ledger.core.reaping.plan_reaps`.

Each job is reaped in isolation: the batch is first tried in one savepoint (errors are rare),
and if that fails, again one savepoint per job, so an error (a lock timeout, a constraint)
rolls back that job alone, appends nothing for it, and is reported as a deferred error; the
rest of the batch commits. A deferred job is left as it is — its history unchanged and so its
view row unchanged — and is remembered in :class:`DeferredJobs`, which the next passes given
the same memory skip until the retry delay has passed. (runledger pushes the lease out in the
row instead; here no view row changes without an event explaining it.)
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from uuid import UUID

from ledger.clock import Clock
from ledger.core.errors import LedgerError
from ledger.core.reaping import (
    DeferredError,
    PlannedReap,
    ReaperConfig,
    ReapReport,
    deferred_error,
    plan_reaps,
    reap_report,
)
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork


class DeferredJobs:
    """The jobs a reaper's earlier passes deferred, each until its retry delay has passed.

    Thread-safe: a service's passes may run on different threads. Held by the service (one
    memory per :class:`~ledger.maintenance.reaper.Reaper`), not by the ledger, so a one-off
    pass (``jobledger reap``, :meth:`Ledger.reap_expired`) starts with none.
    """

    def __init__(self) -> None:
        self._until: dict[UUID, datetime] = {}
        self._lock = threading.Lock()

    def active(self, now: datetime) -> list[UUID]:
        """The jobs still deferred at ``now`` (forgetting those whose time has come)."""
        with self._lock:
            for job_id in [j for j, until in self._until.items() if until <= now]:
                del self._until[job_id]
            return list(self._until)

    def defer(self, job_id: UUID, until: datetime) -> None:
        with self._lock:
            self._until[job_id] = until


def reap(
    store: Store,
    clock: Clock,
    config: ReaperConfig,
    *,
    deferred: DeferredJobs,
    now: datetime | None = None,
) -> ReapReport:
    """One pass (see the module docstring). ``now``: the pass's time for every reading;
    by default the clock is read for the deferral window, the expiry and (once the rows are
    locked) the events' stamps."""

    def reading() -> datetime:
        return now if now is not None else clock.now()

    with store.unit_of_work() as uow:
        skipped = deferred.active(reading())
        expired = uow.expired_leases(reading(), config.limit, exclude=skipped)
        if not expired:
            return ReapReport(0, [], 0, [])
        uow.serialise_appends()
        if config.lock_timeout_s is not None:
            uow.set_lock_timeout(config.lock_timeout_s)
        histories = uow.histories([state.job_id for state in expired])
        stamped = reading()
        planned = plan_reaps(expired, histories, stamped, retry_delay_s=config.retry_delay_s)
        until = stamped + timedelta(seconds=config.retry_delay_s)
        done, errors = _append_each_in_isolation(uow, planned, until)
        for error in errors:
            deferred.defer(error.job_id, error.deferred_until)
    return reap_report(done, errors, error_sample=config.error_sample)


def _append_each_in_isolation(
    uow: UnitOfWork, planned: list[PlannedReap], deferred_until: datetime
) -> tuple[list[PlannedReap], list[DeferredError]]:
    """Append the planned reaps; those that fail are rolled back alone and reported."""
    try:
        # Errors are rare: try the whole batch in one savepoint first...
        with uow.savepoint():
            uow.append([(p.state.job_id, p.events) for p in planned])
        return planned, []
    except LedgerError:
        pass
    # ...and only then one savepoint per job, to find and defer the failing ones.
    done: list[PlannedReap] = []
    errors: list[DeferredError] = []
    for item in planned:
        try:
            with uow.savepoint():
                uow.append([(item.state.job_id, item.events)])
        except LedgerError as error:
            errors.append(deferred_error(item.state, error, deferred_until))
            continue
        done.append(item)
    return done, errors
