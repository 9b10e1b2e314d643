"""The schedules view: one row per schedule, the fold of its stream, with its next slot.

``next_slot`` is derived from the fold (the first slot after the cursor, ``NULL`` unless the
schedule is active), so the scheduler finds the due schedules by an index, and a rebuild
derives the same value from the same events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ledger.core.schedules.events import SCHEDULE_EVENTS
from ledger.core.schedules.slots import InvalidCronError, UnknownTimeZoneError, next_slot
from ledger.core.schedules.state import (
    ScheduleState,
    ScheduleStatus,
    evolve_schedule,
    schedule_stream_id,
)
from ledger.core.times import opt_us
from ledger.views.audit import Origin
from ledger.views.kind import StateKind
from ledger.views.view import Projection

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ScheduleState)


def decode_schedule(blob: bytes) -> ScheduleState:
    return _decoder.decode(blob)


PROJECTION = Projection(
    "schedules",
    1,
    "jl_schedules",
    ("name",),
    (
        "name",
        "status",
        "cron",
        "tz",
        "job_type",
        "org",
        "next_slot",
        "last_slot",
        "last_job_id",
        "stream_version",
        "state",
    ),
    "schema_schedules",
    tuple(cls.name for cls in SCHEDULE_EVENTS),
    description="one row per cron schedule: its definition, state, next and last slot",
    blobs=(("state", decode_schedule),),
)


def upcoming(state: ScheduleState) -> datetime | None:
    """The schedule's next slot (``None`` unless it is active, or when this release cannot
    read its expression or zone: such a schedule is never due, and the rest of the view and
    a rebuild go on)."""
    if state.status is not ScheduleStatus.ACTIVE:
        return None
    try:
        return next_slot(state.cron, state.tz, state.cursor)
    except (InvalidCronError, UnknownTimeZoneError):
        return None


def schedule_row(state: ScheduleState) -> dict[str, Any]:
    """The view row of a schedule (times as µs since the epoch)."""
    return {
        "name": state.name,
        "status": state.status.value,
        "cron": state.cron,
        "tz": state.tz,
        "job_type": state.job_type,
        "org": state.org,
        "next_slot": opt_us(upcoming(state)),
        "last_slot": opt_us(state.last_slot),
        "last_job_id": None if state.last_job_id is None else str(state.last_job_id),
        "stream_version": state.version,
        "state": _encoder.encode(state),
    }


def schedule_of_row(row: Any) -> ScheduleState:
    """A ``jl_schedules`` row (indexable by column name) as the schedule's state."""
    return decode_schedule(bytes(row["state"]))


KIND: StateKind[str, ScheduleState] = StateKind(
    "schedules",
    tuple(SCHEDULE_EVENTS),
    evolve_schedule,
    schedule_stream_id,
    PROJECTION,
    schedule_row,
    schedule_of_row,
    upsert="schedules_upsert",
    get="schedules_get",
    all="schedules_all",
    key_param="name",
    key_of=lambda state: state.name,
    origin=lambda state, event: Origin(state.job_type, state.org),
)
"""Schedules, by name."""
