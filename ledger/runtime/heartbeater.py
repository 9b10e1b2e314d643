"""One heartbeat thread per process: every in-flight job's lease, renewed in one transaction.

Each renewal is still its own ``job_heartbeated`` event. A lease the fence refuses (reaped,
cancelled, re-claimed elsewhere) is reported to ``on_lost`` and no longer renewed; one refused
because its job was cancelled under it (:class:`~ledger.core.errors.JobCancelledError`) to
``on_cancelled`` as well, so the pool stops its handler. The new ends of renewed leases go to
``on_renewed``. ``held`` decides which leases are renewed (the pool leaves out jobs that ran
past their own timeout).

The renewals run on a thread of their own, ``jobledger-heartbeat``, never on the event loop:
an ``async def`` handler that blocks the loop (``time.sleep`` where ``await asyncio.sleep``
was meant) must not cost every other job of the pool its lease. The thread writes through the
ledger itself, as the pool's I/O threads do (handlers never run on it), so neither a blocked
loop nor long sync handlers can starve the renewals. ``held`` and ``on_renewed`` are called on
that thread; ``on_lost`` and ``on_cancelled`` on the loop. :meth:`poke` asks for a renewal
now (the pool's reaction to a cancel notification). The thread also ticks a
:class:`~ledger.runtime.loop_watch.LoopWatch`, which sees the loop blocked and names the
handler blocking it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from time import monotonic
from uuid import UUID

from ledger.api.ledger import LeaseLength, Ledger
from ledger.core.errors import JobCancelledError
from ledger.core.state import JobState, Lease
from ledger.jobs.outcomes import BatchResult
from ledger.runtime.loop_watch import LoopWatch
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)

WATCH_TICK_S = 0.25
"""How often the heartbeat thread probes the event loop (between renewals, if sooner)."""
JOIN_TIMEOUT_S = 2.0
"""How long :meth:`Heartbeater.stop` waits for a renewal in progress to end (a database
outage may hold one longer: the thread, a daemon, then ends on its own; its late write is
fenced like any other)."""


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
        on_cancelled: Callable[[UUID], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._held = held
        self.lease_s = lease_s
        self.interval_s = interval_s
        self._on_lost = on_lost
        self._on_renewed = on_renewed
        self._on_cancelled = on_cancelled
        self._io = io
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch: LoopWatch | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False

    def start(self, watch: LoopWatch | None = None) -> None:
        """Start the thread (call on the event loop); ``watch`` is ticked by it."""
        self._loop = asyncio.get_running_loop()
        self._watch = watch
        self._stopping = False
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name="jobledger-heartbeat", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        self._wake.set()
        await self._io.run(thread.join, JOIN_TIMEOUT_S)

    def poke(self) -> None:
        """Renew now rather than at the next interval (from any thread)."""
        self._wake.set()

    async def beat_once(self) -> int:
        """Renew every held lease now; returns how many were renewed."""
        result = await self._io.run(self._renew)
        if result is None:
            return 0
        for job_id, error in result.rejected.items():
            self._lost(job_id, error)
        return len(result.accepted)

    def _renew(self) -> BatchResult | None:
        """One batched renewal (on a thread); ``None`` if nothing is held."""
        leases = self._held()
        if not leases:
            return None
        result = self._ledger.heartbeat_many(leases, lease_s=self.lease_s)
        if self._on_renewed is not None:
            self._on_renewed(result.accepted)
        return result

    def _lost(self, job_id: UUID, error: Exception) -> None:
        """A refused renewal (on the loop)."""
        if isinstance(error, JobCancelledError):
            log.info("job %s was cancelled while held: stopping its handler", job_id)
            if self._on_cancelled is not None:
                self._on_cancelled(job_id)
        else:
            log.warning("lost the lease on job %s: %s", job_id, error)
        self._on_lost(job_id)

    def _run(self) -> None:
        tick_s = self.interval_s if self._watch is None else min(self.interval_s, WATCH_TICK_S)
        next_beat = monotonic() + self.interval_s
        while True:
            poked = self._wake.wait(max(0.0, min(tick_s, next_beat - monotonic())))
            if self._stopping:
                return
            if self._watch is not None:
                self._watch.tick()
            if poked:
                self._wake.clear()
            elif monotonic() < next_beat:
                continue
            next_beat = monotonic() + self.interval_s
            try:
                result = self._renew()
            except Exception as exc:  # a database hiccup must not end the renewals
                log.warning("heartbeat failed: %s", exc)
                continue
            if result is not None and result.rejected:
                self._post_lost(result)

    def _post_lost(self, result: BatchResult) -> None:
        loop = self._loop
        if loop is None:
            return
        for job_id, error in result.rejected.items():
            try:
                loop.call_soon_threadsafe(self._lost, job_id, error)
            except RuntimeError:  # the loop closed: the pool is gone
                return
