"""One heartbeat loop per process: every in-flight job's lease, renewed in one transaction.

Each renewal is still its own ``job_heartbeated`` event. A lease the fence refuses (reaped,
cancelled, re-claimed elsewhere) is reported to ``on_lost`` and no longer renewed; the new
ends of renewed leases go to ``on_renewed``. ``held`` decides which leases are renewed (the
pool leaves out jobs that ran past their own timeout). The writes run on the pool's I/O
threads, which handlers never occupy, so long sync handlers cannot starve the renewals.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from uuid import UUID

from ledger.api.ledger import LeaseLength, Ledger
from ledger.core.state import JobState, Lease
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)


class Heartbeater:
    def __init__(
        self,
        ledger: Ledger,
        held: Callable[[], list[Lease]],
        *,
        lease_s: LeaseLength,
        interval_s: float,
        on_lost: Callable[[UUID], None],
        io: ThreadLane,
        on_renewed: Callable[[list[JobState]], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._held = held
        self.lease_s = lease_s
        self.interval_s = interval_s
        self._on_lost = on_lost
        self._on_renewed = on_renewed
        self._io = io
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="jobledger-heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def beat_once(self) -> int:
        """Renew every held lease now; returns how many were renewed."""
        leases = self._held()
        if not leases:
            return 0
        result = await self._io.run(self._ledger.heartbeat_many, leases, lease_s=self.lease_s)
        if self._on_renewed is not None:
            self._on_renewed(result.accepted)
        for job_id, error in result.rejected.items():
            log.warning("lost the lease on job %s: %s", job_id, error)
            self._on_lost(job_id)
        return len(result.accepted)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.beat_once()
            except Exception as exc:  # a database hiccup must not kill the loop
                log.warning("heartbeat failed: %s", exc)
