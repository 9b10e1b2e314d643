"""The scheduler service: fires the due slots of the cron schedules on an interval.

One pass is :meth:`ScheduleCommands.fire_due
<ledger.schedules.schedule_commands.ScheduleCommands.fire_due>` (the transaction is
:mod:`ledger.schedules.schedule_firing`), repeated while a pass read as many due schedules as it may
and fired something, up to ``max_rounds``; so a backlog of many schedules drains in one
service pass and a quiet ledger costs one indexed read per interval. Any number of processes
may run it: the fire transaction holds the append lock while it reads the due schedules, so
each slot fires once whichever process gets there first, and the others find nothing due.

The service keeps no memory of its own: the schedules' cursors are in their streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ledger.api.ledger import Ledger
from ledger.core.limits import check_setting_seconds
from ledger.core.schedules.catch_up import PassBounds
from ledger.maintenance.runner import ServiceRunner
from ledger.schedules.schedule_firing import DEFAULT_SCHEDULES_PER_PASS, FireReport

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_INTERVAL_S = 5.0


@dataclass(frozen=True)
class SchedulerConfig:
    """How often the scheduler looks, and how much one pass may do."""

    interval_s: float = DEFAULT_SCHEDULER_INTERVAL_S
    """Between passes. A slot's job is enqueued up to this late (its ``run_at`` is still the
    slot's), so keep it well under ``bounds.grace_s``, after which a slot counts overdue."""
    bounds: PassBounds = field(default_factory=PassBounds)
    schedules_per_round: int = DEFAULT_SCHEDULES_PER_PASS
    max_rounds: int = 10

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.schedules_per_round < 1 or self.max_rounds < 1:
            raise ValueError("interval_s > 0, schedules_per_round >= 1 and max_rounds >= 1")
        check_setting_seconds(self.interval_s, "interval_s")


class Scheduler:
    """Runs scheduler passes over one ledger. Safe to run in several processes at once."""

    name = "scheduler"

    def __init__(
        self,
        ledger: Ledger,
        config: SchedulerConfig | None = None,
        *,
        on_pass: Callable[[FireReport], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self.config = config or SchedulerConfig()
        self._on_pass = on_pass

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def run_once(self, now: datetime | None = None) -> list[FireReport]:
        """One pass at ``now`` (the ledger's clock by default): fire rounds until nothing
        more is due or ``max_rounds``; each round's report."""
        reports: list[FireReport] = []
        for _ in range(self.config.max_rounds):
            report = self._ledger.schedules.fire_due(
                now, bounds=self.config.bounds, limit=self.config.schedules_per_round
            )
            reports.append(report)
            self._log(report)
            if self._on_pass is not None:
                self._on_pass(report)
            if not report.more or (not report.fired and not report.missed):
                break
        return reports

    def _log(self, report: FireReport) -> None:
        if report.fired:
            log.info("fired %d schedule slots of %d schedules", len(report.fired), report.schedules)
        for missed in report.missed:
            log.log(
                logging.WARNING if missed.reason else logging.INFO,
                "schedule %s missed %d slots through %s: %s",
                missed.schedule,
                missed.count,
                missed.through.isoformat(),
                missed.reason or "catch-up policy",
            )
        for broken in report.broken:
            log.error("schedule %s cannot fire: %s", broken.schedule, broken.error)
        if report.conflict:
            log.info("a scheduler pass met another writer of a schedule; the next pass retries")

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes every ``config.interval_s`` until ``stop`` is set."""
        await ServiceRunner([self]).run(stop)
