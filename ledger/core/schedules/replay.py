"""Decision replay for a cron schedule: refold its stream, re-derive each fired and missed
slot from the cron expression, and compare the fold with the schedule's view row.

A scheduler pass consumes a schedule's slots in order from its cursor; so every
``schedule_fired`` must name the first slot after the cursor (a skipped slot is a slot lost),
with the ``run_at`` its jitter gives; every ``schedule_missed`` must name the slots that
follow the cursor and end, ``count`` slots on, at ``through``. The fold refuses a slot at or
before the cursor (a double fire). The refolded state must equal the view's row
(``jl_schedules``): the row is what the scheduler reads. Findings are
:class:`~ledger.core.replay_findings.ReplayFinding` of kind ``schedule``, numbered by the
event's version in the schedule's stream. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from ledger.core.codec import Record
from ledger.core.replay_findings import JobReplay, MismatchError, ReplayFinding, describe
from ledger.core.schedules.catch_up import MAX_NAMED_MISSED, jitter
from ledger.core.schedules.events import ScheduleFired, ScheduleMissed
from ledger.core.schedules.slots import iter_slots
from ledger.core.schedules.state import ScheduleState, evolve_schedule
from ledger.core.state import IllegalTransitionError

SCHEDULE_KIND = "schedule"
"""The ``kind`` of a schedule's :class:`~ledger.core.replay_findings.JobReplay`."""


def check_schedule(records: Sequence[Record], row: ScheduleState | None) -> JobReplay:
    """Check one schedule's stream (``records``, in version order) and its view ``row``
    (``None``: the view has none)."""
    stream_id = records[0].originator_id
    findings: list[ReplayFinding] = []

    def found(record: Record, error: MismatchError) -> None:
        findings.append(
            ReplayFinding(
                stream_id,
                record.originator_version,
                record.event.name,
                error.rule,
                error.expected,
                error.recorded,
                kind=SCHEDULE_KIND,
            )
        )

    state: ScheduleState | None = None
    for record in records:
        try:
            if state is not None:
                _check_slots(state, record)
            state = evolve_schedule(state, record.event)
        except IllegalTransitionError as error:
            found(record, MismatchError("schedule.fold", "an event the fold accepts", str(error)))
            break
        except MismatchError as error:
            found(record, error)
            state = evolve_schedule(state, record.event)
    if state is not None and not findings and state != row:
        found(
            records[-1],
            MismatchError(
                "schedule.view_differs",
                f"the view row of the fold (version {state.version})",
                "no row" if row is None else f"a row at version {row.version}",
            ),
        )
    return JobReplay(stream_id, len(records), findings, kind=SCHEDULE_KIND)


def _check_slots(state: ScheduleState, record: Record) -> None:
    """Raise where a fired or missed slot is not the next of the schedule's slots."""
    event = record.event
    if isinstance(event, ScheduleFired):
        expected = next(iter_slots(state.cron, state.tz, state.cursor), None)
        if event.slot != expected:
            raise MismatchError(
                "schedule.slot_skipped",
                f"the first slot after {state.cursor.isoformat()}: "
                f"{expected.isoformat() if expected else 'none'}",
                describe(event, ["slot"]),
            )
        run_at = event.slot + jitter(state.name, event.slot, state.jitter_s)
        if event.run_at != run_at:
            raise MismatchError(
                "schedule.jitter_differs",
                f"run_at={run_at.isoformat()}",
                describe(event, ["slot", "run_at"]),
            )
    elif isinstance(event, ScheduleMissed):
        slots = list(islice(iter_slots(state.cron, state.tz, state.cursor), event.count))
        named = slots[: min(event.count, MAX_NAMED_MISSED)]
        if len(slots) != event.count or event.slots != named or slots[-1] != event.through:
            raise MismatchError(
                "schedule.missed_slots_differ",
                f"the {event.count} slots after {state.cursor.isoformat()}, through "
                f"{slots[-1].isoformat() if slots else 'none'}",
                describe(event, ["count", "through"]),
            )
