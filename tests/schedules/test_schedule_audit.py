"""Schedule events in the audit view: a row each, by the schedule's job type and org, the
refused slots by code; the live view verifies against its replay (both backends)."""

from __future__ import annotations

from ledger import AuditQuery, Ledger
from ledger.clock import FakeClock
from ledger.core.schedules.state import schedule_stream_id
from ledger.views.audit import ENQUEUE_REFUSED


def test_schedule_events_have_audit_rows(db_url: str, defined: Ledger, clock: FakeClock) -> None:
    """Added, fired and a refused miss are audited under the schedule's stream id, type and
    org; a runner that never saw the add (a fresh process) still finds the origin."""
    defined.schedules.add("s", "*/10 * * * *", "t", org="acme")
    defined.catch_up(["audit"])  # this process's runner remembers the add
    clock.advance(600)
    [fired] = defined.schedules.fire_due().fired
    defined.set_enabled("t", False)
    clock.advance(600)
    defined.schedules.fire_due()
    with Ledger.open(db_url, clock=clock) as fresh:  # a runner with no memory of the add
        rows = fresh.audit(AuditQuery(job=schedule_stream_id("s"), order="oldest")).rows
    assert [(r.event, r.job_type, r.org, r.code) for r in rows] == [
        ("schedule_added", "t", "acme", None),
        ("schedule_fired", "t", "acme", None),
        ("schedule_missed", "t", "acme", ENQUEUE_REFUSED),
    ]
    by_type = defined.audit(AuditQuery(job_type="t", org="acme", order="oldest")).rows
    assert {r.job_id for r in by_type} == {schedule_stream_id("s"), fired.job_id}
    refused = defined.audit(AuditQuery(code=ENQUEUE_REFUSED)).rows
    assert [r.event for r in refused] == ["schedule_missed"]
    report = defined.projections().verify()
    assert report.clean, report
