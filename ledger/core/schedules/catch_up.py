"""What one scheduler pass does with a schedule's due slots: which fire, which are missed,
and each fired slot's job request. Pure: the scheduler service passes ``now`` and its bounds.

A slot is **due** once ``now`` reaches it, **overdue** once it is more than ``grace_s`` old
(no scheduler ran while it was due: downtime, or every worker stopped). Slots that are due
but not overdue always fire. The catch-up policy decides the overdue ones:

- ``all``: each fires, oldest first;
- ``latest``: the newest fires (unless a timely slot fires anyway), the rest are missed;
- ``none``: all are missed; the schedule waits for its next slot.

A pass looks at no more than ``scan_limit`` slots of a schedule and fires no more than
``fire_limit``; the rest wait for the next passes, so a years-old schedule catches up in
bounded steps instead of enqueueing millions of jobs (or scanning millions of slots) at once.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import msgspec

from ledger.core.limits import check_setting_seconds
from ledger.core.schedules.errors import UnplannableScheduleError
from ledger.core.schedules.events import CatchUp
from ledger.core.schedules.slots import slots_between
from ledger.core.schedules.state import ScheduleState, ScheduleStatus
from ledger.core.values import EnqueueRequest

MAX_NAMED_MISSED = 100
"""A ``schedule_missed`` names at most this many slots (it counts them all)."""


class PassBounds(msgspec.Struct, frozen=True):
    """A pass's bounds, per schedule."""

    grace_s: float = 60.0
    fire_limit: int = 100
    scan_limit: int = 10_000

    def __post_init__(self) -> None:
        if self.grace_s < 0 or self.fire_limit < 1 or self.scan_limit < self.fire_limit:
            raise ValueError("grace_s >= 0, fire_limit >= 1 and scan_limit >= fire_limit")
        check_setting_seconds(self.grace_s, "grace_s", zero=True)


class Missed(msgspec.Struct, frozen=True):
    """Slots a pass misses: the first few named, all counted, the last one."""

    slots: list[datetime]
    count: int
    through: datetime


class Fire(msgspec.Struct, frozen=True):
    """A slot a pass fires, and the job request it enqueues."""

    slot: datetime
    request: EnqueueRequest


class PassPlan(msgspec.Struct, frozen=True):
    missed: Missed | None
    fires: list[Fire]

    @property
    def empty(self) -> bool:
        return self.missed is None and not self.fires


def plan_pass(state: ScheduleState, now: datetime, bounds: PassBounds) -> PassPlan:
    """The slots of ``state`` this pass misses and fires (misses first: they are older)."""
    if state.status is not ScheduleStatus.ACTIVE:
        return PassPlan(None, [])
    due = slots_between(state.cron, state.tz, state.cursor, now, limit=bounds.scan_limit)
    missed, firing = split_due(due, now, state.catch_up, bounds)
    return PassPlan(
        None if not missed else _missed(missed),
        [Fire(slot, slot_request(state, slot)) for slot in firing],
    )


def split_due(
    due: list[datetime], now: datetime, policy: CatchUp, bounds: PassBounds
) -> tuple[list[datetime], list[datetime]]:
    """``due`` (oldest first) split into the slots missed and the slots fired this pass."""
    late = now - timedelta(seconds=bounds.grace_s)
    overdue = [slot for slot in due if slot < late]
    timely = due[len(overdue) :]
    if policy is CatchUp.ALL:
        return [], due[: bounds.fire_limit]
    if policy is CatchUp.NONE or timely or len(due) >= bounds.scan_limit:
        # With ``latest``, a full scan means newer slots are still unseen: the newest is
        # fired by a later pass, these are all older than it.
        return overdue, timely[: bounds.fire_limit]
    return overdue[:-1], overdue[-1:]


def _missed(slots: list[datetime]) -> Missed:
    return Missed(slots[:MAX_NAMED_MISSED], len(slots), slots[-1])


def slot_key(name: str, slot: datetime) -> str:
    """The idempotency key of a schedule's slot: the name and the slot's UTC instant."""
    return f"schedule:{name}:{slot.astimezone(UTC).isoformat()}"


def jitter(name: str, slot: datetime, jitter_s: float) -> timedelta:
    """A delay in ``[0, jitter_s)`` drawn from the name and slot, so every process agrees."""
    if jitter_s <= 0:
        return timedelta(0)
    digest = hashlib.sha256(slot_key(name, slot).encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return timedelta(microseconds=int(fraction * jitter_s * 1_000_000))


def slot_request(state: ScheduleState, slot: datetime) -> EnqueueRequest:
    """The job a slot enqueues: the schedule's type, payload, org, queue and priority, run at
    the slot plus its jitter, keyed by the slot.

    Raises :class:`UnplannableScheduleError` when the jitter cannot be added (infinite, or
    past the year 9999): ``add`` bounds it, but a schedule stored before it did must fail
    alone, not end the pass of every schedule with an ``OverflowError``."""
    try:
        run_at = slot + jitter(state.name, slot, state.jitter_s)
    except (OverflowError, ValueError):
        raise UnplannableScheduleError(
            f"its jitter of {state.jitter_s:g}s puts slot {slot.isoformat()} past the latest "
            "storable time (re-add it with a smaller --jitter)"
        ) from None
    return EnqueueRequest(
        job_type=state.job_type,
        payload=state.payload,
        priority=state.priority,
        run_at=run_at,
        org=state.org,
        queue=state.queue,
        idempotency_key=slot_key(state.name, slot),
    )
