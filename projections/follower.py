"""Following the head: keep every tracked projection caught up while the system runs.

A :class:`Follower` loops: catch each tracked projection up (one transaction per batch, rows
and position together — :class:`~projections.tracked.TrackedRunner`), then wait for new
events
(``LISTEN`` on PostgreSQL, polling on SQLite — :mod:`ledger.store.follow`), until stopped.

Any number of followers may run against one database (one per worker pool, say): each batch
locks the projection's ``jl_tracking`` row, so they take turns and the one that comes second
finds nothing left to apply. A failed batch changes nothing (it rolls back whole); the
follower logs it, backs off and tries again from the recorded position — it never skips an
event and never stops on an error, only on :meth:`stop`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec

from ledger.core.errors import LedgerError
from ledger.store.follow import EventWaiter, event_waiter
from ledger.store.store import Store
from ledger.views.catalog import PROJECTIONS, Projection, tracked
from projections.tracked import CatchUp, TrackedRunner

log = logging.getLogger("jobledger.projections")

POLL_S = 1.0
"""The longest wait between two looks at the head (the only way to see other processes'
commits on SQLite; on PostgreSQL a bound on a lost notification)."""
MIN_INTERVAL_S = 0.5
"""The shortest time between two passes. A busy queue commits hundreds of transactions a
second, each a notification: catching up on every one would cost the writers a
transaction each (measured: ~30% of a pool's throughput on 2 cores); gathering them into at
most two passes a second costs little and leaves the view at most about this far behind."""
MAX_BACKOFF_S = 30.0


class CatchingUp(Protocol):
    """Something a follower catches up on each pass (a tracked runner, the chain's)."""

    def catch_up(self) -> CatchUp: ...


class FollowerStats(msgspec.Struct):
    """What a follower has done since it started; ``last_error`` is cleared by a success."""

    passes: int = 0
    applied: int = 0
    errors: int = 0
    last_error: str | None = None
    positions: dict[str, int] = msgspec.field(default_factory=dict)


class Follower:
    """Catch the tracked projections up, then follow new events until :meth:`stop`."""

    def __init__(
        self,
        store: Store,
        projections: Sequence[Projection] | None = None,
        *,
        poll_s: float = POLL_S,
        min_interval_s: float = MIN_INTERVAL_S,
        waiter_factory: Callable[[Store], EventWaiter] = event_waiter,
        on_pass: Callable[[list[CatchUp]], None] | None = None,
        also: Sequence[CatchingUp] = (),
    ) -> None:
        chosen = tracked(list(projections) if projections is not None else list(PROJECTIONS))
        if not chosen and not also:
            raise ValueError("no tracked projection to follow")
        self.store = store
        self.runners = [TrackedRunner(store, p) for p in chosen]
        self.also = list(also)
        """Other runners caught up on each pass after the projections (the hash chain's:
        :class:`projections.chain.ChainRunner`)."""
        self.poll_s = poll_s
        self.min_interval_s = min(min_interval_s, poll_s)
        self.stats = FollowerStats()
        self._waiter_factory = waiter_factory
        self._on_pass = on_pass
        self._stopping = threading.Event()
        self._waiter: EventWaiter | None = None

    def run(self) -> FollowerStats:
        """Follow until :meth:`stop` (call it from another thread or a signal handler)."""
        waiter = self._waiter = self._waiter_factory(self.store)
        try:
            backoff = 0.0
            while not self._stopping.is_set():
                try:
                    self.run_pass()
                    backoff = 0.0
                except LedgerError as exc:
                    # The batch rolled back: nothing was written. Try again from the recorded
                    # position after a pause that grows while the failure lasts.
                    backoff = min(MAX_BACKOFF_S, max(self.poll_s, backoff * 2))
                    self.stats.errors += 1
                    self.stats.last_error = f"{exc.code}: {exc}"
                    log.warning("projection follower: %s; retrying in %.1f s", exc, backoff)
                    self._stopping.wait(backoff)
                    continue
                if self._stopping.wait(self.min_interval_s):
                    break
                waiter.wait(self.poll_s - self.min_interval_s)
        finally:
            waiter.close()
            self._waiter = None
        return self.stats

    def run_pass(self) -> list[CatchUp]:
        """Catch every followed projection up once (what :meth:`run` does on each wake-up)."""
        reports = [runner.catch_up() for runner in [*self.runners, *self.also]]
        self.stats.passes += 1
        self.stats.applied += sum(report.applied for report in reports)
        self.stats.last_error = None
        for report in reports:
            self.stats.positions[report.name] = report.position
        if self._on_pass is not None:
            self._on_pass(reports)
        return reports

    def stop(self) -> None:
        """Ask :meth:`run` to return after the batch in progress (safe from any thread)."""
        self._stopping.set()
        waiter = self._waiter
        if waiter is not None:
            waiter.wake()
