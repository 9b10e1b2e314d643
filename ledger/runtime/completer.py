"""The batch completer: many workers' outcomes, one transaction.

Workers hand their outcome (success or failure) to the completer and move on; the completer
flushes whatever has gathered — at most ``max_batch`` outcomes, after at most ``max_delay_s``
— through :meth:`Ledger.finish_many`. An outcome the fence rejects (the worker lost its lease)
is logged and dropped, never retried: the ledger already belongs to someone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ledger.api.ledger import BatchResult, Ledger, Outcome
from ledger.core.errors import ConcurrencyConflictError, DatabaseBusyError, DatabaseUnusableError
from ledger.core.state import JobState
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)

FLUSH_ATTEMPTS = 3


class BatchCompleter:
    def __init__(
        self,
        ledger: Ledger,
        *,
        max_batch: int = 200,
        max_delay_s: float = 0.002,
        on_recorded: Callable[[JobState], None] | None = None,
        io: ThreadLane | None = None,
    ) -> None:
        self._ledger = ledger
        # The pool's I/O threads (never the handlers' nor asyncio's default executor).
        self._io = io or ThreadLane(1, "jobledger-completer")
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self._on_recorded = on_recorded
        self._pending: list[tuple[Outcome, asyncio.Future[JobState | None]]] = []
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
        recorded (fenced out, or the flush gave up)."""
        future: asyncio.Future[JobState | None] = asyncio.get_running_loop().create_future()
        self._pending.append((outcome, future))
        self._ready.set()
        return future

    async def flush_now(self, outcomes: list[Outcome]) -> list[JobState | None]:
        """Record ``outcomes`` at once, bypassing the batching (used when not running)."""
        futures = [asyncio.get_running_loop().create_future() for _ in outcomes]
        await self._flush(list(zip(outcomes, futures, strict=True)))
        return [f.result() for f in futures]

    async def close(self) -> None:
        """Flush everything submitted so far and stop."""
        self._closing = True
        self._ready.set()
        if self._task is not None:
            await self._task
        if self._pending:
            batch, self._pending = self._pending, []
            await self._flush(batch)

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            if self.max_delay_s and len(self._pending) < self.max_batch and not self._closing:
                # Give concurrent workers a moment to add theirs to the same transaction.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full(), self.max_delay_s)
            self._ready.clear()
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                await self._flush(batch)
            if self._closing:
                return

    async def _full(self) -> None:
        while len(self._pending) < self.max_batch and not self._closing:
            self._ready.clear()
            await self._ready.wait()

    async def _flush(self, batch: list[tuple[Outcome, asyncio.Future[JobState | None]]]) -> None:
        result = await self._finish([outcome for outcome, _ in batch], batch)
        if result is None:
            return
        states = {state.job_id: state for state in result.accepted}
        for outcome, future in batch:
            job_id = outcome.lease.job_id
            rejected = result.rejected.get(job_id)
            if rejected is not None:
                log.info("dropped the outcome of job %s: %s", job_id, rejected)
            state = states.get(job_id) if rejected is None else None
            if state is not None and self._on_recorded is not None:
                self._on_recorded(state)
            if not future.done():
                future.set_result(state)

    async def _finish(
        self, outcomes: list[Outcome], batch: list[tuple[Outcome, asyncio.Future[JobState | None]]]
    ) -> BatchResult | None:
        """``finish_many``, retried on errors that may pass (busy, conflict, lost connection).

        Retrying is safe: an outcome that did commit is refused by the fence the second time.
        If it never lands, the jobs stay leased and the reaper retries them.
        """
        error: Exception | None = None
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return await self._io.run(self._ledger.finish_many, outcomes)
            except (DatabaseBusyError, ConcurrencyConflictError, DatabaseUnusableError) as exc:
                error = exc
                log.warning("completion flush failed (attempt %d): %s", attempt, exc)
                if attempt < FLUSH_ATTEMPTS:
                    await asyncio.sleep(0.05 * attempt)
            except Exception as exc:  # a refusal or a bug: retrying cannot help
                error = exc
                break
        log.error(
            "completion flush gave up on %d outcomes; the jobs stay leased for the reaper: %s",
            len(batch),
            error,
        )
        for _, future in batch:
            if not future.done():
                # "Not recorded", like a fenced-out outcome: the jobs stay leased and the
                # reaper retries them. (Workers do not await these futures, so an exception
                # set here would only be logged again, once per job, as never retrieved.)
                future.set_result(None)
        return None
