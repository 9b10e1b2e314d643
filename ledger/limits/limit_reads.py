"""Reads of the concurrency limits: what holds a pending job back, and each limit's use.

Counted as the claim counts (:mod:`ledger.jobs.claim_limits`): the live leases in the queue
view of the limited types, and of every type sharing a resource with them; read without
the claim's locks, so a figure may be a moment old.
"""

from __future__ import annotations

from ledger.core.blockers import Blocker, concurrency_blockers
from ledger.core.concurrency import LimitUse, Room, TypeLimits, limit_uses, limits_of
from ledger.core.state import JobState
from ledger.store.store import Store
from ledger.views.kinds import DEFINITIONS


def _limits(store: Store) -> dict[str, TypeLimits]:
    return {
        item.job_type: item
        for state in store.states(DEFINITIONS)
        if (item := limits_of(state.definition)) is not None
    }


def _room(store: Store, limits: dict[str, TypeLimits]) -> Room:
    if not limits:
        return Room(limits, {})
    rows = store.read("queue_live_leases", {"types": store.ids.values(sorted(limits))})
    return Room(limits, {(row["job_type"], row["org"]): row["n"] for row in rows})


def blockers(store: Store, state: JobState) -> list[Blocker]:
    """The concurrency limits a job's type, org or resource has reached, if it is pending."""
    limits = _limits(store)
    mine = limits.get(state.job_type)
    if mine is None:
        return []
    sharing = {
        job_type: item
        for job_type, item in limits.items()
        if job_type == state.job_type or (mine.resource and item.resource == mine.resource)
    }
    return concurrency_blockers(state, mine, _room(store, sharing))


def concurrency_limits(store: Store) -> list[LimitUse]:
    """Every concurrency limit with the live leases it counts now."""
    limits = _limits(store)
    return limit_uses(limits, _room(store, limits))
