"""The producer: keeps the worker slots fed with claimed jobs, claiming in batches.

One task claims as many due jobs as there are free slots plus a prefetch allowance, in one
transaction, and buffers them for the slots. It refills only once half of that capacity is
free (or the buffer ran dry), because claiming the moment one slot frees would make every
claim a one-job transaction, and throughput is transactions times jobs per transaction. Job
types whose circuit breaker is open are left out of the claim (a half-open one gets one probe
job); while nothing is due (or every
type's breaker is open) it waits for a wake-up or the poll interval. Claims run on the pool's
I/O threads. With batch turns (:mod:`ledger.runtime.batch_turns`) each claim also records the
outcomes gathered so far, and the room they will free counts towards the refill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from ledger.core.state import JobState, Lease
from ledger.runtime.batch_turns import BatchTurns
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.claims import Claims
from ledger.runtime.threads import ThreadLane
from ledger.runtime.wakeup import Wakeup

log = logging.getLogger(__name__)

PREFETCH_WINDOW_S = 0.05
"""Claimed-but-waiting work the pool aims to hold, in seconds of handler time."""
PREFETCH_CAP_PER_WORKER = 10
INITIAL_HANDLER_ESTIMATE_S = 0.05
HANDLER_ESTIMATE_WEIGHT = 0.05
EVERY_JOB = 2**31
"""A claim's ``starting`` that covers every job it may claim."""


