"""Waking idle workers: in-process at once, across processes through PostgreSQL.

Commits that may make jobs claimable call the store's listeners (same process), and on
PostgreSQL send ``NOTIFY jl_jobs_available`` once per transaction (other processes, via a
``LISTEN`` connection here). The idle poll interval remains the fallback — and the only
cross-process path on SQLite, which has no notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from ledger.api.ledger import Ledger

log = logging.getLogger(__name__)

CHANNEL = "jl_jobs_available"
RECONNECT_DELAY_S = 1.0


class Wakeup:
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._ledger.on_jobs_available(self._from_any_thread)
        conninfo = getattr(self._ledger.store, "conninfo", None)
        if conninfo is not None:
            self._listener = asyncio.create_task(self._listen(conninfo), name="jobledger-listen")
            # Jobs enqueued before LISTEN took effect would wait a whole poll interval.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._listening.wait(), timeout=5.0)

    async def stop(self) -> None:
        self._ledger.remove_listener(self._from_any_thread)
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener

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

    def _from_any_thread(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._event.set)

    async def _listen(self, conninfo: str) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    # A reconnect may have missed notifications: look once, then listen.
                    self._event.set()
                    async for _ in conn.notifies():
                        self._event.set()
            except psycopg.Error as exc:
                log.warning("LISTEN %s failed (%s); polling until reconnected", CHANNEL, exc)
                self._listening.set()
                await asyncio.sleep(RECONNECT_DELAY_S)
