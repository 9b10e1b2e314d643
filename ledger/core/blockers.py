"""Why a pending job is not running: one small pure function per reason.

Each function looks at one thing the reader gathered (the job's state, its queue's pause
state, its rate bucket, the pools' reports, its type's definition, the live leases its
concurrency limits count) and returns a :class:`Blocker` (or a list of them), or nothing when
that thing does not hold the job back. ``show`` and ``stats`` list the blockers together;
none of these functions reads a store or a clock.

A blocker with ``blocking`` false is said for context only (a disabled type refuses new jobs
but its queued ones still run).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import msgspec

from ledger.core.concurrency import Room, TypeLimits, org_key
from ledger.core.queue_pauses import QueueState
from ledger.core.rates import next_token_us, tokens
from ledger.core.state import JobState
from ledger.core.times import from_us, to_us
from ledger.core.values import JobStatus, RateLimit, queue_of


class Blocker(msgspec.Struct, frozen=True):
    """One reason a pending job is not running: a stable ``reason`` code, a sentence for
    people, and when it ends where that is known."""

    reason: str
    message: str
    until: datetime | None = None
    blocking: bool = True


def _pending(state: JobState) -> bool:
    return state.status is JobStatus.PENDING


# --- time, queue pause, rate limit, circuit breaker, disabled type (issue 16, parts 4, 5, 7) --


def not_due(state: JobState, now: datetime) -> Blocker | None:
    """The job's ``run_at`` is still to come (scheduled, or a retry's backoff)."""
    if not _pending(state) or state.run_at <= now:
        return None
    return Blocker("not_due", f"run_at {state.run_at.isoformat()} is in the future", state.run_at)


def queue_paused(state: JobState, queue: QueueState | None) -> Blocker | None:
    """The job's queue is paused (``queue``: its pause state, ``None`` if never paused)."""
    if not _pending(state) or queue is None or not queue.paused:
        return None
    by = f" by {queue.actor}" if queue.actor else ""
    why = f": {queue.reason}" if queue.reason else ""
    return Blocker(
        "queue_paused",
        f"queue {queue_of(state.request.queue)!r} paused{by} at "
        f"{queue.changed_at.isoformat()}{why}",
    )


def rate_limited(
    state: JobState, rate: RateLimit | None, tat_us: int | None, now: datetime
) -> Blocker | None:
    """The job's rate key has no token at ``now`` (``rate``: its type's limit; ``tat_us``:
    its bucket's, ``None`` if never spent)."""
    if not _pending(state) or rate is None or tat_us is None:
        return None
    if tokens(tat_us, rate, to_us(now)) > 0:
        return None
    until = from_us(next_token_us(tat_us, rate))
    scope = f" for org {state.org or '(none)'!r}" if rate.per_org else ""
    return Blocker(
        "rate_limited",
        f"rate limited{scope} until {until.isoformat()} ({rate.limit} per {rate.period_s:g}s)",
        until,
    )


def breaker_open(state: JobState, pool_reasons: Iterable[str]) -> Blocker | None:
    """A live pool reports the circuit breaker of the job's type open (``pool_reasons``: the
    live pools' health reasons). The breaker is each process's own; this is what the pools'
    reports say of it, and a pool that does not report it may still claim the job."""
    if not _pending(state):
        return None
    prefix = f"circuit breaker open for {state.job_type!r} until "
    ends = [reason.removeprefix(prefix) for reason in pool_reasons if reason.startswith(prefix)]
    if not ends:
        return None
    latest = max(datetime.fromisoformat(end) for end in ends)
    return Blocker(
        "breaker_open",
        f"circuit breaker for {state.job_type!r} open in {len(ends)} live pool(s), "
        f"until {latest.isoformat()} at the latest",
        latest,
    )


def type_disabled(state: JobState, enabled: bool | None) -> Blocker | None:
    """The job's type is disabled (``enabled``: its definition's flag, ``None`` if the type
    is not defined). Said for context: it refuses new jobs; queued ones still run."""
    if not _pending(state) or enabled is None or enabled:
        return None
    return Blocker(
        "type_disabled",
        f"job type {state.job_type!r} is disabled (new jobs refused; queued ones still run)",
        blocking=False,
    )


# --- concurrency limits (issue 16, part 3) --------------------------------------------


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
