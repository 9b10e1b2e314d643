"""Waiting for new events: what lets a tracked projection follow the head without busy polling.

On PostgreSQL every transaction that appends events sends ``NOTIFY jl_events`` (the
eventsourcing recorder's channel, named after the events table), so a follower listens for
:attr:`~ledger.store.notifications.Topic.EVENTS_APPENDED` through the store's LISTEN facility
(:meth:`~ledger.store.store.Store.listen`) and wakes as soon as anything commits. SQLite has
no notifications (:attr:`~ledger.store.store.Store.has_notifications`):
the follower polls (commits in this process also wake it, through the store's listeners).
Either way the wait is bounded by ``timeout``, so a lost notification costs one poll interval,
never an event: the caller always re-reads from its recorded position.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ledger.store.notifications import Topic
from ledger.store.store import Store


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
    """Woken by the store's notifications of appended events (its listener thread); polls
    meanwhile if the listening connection fails."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._listening = store.listen(Topic.EVENTS_APPENDED, self.wake)

    def close(self) -> None:
        self._listening.close()
        self.wake()


def event_waiter(store: Store) -> EventWaiter:
    """The best waiter for ``store``: notifications where it has them (PostgreSQL), else
    polling (SQLite)."""
    if store.has_notifications:
        return ListeningWaiter(store)
    return PollingWaiter(store)
