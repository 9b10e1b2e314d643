"""Why a pending job is not running: one :class:`Blocker` per reason, one function per kind
of reason (pure).

``jobledger show`` lists a pending job's blockers and ``stats`` the limits behind them.
Each kind of reason is a function here that takes what the reader counted and returns the
blockers it finds, so a new kind (rate limits, a paused queue) is one more function beside
these, its results concatenated.
"""

from __future__ import annotations

import msgspec

from ledger.core.concurrency import Room, TypeLimits, org_key
from ledger.core.events import JobStatus
from ledger.core.state import JobState


class Blocker(msgspec.Struct, frozen=True):
    """One reason a pending job is held back now."""

    code: str
    """Stable: ``concurrency_limit``, ``per_org_concurrency_limit``, ``resource_limit``."""
    message: str
    """For people: which limit, of what, and how many leases hold it."""


def concurrency_blockers(state: JobState, limits: TypeLimits | None, room: Room) -> list[Blocker]:
    """The concurrency limits a pending job's type, org or resource has reached (``room``:
    counted from the live leases of the type and of every type sharing its resource)."""
    if state.status is not JobStatus.PENDING or limits is None:
        return []
    found: list[Blocker] = []
    job_type = state.job_type
    if limits.concurrency is not None:
        leased = room.leased(job_type)
        if leased >= limits.concurrency:
            found.append(
                Blocker(
                    "concurrency_limit",
                    f"concurrency limit {limits.concurrency} of {job_type} reached "
                    f"({leased} leased)",
                )
            )
    if limits.per_org is not None:
        org = org_key(state.request.org)
        leased = room.leased(job_type, org)
        if leased >= limits.per_org:
            whose = f"org {org}" if org else "jobs without an org"
            found.append(
                Blocker(
                    "per_org_concurrency_limit",
                    f"per-org concurrency limit {limits.per_org} of {job_type} reached for "
                    f"{whose} ({leased} leased)",
                )
            )
    if limits.resource is not None:
        cap = room.resource_limit(limits.resource)
        leased = room.leased_of_resource(limits.resource)
        if cap is not None and leased >= cap:
            found.append(
                Blocker(
                    "resource_limit",
                    f"resource limit {cap} of {limits.resource} reached ({leased} leased)",
                )
            )
    return found
