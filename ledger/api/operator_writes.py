"""Operator and recovery writes that are more than a fenced decision: requeue (which must
respect the live-subject rule) and the boot reap of a crashed process's claims."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from ledger.clock import Clock
from ledger.core import decide
from ledger.core.errors import JobNotFoundError
from ledger.core.state import JobState
from ledger.store.store import Store


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
        return uow.append([(job_id, [event])])[job_id]


def release_stale_claims(
    store: Store, clock: Clock, prefix: str, alive: Callable[[str], bool], reason: str
) -> list[JobState]:
    """Release the jobs leased by workers named ``prefix…`` that ``alive`` says are gone."""
    with store.unit_of_work() as uow:
        held = [
            s
            for s in uow.leased_by_prefix(prefix)
            if s.worker_id is not None and not alive(s.worker_id)
        ]
        now = clock.now()
        changes = [(s.job_id, [decide.decide_release_stale(s, now, reason)]) for s in held]
        released = uow.append(changes)
    return [released[s.job_id] for s in held]
