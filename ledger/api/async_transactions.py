"""An async ledger inside an application's transaction: :class:`AsyncTransaction`.

What :meth:`AsyncLedger.using <ledger.api.async_ledger.AsyncLedger.using>` returns. The unit
of work stays the sync one (one unit of work, not two to keep alike): it runs in the async
ledger's thread, and each of its statements is sent on the application's
``psycopg.AsyncConnection`` *by the event loop* (:mod:`ledger.store.postgres.async_joined`),
the thread waiting for the result while the loop goes on serving other tasks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from ledger.api.in_thread import InThread
from ledger.api.ledger import Ledger

R = TypeVar("R")


class AsyncTransaction:
    """A ledger's commands and reads in the application's transaction, awaitable."""

    def __init__(self, joined: Ledger, run: Callable[[Callable[[], Any]], Awaitable[Any]]) -> None:
        self.ledger = joined
        self._run = run

    async def run(self, call: Callable[[], R]) -> R:
        """``call()`` in the async ledger's executor."""
        return cast(R, await self._run(call))

    enqueue = InThread(Ledger.enqueue)
    enqueue_many = InThread(Ledger.enqueue_many)
    enqueue_outcomes = InThread(Ledger.enqueue_outcomes)
    get = InThread(Ledger.get)
    cancel = InThread(Ledger.cancel)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Nothing to end: the transaction is the application's to commit or roll back."""
