"""The archiver service: retention runs on an interval, off unless asked for.

One pass is :func:`ledger.retention.retention_runs.run_retention` at the ledger's clock: the
finished jobs past their rule move to the archive, a batch (PostgreSQL: a month partition) per
``jobs_archived`` event (decision 31); on PostgreSQL each pass also makes the partitions of
the coming months.
Any number of processes may run it at once: the hot delete re-checks each job under the
write lock, so a job moves once; the retention stream's version refuses a second batch event
at the same version, and the pass that lost that race is logged and tried again next
interval. It keeps no memory: the policy is read from the stream on every pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from ledger.api.ledger import Ledger
from ledger.core.limits import check_setting_seconds
from ledger.retention.retention_runs import BATCH, RetentionRun, run_retention

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiverConfig:
    """How often the archiver runs and how many jobs each batch moves."""

    interval_s: float = 3600.0
    batch: int = BATCH

    def __post_init__(self) -> None:
        check_setting_seconds(self.interval_s, "interval_s")


class Archiver:
    """Runs retention passes over one ledger (a maintenance service)."""

    name = "archiver"

    def __init__(self, ledger: Ledger, config: ArchiverConfig | None = None) -> None:
        self._ledger = ledger
        self.config = config or ArchiverConfig()

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def run_once(self, now: datetime | None = None) -> RetentionRun:
        """One pass at ``now`` (the ledger's clock by default)."""
        if not self._ledger.store.read_only:
            self._ledger.catch_up()  # the audit view takes a job's rows in before it moves
        done = run_retention(
            self._ledger.store,
            now or self._ledger.clock.now(),
            actor=f"archiver:{self._ledger.store.backend}",
            batch=self.config.batch,
        )
        if done.moved or done.held:
            log.info(
                "archived %d jobs in %d batches (%d held, %d changed meanwhile)",
                done.moved,
                done.batches,
                done.held,
                done.changed,
            )
        return done
