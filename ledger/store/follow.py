"""Waiting for new events: what lets a tracked projection follow the head without busy polling.

On PostgreSQL every transaction that appends events sends ``NOTIFY jl_events`` (the
eventsourcing recorder's channel, named after the events table), so a follower ``LISTEN``\\ s on
a connection of its own and wakes as soon as anything commits. SQLite has no notifications:
the follower polls (commits in this process also wake it, through the store's listeners).
Either way the wait is bounded by ``timeout``, so a lost notification costs one poll interval,
never an event: the caller always re-reads from its recorded position.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import psycopg

from ledger.store.base import EVENTS_TABLE, Store

log = logging.getLogger("jobledger.follow")

CHANNEL = EVENTS_TABLE
"""The recorder's channel: one notification per transaction that appended events."""
RECONNECT_DELAY_S = 1.0


class EventWaiter(Protocol):
    def wait(self, timeout: float) -> bool:
        """Block until new events may have been appended, or ``timeout`` seconds; true if
        woken (a notification or :meth:`wake`)."""
        ...

    def wake(self) -> None:
        """End the current or next wait at once (any thread)."""
        ...

    def close(self) -> None: ...


class _Signal:
    """A wake-up flag: set by whatever may mean new events, cleared by each wait."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wait(self, timeout: float) -> bool:
        woken = self._event.wait(timeout)
        self._event.clear()
        return woken

    def wake(self) -> None:
        self._event.set()


class PollingWaiter(_Signal):
    """Waits out the poll interval unless this process commits, or someone calls wake()."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._store = store
        store.add_listener(self.wake)

    def close(self) -> None:
        self._store.remove_listener(self.wake)
        self.wake()


class ListeningWaiter(_Signal):
    """``LISTEN jl_events`` on its own connection, in a daemon thread; polls meanwhile if the
    connection fails (and says so once per failure)."""

    def __init__(self, conninfo: str) -> None:
        super().__init__()
        self._conninfo = conninfo
        self._closed = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="jobledger-follow", daemon=True)
        self._thread.start()
        # Events committed before LISTEN took effect are read anyway (the caller reads from
        # its position first); waiting here only keeps the first wait from sleeping through
        # a commit made right after start.
        self._listening.wait(timeout=5.0)

    def close(self) -> None:
        self._closed.set()
        self.wake()
        self._thread.join(timeout=2.0)

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    self.wake()  # a reconnect may have missed notifications
                    while not self._closed.is_set():
                        # A short timeout so close() is noticed without a notification.
                        for _ in conn.notifies(timeout=0.2, stop_after=1):
                            self.wake()
            except psycopg.Error as exc:
                log.warning("LISTEN %s failed (%s); polling until reconnected", CHANNEL, exc)
                self._listening.set()
                self._closed.wait(RECONNECT_DELAY_S)


def event_waiter(store: Store) -> EventWaiter:
    """The best waiter for ``store``: LISTEN on PostgreSQL, polling on SQLite."""
    conninfo = getattr(store, "conninfo", None)
    if isinstance(conninfo, str):
        return ListeningWaiter(conninfo)
    return PollingWaiter(store)
