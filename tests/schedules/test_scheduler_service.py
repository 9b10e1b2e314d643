"""The scheduler service (ledger/maintenance/scheduler.py): rounds drain a backlog of due
schedules in one pass; a pool runs it unless its interval is 0."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import psycopg
import pytest

from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.schedules.events import ScheduleAdded
from ledger.core.schedules.state import schedule_stream_id
from ledger.maintenance.scheduler import Scheduler, SchedulerConfig
from ledger.runtime.config import PoolConfig
from ledger.schedules.schedule_reads import schedule_detail
from ledger.views.kinds import SCHEDULES


def test_one_pass_fires_every_due_schedule_in_rounds(defined: Ledger, clock: FakeClock) -> None:
    """Three due schedules, one per round: one pass fires all three, then a round finds none."""
    for name in ("a", "b", "c"):
        defined.schedules.add(name, "*/10 * * * *", "t")
    clock.advance(600)
    scheduler = Scheduler(defined, SchedulerConfig(schedules_per_round=1))
    reports = scheduler.run_once()
    assert [len(r.fired) for r in reports] == [1, 1, 1, 0]
    assert {r.fired[0].schedule for r in reports[:3]} == {"a", "b", "c"}
    assert scheduler.run_once()[0].schedules == 0


def test_a_pool_runs_the_scheduler_unless_its_interval_is_zero() -> None:
    """The setting's default turns the scheduler on; 0 turns it off; < 0 is refused."""
    default = PoolConfig().scheduler_config()
    assert default is not None and default.interval_s == PoolConfig.scheduler_interval_s > 0
    assert PoolConfig(scheduler_interval_s=0).scheduler_config() is None
    with pytest.raises(ValueError, match="scheduler_interval_s"):
        PoolConfig(scheduler_interval_s=-1)


def _store_unreadable(ledger: Ledger, clock: FakeClock, name: str) -> None:
    """``name`` redefined with an expression this release's cronsim refuses, appended as an
    older release whose cronsim read it would have (add_schedule itself refuses it)."""
    with ledger.store.unit_of_work() as uow:
        uow.serialise_appends()
        uow.append(
            [
                SCHEDULES.change(name, [ScheduleAdded(at=clock.now(), schedule=name,
                                 cron="0 0 30 2 *", tz="UTC", job_type="t", payload={}, org=None,
                                 queue=None, priority=None, catch_up="latest", jitter_s=0.0,
                                 reason="older release")])
            ]
        )  # fmt: skip


def test_a_schedule_whose_cron_cannot_be_read_does_not_stop_the_others(
    defined: Ledger, clock: FakeClock
) -> None:
    """An unreadable stored expression: that schedule has no next slot and fires nothing
    (shown, not raised); the other schedules fire, and the views verify."""
    defined.schedules.add("good", "*/10 * * * *", "t")
    defined.schedules.add("bad", "*/10 * * * *", "t")
    _store_unreadable(defined, clock, "bad")
    clock.advance(600)
    [report] = Scheduler(defined, SchedulerConfig()).run_once()
    assert [fired.schedule for fired in report.fired] == ["good"]
    detail = schedule_detail(defined.store, "bad")
    assert detail is not None and detail.next_slots == [] and detail.fired == []
    assert defined.projections().verify().clean


def _set_next_slot(db_url: str, name: str, like: str) -> None:
    """Give ``name``'s view row ``like``'s next slot, outside the ledger: the row an older
    release wrote when its cronsim still read ``name``'s expression."""
    sql = (
        "UPDATE jl_schedules SET next_slot = "
        "(SELECT next_slot FROM jl_schedules WHERE name = ?) WHERE name = ?"
    )
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s").encode(), (like, name))
        return
    with closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as conn:
        conn.execute(sql, (like, name))
        conn.commit()


def test_a_due_row_whose_cron_became_unreadable_is_reported_broken(
    defined: Ledger, clock: FakeClock, db_url: str
) -> None:
    """A view row made due by an older release's reading of an expression this one refuses:
    the pass appends nothing for it and names it in ``broken``; the others fire."""
    defined.schedules.add("good", "*/10 * * * *", "t")
    defined.schedules.add("bad", "*/10 * * * *", "t")
    _store_unreadable(defined, clock, "bad")
    _set_next_slot(db_url, "bad", like="good")
    clock.advance(600)
    [report] = Scheduler(defined, SchedulerConfig()).run_once()
    assert [fired.schedule for fired in report.fired] == ["good"]
    assert [(b.schedule, "Bad day-of-month" in b.error) for b in report.broken] == [("bad", True)]
    assert schedule_detail(defined.store, "bad") is not None
    assert [r.event.name for r in defined.store.history(schedule_stream_id("bad"))] == [
        "schedule_added",
        "schedule_added",
    ]


def _store_huge_jitter(ledger: Ledger, clock: FakeClock, name: str, jitter_s: float) -> None:
    """``name`` redefined with a jitter ``add_schedule`` now refuses, appended as a release
    that did not bound it would have (``schedule add --jitter 1e12`` was accepted)."""
    with ledger.store.unit_of_work() as uow:
        uow.serialise_appends()
        uow.append(
            [
                SCHEDULES.change(name, [ScheduleAdded(at=clock.now(), schedule=name,
                                 cron="*/10 * * * *", tz="UTC", job_type="t", payload={},
                                 org=None, queue=None, priority=None, catch_up="latest",
                                 jitter_s=jitter_s, reason="older release")])
            ]
        )  # fmt: skip


@pytest.mark.parametrize("jitter_s", [1e14, 1e300, float("inf"), float("nan")])
def test_a_stored_jitter_past_the_storable_times_does_not_stop_the_others(
    defined: Ledger, clock: FakeClock, jitter_s: float
) -> None:
    """A schedule whose stored jitter overflows its slot's run_at is reported broken and
    left unfired; the other schedules fire in the same pass (no OverflowError roll-back)."""
    defined.schedules.add("good", "*/10 * * * *", "t")
    defined.schedules.add("bad", "*/10 * * * *", "t")
    _store_huge_jitter(defined, clock, "bad", jitter_s)
    clock.advance(600)
    [report] = Scheduler(defined, SchedulerConfig()).run_once()
    assert [fired.schedule for fired in report.fired] == ["good"]
    assert [b.schedule for b in report.broken] == ["bad"]
    assert "jitter" in report.broken[0].error
    assert [r.event.name for r in defined.store.history(schedule_stream_id("bad"))] == [
        "schedule_added",
        "schedule_added",
    ]
    assert defined.projections().verify().clean
