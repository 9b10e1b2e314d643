"""Batch turns: the producer's next claim also records the outcomes gathered so far.

Without turns a pool pays two commits per batch of jobs: the producer's claim and the
completer's flush. With them, when the producer claims it takes the completer's gathered
outcomes into the same transaction (:meth:`Ledger.finish_and_claim`), and while it is about to
claim again the completer holds outcomes back for it (:attr:`BatchCompleter.hold_s`). The
producer still claims at half capacity — counting the room those outcomes will free — so the
turn comes while half the depth is still buffered or running, and no slot waits through it.

The depth bound holds: a turn claims at most the room left plus the leases its own outcomes
end, and in commit order those outcomes precede the new leases. A turn that fails gives its
outcomes back to the completer, whose retries and fencing then apply as to any flush.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.core.errors import DatabaseUnusableError
from ledger.core.state import JobState
from ledger.runtime.claims import Claims
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.threads import ThreadLane


class BatchTurns:
    """Claims for the producer, recording the completer's gathered outcomes in the same
    transaction."""

    def __init__(self, claims: Claims, completer: BatchCompleter, io: ThreadLane) -> None:
        self._claims = claims
        self._completer = completer
        self._io = io

    @property
    def freeing(self) -> int:
        """Leases a turn taken now would end: the outcomes gathered so far."""
        return self._completer.waiting if self._completer.running else 0

    @property
    def most(self) -> int:
        """The most outcomes one turn records (the completer's batch size)."""
        return self._completer.max_batch

    async def take(
        self, room: int, types: Sequence[str], starting: int = 0
    ) -> tuple[list[JobState], int]:
        """Record the gathered outcomes and claim up to ``room`` plus the leases they end, of
        ``types`` (the first ``starting`` recorded as started); the jobs claimed and the
        limit they were claimed with."""
        taken = self._completer.take_for_turn() if self._completer.running else []
        limit = max(0, room + len(taken))
        if not taken:
            jobs = await self._io.run(self._claims.claim, limit, types, starting) if limit else []
            return jobs, limit
        outcomes = [handed.outcome for handed in taken]
        try:
            turn = await self._io.run(
                self._claims.finish_and_claim, outcomes, limit, types, starting
            )
        except Exception as exc:
            self._completer.give_back(taken, maybe_written=isinstance(exc, DatabaseUnusableError))
            raise
        await self._completer.settle_turn(taken, turn.finished)
        return turn.claimed, limit

    def nudge(self) -> None:
        """The producer no longer expects to claim soon: the completer flushes on its own."""
        self._completer.nudge()
