"""Operator and recovery writes that are more than a fenced decision: cancel of many jobs
(each refusal reported), requeue (which must respect the live-subject rule) and the boot reap
of a crashed process's claims (released, or failed as ``worker_lost`` if their handler ran)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.clock import Clock
from ledger.core import decide
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JobCancelled
from ledger.core.reaping import BootReap, plan_boot_reap
from ledger.core.requests import check_reason
from ledger.core.state import JobState
from ledger.core.values import JobStatus
from ledger.jobs.worker_writes import write_fenced_many
from ledger.store.store import Store
from ledger.views.kinds import JOBS


class Refusal(msgspec.Struct, frozen=True):
    """A job an operator's command left as it was, and why (its error's stable code)."""

    job_id: UUID
    job_type: str | None
    """``None`` for a job that does not exist."""
    code: str
    message: str


class Cancelled(msgspec.Struct, frozen=True):
    """A job cancelled, and what it was until then."""

    job_id: UUID
    job_type: str
    was: str
    """Its status before: ``pending`` or ``leased``."""
    worker_id: str | None
    """The worker whose lease the cancel ended (its later writes fail the fence)."""


class CancelReport(msgspec.Struct, frozen=True):
    cancelled: list[Cancelled]
    refused: list[Refusal]


def _cancelled(state: JobState) -> Cancelled:
    leased = state.status is JobStatus.LEASED
    worker = state.worker_id if leased else None
    return Cancelled(state.job_id, state.job_type, state.status.value, worker)


def cancel_each(store: Store, clock: Clock, job_ids: Iterable[UUID], reason: str) -> CancelReport:
    """Cancel every live job of ``job_ids`` in one transaction; each unknown or finished one
    is reported as refused, not raised, and stops no other. A repeated id counts once."""
    check_reason(reason)
    wanted = list(dict.fromkeys(job_ids))
    before: dict[UUID, JobState] = {}

    def decision(state: JobState, now: datetime) -> JobCancelled:
        before[state.job_id] = state
        return decide.decide_cancel(state, now, reason)

    result = write_fenced_many(store, clock, [(job_id, decision) for job_id in wanted])
    cancelled = [_cancelled(before[job_id]) for job_id in wanted if job_id not in result.rejected]
    refused = [
        Refusal(job_id, before[job_id].job_type if job_id in before else None, e.code, e.message)
        for job_id, e in result.rejected.items()
    ]
    return CancelReport(cancelled, refused)


def requeue(store: Store, clock: Clock, job_id: UUID, reason: str) -> JobState:
    """Start a new run of a dead or cancelled job, refused while its subject has a live job."""
    with store.unit_of_work() as uow:
        state = uow.lock_jobs([job_id]).get(job_id)
        if state is None:
            raise JobNotFoundError(f"no job {job_id}")
        live = None
        if state.subject is not None:
            uow.serialise_appends()  # the live-subject answer must hold until commit
            live = uow.find_live_subject(state.subject.source_id, state.subject.uri)
        now = clock.now()
        event = decide.decide_requeue(
            state, now, reason, live_subject_job=live.job_id if live else None
        )
        return uow.append([JOBS.change(job_id, [event])])[job_id]


def release_stale_claims(
    store: Store, clock: Clock, prefix: str, alive: Callable[[str], bool], reason: str
) -> BootReap:
    """End the claims of workers named ``prefix…`` that ``alive`` says are gone (the boot
    reap, :func:`ledger.core.reaping.plan_boot_reap`): released if their handler never
    started, failed as ``worker_lost`` if it had."""
    with store.unit_of_work() as uow:
        held = [
            s
            for s in uow.leased_by_prefix(prefix)
            if s.worker_id is not None and not alive(s.worker_id)
        ]
        if not held:
            return BootReap(released=[], lost=[])
        started = [s.job_id for s in held if decide.handler_started(s)]
        histories = uow.histories(started) if started else {}
        now = clock.now()
        changed = uow.append([JOBS.changes(plan_boot_reap(held, histories, now, reason))])
    return BootReap(
        released=[changed[s.job_id] for s in held if s.job_id not in histories],
        lost=[changed[s.job_id] for s in held if s.job_id in histories],
    )
