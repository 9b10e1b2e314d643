"""The limit commands: :class:`LimitCommands`, what ``ledger.limits`` hands out: the reads of
:class:`~ledger.limits.limit_reader.LimitReader` plus a queue's pause and resume
(:mod:`ledger.limits.queue_commands`)."""

from __future__ import annotations

from ledger.core.queue_pauses import QueueState
from ledger.jobs.binding import LedgerBinding
from ledger.limits import queue_commands
from ledger.limits.limit_reader import LimitReader


class LimitCommands(LimitReader):
    """The limit reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)

    def pause_queue(
        self, queue: str, *, reason: str = "paused", actor: str | None = None
    ) -> QueueState | None:
        """Stop claiming ``queue``'s jobs (they stay pending; leased ones finish). A
        ``queue_paused`` event names ``actor`` and ``reason``; pausing a paused queue appends
        nothing."""
        return queue_commands.set_paused(
            self.store, self.clock, queue, True, reason=reason, actor=actor
        )

    def resume_queue(
        self, queue: str, *, reason: str = "resumed", actor: str | None = None
    ) -> QueueState | None:
        """Claim ``queue``'s jobs again (a ``queue_resumed``; nothing if it is not paused)."""
        return queue_commands.set_paused(
            self.store, self.clock, queue, False, reason=reason, actor=actor
        )
