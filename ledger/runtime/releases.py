"""Giving claimed jobs back: at shutdown, and from a worker cancelled mid-job.

A release returns the job to pending without consuming its attempt. A cancelled worker's
release runs as its own tracked task (an *orphan* once the worker is gone), so a second
cancellation of the worker cannot strand the claim; :meth:`Releaser.wait_for_pending` waits for
those before the pool shuts down.
"""

from __future__ import annotations

import asyncio
import logging

from ledger.api.ledger import Ledger
from ledger.core.errors import LedgerError
from ledger.core.state import Lease
from ledger.runtime.claims import Claims
from ledger.runtime.health import PoolStats
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)

RELEASE_REASON = "released at shutdown"


class Releaser:
    def __init__(self, ledger: Ledger, claims: Claims, stats: PoolStats, io: ThreadLane) -> None:
        self._ledger = ledger
        self._io = io
        self._claims = claims
        self._stats = stats
        self._pending: set[asyncio.Task[None]] = set()

    async def release(self, lease: Lease) -> None:
        """Release one claim; a refusal (the lease is already gone) is logged, not raised."""
        self._claims.forget(lease.job_id)
        try:
            await self._io.run(self._ledger.release, lease, reason=RELEASE_REASON)
            self._stats.released += 1
        except LedgerError as exc:
            log.info("did not release job %s: %s", lease.job_id, exc)

    async def release_shielded(self, lease: Lease) -> None:
        """Release from a cancelled worker, in a tracked task the caller's next cancellation
        cannot stop."""
        task = asyncio.create_task(self.release(lease), name=f"jobledger-release-{lease.job_id}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        await asyncio.shield(task)

    @property
    def pending(self) -> int:
        """Shielded releases still running."""
        return len(self._pending)

    async def wait_for_pending(self, timeout: float | None = None) -> int:
        """Wait (up to ``timeout`` seconds) for the shielded releases still running; returns
        how many of them finished."""
        pending = set(self._pending)
        if not pending:
            return 0
        done, _ = await asyncio.wait(pending, timeout=timeout)
        return len(done)
