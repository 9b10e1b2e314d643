"""The feature namespaces a ledger hands out: :class:`LedgerNamespaces`, a base of
:class:`~ledger.api.ledger.Ledger`: each feature's commands class (its reads and its
commands) where a reader hands out the reads alone
(:class:`~ledger.api.reader_namespaces.ReaderNamespaces`), bound to the ledger it is read
from (:class:`~ledger.jobs.binding.LedgerBinding`). Each feature is imported when it is
first asked for, as the reader's are: an application that only enqueues and works jobs
loads none of them (fewer modules, and fewer objects for the cycle collector to walk on
every full pass of a bulk enqueue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.api.reader_namespaces import ReaderNamespaces

if TYPE_CHECKING:
    from ledger.integrity.integrity_commands import IntegrityCommands
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
        from ledger.workflows.workflow_commands import WorkflowCommands

        return WorkflowCommands(self._binding())

    @property
    def schedules(self) -> ScheduleCommands:
        """Cron schedules: ``add``, ``pause``, ``resume``, ``remove``, the scheduler's
        ``fire_due`` pass, and the reads."""
        from ledger.schedules.schedule_commands import ScheduleCommands

        return ScheduleCommands(self._binding())

    @property
    def sources(self) -> SourceCommands:
        """Sources: ``sync`` a listing into jobs, ``poll``, ``enqueue_poll``, and the reads."""
        from ledger.sources.source_commands import SourceCommands

        return SourceCommands(self._binding())

    @property
    def tokens(self) -> TokenCommands:
        """API tokens: ``create``, ``revoke``, and the reads."""
        from ledger.tokens.token_commands import TokenCommands

        return TokenCommands(self._binding())

    @property
    def retention(self) -> RetentionCommands:
        """Retention: ``set_rule``, ``run``, and the reads."""
        from ledger.retention.retention_commands import RetentionCommands

        return RetentionCommands(self._binding())

    @property
    def limits(self) -> LimitCommands:
        """Limits: ``pause_queue``, ``resume_queue``, and the reads."""
        from ledger.limits.limit_commands import LimitCommands

        return LimitCommands(self._binding())

    @property
    def integrity(self) -> IntegrityCommands:
        """The history's hash chain: ``head``, ``verify``, ``catch_up``, ``checkpoint``."""
        from ledger.integrity.integrity_commands import IntegrityCommands

        return IntegrityCommands(self._binding())

    def _binding(self) -> LedgerBinding:
        """What the namespaces are bound to: the ledger's (:class:`~ledger.api.ledger.Ledger`)."""
        raise NotImplementedError
