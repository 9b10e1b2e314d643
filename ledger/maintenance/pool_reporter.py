"""The pool reporter service: a worker pool's report of itself into ``jl_pools``, on an interval.

Each pass replaces this pool's row (its id, host, pid, start, concurrency, jobs in flight, its
own health verdict and reasons, the jobledger release) stamped with the ledger's clock, then
deletes the rows of pools silent for longer than the retention — any pool's reporter may, so a
pool that died without removing its row is cleared by the survivors. The pool removes its own
row when it stops (:meth:`PoolReporter.remove`). What readers make of the rows, and why they
are not a view of the history: :mod:`ledger.api.pools`.

A pass is two short statements on the maintenance runner's thread of its own, so a pool whose
loop is blocked still reports (its verdict then says what is wrong), while a process that is
stopped or killed stops reporting, which is what lets a reader count it dead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.api.ledger import Ledger
from ledger.api.pools import PoolReport, prune_pools, remove_pool, report_pool
from ledger.core.limits import check_setting_seconds


@dataclass(frozen=True)
class PoolReporterConfig:
    """How often a pool reports, and how long a silent pool's row is kept. Seconds."""

    interval_s: float = 5.0
    retention_s: float = 3600.0
    """Long enough that an operator sees a dead pool among the stale rows for a while."""

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError("interval_s must be positive")
        if self.retention_s < self.interval_s:
            raise ValueError("retention_s must be at least interval_s")
        check_setting_seconds(self.interval_s, "interval_s")
        check_setting_seconds(self.retention_s, "retention_s")


class PoolReporter:
    """Writes the report ``describe(now)`` gives on every pass (see the module docstring)."""

    name = "pool-reporter"

    def __init__(
        self,
        ledger: Ledger,
        describe: Callable[[datetime], PoolReport],
        config: PoolReporterConfig | None = None,
    ) -> None:
        self._ledger = ledger
        self._describe = describe
        self.config = config or PoolReporterConfig()

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def run_once(self, now: datetime | None = None) -> PoolReport:
        """Report at ``now`` (the ledger's clock by default) and prune; the report written."""
        now = now or self._ledger.clock.now()
        report = self._describe(now)
        report_pool(self._ledger.store, report)
        prune_pools(self._ledger.store, now - timedelta(seconds=self.config.retention_s))
        return report

    def remove(self, pool_id: str) -> bool:
        """Delete this pool's row (it stopped); whether there was one."""
        return remove_pool(self._ledger.store, pool_id)
