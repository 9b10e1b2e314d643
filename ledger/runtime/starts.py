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
its next transaction. A database blip is retried as a report's write is
(:func:`ledger.runtime.retrying.written`).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from ledger.api.leases import LeaseLength, lease_for
from ledger.api.ledger import Ledger
from ledger.core.state import JobState, Lease
from ledger.runtime.retrying import written
from ledger.runtime.threads import ThreadLane

log = logging.getLogger(__name__)

GATHER_TURNS = 2
"""Turns of the event loop a start write waits for more requests before it takes them."""


class StartRecorder:
    """Appends the start of many handlers per transaction; see the module docstring."""

    def __init__(self, ledger: Ledger, io: ThreadLane, lease_s: LeaseLength) -> None:
        self._ledger = ledger
        self._io = io
        self._lease_s = lease_s
        self._waiting: list[tuple[JobState, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def started(self, job: JobState) -> bool:
        """Record that ``job``'s handler starts and wait for the commit: true to go ahead,
        false if the fence refused it (the lease is gone: do not start the handler). Raises
        the database's error once retrying it is no use."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((job, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="jobledger-starts")
        return await future

    async def close(self) -> None:
        """Wait for a write in progress (the pool's I/O threads are shut down after)."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def _write(self) -> None:
        try:
            # Let the slots that are ready to run this turn ask too (each request after the
            # first joins for free; measured: fewer, larger start transactions).
            for _ in range(GATHER_TURNS):
                await asyncio.sleep(0)
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._write_batch(batch)
        finally:
            self._writer = None

    async def _write_batch(self, batch: list[tuple[JobState, asyncio.Future[bool]]]) -> None:
        leases: list[Lease] = []
        for job, _ in batch:
            assert job.lease is not None, "only leased jobs start"
            leases.append(job.lease)
        shortest = timedelta(seconds=min(lease_for(self._lease_s, j.job_type) for j, _ in batch))

        async def write() -> set[object]:
            result = await self._io.run(self._ledger.start_many, leases)
            return set(result.rejected)

        try:
            refused = await written(
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
        for job, future in batch:
            if not future.done():  # a slot cancelled while it waited has gone
                future.set_result(job.job_id not in refused)
