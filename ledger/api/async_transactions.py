"""An async ledger inside an application's transaction: :class:`AsyncTransaction`.

What :meth:`AsyncLedger.using <ledger.api.async_ledger.AsyncLedger.using>` returns. The unit
of work stays the sync one (one unit of work, not two to keep alike): it runs in the async
ledger's thread, and each of its statements is sent on the application's
``psycopg.AsyncConnection`` *by the event loop* (:mod:`ledger.store.postgres.async_borrowed`),
the thread waiting for the result while the loop goes on serving other tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar

from ledger.api.async_ledger import AsyncLedger, _InThread
from ledger.api.ledger import Ledger

R = TypeVar("R")


class AsyncTransaction:
    """A ledger's commands and reads in the application's transaction, awaitable."""

    def __init__(self, owner: AsyncLedger, joined: Ledger) -> None:
        self.ledger = joined
        self._owner = owner

    async def run(self, call: Callable[[], R]) -> R:
        """``call()`` in the async ledger's executor."""
        return await self._owner.run(call)

    enqueue = _InThread(Ledger.enqueue)
    enqueue_many = _InThread(Ledger.enqueue_many)
    enqueue_outcomes = _InThread(Ledger.enqueue_outcomes)
    get = _InThread(Ledger.get)
    cancel = _InThread(Ledger.cancel)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Nothing to end: the transaction is the application's to commit or roll back."""
