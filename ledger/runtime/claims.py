"""The leases a pool holds: claimed in batches, renewed by the heartbeater, forgotten once the
job's outcome is recorded, its release is sent, or the fence says the lease is gone."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.state import JobState, Lease
from ledger.runtime.health import PoolStats


class Claims:
    """Claims due jobs for one worker id and remembers the leases they came with.

    :meth:`claim` blocks on the database (run it in a thread); the other methods are cheap
    and called from the event loop. A lease is held from its claim until :meth:`forget`, so the
    heartbeater renews claimed-but-waiting jobs too.
    """

    def __init__(
        self,
        ledger: Ledger,
        worker_id: str,
        *,
        types: Sequence[str],
        lease_s: dict[str, float],
        stats: PoolStats,
        queues: Sequence[str] | None = None,
    ) -> None:
        self._ledger = ledger
        self.worker_id = worker_id
        self.types = list(types)
        self.queues = list(queues) if queues is not None else None
        self.lease_s = lease_s
        self._stats = stats
        self._held: dict[UUID, Lease] = {}

    def claim(self, limit: int) -> list[JobState]:
        """Up to ``limit`` due jobs of :attr:`types` (in :attr:`queues`, if set), leased in one
        transaction (none if this pool claims no types)."""
        if not self.types:
            return []
        jobs = self._ledger.claim(
            self.worker_id, limit=limit, types=self.types, lease_s=self.lease_s, queues=self.queues
        )
        for job in jobs:
            assert job.lease is not None
            self._held[job.job_id] = job.lease
        self._stats.claimed += len(jobs)
        return jobs

    def leases(self) -> list[Lease]:
        return list(self._held.values())

    def forget(self, job_id: UUID) -> None:
        self._held.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._held)
