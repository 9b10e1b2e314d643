"""Schedule events through the store: the schedules view is written with them, verifies
against its replay and rebuilds (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.schedules.events import ScheduleAdded, ScheduleFired, SchedulePaused
from ledger.core.schedules.state import ScheduleStatus
from ledger.views.kinds import SCHEDULES

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_schedule_events_write_a_view_that_verifies_and_rebuilds(db_url: str) -> None:
    """Added, fired and paused: the row follows the events; verify is clean; rebuild agrees."""
    added = ScheduleAdded(
        at=START, schedule="nightly", cron="*/5 * * * *", tz="Europe/Paris", job_type="t",
        payload={"k": 1}, org="acme", queue=None, priority=None, catch_up="latest",
        jitter_s=0.0, reason="test",
    )  # fmt: skip
    slot = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    fired = ScheduleFired(
        at=slot, schedule="nightly", slot=slot, job_id=uuid4(), created=True, run_at=slot
    )
    with Ledger.open(db_url, clock=FakeClock(START)) as ledger:
        with ledger.store.unit_of_work() as uow:
            uow.append([SCHEDULES.change("nightly", [added, fired])])
        state = ledger.store.state(SCHEDULES, "nightly")
        assert state is not None and state.last_slot == slot and state.version == 2
        with ledger.store.unit_of_work() as uow:
            paused = SchedulePaused(at=slot, schedule="nightly", reason="maintenance")
            uow.append([SCHEDULES.change("nightly", [paused])])
        [row] = ledger.store.states(SCHEDULES)
        assert row.status is ScheduleStatus.PAUSED and row.payload == {"k": 1}
        report = ledger.projections().verify()
        assert report.clean, report
        assert {v.name: v.expected_rows for v in report.views}["schedules"] == 1
        ledger.projections().rebuild(["schedules"])
        assert ledger.store.states(SCHEDULES) == [row]
