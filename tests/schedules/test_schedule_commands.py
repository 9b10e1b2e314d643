"""The schedule commands and the fire transaction through the Python API (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.errors import DefinitionNotFoundError, InvalidRequestError
from ledger.core.schedules.catch_up import slot_key
from ledger.core.schedules.errors import (
    ScheduleExistsError,
    ScheduleNotFoundError,
    ScheduleTransitionError,
)
from ledger.core.schedules.events import ScheduleFired, ScheduleMissed
from ledger.core.schedules.slots import InvalidCronError, UnknownTimeZoneError
from ledger.core.schedules.state import ScheduleStatus, schedule_stream_id
from ledger.testing import enqueued, refute_enqueued


def test_add_refuses_what_enqueue_or_the_parser_would(defined: Ledger) -> None:
    """Bad cron, bad zone, bad policy, undefined or disabled type, a taken name: refused."""
    with pytest.raises(InvalidCronError):
        defined.schedules.add("s", "61 * * * *", "t")
    with pytest.raises(UnknownTimeZoneError):
        defined.schedules.add("s", "* * * * *", "t", tz="Mars/Olympus")
    with pytest.raises(InvalidRequestError, match="catch_up"):
        defined.schedules.add("s", "* * * * *", "t", catch_up="some")
    with pytest.raises(DefinitionNotFoundError, match="not defined"):
        defined.schedules.add("s", "* * * * *", "nope")
    defined.schedules.add("s", "* * * * *", "t")
    with pytest.raises(ScheduleExistsError):
        defined.schedules.add("s", "*/5 * * * *", "t")
    replaced = defined.schedules.add("s", "*/5 * * * *", "t", replace=True)
    assert replaced.cron == "*/5 * * * *" and replaced.version == 2
    defined.set_enabled("t", False)
    with pytest.raises(DefinitionNotFoundError, match="disabled"):
        defined.schedules.add("s2", "* * * * *", "t")
    assert [s.name for s in defined.schedules.all()] == ["s"]


def test_pause_resume_remove_follow_the_status(defined: Ledger, clock: FakeClock) -> None:
    """Pause, resume and remove are events; a wrong status or unknown name is refused."""
    with pytest.raises(ScheduleNotFoundError):
        defined.schedules.pause("s")
    defined.schedules.add("s", "* * * * *", "t")
    assert defined.schedules.pause("s").status is ScheduleStatus.PAUSED
    with pytest.raises(ScheduleTransitionError, match="cannot pause"):
        defined.schedules.pause("s")
    clock.advance(600)
    assert (
        defined.schedules.fire_due().fired == []
    )  # paused: its slots are neither fired nor missed
    resumed = defined.schedules.resume("s")
    assert resumed.status is ScheduleStatus.ACTIVE and resumed.cursor == clock.now()
    assert defined.schedules.remove("s").status is ScheduleStatus.REMOVED
    with pytest.raises(ScheduleNotFoundError):
        defined.schedules.remove("s")
    again = defined.schedules.add("s", "* * * * *", "t")  # a removed name may be added again
    assert again.version == 5


def test_fire_due_makes_one_job_per_slot_keyed_by_it(defined: Ledger, clock: FakeClock) -> None:
    """Three due slots fire three jobs, each keyed by its slot; a repeat pass fires none."""
    defined.schedules.add("every", "* * * * *", "t", {"n": 1}, org="acme", catch_up="all")
    clock.advance(3 * 60 + 1)
    with enqueued(defined) as first_pass:
        report = defined.schedules.fire_due()
    first_pass.assert_jobs([("t", {"n": 1})] * 3)
    first_pass.assert_enqueued(type="t", org="acme")
    assert [f.slot for f in report.fired] == [
        datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in (1, 2, 3)
    ]
    jobs = defined.get_many([f.job_id for f in report.fired])
    assert {jobs[f.job_id].request.idempotency_key for f in report.fired} == {
        slot_key("every", f.slot) for f in report.fired
    }
    assert all(jobs[f.job_id].request.org == "acme" for f in report.fired)
    with enqueued(defined) as repeat_pass:
        assert defined.schedules.fire_due().fired == []
    repeat_pass.assert_jobs([])
    state = defined.schedules.get("every")
    assert state is not None and state.fired == 3 and state.last_slot == report.fired[-1].slot


def test_a_hand_made_job_with_the_slot_key_is_named_not_repeated(
    defined: Ledger, clock: FakeClock
) -> None:
    """A job already holding a slot's key (same request) is the slot's job: created false."""
    state = defined.schedules.add("s", "*/10 * * * *", "t")
    slot = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    existing = defined.enqueue("t", {}, run_at=slot, idempotency_key=slot_key("s", slot)).job_id
    clock.set(slot)
    with enqueued(defined) as firing:
        [fired] = defined.schedules.fire_due().fired
    firing.assert_jobs([])  # the slot's job is the hand-made one: no job_enqueued
    assert fired.job_id == existing and not fired.created and state.version == 1


def test_catch_up_latest_misses_the_overdue_and_fires_the_newest(
    defined: Ledger, clock: FakeClock
) -> None:
    """After an hour of downtime, ``latest`` fires the newest slot and misses the rest."""
    defined.schedules.add("s", "*/10 * * * *", "t")  # the default policy is latest
    clock.advance(3600 + 120)
    report = defined.schedules.fire_due()
    assert [f.slot for f in report.fired] == [datetime(2026, 1, 1, 1, 0, tzinfo=UTC)]
    [missed] = report.missed
    assert missed.count == 5 and missed.reason is None


def test_a_disabled_type_misses_its_slots_with_the_reason(
    defined: Ledger, clock: FakeClock
) -> None:
    """A type disabled after the add: the slot is recorded missed, saying why."""
    defined.schedules.add("s", "*/10 * * * *", "t")
    defined.set_enabled("t", False)
    clock.advance(600)
    report = defined.schedules.fire_due()
    assert report.fired == [] and report.missed[0].reason is not None
    refute_enqueued(defined, type="t")
    events = [r.event for r in defined.store.history(schedule_stream_id("s"))]
    assert isinstance(events[-1], ScheduleMissed)
    assert events[-1].reason is not None and "disabled" in events[-1].reason
    assert not any(isinstance(e, ScheduleFired) for e in events)
    assert defined.projections().verify().clean
    clock.advance(timedelta(minutes=10).total_seconds())
    defined.set_enabled("t", True)
    assert len(defined.schedules.fire_due().fired) == 1
