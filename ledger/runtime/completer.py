"""The batch completer: many workers' outcomes, one transaction, kept until they land.

Workers hand their outcome (success or failure) to the completer and move on; the completer
flushes whatever has gathered — at most ``max_batch`` outcomes, after at most ``max_delay_s``
— through :meth:`Ledger.finish_claimed` (:meth:`Ledger.finish_many`'s way for the jobs
the worker's last known state no longer describes). An outcome the fence rejects (the
worker lost its lease) is logged and dropped, never retried: the ledger already belongs to
someone else.

A flush that fails on an error that may pass — the connection dropped, the server
restarting, a lock or serialisation conflict — is retried with a bounded, jittered back-off
(each try on a fresh connection: the store's checkout pings it) for as long as the outcome's
lease may still be live. An outcome is handed over after its last heartbeat (the pool stops
renewing it then), so its lease ends by the time it was handed over plus the longest lease
the pool takes; past that the fence would refuse it anyway and the reaper owns the job, so
the completer gives it up. A connection drop or a server restart shorter than the lease
therefore loses no outcome, and consumes no attempt.

Batch turns (:mod:`ledger.runtime.batch_turns`): while the pool's producer is about to claim again
(``defer_to()`` is true), gathered outcomes wait up to ``hold_s`` instead of ``max_delay_s``,
so that the producer can take them (:meth:`take_for_turn`) into the transaction of its next
claim; outcomes it could not record it gives back (:meth:`give_back`) to be retried here.

Retrying a write is safe here because it is fenced: if a try whose acknowledgement was lost
did commit, the next one is refused by the fence. Such a refusal is recognised (the job's
state shows this very attempt's outcome) and counted as recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from ledger.api.ledger import BatchResult, Completion, Ledger, Outcome
from ledger.core.errors import DatabaseUnusableError
from ledger.core.state import JobState
from ledger.core.values import JobStatus
from ledger.jobs.leases import DEFAULT_LEASE_S, LeaseLength
from ledger.runtime.retrying import (
    PASSING_ERRORS,
    RETRY_FIRST_DELAY_S,
    RETRY_MAX_DELAY_S,
    longest_wait,
    retry_delay,
)
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)


Settled = Callable[[JobState | None], None]
"""Told, once, what became of a handed outcome: the job's new state, or ``None`` if it was
not recorded."""


@dataclass(slots=True)
class _Handed:
    """One outcome in the completer's hands, with when its lease ends at the latest."""

    outcome: Outcome
    on_settled: Settled
    lease_ends_by: datetime
    handed_at: float
    """The event loop's time when it was handed over (what the gathering delay counts from)."""
    maybe_written: bool = False
    """A turn that carried it failed in a way that may have committed."""
    known: JobState | None = None
    """The job's state as its worker last saw it (after its start), if known: the outcome is
    decided on it first, without a read (:meth:`Ledger.finish_claimed`)."""
    settled: bool = False

    def settle(self, state: JobState | None) -> None:
        if self.settled:
            return
        self.settled = True
        try:
            self.on_settled(state)
        except Exception:  # one listener's failure must not leave the batch's others unsettled
            log.exception("telling the outcome of job %s failed", self.outcome.lease.job_id)


def recorded_earlier(outcome: Outcome, state: JobState) -> bool:
    """Whether ``state`` shows ``outcome`` already recorded (by a try whose acknowledgement
    was lost): the same run and attempt, no longer leased, ended the way the outcome says."""
    lease = outcome.lease
    if (state.run_number, state.attempt) != (lease.run_number, lease.attempt):
        return False
    if state.status == JobStatus.LEASED:
        return False
    if isinstance(outcome, Completion):
        return state.status == JobStatus.SUCCEEDED
    return state.last_error == outcome.failure


def _longest(lease_s: LeaseLength) -> float:
    if isinstance(lease_s, Mapping):
        return float(max(lease_s.values(), default=DEFAULT_LEASE_S))
    return lease_s


