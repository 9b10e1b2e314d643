"""A schedule's fold: its definition, status and cursor, from its stream's events. Pure."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid5

import msgspec
from msgspec.structs import replace

from ledger.core.events import Event
from ledger.core.schedules.events import (
    CatchUp,
    ScheduleAdded,
    ScheduleFired,
    ScheduleMissed,
    SchedulePaused,
    ScheduleRemoved,
    ScheduleResumed,
)
from ledger.core.state import IllegalTransitionError
from ledger.core.values import JSON

SCHEDULE_NAMESPACE = UUID("0b7c6a8e-3f1d-4c52-9a77-5e2d8c1b4f90")


def schedule_stream_id(name: str) -> UUID:
    """The originator id of a schedule's stream (stable across databases)."""
    return uuid5(SCHEDULE_NAMESPACE, f"schedule:{name}")


class ScheduleStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    REMOVED = "removed"


class ScheduleState(msgspec.Struct, frozen=True):
    """A schedule as its stream tells it (the schedules view's row, less the next slot,
    which :func:`ledger.core.schedules.slots.next_slot` derives)."""

    name: str
    cron: str
    tz: str
    job_type: str
    payload: dict[str, JSON]
    org: str | None
    queue: str | None
    priority: int | None
    catch_up: CatchUp
    jitter_s: float
    status: ScheduleStatus
    cursor: datetime
    """Slots strictly after this instant are still to fire or miss."""
    added_at: datetime
    last_slot: datetime | None
    """The last slot fired."""
    last_job_id: UUID | None
    fired: int
    missed: int
    version: int


def evolve_schedule(state: ScheduleState | None, event: Event) -> ScheduleState:
    """Apply one schedule event. Pure."""
    if isinstance(event, ScheduleAdded):
        if state is not None and state.name != event.schedule:
            raise IllegalTransitionError(f"schedule {event.schedule} added to {state.name}")
        return ScheduleState(
            name=event.schedule,
            cron=event.cron,
            tz=event.tz,
            job_type=event.job_type,
            payload=event.payload,
            org=event.org,
            queue=event.queue,
            priority=event.priority,
            catch_up=CatchUp(event.catch_up),
            jitter_s=event.jitter_s,
            status=ScheduleStatus.ACTIVE,
            cursor=event.at,
            added_at=event.at,
            last_slot=None if state is None else state.last_slot,
            last_job_id=None if state is None else state.last_job_id,
            fired=0 if state is None else state.fired,
            missed=0 if state is None else state.missed,
            version=1 if state is None else state.version + 1,
        )
    if state is None:
        raise IllegalTransitionError(f"{event.name} before schedule_added")
    if isinstance(event, SchedulePaused):
        _expect(state, event, ScheduleStatus.ACTIVE)
        return replace(state, status=ScheduleStatus.PAUSED, version=state.version + 1)
    if isinstance(event, ScheduleResumed):
        _expect(state, event, ScheduleStatus.PAUSED)
        return replace(
            state, status=ScheduleStatus.ACTIVE, cursor=event.at, version=state.version + 1
        )
    if isinstance(event, ScheduleRemoved):
        if state.status is ScheduleStatus.REMOVED:
            raise IllegalTransitionError(f"schedule {state.name} removed twice")
        return replace(state, status=ScheduleStatus.REMOVED, version=state.version + 1)
    if isinstance(event, ScheduleFired):
        _expect(state, event, ScheduleStatus.ACTIVE)
        _expect_after(state, event.slot, event)
        return replace(
            state,
            cursor=event.slot,
            last_slot=event.slot,
            last_job_id=event.job_id,
            fired=state.fired + 1,
            version=state.version + 1,
        )
    if isinstance(event, ScheduleMissed):
        _expect(state, event, ScheduleStatus.ACTIVE)
        _expect_after(state, event.through, event)
        return replace(
            state,
            cursor=event.through,
            missed=state.missed + event.count,
            version=state.version + 1,
        )
    raise IllegalTransitionError(f"not a schedule event: {type(event).__name__}")


def _expect(state: ScheduleState, event: Event, status: ScheduleStatus) -> None:
    if state.status is not status:
        raise IllegalTransitionError(f"{event.name} on a {state.status} schedule {state.name}")


def _expect_after(state: ScheduleState, slot: datetime, event: Event) -> None:
    # A slot at or before the cursor was already consumed: firing it again is the double
    # fire the scheduler exists to prevent.
    if slot <= state.cursor:
        raise IllegalTransitionError(
            f"{event.name} of slot {slot.isoformat()} at or before schedule {state.name}'s "
            f"cursor {state.cursor.isoformat()}"
        )
