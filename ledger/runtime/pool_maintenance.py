"""The maintenance services one pool runs beside its workers: the reporter, the reaper, the
scheduler, the archiver, the chain witness and the watchdog, each as its :class:`PoolConfig`
asks, run by one :class:`~ledger.maintenance.runner.ServiceRunner` task from the pool's start
to its stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from ledger.api.ledger import Ledger
from ledger.api.pools import PoolReport
from ledger.maintenance.archiver import Archiver
from ledger.maintenance.chain_witness import ChainWitness
from ledger.maintenance.pool_reporter import PoolReporter
from ledger.maintenance.reaper import Reaper
from ledger.maintenance.runner import Service, ServiceRunner, ServiceStats
from ledger.maintenance.scheduler import Scheduler
from ledger.maintenance.watchdog import Watchdog
from ledger.runtime.config import PoolConfig
from ledger.runtime.pool_metrics import PoolMetrics
from ledger.runtime.threads import ThreadLane
from ledger.store.frozen_writers import FrozenWriter

log = logging.getLogger("ledger.runtime.pool")  # the pool's logger, as before this module


class PoolMaintenance:
    """One pool's maintenance services. ``report`` is the pool as its reporter writes it;
    ``on_frozen_writers_ended`` hears of the sessions the watchdog ended."""

    def __init__(
        self,
        ledger: Ledger,
        config: PoolConfig,
        *,
        metrics: PoolMetrics,
        report: Callable[[datetime], PoolReport],
        on_frozen_writers_ended: Callable[[list[FrozenWriter]], None],
    ) -> None:
        self._config = config
        self.reaper = Reaper(ledger, config.reaper_config(), on_pass=metrics.reaper_passed)
        archiver_config = config.archiver_config()
        self.archiver = None if archiver_config is None else Archiver(ledger, archiver_config)
        witness_config = config.chain_witness_config()
        self.chain_witness = (
            None if witness_config is None else ChainWitness(ledger, witness_config)
        )
        reporter_config = config.reporter_config()
        self.reporter = (
            PoolReporter(ledger, report, reporter_config) if reporter_config is not None else None
        )
        scheduler_config = config.scheduler_config()
        self.scheduler = (
            Scheduler(ledger, scheduler_config) if scheduler_config is not None else None
        )
        watchdog_config = config.watchdog_config()
        self.watchdog = (
            Watchdog(ledger, watchdog_config, on_ended=on_frozen_writers_ended)
            if watchdog_config is not None
            else None
        )
        self._runner: ServiceRunner | None = None

    @property
    def stats(self) -> dict[str, ServiceStats]:
        """How each service's passes went (empty before :meth:`start`)."""
        return dict(self._runner.stats) if self._runner is not None else {}

    def services(self) -> list[Service]:
        """The reporter, the reaper, the scheduler and the chain witness (unless their
        intervals are 0), the archiver (only if asked for) and the watchdog (where the store
        can end frozen writers). The runner runs each pass on a thread of its own (never the
        loop's, nor the executor handlers use), logs a failed pass and keeps the interval; so a
        reaper blocked behind a frozen writer's lock does not hold up the watchdog."""
        services: list[Service] = []
        if self.reporter is not None:
            services.append(self.reporter)
        if self._config.reaper_interval_s > 0:
            services.append(self.reaper)
        if self.archiver is not None:
            services.append(self.archiver)
        if self.chain_witness is not None:
            services.append(self.chain_witness)
        if self.scheduler is not None:
            services.append(self.scheduler)
        if self.watchdog is not None and self.watchdog.enabled:
            services.append(self.watchdog)
        return services

    def start(self, stop_requested: asyncio.Event) -> asyncio.Task[None] | None:
        """The task running the services until ``stop_requested`` is set; ``None`` when this
        pool runs none."""
        services = self.services()
        if not services:
            return None
        self._runner = ServiceRunner(services)
        maintain = self._runner.run(stop_requested)
        return asyncio.create_task(maintain, name="jobledger-maintenance")

    async def wait_for_passes(self, io: ThreadLane, timeout_s: float) -> None:
        """Wait (on ``io``) for the passes a cancelled runner left on their threads, up to
        ``timeout_s``: the store they use is closed next."""
        runner = self._runner
        if runner is None:
            return
        if not await io.run(runner.wait_for_passes, timeout_s):
            log.warning("a maintenance pass still runs after %.1f s; closing anyway", timeout_s)

    def report_now(self) -> None:
        """Write the pool's report at once (from the heartbeat thread, while the loop that
        runs the reporter's service is blocked), so `jobledger pools` shows the block."""
        if self.reporter is None:
            return
        try:
            self.reporter.run_once()
        except Exception:
            log.warning("could not report the blocked loop", exc_info=True)

    async def remove_report(self, io: ThreadLane, pool_id: str) -> None:
        """Delete the pool's row as it stops (on ``io``); a failure only leaves it to go
        stale. Nothing to delete where the pool reports nothing."""
        if self.reporter is None:
            return
        try:
            await io.run(self.reporter.remove, pool_id)
        except Exception:
            log.warning("could not remove pool %s's report", pool_id, exc_info=True)
