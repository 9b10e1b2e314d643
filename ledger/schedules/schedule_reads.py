"""What ``schedule list`` and ``schedule show`` read about a schedule, and its JSON shape.

The list is the schedules view; ``show`` adds what only the schedule's stream says — each
fired slot and the job its key names, each run of missed slots and why — and the next slots,
derived from the cron expression after the cursor (an active schedule's only).
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.plain import plain
from ledger.core.schedules.events import ScheduleFired, ScheduleMissed
from ledger.core.schedules.slots import InvalidCronError, UnknownTimeZoneError, next_slots
from ledger.core.schedules.state import ScheduleState, ScheduleStatus, schedule_stream_id
from ledger.core.values import JSON
from ledger.store.store import Store
from ledger.views.kinds import SCHEDULES
from ledger.views.schedules import upcoming

SHOWN_SLOTS = 10
"""How many of the last fired slots, the last misses and the next slots ``show`` lists."""


class FiredSlotView(msgspec.Struct, frozen=True):
    slot: datetime
    job_id: UUID
    created: bool
    run_at: datetime
    fired_at: datetime


class MissedSlotsView(msgspec.Struct, frozen=True):
    slots: list[datetime]
    count: int
    through: datetime
    policy: str
    reason: str | None
    missed_at: datetime


class ScheduleDetail(msgspec.Struct, frozen=True):
    """A schedule with its last fired slots, its last misses and its next slots."""

    state: ScheduleState
    fired: list[FiredSlotView]
    """The last fired slots, newest last."""
    missed: list[MissedSlotsView]
    """The last ``schedule_missed`` events, newest last."""
    next_slots: list[datetime]


def schedule_detail(store: Store, name: str, count: int = SHOWN_SLOTS) -> ScheduleDetail | None:
    """``name``'s detail (``None``: no such schedule), from its view row and its stream."""
    state = store.state(SCHEDULES, name)
    if state is None:
        return None
    fired: list[FiredSlotView] = []
    missed: list[MissedSlotsView] = []
    for record in store.history(schedule_stream_id(name)):
        event = record.event
        if isinstance(event, ScheduleFired):
            fired.append(
                FiredSlotView(event.slot, event.job_id, event.created, event.run_at, event.at)
            )
        elif isinstance(event, ScheduleMissed):
            missed.append(
                MissedSlotsView(
                    event.slots, event.count, event.through, event.policy, event.reason, event.at
                )
            )
    coming: list[datetime] = []
    if state.status is ScheduleStatus.ACTIVE:
        with contextlib.suppress(InvalidCronError, UnknownTimeZoneError):  # none to show
            coming = next_slots(state.cron, state.tz, state.cursor, count)
    return ScheduleDetail(state, fired[-count:], missed[-count:], coming)


def schedule_json(state: ScheduleState) -> dict[str, JSON]:
    """A schedule as ``schedule list --json`` shows it (times ISO 8601 UTC)."""
    return {
        "name": state.name,
        "status": state.status.value,
        "cron": state.cron,
        "tz": state.tz,
        "job_type": state.job_type,
        "payload": plain(state.payload),
        "org": state.org,
        "queue": state.queue,
        "priority": state.priority,
        "catch_up": state.catch_up.value,
        "jitter_s": state.jitter_s,
        "added_at": plain(state.added_at),
        "cursor": plain(state.cursor),
        "next_slot": plain(upcoming(state)),
        "last_slot": plain(state.last_slot),
        "last_job_id": None if state.last_job_id is None else str(state.last_job_id),
        "fired": state.fired,
        "missed": state.missed,
        "version": state.version,
    }


def schedule_detail_json(detail: ScheduleDetail) -> dict[str, JSON]:
    """``schedule show --json``: the list's fields, the last fired slots with their jobs,
    the last misses and the next slots."""
    return {
        **schedule_json(detail.state),
        "fired_slots": [plain(msgspec.structs.asdict(slot)) for slot in detail.fired],
        "missed_slots": [plain(msgspec.structs.asdict(run)) for run in detail.missed],
        "next_slots": [plain(slot) for slot in detail.next_slots],
    }
