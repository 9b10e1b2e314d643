"""The tracked views (audit) followed from a thread of a worker process.

A :class:`~projections.follower.Follower` polls the head and applies new events in
batches; here it runs in a daemon thread beside a pool (``follow_projections=True``). A daemon
thread is safe to abandon at exit because each batch is one transaction: exiting mid-batch
loses nothing.
"""

from __future__ import annotations

import logging
import threading

from ledger.api.ledger import Ledger
from ledger.runtime.threads import ThreadLane
from projections.follower import Follower

log = logging.getLogger(__name__)

FOLLOWER_MIN_POLL_S = 0.25
"""The projection follower looks at the head at least this long apart (a look that finds
nothing new is one read; on SQLite it is the only way to see other processes' commits)."""


class FollowerThread:
    """Starts, watches and stops one follower thread."""

    def __init__(self, ledger: Ledger, *, poll_interval_s: float, io: ThreadLane) -> None:
        self._ledger = ledger
        self._io = io
        self._poll_s = max(FOLLOWER_MIN_POLL_S, poll_interval_s)
        self._follower: Follower | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._follower = Follower(self._ledger.store, poll_s=self._poll_s)
        self._thread = threading.Thread(
            target=_follow, args=(self._follower,), name="jobledger-projections", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """Ask the follower to stop and wait for its thread (off the event loop)."""
        thread, self._thread = self._thread, None
        if self._follower is None or thread is None:
            return
        self._follower.stop()
        await self._io.run(thread.join)

    def problem(self, *, running: bool) -> str | None:
        """Why the follower is not keeping up, or ``None``: its last error (kept after a
        stop), else a dead thread while the pool is ``running``."""
        follower, thread = self._follower, self._thread
        if follower is not None and follower.stats.last_error is not None:
            return f"projection follower failing: {follower.stats.last_error}"
        if running and thread is not None and not thread.is_alive():
            return "projection follower stopped"
        return None


def _follow(follower: Follower) -> None:
    try:
        follower.run()
    except Exception as exc:  # a bug, not a database error (those it retries)
        follower.stats.last_error = f"{type(exc).__name__}: {exc}"
        log.exception("projection follower stopped")
