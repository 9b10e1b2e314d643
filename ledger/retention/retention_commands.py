"""The retention commands: :class:`RetentionCommands`, what ``ledger.retention`` hands out:
the reads of :class:`~ledger.retention.retention_reader.RetentionReader` plus a rule set and
a run (:mod:`ledger.retention.retention_runs`), both at the ledger's clock."""

from __future__ import annotations

from ledger.core.retention import RetentionPolicy
from ledger.jobs.binding import LedgerBinding
from ledger.retention import retention_runs
from ledger.retention.retention_reader import RetentionReader
from ledger.retention.retention_runs import BATCH, RetentionRun


class RetentionCommands(RetentionReader):
    """The retention reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)

    def set_rule(
        self,
        *,
        job_type: str | None = None,
        status: str | None = None,
        after_s: int | None,
        actor: str | None = None,
    ) -> RetentionPolicy:
        """Set (or with ``after_s`` ``None`` drop) the rule for ``job_type`` / ``status``
        (``None``: any); the policy after it."""
        return retention_runs.set_rule(
            self.store,
            self.clock.now(),
            job_type=job_type,
            status=status,
            after_s=after_s,
            actor=actor,
        )

    def run(
        self,
        *,
        dry_run: bool = False,
        actor: str | None = None,
        batch: int = BATCH,
        list_limit: int = 1_000,
    ) -> RetentionRun:
        """One retention run now: the finished jobs past their rule and not held move to the
        archive, a batch at a time (a dry run moves nothing; ``retention.unsupported``
        without an archive)."""
        return retention_runs.run_retention(
            self.store,
            self.clock.now(),
            dry_run=dry_run,
            actor=actor,
            batch=batch,
            list_limit=list_limit,
        )
