"""The reaper service: fails expired leases on an interval (River's ``JobRescuer``).

One pass is the :meth:`Ledger.reap <ledger.api.ledger.Ledger.reap>` command: up to ``limit``
expired leases, oldest expiry first, each failed as ``lease_expired`` (retried after a fixed
delay, or dead-lettered), with diagnostics derived from its history; any number of processes
may reap at once (``SKIP LOCKED``). The transaction is :mod:`ledger.jobs.reaping`, the pure
decision and report types :mod:`ledger.core.reaping`.

The service adds what outlives one pass: its frozen :class:`ReaperConfig` and its loop
(:class:`~ledger.maintenance.runner.ServiceRunner` runs it on ``config.interval_s``). It keeps
no memory of its own: a job whose reap failed is deferred by a ``job_reap_deferred`` event that
pushes its lease out, which every reaper in every process sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from ledger.api.ledger import Ledger
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

    def __init__(
        self,
        ledger: Ledger,
        config: ReaperConfig | None = None,
        *,
        on_pass: Callable[[ReapReport], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self.config = config or ReaperConfig()
        self._on_pass = on_pass

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def run_once(self, now: datetime | None = None) -> ReapReport:
        """One pass at ``now`` (the ledger's clock by default)."""
        report = self._ledger.reap(self.config, now=now)
        if report.processed or report.deferred_error_count:
            log.info(
                "reaped %d expired leases (%d dead-lettered), %d deferred",
                report.processed,
                len(report.dead_lettered),
                report.deferred_error_count,
            )
        for error in report.deferred_errors:
            log.warning(
                "reap of job %s deferred until %s: %s (sqlstate %s)",
                error.job_id,
                error.deferred_until.isoformat() if error.deferred_until else "the next pass",
                error.code,
                error.sqlstate,
            )
        if self._on_pass is not None:
            self._on_pass(report)
        return report

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes every ``config.interval_s`` until ``stop`` is set (a pass that fails
        is logged and the next one runs on time)."""
        await ServiceRunner([self]).run(stop)
