"""Recording that a handler starts, before it starts: the boot reap's evidence.

When a process dies, the pool that restarts on its host must tell the claims whose handler was
running (the handler may be what killed it: spend the attempt, ``worker_lost``) from those
still waiting in the prefetch buffer (release them, free). Only the history can say which, so
a slot appends the stage ``running`` (``job_stage_changed``) and waits for its commit before
it calls the handler (:meth:`StartRecorder.started`). The write is fenced, so a lease lost or
cancelled meanwhile is refused and its handler never starts.

A job claimed for a slot that is already waiting gets its start in the claim's own
transaction (the producer's ``starting``; :func:`ledger.core.decide.start_with_lease`), so
it costs no write of its own; the slot sees its stage ``running`` and goes ahead. Only a job
that waited in the prefetch buffer needs this recorder. One write per such job would multiply
the pool's transactions; instead the slots that start one in the same turn of the event loop
share one transaction (a group commit): the first to ask starts a writer task, which runs on
the next turn and takes every request made until then; requests made while it writes go into
its next transaction. The write does not read the jobs first: each start is decided on the
state the claim returned and appended to the jobs still at that version
(:meth:`Ledger.start_claimed <ledger.api.worker_commands.WorkerCommands.start_claimed>`; on
PostgreSQL one statement, :mod:`ledger.store.postgres.unread_appends`). A database blip is
retried as a report's write is (:func:`ledger.runtime.retrying.written`): a write whose
commit landed unacknowledged finds its jobs moved on, decides again on what is stored
(running already: nothing to append) and lets the handlers go ahead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from ledger.api.ledger import BatchResult, Ledger
from ledger.core.errors import DatabaseUnusableError
from ledger.core.state import JobState
from ledger.jobs.leases import LeaseLength, lease_for
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.retrying import written
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)

GATHER_MAX_S = 0.002
"""The longest a start write waits for the other slots that may ask to join it."""


class StartRecorder:
    """Appends the start of many handlers per transaction; see the module docstring."""

    def __init__(
        self,
        ledger: Ledger,
        io: ThreadLane,
        lease_s: LeaseLength,
        could_ask: Callable[[], int] = lambda: 0,
        outcomes: BatchCompleter | None = None,
    ) -> None:
        self._ledger = ledger
        self._outcomes = outcomes
        """The completer whose gathered outcomes each start write carries (None: none)."""
        self._io = io
        self._lease_s = lease_s
        self._could_ask = could_ask
        """How many slots could ask now (neither running a handler nor waiting for a job)."""
        self._waiting: list[tuple[JobState, asyncio.Future[JobState | None]]] = []
        self._asked = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    async def started(self, job: JobState) -> JobState | None:
        """Record that ``job``'s handler starts and wait for the commit: the job's state
        after it to go ahead (``job`` itself if the stored state had it running already),
        ``None`` if the fence refused it (the lease is gone: do not start the handler).
        Raises the database's error once retrying it is no use."""
        future: asyncio.Future[JobState | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((job, future))
        self._asked.set()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="jobledger-starts")
        return await future

    async def close(self) -> None:
        """Wait for a write in progress (the pool's I/O threads are shut down after)."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def _write(self) -> None:
        try:
            while self._waiting:
                await self._gather()
                batch, self._waiting = self._waiting, []
                await self._write_batch(batch)
        finally:
            self._writer = None

    async def _gather(self) -> None:
        """Wait, at most :data:`GATHER_MAX_S`, until every slot that could ask has asked:
        slots done with a tiny handler ask within microseconds of each other, and a write
        per two or three of them cost ~3x the client CPU per job (bench/README.md)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATHER_MAX_S
        while len(self._waiting) < self._could_ask():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._asked.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._asked.wait()
            except TimeoutError:
                return

    async def _with_outcomes(self, jobs: list[JobState]) -> BatchResult | None:
        """The starts of ``jobs`` written together with the outcomes the completer has
        gathered, if any (one write where there were two: the slots that start a job have
        most often just ended one): the starts' result; ``None`` if there were none to carry,
        or the write failed. The completer settles the outcomes written, and retries, its
        own careful way, those of a write that failed; the starts are then written alone."""
        completer = self._outcomes
        if completer is None or not completer.running:
            return None
        taken = completer.take_for_turn()
        if not taken:
            return None
        finished = [(handed.known, handed.outcome) for handed in taken]
        try:
            started, outcomes = await self._io.run(
                self._ledger.start_and_finish_claimed, jobs, finished
            )
        except Exception as exc:
            completer.give_back(taken, maybe_written=isinstance(exc, DatabaseUnusableError))
            log.info("a start write with %d outcomes failed; writing the starts alone", len(taken))
            return None
        await completer.settle_turn(taken, outcomes)
        return started

    async def _write_batch(
        self, batch: list[tuple[JobState, asyncio.Future[JobState | None]]]
    ) -> None:
        jobs = [job for job, _ in batch]
        shortest = timedelta(seconds=min(lease_for(self._lease_s, j.job_type) for j in jobs))
        result = await self._with_outcomes(jobs)

        async def write() -> BatchResult:
            return await self._io.run(self._ledger.start_claimed, jobs)

        try:
            if result is None:
                result = await written(
                    write,
                    what=f"start of {len(batch)} job(s)",
                    clock=self._ledger.clock,
                    lease=shortest,
                )
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        after = {state.job_id: state for state in result.accepted}
        for job, future in batch:
            if not future.done():  # a slot cancelled while it waited has gone
                refused = job.job_id in result.rejected
                future.set_result(None if refused else after.get(job.job_id, job))
