"""The claim's concurrency step: claim due jobs, then keep only what every limit has room for.

The claim query returns its candidates with their types' definitions
(:meth:`~ledger.store.unit_of_work.UnitOfWork.claimable`). When none of them is of a limited
type, that is the claim, and limits cost nothing more. Otherwise, in the same transaction:

1. read every definition (fresh: the limits to enforce) and lock the keys of the limited
   types the claim may take, and of their resources, in one sorted order (PostgreSQL: a
   transaction advisory lock per key; SQLite's writers are already serialised);
2. count the live leases of those types from the queue view (after the locks, so a claim
   that committed while we waited is counted), less the leases this transaction's own
   outcomes end (a turn's finished jobs);
3. admit the candidates in claim order while each of their keys has room
   (:func:`ledger.core.concurrency.admit`); if a limit refused some, ask again without the
   full keys' jobs and those already taken, a few times at most, so a full type's backlog at
   the head of the queue does not crowd out the jobs behind it.

Candidates refused stay locked (unchanged) until commit. A limit set while a claim runs
applies from the next claim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from ledger.core.concurrency import Room, TypeLimits, admit, limits_of, lock_keys, org_key
from ledger.core.state import JobState
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS

MAX_ASKS = 4
"""How many times a claim asks again for jobs after its limits refused candidates."""


def claim_within_limits(
    uow: UnitOfWork,
    now: datetime,
    types: Sequence[str] | None,
    limit: int,
    queues: Sequence[str] | None,
    *,
    freed: Iterable[JobState] = (),
) -> list[JobState]:
    """Up to ``limit`` due jobs, in claim order, within every concurrency limit, locked in
    ``uow``. ``freed``: leased jobs whose end ``uow`` will append before these leases (their
    slots are free for this claim)."""
    due = uow.claimable(now, types, limit, queues)
    if not due or not _any_limited(uow, due):
        return due
    limits = {
        item.job_type: item
        for state in uow.all_states(DEFINITIONS)
        if (item := limits_of(state.definition)) is not None
    }
    claimed = limits if types is None else {t: limits[t] for t in types if t in limits}
    uow.lock_limit_keys(lock_keys(claimed.values()))
    counted = _counted(limits, claimed)
    room = Room(counted, _live(uow, counted, freed))
    admitted, refused = admit(due, room)
    for _ in range(MAX_ASKS):
        if not refused or len(admitted) >= limit:
            break
        more = uow.claimable(
            now,
            types,
            limit - len(admitted),
            queues,
            full_types=room.full_types(),
            full_orgs=room.full_orgs(),
            taken=[state.job_id for state in admitted],
        )
        if not more:
            break
        taken, refused = admit(more, room)
        admitted += taken
    return admitted


def _any_limited(uow: UnitOfWork, due: Sequence[JobState]) -> bool:
    # The claim rows brought their definitions: this asks the database nothing.
    definitions = uow.states(DEFINITIONS, list({state.job_type for state in due}))
    return any(limits_of(state.definition) is not None for state in definitions.values())


def _counted(
    limits: dict[str, TypeLimits], claimed: dict[str, TypeLimits]
) -> dict[str, TypeLimits]:
    """The types whose leases count: the claimed limited types, and every type sharing a
    resource with one of them."""
    resources = {item.resource for item in claimed.values() if item.resource is not None}
    return {
        job_type: item
        for job_type, item in limits.items()
        if job_type in claimed or item.resource in resources
    }


def _live(
    uow: UnitOfWork, counted: dict[str, TypeLimits], freed: Iterable[JobState]
) -> dict[tuple[str, str], int]:
    live = Counter(uow.live_leases(sorted(counted)))
    for state in freed:
        key = (state.job_type, org_key(state.request.org))
        if live[key] > 0:
            live[key] -= 1
    return dict(live)
