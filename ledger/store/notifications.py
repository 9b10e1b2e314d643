"""Cross-process wake-ups: what a store can tell other processes when it commits.

Two topics, each a PostgreSQL channel:

- :attr:`Topic.EVENTS_APPENDED` (``jl_events``, the eventsourcing recorder's channel): every
  transaction that appended events, whatever they were. Tailing readers (the projection
  follower, ``history --follow``) wait on it. Appends take no table lock, so a notification
  may come before the event is *final* for a tailing reader (an older transaction still in
  flight): the reader reads what is final and comes back at its next wake-up or poll.
- :attr:`Topic.JOBS_AVAILABLE` (``jl_jobs_available``): only commits that may have made jobs
  claimable, once per transaction. Idle workers wait on it. A commit that cancelled leased
  jobs sends one more, with the payload :data:`CANCELLED_PAYLOAD`: pools then renew their
  leases at once, and the fence's answer tells them which handlers to stop (one channel and
  one LISTEN loop for both).

A backend says whether it has notifications at all (:attr:`Store.has_notifications
<ledger.store.store.Store.has_notifications>`; SQLite has none: callers poll). Where it has,
:meth:`~ledger.store.store.Store.listen` (a thread, for blocking callers) and
:meth:`~ledger.store.store.Store.listen_async` (a task, for the worker pool's event loop)
call ``on_notify()`` for each notification, and once after each (re)connect, since a
reconnect may have missed some. A notification is only a hint to look: callers always re-read
from their own position, so a lost one costs a poll interval, never an event.
"""

from __future__ import annotations

import enum
from typing import Protocol


class Topic(enum.Enum):
    """What a listener wants to hear about; the value is the PostgreSQL channel."""

    EVENTS_APPENDED = "jl_events"
    JOBS_AVAILABLE = "jl_jobs_available"


CANCELLED_PAYLOAD = "cancelled"
"""The payload of a :attr:`Topic.JOBS_AVAILABLE` notification sent by a commit that cancelled
leased jobs (``jobs_cancelled_notify``)."""


class Listening(Protocol):
    """A running listener (sync face): ``on_notify`` is called from its own thread."""

    def close(self) -> None:
        """Stop listening and wait (briefly) for the listener's thread to end."""
        ...


class AsyncListening(Protocol):
    """A running listener (async face): ``on_notify`` is called in the event loop."""

    async def close(self) -> None:
        """Stop listening (cancel the listening task and await it)."""
        ...


LISTEN_READY_TIMEOUT_S = 5.0
"""How long starting a listener waits for its ``LISTEN`` to take effect (or first fail):
events committed before it are read anyway, but waiting keeps the first wait from sleeping
through a commit made right after start."""
RECONNECT_DELAY_S = 1.0
"""The pause before a failed listening connection is opened again (callers poll meanwhile)."""
