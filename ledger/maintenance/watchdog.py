"""The watchdog service: ends database sessions frozen inside a write that stall every writer.

A worker stopped (SIGSTOP, a paused VM, a debugger) in the middle of a PostgreSQL write keeps
the events table's lock, so every other writer — claims, heartbeats, completions, the reaper
— waits for it. The server ends a session idle inside a transaction
(``idle_in_transaction_session_timeout``), but not one frozen between the statements of a
pipelined write, which it counts as active; and as it ends one session of a frozen process,
the next one queued for the lock takes it. Each pass ends the sessions that block another and
whose client has been silent inside a transaction for longer than half the ledger's
idle-in-transaction bound, with the other stuck sessions of their process
(:meth:`Ledger.end_frozen_writers <ledger.api.ledger.Ledger.end_frozen_writers>`; the
criteria and why they are safe: :mod:`ledger.store.postgres.frozen_writers`).

A pass is one short statement that takes no table lock, on the maintenance runner's thread
of its own, so it runs while every other writer of this process waits. It runs where the
store can end sessions (PostgreSQL); on SQLite there is nothing to run (a frozen writer
keeps the one write lock until it resumes or dies: ``docs/operations.md``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ledger.api.ledger import Ledger
from ledger.core.limits import check_setting_seconds
from ledger.maintenance.runner import ServiceRunner
from ledger.store.frozen_writers import FrozenWriter

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.5
"""The shortest derived interval between passes."""


@dataclass(frozen=True)
class WatchdogConfig:
    """How silent a frozen writer must be to be ended, and how often to look. Seconds."""

    silent_s: float | None = None
    """``None``: the store's (half the idle-in-transaction timeout the ledger was opened with;
    a worker's timeout is half its lease), so a frozen process is ended before the server's
    timeout would end the first of its sessions alone."""
    interval_s: float | None = None
    """``None``: half the bound (at least :data:`MIN_INTERVAL_S`), so a frozen writer is
    ended within 1.5 times the bound of its last statement."""

    def __post_init__(self) -> None:
        if self.silent_s is not None and self.silent_s < 0:
            raise ValueError("silent_s must be >= 0")
        if self.interval_s is not None and self.interval_s <= 0:
            raise ValueError("interval_s must be positive")
        for value, what in ((self.silent_s, "silent_s"), (self.interval_s, "interval_s")):
            if value is not None:
                check_setting_seconds(value, what, zero=True)


class Watchdog:
    """Runs watchdog passes over one ledger. Safe to run in several processes at once (a
    session ended twice is ended once)."""

    name = "watchdog"

    def __init__(
        self,
        ledger: Ledger,
        config: WatchdogConfig | None = None,
        *,
        on_ended: Callable[[list[FrozenWriter]], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self.config = config or WatchdogConfig()
        self._on_ended = on_ended

    @property
    def silent_s(self) -> float | None:
        """The bound a pass uses; ``None`` when the store has none (the watchdog is off)."""
        if self.config.silent_s is not None:
            return self.config.silent_s
        return self._ledger.store.frozen_writer_bound_s

    @property
    def enabled(self) -> bool:
        """Whether a pass can end anything here (PostgreSQL, with a bound)."""
        return self._ledger.store.ends_frozen_writers and self.silent_s is not None

    @property
    def interval_s(self) -> float:
        if self.config.interval_s is not None:
            return self.config.interval_s
        return max(MIN_INTERVAL_S, (self.silent_s or 0.0) / 2)

    def run_once(self) -> list[FrozenWriter]:
        """One pass: end the frozen writers found, log each; those ended."""
        silent_s = self.silent_s
        if not self.enabled or silent_s is None:
            return []
        found = self._ledger.end_frozen_writers(silent_s)
        for writer in found:
            _log_ended(writer)
        ended = [writer for writer in found if writer.ended]
        if ended and self._on_ended is not None:
            self._on_ended(ended)
        return ended

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes every :attr:`interval_s` until ``stop`` is set."""
        await ServiceRunner([self]).run(stop)


def _log_ended(writer: FrozenWriter) -> None:
    if writer.frozen_pid is None and not writer.blocked_pids:
        why = "frozen inside a write past the idle-in-transaction bound, its rows locked"
    elif writer.frozen_pid is None:
        why = "frozen inside a write while sessions {} waited on its locks".format(
            ", ".join(str(pid) for pid in writer.blocked_pids)
        )
    else:
        why = f"another session of the process of frozen session {writer.frozen_pid}"
    log.warning(
        "%s session %d (%s, user %r, application %r, client %s): %s; silent %.1f s, "
        "transaction open %.1f s; last statement: %s",
        "ended" if writer.ended else "could not end",
        writer.pid,
        writer.state,
        writer.user,
        writer.application_name,
        writer.client_addr or "local",
        why,
        writer.silent_s,
        writer.transaction_s,
        " ".join(writer.query.split()),
    )
