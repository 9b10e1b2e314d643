"""The feature namespaces a reader hands out: :class:`ReaderNamespaces`, a base of
:class:`~ledger.api.reader.Reader` (a ledger's are
:class:`~ledger.api.ledger_namespaces.LedgerNamespaces`).

Each feature (``ledger/workflows/``, ``schedules/``, ``sources/``, ``tokens/``,
``retention/``, ``limits/``) has a reader class (its reads) and a commands class (the reads
and its commands). A :class:`~ledger.api.reader.Reader` hands out the reads, a
:class:`~ledger.api.ledger.Ledger` the commands, as River's client hands out its services.
Each property makes a fresh namespace bound to the object it is read from (cheap: a few
fields), so one taken from ``ledger.using(conn)`` works in that transaction; the reader's
import the feature on use, so a read command's start-up loads only the features it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.clock import Clock

if TYPE_CHECKING:
    from ledger.integrity.integrity_reader import IntegrityReader
    from ledger.limits.limit_reader import LimitReader
    from ledger.retention.retention_reader import RetentionReader
    from ledger.schedules.schedule_reader import ScheduleReader
    from ledger.sources.source_reader import SourceReader
    from ledger.store.store import Store
    from ledger.tokens.token_reader import TokenReader
    from ledger.workflows.workflow_reader import WorkflowReader


class ReaderNamespaces:
    """Each feature's reads, handed out by a reader."""

    store: Store
    clock: Clock

    @property
    def workflows(self) -> WorkflowReader:
        """The workflow reads: runs, steps, histories, timelines, graphs, handles."""
        from ledger.workflows.workflow_reader import WorkflowReader

        return WorkflowReader(self.store, self.clock)

    @property
    def schedules(self) -> ScheduleReader:
        """The cron schedule reads."""
        from ledger.schedules.schedule_reader import ScheduleReader

        return ScheduleReader(self.store, self.clock)

    @property
    def sources(self) -> SourceReader:
        """The source reads: sync state, sources, polls and breakers."""
        from ledger.sources.source_reader import SourceReader

        return SourceReader(self.store, self.clock)

    @property
    def tokens(self) -> TokenReader:
        """The API token reads and the bearer check."""
        from ledger.tokens.token_reader import TokenReader

        return TokenReader(self.store, self.clock)

    @property
    def retention(self) -> RetentionReader:
        """The retention policy and what a run would move."""
        from ledger.retention.retention_reader import RetentionReader

        return RetentionReader(self.store, self.clock)

    @property
    def integrity(self) -> IntegrityReader:
        """The history's hash chain: its head, checkpoints, and verification."""
        from ledger.integrity.integrity_reader import IntegrityReader

        return IntegrityReader(self.store, self.clock)

    @property
    def limits(self) -> LimitReader:
        """The queues and their pauses, the concurrency limits, the rate buckets."""
        from ledger.limits.limit_reader import LimitReader

        return LimitReader(self.store, self.clock)
