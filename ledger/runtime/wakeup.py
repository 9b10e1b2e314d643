"""Waking idle workers: in-process at once, across processes through the store's notifications.

Commits that may make jobs claimable call the store's listeners (same process), and on
PostgreSQL send ``NOTIFY jl_jobs_available`` once per transaction, which other processes
hear through the store's LISTEN facility (its async face,
:meth:`~ledger.store.store.Store.listen_async`). The idle poll interval remains the fallback —
and the only cross-process path where the store has no notifications (SQLite).

The same LISTEN hears a commit that cancelled leased jobs (the payload
:data:`~ledger.store.notifications.CANCELLED_PAYLOAD`): ``on_cancelled`` is called, and the
pool renews its leases at once to learn from the fence which of its handlers to stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ledger.api.ledger import Ledger
from ledger.store.notifications import CANCELLED_PAYLOAD, AsyncListening, Topic


class Wakeup:
    """An asyncio wake-up flag for the pool's idle claim loop."""

    def __init__(self, ledger: Ledger, on_cancelled: Callable[[], None] | None = None) -> None:
        self._ledger = ledger
        self._on_cancelled = on_cancelled
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening: AsyncListening | None = None

    async def start(self) -> None:
        """Hear this process's commits, and other processes' where the store can tell;
        returns once listening took effect (jobs enqueued before it would otherwise wait a
        whole poll interval)."""
        self._loop = asyncio.get_running_loop()
        self._ledger.on_jobs_available(self._from_any_thread)
        store = self._ledger.store
        if store.has_notifications:
            self._listening = await store.listen_async(
                Topic.JOBS_AVAILABLE, self._event.set, self._heard
            )

    async def stop(self) -> None:
        self._ledger.remove_listener(self._from_any_thread)
        if self._listening is not None:
            await self._listening.close()
            self._listening = None

    def signal(self) -> None:
        """Wake the waiter (call from the event loop's thread)."""
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a signal; true if one came."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        finally:
            self._event.clear()
        return True

    def _heard(self, payload: str) -> None:
        if payload == CANCELLED_PAYLOAD and self._on_cancelled is not None:
            self._on_cancelled()

    def _from_any_thread(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._event.set)
