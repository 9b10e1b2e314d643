"""A schedule's events. A schedule is a stream of its own, its id derived from its name
(:func:`ledger.core.schedules.state.schedule_stream_id`), so every database names it alike.

``schedule`` is the schedule's name (``name`` is every event's stored tag). Slots are UTC
instants: a slot is named by the instant it stands for, never by a wall-clock time, so the
repeated hour of a DST fall-back has two distinct slots where a cron expression matches
both (see :mod:`ledger.core.schedules.slots`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID

from ledger.core.events import Event
from ledger.core.values import JSON


class CatchUp(StrEnum):
    """What a pass does with slots that came due while no scheduler ran (overdue slots):
    ``all`` fires each, ``latest`` fires the newest and misses the rest, ``none`` misses
    them all and waits for the next slot."""

    ALL = "all"
    LATEST = "latest"
    NONE = "none"


class ScheduleAdded(Event, frozen=True):
    """A schedule is defined, or redefined: (none) | removed | active | paused -> active.

    Slots strictly after ``at`` are its slots; a redefinition starts afresh from its own
    ``at`` (the old expression's slots are not carried over)."""

    name = "schedule_added"
    schedule: str
    cron: str
    tz: str
    job_type: str
    payload: dict[str, JSON]
    org: str | None
    queue: str | None
    priority: int | None
    catch_up: str
    jitter_s: float
    reason: str


class SchedulePaused(Event, frozen=True):
    """A schedule stops firing: active -> paused. Slots while paused are neither fired nor
    missed; the pause explains them."""

    name = "schedule_paused"
    schedule: str
    reason: str


class ScheduleResumed(Event, frozen=True):
    """A schedule fires again from the resume on: paused -> active (slots strictly after
    ``at``)."""

    name = "schedule_resumed"
    schedule: str
    reason: str


class ScheduleRemoved(Event, frozen=True):
    """A schedule is gone: active | paused -> removed (its history stays; adding the name
    again continues the same stream)."""

    name = "schedule_removed"
    schedule: str
    reason: str


class ScheduleFired(Event, frozen=True):
    """One slot fired: active -> active, the slot is consumed. ``job_id`` is the job the
    slot's idempotency key names; ``created`` is false when that job already existed (a
    repeat of the slot after a lost acknowledgement, or a job enqueued with that key by
    hand), so the slot still made exactly one job."""

    name = "schedule_fired"
    schedule: str
    slot: datetime
    job_id: UUID
    created: bool
    run_at: datetime


class ScheduleMissed(Event, frozen=True, omit_defaults=True):
    """Slots that made no job: active -> active, the slots are consumed.

    Overdue slots the catch-up policy skipped, or (with ``reason``) slots the scheduler could
    not fire because enqueue refused their job (its type disabled or undefined, or the
    slot's idempotency key held by a job asked with other fields). ``slots`` names them,
    oldest first, up to a cap; ``count`` is how many there were in all (more than
    ``len(slots)`` after a long downtime) and ``through`` the last of them, where the
    schedule's slots continue from. ``reason`` is the one field left out of the stored map
    when unset (``omit_defaults``), so a policy's miss is stored as before it existed; its
    default, ``None`` ("missed by the catch-up policy"), must never change."""

    name = "schedule_missed"
    schedule: str
    slots: list[datetime]
    count: int
    through: datetime
    policy: str
    reason: str | None = None


SCHEDULE_EVENTS: tuple[type[Event], ...] = (
    ScheduleAdded,
    SchedulePaused,
    ScheduleResumed,
    ScheduleRemoved,
    ScheduleFired,
    ScheduleMissed,
)

ScheduleEvent = (
    ScheduleAdded
    | SchedulePaused
    | ScheduleResumed
    | ScheduleRemoved
    | ScheduleFired
    | ScheduleMissed
)
