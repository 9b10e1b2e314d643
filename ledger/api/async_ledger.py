"""The ledger for asyncio applications: :class:`AsyncLedger`, whose calls never block the loop.

Each command and read is the sync :class:`~ledger.api.ledger.Ledger`'s own, run in a thread of
this ledger's executor (ten threads, what a PostgreSQL store's pool can serve at once), so the
async API has no second unit of work, no second SQL and no second result type to drift from
the first (docs/architecture.md, decision 35: measured, a thread hop costs 0.05-0.5 ms on a
loaded host against a unit of work's 2-7 ms). What waits is async: :meth:`wait` sleeps
in the loop until the job may have changed, woken by ``LISTEN jl_events`` on one async psycopg
connection shared by every wait (PostgreSQL), or by a short poll (SQLite).

An application's own ``psycopg.AsyncConnection`` transaction is joined by :meth:`using`
(:mod:`ledger.api.async_transactions`).

A cancelled await does not cancel the call it awaits: a thread cannot be interrupted
mid-transaction, so the call runs to its end (an enqueue whose caller was cancelled may still
have committed its job; an idempotency key makes a retry safe).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from ledger.api.async_transactions import AsyncTransaction
from ledger.api.deprecated import DeprecatedAsyncLedgerMethods
from ledger.api.in_thread import InThread
from ledger.api.ledger import Ledger
from ledger.core.errors import JobNotFoundError
from ledger.core.state import JobState
from ledger.core.workflows.spec import WorkflowRequest
from ledger.store.notifications import AsyncListening, Topic
from ledger.workflows.workflow_commands import WorkflowCommands
from ledger.workflows.workflow_writes import WorkflowStarted

R = TypeVar("R")

DEFAULT_THREADS = 10
"""Threads per async ledger: a PostgreSQL store's pool holds at most 10 connections (2 kept,
8 overflow), so more threads would only queue for one."""
WAIT_POLL_S = 0.05
"""How often :meth:`AsyncLedger.wait` reads again when nothing woke it (SQLite has no
notifications; on PostgreSQL only a lost notification needs it)."""


class AsyncWorkflows:
    """:class:`~ledger.workflows.workflow_commands.WorkflowCommands`' submit, awaitable: run in
    the async ledger's executor, as its own methods are."""

    def __init__(
        self, commands: WorkflowCommands, run: Callable[[Callable[[], Any]], Awaitable[Any]]
    ) -> None:
        self._commands = commands
        self._run = run

    async def submit(self, request: WorkflowRequest | Mapping[str, Any]) -> WorkflowStarted:
        """Awaitable :meth:`WorkflowCommands.submit
        <ledger.workflows.workflow_commands.WorkflowCommands.submit>`."""
        started = await self._run(functools.partial(self._commands.submit, request))
        return cast(WorkflowStarted, started)


class AsyncLedger(DeprecatedAsyncLedgerMethods):
    """An open ledger for asyncio code (see the module docstring). ``async with`` closes it."""

    def __init__(self, ledger: Ledger, *, threads: int = DEFAULT_THREADS) -> None:
        self.ledger = ledger
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="jobledger-async")
        self._changed: asyncio.Event | None = None
        self._listening: AsyncListening | None = None

    @classmethod
    async def open(
        cls, url: str | None = None, *, threads: int = DEFAULT_THREADS, **options: Any
    ) -> Self:
        """Open the ledger at ``url`` as :meth:`Ledger.open` does (the same ``options``),
        without blocking the loop."""
        ledger = await asyncio.to_thread(functools.partial(Ledger.open, url, **options))
        return cls(ledger, threads=threads)

    async def run(self, call: Callable[[], R]) -> R:
        """``call()`` in this ledger's executor (a sync ledger call of your own, say)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    enqueue = InThread(Ledger.enqueue)
    enqueue_many = InThread(Ledger.enqueue_many)
    enqueue_outcomes = InThread(Ledger.enqueue_outcomes)
    define = InThread(Ledger.define)
    get = InThread(Ledger.get)
    get_many = InThread(Ledger.get_many)
    history = InThread(Ledger.history)
    cancel = InThread(Ledger.cancel)
    cancel_many = InThread(Ledger.cancel_many)

    @property
    def workflows(self) -> AsyncWorkflows:
        """The workflow commands, awaitable (``await async_ledger.workflows.submit(...)``)."""
        return AsyncWorkflows(self.ledger.workflows, self.run)

    def using(self, connection: object) -> AsyncTransaction:
        """This ledger inside the application's transaction on ``connection``, a
        ``psycopg.AsyncConnection`` of the running loop (PostgreSQL; on SQLite a
        ``sqlite3.Connection``, its statements run in this ledger's threads), as
        :meth:`Ledger.using` is for a sync connection: the job exists iff the application
        commits. Call it inside the loop (:mod:`ledger.api.async_transactions`)."""
        joined = self.ledger.using(connection, loop=asyncio.get_running_loop())
        return AsyncTransaction(joined, self.run)

    async def wait(self, job_id: UUID, timeout: float) -> JobState:
        """Wait up to ``timeout`` seconds (real time: real workers run the job) for the job to
        end (succeeded, dead or cancelled); its state then, ended or not. Raises
        ``job.not_found`` if there is no such job."""
        changed = await self._wakeups()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    woken = changed()  # before the read: a commit after it sets this one
                    state = await self.get(job_id)
                    if state is None:
                        raise JobNotFoundError(f"no job {job_id}")
                    if not state.status.is_live:
                        return state
                    with contextlib.suppress(TimeoutError):  # the poll's turn
                        await asyncio.wait_for(woken.wait(), WAIT_POLL_S)
        except TimeoutError:
            state = await self.get(job_id)
            if state is None:
                raise JobNotFoundError(f"no job {job_id}") from None
            return state

    async def _wakeups(self) -> Callable[[], asyncio.Event]:
        """The current wake-up event's getter, listening started on first use: each commit
        that may have changed a job sets the current event and puts a fresh one in its
        place."""
        if self._changed is None:
            self._changed = asyncio.Event()
            if self.ledger.store.has_notifications:
                self._listening = await self.ledger.store.listen_async(
                    Topic.EVENTS_APPENDED, self._notify
                )

        def current() -> asyncio.Event:
            assert self._changed is not None
            return self._changed

        return current

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    async def close(self) -> None:
        """Stop listening, let running calls end, and close the ledger's store."""
        if self._listening is not None:
            await self._listening.close()
            self._listening = None
        await asyncio.to_thread(self._executor.shutdown)
        await asyncio.to_thread(self.ledger.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
