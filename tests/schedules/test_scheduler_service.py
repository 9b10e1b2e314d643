"""The scheduler service (ledger/maintenance/scheduler.py): rounds drain a backlog of due
schedules in one pass; a pool runs it unless its interval is 0."""

from __future__ import annotations

import pytest

from ledger import Ledger
from ledger.clock import FakeClock
from ledger.maintenance.scheduler import Scheduler, SchedulerConfig
from ledger.runtime.config import PoolConfig


def test_one_pass_fires_every_due_schedule_in_rounds(defined: Ledger, clock: FakeClock) -> None:
    """Three due schedules, one per round: one pass fires all three, then a round finds none."""
    for name in ("a", "b", "c"):
        defined.add_schedule(name, "*/10 * * * *", "t")
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
