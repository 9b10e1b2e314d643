"""The in-process half of waking idle workers: callbacks run after a commit in this process.

Other processes learn of commits from the database (``NOTIFY`` on PostgreSQL, see
:mod:`ledger.store.notifications`) or by polling; callers in this process need not wait for
either: the store calls every registered listener right after a commit that may have made jobs
claimable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Listener = Callable[[], None]


class ListenerBus:
    """A thread-safe set of callbacks, called in the committing thread."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def add(self, listener: Listener) -> None:
        """Call ``listener()`` on every :meth:`notify`; it must be quick and must not raise."""
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        """Stop calling ``listener`` (nothing happens if it was never added)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def notify(self) -> None:
        """Call every listener; one added or removed meanwhile may or may not be called."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
