"""The one LISTEN loop, with a sync face (a thread) and an async face (a task).

:func:`listen_loop` holds a ``LISTEN`` connection of its own (autocommit: a transaction left
open would hold back the server's cleanup) and calls ``on_notify()`` for each notification,
and once after each (re)connect, since a reconnect may have missed some. A failure is logged
and retried after :data:`~ledger.store.notifications.RECONNECT_DELAY_S`; callers poll
meanwhile, and always re-read from their own position, so a lost notification costs a poll
interval, never an event.

:class:`ThreadListening` runs the loop on an event loop of its own in a daemon thread (the
projection follower, ``history --follow``); :class:`TaskListening` runs it as a task of the
caller's event loop (the worker pool's wake-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg.sql import SQL, Identifier

from ledger.store.notifications import LISTEN_READY_TIMEOUT_S, RECONNECT_DELAY_S, Topic

log = logging.getLogger("jobledger.listen")


async def listen_loop(
    conninfo: str,
    topic: Topic,
    on_notify: Callable[[], None],
    on_ready: Callable[[], None],
    on_payload: Callable[[str], None] | None = None,
) -> None:
    """Listen on ``topic``'s channel until cancelled; ``on_ready()`` after each attempt to
    start listening, whether it succeeded or failed; ``on_payload(payload)`` too, after
    ``on_notify()``, for a notification that carries one."""
    channel = topic.value
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(SQL("LISTEN {}").format(Identifier(channel)))
                on_ready()
                on_notify()  # a reconnect may have missed notifications: look once
                async for notify in conn.notifies():
                    on_notify()
                    if on_payload is not None and notify.payload:
                        on_payload(notify.payload)
        except psycopg.Error as exc:
            log.warning("LISTEN %s failed (%s); polling until reconnected", channel, exc)
            on_ready()
            await asyncio.sleep(RECONNECT_DELAY_S)


class TaskListening:
    """The async face: the loop as a task of the running event loop."""

    def __init__(
        self,
        conninfo: str,
        topic: Topic,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> None:
        self._ready = asyncio.Event()
        self._task = asyncio.create_task(
            listen_loop(conninfo, topic, on_notify, self._ready.set, on_payload),
            name="jobledger-listen",
        )

    async def started(self) -> TaskListening:
        """Wait (a few seconds at most) for the first attempt to start listening."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout=LISTEN_READY_TIMEOUT_S)
        return self

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class ThreadListening:
    """The sync face: the loop on an event loop of its own, in a daemon thread
    (``on_notify`` is called from that thread)."""

    def __init__(self, conninfo: str, topic: Topic, on_notify: Callable[[], None]) -> None:
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(
            listen_loop(conninfo, topic, on_notify, self._ready.set)
        )
        self._thread = threading.Thread(target=self._run, name="jobledger-listen", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=LISTEN_READY_TIMEOUT_S)

    def _run(self) -> None:
        try:
            with contextlib.suppress(asyncio.CancelledError):
                self._loop.run_until_complete(self._task)
        finally:
            self._loop.close()

    def close(self) -> None:
        if not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=2.0)
