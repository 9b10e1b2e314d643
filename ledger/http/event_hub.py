"""One follower of the log per server process, fanning new events out to every open stream.

The follower is a thread: it waits on the feed's waiter (``LISTEN jl_events`` on PostgreSQL;
on SQLite the poll interval, as nothing notifies across processes), reads the final events
after its position and hands each batch to every subscriber's queue in its event loop. So a
hundred open streams cost one reader of the database, not a hundred.

A subscriber registers under the hub's lock and learns the hub's position at that moment:
every batch published later is after it, so a stream resuming from an older position reads
the gap itself (up to that position) and then takes the queue, without a gap or a repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence

from litestar.exceptions import ServiceUnavailableException

from ledger.api.event_feed import EventFeed, EventWaiter, FeedEvent, TailPosition

log = logging.getLogger(__name__)

DEFAULT_POLL_S = 0.5
"""How often the follower reads the log unwoken (SQLite's only way to see other processes'
commits; on PostgreSQL a bound on a lost notification or an event not final when notified)."""
BATCH = 500
"""Events read per query."""
QUEUE_BATCHES = 1_000
"""Batches a subscriber may fall behind by before its stream is ended (it resumes with
``Last-Event-ID``) rather than hold the server's memory."""

START_TIMEOUT_S = 10.0
"""How long a new stream waits for the follower's first read of the log before a 503."""

Batch = Sequence[FeedEvent]
END: Batch = ()
"""Put on a queue to end the stream (the server is closing, or the subscriber fell behind)."""


class Subscription:
    """One open stream's queue of batches, and where the hub was when it joined."""

    def __init__(self, loop: asyncio.AbstractEventLoop, joined_at: TailPosition) -> None:
        self.loop = loop
        self.joined_at = joined_at
        self.queue: asyncio.Queue[Batch] = asyncio.Queue(maxsize=QUEUE_BATCHES + 1)

    def offer(self, batch: Batch) -> None:
        """In the subscriber's loop: queue ``batch``, or end a stream that fell behind."""
        if self.queue.qsize() >= QUEUE_BATCHES and batch is not END:
            batch = END
        if not self.queue.full():
            self.queue.put_nowait(batch)


class EventHub:
    """The shared follower (started by the first subscriber; see the module docstring)."""

    def __init__(self, feed: EventFeed, *, poll_s: float = DEFAULT_POLL_S) -> None:
        self.feed = feed
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._subscribers: set[Subscription] = set()
        self._position: TailPosition | None = None
        self._thread: threading.Thread | None = None
        self._waiter: EventWaiter | None = None
        self._closing = threading.Event()
        self._started = threading.Event()

    def join(self, loop: asyncio.AbstractEventLoop) -> Subscription:
        """Register a subscriber of ``loop`` (blocking until the follower knows its position:
        call it from a worker thread)."""
        self._start()
        if not self._started.wait(timeout=START_TIMEOUT_S):
            raise ServiceUnavailableException("the event stream cannot read the ledger")
        with self._lock:
            assert self._position is not None
            subscription = Subscription(loop, self._position)
            if self._closing.is_set():
                loop.call_soon_threadsafe(subscription.offer, END)
            self._subscribers.add(subscription)
            return subscription

    def leave(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def close(self, *, wait: bool = True) -> None:
        """End every open stream and stop the follower (any thread; idempotent); ``wait``
        for the follower's thread to end (not from a signal handler on the event loop)."""
        self._closing.set()
        with self._lock:
            for subscription in self._subscribers:
                self._deliver(subscription, END)
            waiter = self._waiter
        if waiter is not None:
            waiter.wake()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jobledger-event-hub", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        waiter = self.feed.waiter()
        with self._lock:
            self._waiter = waiter
        try:
            position = self._first_position(waiter)
            while not self._closing.is_set():
                try:
                    position = self._publish_after(position)
                except Exception:  # a failed read must not end the follower: retry later
                    log.exception("event stream: reading the log failed; retrying")
                waiter.wait(self.poll_s)
        finally:
            with self._lock:
                self._waiter = None
            waiter.close()

    def _first_position(self, waiter: EventWaiter) -> TailPosition:
        while True:
            try:
                position = self.feed.head()
            except Exception:
                log.exception("event stream: reading the log's end failed; retrying")
                waiter.wait(self.poll_s)
                continue
            with self._lock:
                self._position = position
            self._started.set()
            return position

    def _publish_after(self, position: TailPosition) -> TailPosition:
        while not self._closing.is_set():
            batch = self.feed.after(position, BATCH)
            if not batch:
                return position
            position = batch[-1].at
            with self._lock:
                self._position = position
                for subscription in self._subscribers:
                    self._deliver(subscription, batch)
            if len(batch) < BATCH:
                return position
        return position

    @staticmethod
    def _deliver(subscription: Subscription, batch: Batch) -> None:
        with contextlib.suppress(RuntimeError):  # its loop has closed: the server is gone
            subscription.loop.call_soon_threadsafe(subscription.offer, batch)
