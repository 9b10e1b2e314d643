"""The reaper service: fails expired leases on an interval (River's ``JobRescuer``).

One pass is the :meth:`Ledger.reap <ledger.api.ledger.Ledger.reap>` command: up to ``limit``
expired leases, oldest expiry first, each failed as ``lease_expired`` (retried after a fixed
delay, or dead-lettered), with diagnostics derived from its history; any number of processes
may reap at once (``SKIP LOCKED``). The transaction is :mod:`ledger.api.reaping`, the pure
decision and report types :mod:`ledger.core.reaping`.

The service adds what outlives one pass: its frozen :class:`ReaperConfig`, and the memory of
the jobs its passes deferred (a job whose reap failed is skipped by this reaper until the retry
delay has passed). :class:`~ledger.maintenance.runner.ServiceRunner` runs it on
``config.interval_s``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from ledger.api.ledger import Ledger
from ledger.api.reaping import DeferredJobs
from ledger.core.reaping import DeferredError, ReapedLease, ReaperConfig, ReapReport
from ledger.maintenance.runner import ServiceRunner

__all__ = [  # the service, its config and its report (defined in the core)
    "DeferredError",
    "ReapReport",
    "ReapedLease",
    "Reaper",
    "ReaperConfig",
]

log = logging.getLogger(__name__)


class Reaper:
    """Runs reaper passes over one ledger. Safe to run in several processes at once."""

    name = "reaper"

    def __init__(self, ledger: Ledger, config: ReaperConfig | None = None) -> None:
        self._ledger = ledger
        self.config = config or ReaperConfig()
        self._deferred = DeferredJobs()

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def run_once(self, now: datetime | None = None) -> ReapReport:
        """One pass at ``now`` (the ledger's clock by default), skipping the jobs this
        reaper's earlier passes deferred until their retry delay has passed."""
        report = self._ledger.reap(self.config, deferred=self._deferred, now=now)
        if report.processed or report.deferred_error_count:
            log.info(
                "reaped %d expired leases (%d dead-lettered), %d deferred",
                report.processed,
                len(report.dead_lettered),
                report.deferred_error_count,
            )
        return report

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes every ``config.interval_s`` until ``stop`` is set (a pass that fails
        is logged and the next one runs on time)."""
        await ServiceRunner([self]).run(stop)
