"""Seeing, from another thread, that the event loop is blocked, and by which handler.

The commonest mistake in an ``async def`` handler is a blocking call (``time.sleep``, a
synchronous HTTP client, a CPU-bound loop): the whole event loop stops with it, and with it
every other job of the pool. :class:`LoopWatch` is ticked by the heartbeat thread: each tick
posts a probe to the loop (``call_soon_threadsafe``), and a probe still unanswered
``threshold_s`` later means the loop is blocked. The thread then reads the loop thread's
stack (:func:`sys._current_frames`) to name what blocks it: the async handler whose frames are
on it (its job type and id, and the handler's line), or the code's location when no handler
is. Measured on a monotonic counter: lateness is a physical duration, not a time in history.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from time import monotonic
from types import CodeType, FrameType
from uuid import UUID

from ledger.clock import Clock
from ledger.runtime.health import PoolStats
from ledger.runtime.pool_metrics import PoolMetrics

log = logging.getLogger(__name__)

LOOP_BLOCKED_S = 1.0
"""A probe of the event loop unanswered this long means the loop is blocked (asyncio's own
debug mode calls a callback slow at 0.1 s; a full second is a blocking call, not load)."""


@dataclass(frozen=True)
class LoopBlock:
    """One time the event loop was seen blocked."""

    seconds: float
    """How long the loop had not answered when seen (then, once it answered: in all)."""
    job_type: str | None
    """The job type whose async handler was running on the loop (``None``: no handler)."""
    job_id: UUID | None
    where: str
    """``file:line in function`` of the handler's frame (else of the loop's innermost)."""
    ended: bool = False

    def describe(self) -> str:
        """One line for the log and the pool's health reasons."""
        verb = "was blocked" if self.ended else "has been blocked"
        if self.job_type is None:
            culprit = f"code outside any handler, at {self.where}"
        else:
            culprit = (
                f"the async handler of job type {self.job_type!r} (job {self.job_id}), "
                f"at {self.where}"
            )
        return f"event loop {verb} for {self.seconds:.1f} s by {culprit}"


class LoopWatch:
    """Probes ``loop`` from a watching thread (:meth:`tick`); calls ``on_blocked`` (on the
    watching thread) once per blocked spell, and ``on_answered`` (on the loop) when a
    reported spell ends, with its full length."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        handler_call: CodeType,
        on_blocked: Callable[[LoopBlock], None],
        on_answered: Callable[[LoopBlock], None],
        threshold_s: float = LOOP_BLOCKED_S,
    ) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()  # built on the loop's thread
        self._handler_call = handler_call
        self._on_blocked = on_blocked
        self._on_answered = on_answered
        self.threshold_s = threshold_s
        self._probe_sent: float | None = None
        self._reported: LoopBlock | None = None

    def tick(self) -> None:
        """Post a probe if none is out; report the loop blocked if the one out is late."""
        sent = self._probe_sent
        now = monotonic()
        if sent is None:
            self._probe_sent = now  # before posting: the answer may come at once
            try:
                self._loop.call_soon_threadsafe(self._answered, now)
            except RuntimeError:  # the loop is closed: nothing to watch
                self._probe_sent = None
            return
        if self._reported is None and now - sent >= self.threshold_s:
            block = self._blocker(now - sent)
            self._reported = block
            self._on_blocked(block)

    def _answered(self, sent: float) -> None:
        reported, self._reported = self._reported, None
        self._probe_sent = None
        if reported is not None:
            ended = LoopBlock(
                monotonic() - sent, reported.job_type, reported.job_id, reported.where, True
            )
            self._on_answered(ended)

    def _blocker(self, seconds: float) -> LoopBlock:
        frame = sys._current_frames().get(self._loop_thread)
        innermost = frame
        inside: FrameType | None = None  # the frame the handler call called: the handler's
        while frame is not None:
            if frame.f_code is self._handler_call:
                job = getattr(frame.f_locals.get("context"), "job", None)
                where = _where(inside or innermost)
                if job is None:
                    return LoopBlock(seconds, None, None, where)
                return LoopBlock(seconds, job.job_type, job.job_id, where)
            inside, frame = frame, frame.f_back
        return LoopBlock(seconds, None, None, _where(innermost))


LOOP_BLOCK_REMEMBERED = timedelta(minutes=10)
"""How long after a blocked spell ends the pool's health still names it (degraded)."""


class LoopBlocks:
    """What a pool keeps and says of its blocked loop: the log line, ``stats.loop_blocks``,
    the last spell (:attr:`last`), the metric, and the health reason (:meth:`reason`: while
    blocked, then for :data:`LOOP_BLOCK_REMEMBERED` of the ledger's clock)."""

    def __init__(
        self,
        clock: Clock,
        stats: PoolStats,
        metrics: PoolMetrics,
        *,
        report_now: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        self._stats = stats
        self._metrics = metrics
        self._report_now = report_now
        self._last: LoopBlock | None = None
        self._seen_at: datetime | None = None

    def seen(self, block: LoopBlock) -> None:
        """The loop is blocked now (called on the heartbeat thread, which renews the
        leases meanwhile); the pool's report is written at once (its service waits on the
        blocked loop)."""
        self._remember(block)
        self._stats.loop_blocks += 1
        self._metrics.loop_blocked(block.job_type)
        log.warning(
            "%s; leases are kept alive from the heartbeat thread meanwhile. A blocking call in "
            "an async def handler stops every job of this pool: await it, run it with "
            "asyncio.to_thread, or make the handler a plain def",
            block.describe(),
        )
        if self._report_now is not None:
            self._report_now()

    def ended(self, block: LoopBlock) -> None:
        """The blocked spell is over (on the loop), ``block.seconds`` long in all."""
        self._remember(block)
        log.warning("%s", block.describe())

    @property
    def last(self) -> LoopBlock | None:
        """The last blocked spell seen (its full length once it ended)."""
        return self._last

    def reason(self) -> str | None:
        """The pool's health reason, if the loop is blocked or was lately."""
        block, seen_at = self._last, self._seen_at
        if block is None or seen_at is None:
            return None
        if block.ended and self._clock.now() - seen_at > LOOP_BLOCK_REMEMBERED:
            return None
        return f"{block.describe()} (seen {seen_at.isoformat()})"

    def _remember(self, block: LoopBlock) -> None:
        self._last = block
        self._seen_at = self._clock.now()


def _where(frame: FrameType | None) -> str:
    if frame is None:
        return "an unknown place"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
