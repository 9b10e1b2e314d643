"""What a pool has done (:class:`PoolStats`) and whether it is fit to go on (:class:`Health`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ledger.core.state import JobState
from ledger.core.values import JobStatus


@dataclass
class PoolStats:
    """What the pool has done since it started."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    fenced_out: int = 0
    released: int = 0
    expired_before_start: int = 0
    """Claimed jobs dropped unstarted because their lease had ended (a paused process)."""
    frozen_writers_ended: int = 0
    """Database sessions this pool's watchdog ended: frozen inside a write, they blocked
    other writers (PostgreSQL; :mod:`ledger.maintenance.watchdog`)."""
    handlers_cancelled: int = 0
    """Running handlers this pool was told to stop because their job was cancelled."""
    loop_blocks: int = 0
    """Times the event loop was seen blocked (:mod:`ledger.runtime.loop_watch`; the last
    one, and who caused it: :attr:`WorkerPool.last_loop_block
    <ledger.runtime.pool.WorkerPool.last_loop_block>`)."""

    def count_recorded(self, state: JobState) -> None:
        """Count one recorded outcome by the state it left the job in (a retry is ``pending``
        again; a cancelled or otherwise ended job is not counted)."""
        if state.status is JobStatus.SUCCEEDED:
            self.succeeded += 1
        elif state.status is JobStatus.DEAD:
            self.dead += 1
        elif state.status is JobStatus.PENDING:
            self.retried += 1


@dataclass
class Health:
    status: Literal["ok", "degraded"]
    reasons: list[str] = field(default_factory=list)
    open_breakers: dict[str, datetime] = field(default_factory=dict)
    """Job types whose circuit breaker is open, and when each cooldown ends."""


def assess(
    *,
    started: bool,
    live_workers: int,
    concurrency: int,
    open_breakers: dict[str, datetime],
    follower_problem: str | None,
    stuck_handler_threads: int = 0,
    loop_block: str | None = None,
) -> Health:
    """``ok``, or ``degraded`` with every reason: dead worker slots (only while started), an
    open breaker (per type), sync handlers still running after their job ended, a failing or
    stopped projection follower, an event loop blocked now or lately (``loop_block``)."""
    reasons = []
    if loop_block is not None:
        reasons.append(loop_block)
    if started and live_workers < concurrency:
        reasons.append(f"{live_workers} of {concurrency} workers alive")
    for job_type, until in open_breakers.items():
        reasons.append(f"circuit breaker open for {job_type!r} until {until.isoformat()}")
    if stuck_handler_threads > 0:
        reasons.append(
            f"{stuck_handler_threads} sync handler thread(s) still running after their job ended"
        )
    if follower_problem is not None:
        reasons.append(follower_problem)
    return Health("degraded" if reasons else "ok", reasons, dict(open_breakers))
