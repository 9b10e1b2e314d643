"""A batch turn: record a worker's finished outcomes and claim its next jobs in one transaction.

A pool that claims in batches and records outcomes in batches pays two commits per batch of
jobs; a turn pays one. The outcomes are decided first, each against its job's locked state
(the fence: an outcome on a lease that has ended or moved to another worker is refused and
reported, nothing appended for it), then the due jobs are claimed, and everything is appended
in that order — so in commit order the finished jobs' attempts end before the new leases
begin, and a worker holding ``depth`` leases never appears to hold more. A refused outcome
does not stop the claim: the turn commits the rest. A job whose stolen lease was reaped back
to pending may be claimed again in the same turn (its old attempt's outcome is refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import msgspec

from ledger.clock import Clock
from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobEvent
from ledger.core.state import JobState, fold
from ledger.core.values import JobStatus
from ledger.jobs.claim_rates import RatedClaim
from ledger.jobs.leases import LeaseLength
from ledger.jobs.outcomes import BatchResult
from ledger.jobs.worker_writes import Decision, checked_claim, claim_due, decide_each, lease_changes
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import JOBS


class TurnResult(msgspec.Struct):
    """What a turn did: the outcomes' result (as :meth:`Ledger.finish_many` reports it) and
    the jobs it claimed, in claim order."""

    finished: BatchResult
    claimed: list[JobState]


def finish_and_claim(
    store: Store,
    clock: Clock,
    outcomes: Sequence[tuple[UUID, Decision]],
    worker_id: str,
    *,
    limit: int,
    types: Sequence[str] | None,
    lease_s: LeaseLength,
    queues: Sequence[str] | None = None,
    starting: int = 0,
) -> TurnResult:
    """Decide ``outcomes`` (job, decision) under their jobs' row locks, lease up to ``limit``
    due jobs (of ``types`` and in ``queues``; any if ``None``; ``limit`` 0 claims nothing) to
    ``worker_id``, and append both in one transaction (see the module docstring); the first
    ``starting`` claimed jobs also started (as :func:`ledger.jobs.worker_writes.claim`)."""
    if limit < 0:
        raise InvalidRequestError("a turn needs limit >= 0")
    queues = checked_claim(worker_id, lease_s, queues)
    claiming = limit > 0 and (types is None or bool(types)) and (queues is None or bool(queues))
    with store.unit_of_work() as uow:
        changes, rejected = decide_each(uow, clock, outcomes)
        claimed = (
            claim_due(uow, clock, types, limit, queues, freed=_ended_leases(uow, changes))
            if claiming
            else RatedClaim([], {})
        )
        # Outcomes first: in commit order an attempt ends before the next lease begins.
        new_states = uow.append(
            [JOBS.changes([*changes, *lease_changes(clock, claimed, worker_id, lease_s, starting)])]
        )
    finished = BatchResult(
        accepted=[new_states[job_id] for job_id in dict.fromkeys(job_id for job_id, _ in changes)],
        rejected=rejected,
    )
    return TurnResult(finished, [new_states[state.job_id] for state in claimed.due])


def _ended_leases(
    uow: UnitOfWork, changes: Sequence[tuple[UUID, Sequence[JobEvent]]]
) -> list[JobState]:
    """The leased jobs that ``changes`` end (their slots free for the turn's claim)."""
    after: dict[UUID, JobState] = {}
    before: dict[UUID, JobState] = {}
    for job_id, events in changes:
        state = after.get(job_id) or uow.loaded(job_id)
        if state is None:
            continue
        before.setdefault(job_id, state)
        after[job_id] = fold(events, state) or state
    return [
        before[job_id]
        for job_id, state in after.items()
        if before[job_id].status is JobStatus.LEASED and state.status is not JobStatus.LEASED
    ]