class Producer:
    """Claims for ``concurrency`` slots and hands jobs out one at a time (:meth:`next_job`).

    A slot brackets each job it runs with :meth:`job_started` and :meth:`job_ended`, which is
    how the producer knows how much room there is and how long handlers take.
    """

    def __init__(
        self,
        claims: Claims,
        *,
        concurrency: int,
        prefetch: int | None,
        poll_interval_s: float,
        breaker: CircuitBreaker,
        wakeup: Wakeup,
        io: ThreadLane,
        turns: BatchTurns | None = None,
        on_blocked: Callable[[], None] | None = None,
        start_every_claim: bool = False,
    ) -> None:
        self._claims = claims
        self._on_blocked = on_blocked
        self._turns = turns
        self._io = io
        self.concurrency = concurrency
        self.poll_interval_s = poll_interval_s
        self._fixed_prefetch = prefetch
        self._prefetch_cap = max(1, PREFETCH_CAP_PER_WORKER * concurrency)
        self._handler_s = INITIAL_HANDLER_ESTIMATE_S
        self._breaker = breaker
        self._wakeup = wakeup
        # None tells a slot to stop (one per slot, after the last job).
        self._buffer: asyncio.Queue[JobState | None] = asyncio.Queue()
        self._in_flight = 0
        self._room = asyncio.Event()
        self._idle = asyncio.Event()
        self._stopping = False
        self._hungry = False
        self._waiting_slots = 0
        self._start_every_claim = start_every_claim
        """Record every claimed job as started by its claim (``PoolConfig.exact_starts`` off)."""
        """Slots waiting in :meth:`next_job` for a job (the buffer is empty for them)."""

    @property
    def expects_turn(self) -> bool:
        """Whether this producer takes turns and is about to claim again: its last claim
        filled its limit (more may be due) and it is not stopping."""
        return self._turns is not None and self._hungry and not self._stopping

    @property
    def blocked_on_outcomes(self) -> bool:
        """Whether every lease held is a finished job's outcome on its way to the ledger and
        there is no room to claim more: nothing runs, nothing is buffered, and only recording
        those outcomes lets work go on (no outcome can join them before that)."""
        return self._in_flight == 0 and self._buffer.empty() and self._room_for() <= 0

    @property
    def prefetch(self) -> int:
        """How many claimed jobs may wait for a free worker.

        Fixed if given; otherwise enough to keep the workers busy for about
        ``PREFETCH_WINDOW_S`` at the handlers' recent pace: fast handlers get large claim
        batches (one transaction per batch is what makes throughput), slow ones hold few
        jobs back from other processes."""
        if self._fixed_prefetch is not None:
            return self._fixed_prefetch
        wanted = self.concurrency * PREFETCH_WINDOW_S / max(self._handler_s, 1e-6)
        return max(1, min(self._prefetch_cap, int(wanted)))

    # --- the claiming loop ------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        self._stopping = False
        return asyncio.create_task(self._produce(), name="jobledger-producer")

    def stop(self) -> None:
        """Stop claiming: the loop ends at its next turn, whatever it was waiting for."""
        self._stopping = True
        self._wakeup.signal()
        self._room.set()
        if self._turns is not None:
            self._turns.nudge()

    async def _produce(self) -> None:
        while not self._stopping:
            room = self._room_for()
            if not self._would_claim(room):
                self._room.clear()
                # Bounded: a lease may also end where nothing calls room_freed (a renewal
                # refused), and the loop must then still see the room it left.
                # asyncio.timeout, not wait_for: wait_for runs the wait in a task of its own
                # (Python 3.11), so a set() reached this loop two hops later, by when slots
                # whose handlers never suspend had run the buffer dry.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval_s):
                        await self._room.wait()
                continue
            # An idle claim must have begun holding nothing: one begun while a job's outcome
            # was on its way may miss what that outcome releases (a workflow step's next
            # job), which commits while the claim runs.
            held_nothing = self._holds_nothing()
            try:
                jobs = await self._claim(room)
            except Exception as exc:
                log.warning("claim failed: %r (cause %r)", exc, exc.__cause__)
                self._set_hungry(False)
                await self._wakeup.wait(self.poll_interval_s)
                continue
            for job in jobs:
                self._buffer.put_nowait(job)
            if not jobs:
                if held_nothing:
                    self._idle.set()
                await self._wakeup.wait(self.poll_interval_s)

    async def _claim(self, room: int) -> list[JobState]:
        """Up to ``room`` jobs of the types whose breaker is closed, plus one probe job of
        each half-open type while there is room (see :mod:`ledger.runtime.breaker`)."""
        free, probes = self._breaker.claimable(self._claims.types)
        # Jobs that slots already waiting will start at once have their start recorded in
        # the claim's own transaction (no second write before their handlers run; see
        # ledger.runtime.starts). Only the buffer feeds slots, so while the claim runs those
        # slots stay waiting and take the first jobs it returns.
        if self._start_every_claim:
            starting = EVERY_JOB
        else:
            starting = self._waiting_slots if self._buffer.empty() else 0
        if self._turns is not None:
            jobs, room = await self._turns.take(room, free, starting)
        else:
            jobs = await self._io.run(self._claims.claim, room, free, starting) if free else []
        self._set_hungry(bool(jobs) and len(jobs) >= room)
        for job_type in probes:
            if len(jobs) >= room:
                break
            probe = await self._io.run(self._claims.claim, 1, [job_type])
            if probe:
                self._breaker.probe_claimed(job_type)
                jobs.extend(probe)
        return jobs

    def _would_claim(self, room: int) -> bool:
        """Whether to claim now, with ``room`` free. Refill in batches: claiming the moment
        one slot frees up would make every claim a one-job transaction. Wait for half the
        capacity to be free (with turns: or about to be, by the outcomes the claim records),
        unless the buffer has run dry and a worker would sit idle."""
        freeing = room + (self._turns.freeing if self._turns is not None else 0)
        return freeing > 0 and (freeing >= self._refill_at() or self._buffer.empty())

    def _wake_if_due(self) -> None:
        """Wake the claiming loop if it would claim now. Asked wherever its inputs change
        (a job taken or ended, a lease let go) rather than waking it at every change: each
        wake-up costs the loop a task switch and a new timeout, per job, to find (mostly)
        that the refill is not due yet."""
        if not self._room.is_set() and self._would_claim(self._room_for()):
            self._room.set()

    def _set_hungry(self, hungry: bool) -> None:
        was, self._hungry = self._hungry, hungry
        if was and not hungry and self._turns is not None:
            self._turns.nudge()

    def _room_for(self) -> int:
        # Every lease the pool holds counts — buffered, running, and finished but not yet
        # recorded — so that ``concurrency + prefetch`` bounds the jobs leased at once (counting
        # only running and buffered jobs let the next claim commit before the outcomes of the
        # last: bench/compare.py measured 2-8x the declared depth).
        held = max(len(self._claims), self._in_flight + self._buffer.qsize())
        return self.concurrency + self.prefetch - held

    def room_freed(self) -> None:
        """A held lease ended (its outcome recorded, or it was given up): there may be room."""
        self._wake_if_due()

    def _refill_at(self) -> int:
        half = max(1, (self.concurrency + self.prefetch) // 2)
        # A turn records at most a completion batch of outcomes, and the completer writes a
        # full batch on its own: refilling later would leave those outcomes to it.
        return min(half, self._turns.most) if self._turns is not None else half

    # --- the slots' side --------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Jobs a slot is running now."""
        return self._in_flight

    @property
    def waiting_slots(self) -> int:
        """Slots waiting for a job (the buffer is empty for them)."""
        return self._waiting_slots

    async def next_job(self) -> JobState | None:
        """The next claimed job, or ``None`` when the slot should stop."""
        self._waiting_slots += 1
        try:
            job = await self._buffer.get()
        finally:
            self._waiting_slots -= 1
        if self._buffer.empty():
            self._wake_if_due()  # the buffer ran dry: a refill may be due before half
        return job

    def job_started(self) -> float:
        """A slot starts running a job: it occupies room until :meth:`job_ended` (call that in
        a ``finally``, with what this returned); its duration feeds the estimate behind
        :attr:`prefetch`. (Two calls, not a context manager: a generator per job costs
        more than the bookkeeping it brackets.)"""
        self._in_flight += 1
        return time.perf_counter()

    def job_ended(self, started: float) -> None:
        """The job :meth:`job_started` returned ``started`` for has ended."""
        self._in_flight -= 1
        self._observe(time.perf_counter() - started)
        self._wake_if_due()
        if self._on_blocked is not None and self._in_flight == 0 and self.blocked_on_outcomes:
            self._on_blocked()

    def _observe(self, seconds: float) -> None:
        """Fold one handler duration into the moving estimate behind :attr:`prefetch`."""
        self._handler_s += HANDLER_ESTIMATE_WEIGHT * (seconds - self._handler_s)

    def close_slots(self, slots: int) -> None:
        """Tell ``slots`` slots to stop once the jobs buffered before this call are taken."""
        for _ in range(slots):
            self._buffer.put_nowait(None)

    async def give_back_buffered(self, release: Callable[[Lease], Awaitable[None]]) -> None:
        """Release every job still buffered, one at a time: a slot that frees up meanwhile may
        still take (and run) the next one."""
        while not self._buffer.empty():
            job = self._buffer.get_nowait()
            if job is not None and job.lease is not None:
                await release(job.lease)

    def _holds_nothing(self) -> bool:
        """Nothing buffered, running, or finished with its outcome not yet recorded."""
        return self._buffer.empty() and self._in_flight == 0 and not self._claims

    async def wait_until_idle(self) -> None:
        """Return once a claim begun while nothing was buffered, running or held found
        nothing due, and nothing is held still."""
        while True:
            self._idle.clear()
            await self._idle.wait()
            if self._holds_nothing():
                return
