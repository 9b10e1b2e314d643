"""``replay --check`` over schedule streams: a scheduler's history checks clean; a fired
slot that skips one, a wrong jitter or wrong missed slots are findings (both backends)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.codec import Record
from ledger.core.schedules.events import ScheduleAdded, ScheduleFired, ScheduleMissed
from ledger.core.schedules.replay import check_schedule
from ledger.core.schedules.state import schedule_stream_id
from ledger.views.kinds import SCHEDULES

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_schedulers_history_checks_clean(db_url: str, defined: Ledger, clock: FakeClock) -> None:
    """Fired, missed (by policy and refused) and paused slots: no finding, one schedule."""
    defined.schedules.add("s", "*/10 * * * *", "t", jitter_s=30.0, catch_up="latest")
    clock.advance(3600)
    defined.schedules.fire_due()
    defined.set_enabled("t", False)
    clock.advance(600)
    defined.schedules.fire_due()
    defined.schedules.pause("s")
    result = invoke(db_url, "replay", "--check", "--all", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["schedules"] == 1 and summary["findings"] == []
    one = invoke(db_url, "replay", "--check", str(schedule_stream_id("s")), "--json")
    assert one.exit_code == 0 and json.loads(one.stdout)["schedules"] == 1


def test_a_skipped_slot_is_a_finding(db_url: str, defined: Ledger) -> None:
    """A fired slot that is not the first after the cursor: exit 3, schedule.slot_skipped."""
    added = _added()
    late = START + timedelta(minutes=20)  # the 00:10 slot was skipped
    fired = ScheduleFired(
        at=late, schedule="s", slot=late, job_id=uuid4(), created=True, run_at=late
    )
    with defined.store.unit_of_work() as uow:
        uow.append([SCHEDULES.change("s", [added, fired])])
    result = invoke(db_url, "replay", "--check", "--all")
    assert result.exit_code == 3, result.output
    assert "schedule.slot_skipped" in result.stdout


def test_wrong_jitter_and_missed_slots_are_findings() -> None:
    """The pure check: a run_at off the slot's jitter, a missed count that does not end at
    ``through``, and a view row that differs from the fold."""
    stream = schedule_stream_id("s")
    slot = START + timedelta(minutes=10)
    events = [
        _added(),
        ScheduleFired(at=slot, schedule="s", slot=slot, job_id=uuid4(), created=True,
                      run_at=slot + timedelta(seconds=1)),  # no jitter configured
        ScheduleMissed(at=slot, schedule="s", slots=[slot + timedelta(minutes=10)], count=1,
                       through=slot + timedelta(minutes=20), policy="latest"),
    ]  # fmt: skip
    records = [Record(stream, version, e) for version, e in enumerate(events, 1)]
    checked = check_schedule(records, None)
    assert [f.rule for f in checked.findings] == [
        "schedule.jitter_differs",
        "schedule.missed_slots_differ",
    ]
    clean = check_schedule(records[:1], None)
    assert [f.rule for f in clean.findings] == ["schedule.view_differs"]


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


def _added() -> ScheduleAdded:
    return ScheduleAdded(
        at=START, schedule="s", cron="*/10 * * * *", tz="UTC", job_type="t", payload={},
        org=None, queue=None, priority=None, catch_up="latest", jitter_s=0.0, reason="test",
    )  # fmt: skip