class BatchCompleter:
    """Records the outcomes handed to it (see the module docstring).

    ``lease_s``: the lease lengths the pool claims and renews with (the longest bounds how
    long an outcome is retried); ``retry_first_delay_s`` / ``retry_max_delay_s``: the
    back-off between failed flushes."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        lease_s: LeaseLength = DEFAULT_LEASE_S,
        max_batch: int = 200,
        max_delay_s: float = 0.002,
        on_recorded: Callable[[JobState], None] | None = None,
        retry_first_delay_s: float = RETRY_FIRST_DELAY_S,
        retry_max_delay_s: float = RETRY_MAX_DELAY_S,
        io: ThreadLane | None = None,
        defer_to: Callable[[], bool] | None = None,
        hold_s: float = 0.0,
        nothing_else_coming: Callable[[], bool] | None = None,
    ) -> None:
        self._ledger = ledger
        self._lease = timedelta(seconds=_longest(lease_s))
        # The pool's I/O threads (never the handlers' nor asyncio's default executor).
        self._io = io or ThreadLane(1, "jobledger-completer")
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self.retry_first_delay_s = retry_first_delay_s
        self.retry_max_delay_s = retry_max_delay_s
        self._on_recorded = on_recorded
        self._defer_to = defer_to
        self._nothing_else_coming = nothing_else_coming
        self.hold_s = hold_s
        self._pending: list[_Handed] = []
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="jobledger-completer")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def submit(self, outcome: Outcome) -> asyncio.Future[JobState | None]:
        """Queue an outcome; the future gives the job's new state, or ``None`` if it was not
        recorded (fenced out, its lease ended before the database came back, or a refusal
        that retrying cannot help)."""
        future: asyncio.Future[JobState | None] = asyncio.get_running_loop().create_future()

        def resolve(state: JobState | None) -> None:
            if not future.done():  # the caller may have cancelled it (a wait_for timed out)
                future.set_result(state)

        self.hand_over(outcome, resolve)
        return future

    def hand_over(
        self, outcome: Outcome, on_settled: Settled, *, known: JobState | None = None
    ) -> None:
        """Queue an outcome; ``on_settled`` is called (on the event loop, once) with the job's
        new state, or ``None`` if it was not recorded, as :meth:`submit`'s future would be
        resolved. What the worker slots use: a future per job, and the loop turn its done
        callback takes, cost more than the callback itself (bench/bench_pool_cpu.py).
        ``known``: the job's state as the worker last saw it, if it knows it."""
        self._pending.append(self._hand(outcome, on_settled, known))
        # Wake the flushing task only when this outcome changes what it waits for: the first
        # one starts the gathering delay, a full batch ends it. The others would wake it to
        # find the same deadline (one wake-up, and a new timeout, per job).
        waiting = len(self._pending)
        if waiting == 1 or waiting >= self.max_batch:
            self._ready.set()

    @property
    def waiting(self) -> int:
        """Outcomes gathered and not yet on their way to the ledger."""
        return len(self._pending)

    def take_for_turn(self) -> list[_Handed]:
        """Hand up to ``max_batch`` gathered outcomes to a batch turn, oldest first; the turn
        settles them (:meth:`settle_turn`) or gives them back (:meth:`give_back`)."""
        taken = self._pending[: self.max_batch]
        del self._pending[: self.max_batch]
        self._ready.set()  # the oldest waiting outcome changed
        return taken

    async def settle_turn(self, taken: list[_Handed], result: BatchResult) -> None:
        """Settle the outcomes a turn recorded or refused, as a flush would."""
        await self._settle(taken, result, any(handed.maybe_written for handed in taken))

    def give_back(self, taken: list[_Handed], *, maybe_written: bool) -> None:
        """A turn could not record ``taken``: they are flushed (and retried) from here."""
        for handed in taken:
            handed.maybe_written = handed.maybe_written or maybe_written
            handed.handed_at = -math.inf  # due at once
        self._pending[:0] = taken
        self._ready.set()

    def nudge(self) -> None:
        """Look again at whether to flush (``defer_to()`` may have changed)."""
        self._ready.set()

    async def flush_now(self, outcomes: list[Outcome]) -> list[JobState | None]:
        """Record ``outcomes`` at once, bypassing the batching (used when not running)."""
        states: list[JobState | None] = [None] * len(outcomes)

        def settled_at(i: int) -> Settled:
            return lambda state: states.__setitem__(i, state)

        batch = [self._hand(outcome, settled_at(i)) for i, outcome in enumerate(outcomes)]
        await self._flush(batch)
        return states

    async def close(self) -> None:
        """Flush everything submitted so far and stop (with the database away, this waits
        until it is back or the outcomes' leases have ended)."""
        self._closing = True
        self._ready.set()
        if self._task is not None:
            await self._task
        if self._pending:
            batch, self._pending = self._pending, []
            await self._flush(batch)

    def _hand(
        self, outcome: Outcome, on_settled: Settled, known: JobState | None = None
    ) -> _Handed:
        now = asyncio.get_running_loop().time()
        lease_ends_by = self._ledger.clock.now() + self._lease
        return _Handed(outcome, on_settled, lease_ends_by, now, known=known)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._ready.wait()
            self._ready.clear()
            # Give concurrent workers a moment to add theirs to the same transaction (or the
            # producer, while it is about to claim, the chance to take them into its own).
            while self._pending and not self._closing:
                deferring = self._defer_to is not None and self._defer_to()
                # A full batch goes at once, unless the producer is about to take it: this
                # task is woken first, so it would always win that race.
                if len(self._pending) >= self.max_batch and not deferring:
                    break
                # Nothing could join the batch before it is written (the pool holds only
                # these outcomes and has no room to claim): gathering would only wait.
                nothing_else = self._nothing_else_coming
                if not deferring and nothing_else is not None and nothing_else():
                    break
                left = self._pending[0].handed_at + self._gathering_s() - loop.time()
                if left <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._ready.wait()
                self._ready.clear()
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                await self._flush(batch)
            if self._closing:
                return

    def _gathering_s(self) -> float:
        """How long the oldest gathered outcome may wait before it is flushed from here."""
        if self._defer_to is not None and self._defer_to():
            return max(self.hold_s, self.max_delay_s)
        return self.max_delay_s

    async def _flush(self, batch: list[_Handed]) -> None:
        """``finish_claimed`` until it lands or every outcome's lease has ended."""
        failed_tries = 0
        maybe_written = any(handed.maybe_written for handed in batch)
        while batch:
            try:
                known = [(handed.known, handed.outcome) for handed in batch]
                result = await self._io.run(self._ledger.finish_claimed, known)
            except PASSING_ERRORS as exc:
                failed_tries += 1
                maybe_written = maybe_written or isinstance(exc, DatabaseUnusableError)
                batch = self._without_ended_leases(batch, exc)
                if batch:
                    delay = retry_delay(
                        failed_tries,
                        first_s=self.retry_first_delay_s,
                        max_s=longest_wait(self._lease, self.retry_max_delay_s),
                    )
                    log.warning(
                        "completion flush failed (try %d, %d outcomes; again in %.2f s): %s",
                        failed_tries,
                        len(batch),
                        delay,
                        exc,
                    )
                    await asyncio.sleep(delay)
                continue
            except Exception as exc:  # a refusal or a bug: retrying cannot help
                log.error(
                    "completion flush gave up on %d outcomes; the jobs stay leased for the "
                    "reaper: %s",
                    len(batch),
                    exc,
                )
                self._settle_unrecorded(batch)
                return
            if failed_tries:
                log.info(
                    "completion flush recorded %d outcomes after %d failed tries",
                    len(batch),
                    failed_tries,
                )
            await self._settle(batch, result, maybe_written)
            return

    def _without_ended_leases(self, batch: list[_Handed], error: Exception) -> list[_Handed]:
        """Give up the outcomes whose lease has ended by now; the others."""
        now = self._ledger.clock.now()
        ended = [handed for handed in batch if handed.lease_ends_by <= now]
        if ended:
            log.error(
                "completion flush gave up on %d outcomes: their leases ended while the "
                "database was unreachable; the reaper owns those jobs now: %s",
                len(ended),
                error,
            )
            self._settle_unrecorded(ended)
        return [handed for handed in batch if handed.lease_ends_by > now]

    @staticmethod
    def _settle_unrecorded(batch: list[_Handed]) -> None:
        for handed in batch:
            # "Not recorded", like a fenced-out outcome: the jobs stay leased and the reaper
            # retries them. (Workers do not await the outcome, so an exception passed on here
            # would only be logged again, once per job.)
            handed.settle(None)

    async def _settle(self, batch: list[_Handed], result: BatchResult, maybe_written: bool) -> None:
        states = {state.job_id: state for state in result.accepted}
        if maybe_written and result.rejected:
            states.update(await self._recorded_earlier(batch, result))
        for handed in batch:
            job_id = handed.outcome.lease.job_id
            state = states.get(job_id)
            if state is None and job_id in result.rejected:
                log.info("dropped the outcome of job %s: %s", job_id, result.rejected[job_id])
            if state is not None and self._on_recorded is not None:
                self._on_recorded(state)
            handed.settle(state)

    async def _recorded_earlier(
        self, batch: list[_Handed], result: BatchResult
    ) -> dict[UUID, JobState]:
        """The rejected outcomes that an earlier try had recorded after all, by job."""
        refused = [h.outcome for h in batch if h.outcome.lease.job_id in result.rejected]
        try:
            current = await self._io.run(
                self._ledger.store.get_jobs, [outcome.lease.job_id for outcome in refused]
            )
        except Exception as exc:  # only the bookkeeping is at stake: the ledger is right
            log.warning("could not tell whether refused outcomes had landed: %s", exc)
            return {}
        found: dict[UUID, JobState] = {}
        for outcome in refused:
            state = current.get(outcome.lease.job_id)
            if state is not None and recorded_earlier(outcome, state):
                log.info("the outcome of job %s had been recorded by an earlier try", state.job_id)
                found[state.job_id] = state
        return found
