"""The feature namespaces a ledger hands out: :class:`LedgerNamespaces`, a base of
:class:`~ledger.api.ledger.Ledger`: each feature's commands class (its reads and its
commands) where a reader hands out the reads alone
(:class:`~ledger.api.reader_namespaces.ReaderNamespaces`), bound to the ledger it is read
from (:class:`~ledger.jobs.binding.LedgerBinding`).
"""

from __future__ import annotations

from ledger.api.reader_namespaces import ReaderNamespaces
from ledger.jobs.binding import LedgerBinding
from ledger.limits.limit_commands import LimitCommands
from ledger.retention.retention_commands import RetentionCommands
from ledger.schedules.schedule_commands import ScheduleCommands
from ledger.sources.source_commands import SourceCommands
from ledger.tokens.token_commands import TokenCommands
from ledger.workflows.workflow_commands import WorkflowCommands


class LedgerNamespaces(ReaderNamespaces):
    """Each feature's reads and commands, handed out by a ledger, bound to it
    (:meth:`_binding`)."""

    @property
    def workflows(self) -> WorkflowCommands:
        """Workflow runs: ``submit``, ``complete_step``, ``cancel``, ``append_steps``,
        ``recover``, ``handle``, and the reads."""
        return WorkflowCommands(self._binding())

    @property
    def schedules(self) -> ScheduleCommands:
        """Cron schedules: ``add``, ``pause``, ``resume``, ``remove``, the scheduler's
        ``fire_due`` pass, and the reads."""
        return ScheduleCommands(self._binding())

    @property
    def sources(self) -> SourceCommands:
        """Sources: ``sync`` a listing into jobs, ``poll``, ``enqueue_poll``, and the reads."""
        return SourceCommands(self._binding())

    @property
    def tokens(self) -> TokenCommands:
        """API tokens: ``create``, ``revoke``, and the reads."""
        return TokenCommands(self._binding())

    @property
    def retention(self) -> RetentionCommands:
        """Retention: ``set_rule``, ``run``, and the reads."""
        return RetentionCommands(self._binding())

    @property
    def limits(self) -> LimitCommands:
        """Limits: ``pause_queue``, ``resume_queue``, and the reads."""
        return LimitCommands(self._binding())

    def _binding(self) -> LedgerBinding:
        """What the namespaces are bound to: the ledger's (:class:`~ledger.api.ledger.Ledger`)."""
        raise NotImplementedError
