"""One async method per sync ledger method: :class:`InThread`, the descriptor
:class:`~ledger.api.async_ledger.AsyncLedger` and
:class:`~ledger.api.async_transactions.AsyncTransaction` are made of."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, Generic, ParamSpec, Protocol, TypeVar

from ledger.api.ledger import Ledger

P = ParamSpec("P")
R = TypeVar("R")


class Runs(Protocol):
    """What an :class:`InThread` method needs of its owner: the sync ledger, an executor."""

    ledger: Ledger

    async def run(self, call: Callable[[], R]) -> R: ...


class InThread(Generic[P, R]):
    """An :class:`AsyncLedger` method that runs the sync ``Ledger`` method of that name in the
    ledger's executor: the same arguments, the same result (awaited), the same errors."""

    def __init__(self, method: Callable[Concatenate[Ledger, P], R]) -> None:
        self._method = method
        self.__doc__ = f"Awaitable :meth:`Ledger.{method.__name__}`: {method.__doc__ or ''}"

    def __get__(self, owner: Runs, kind: type[Runs]) -> Callable[P, Awaitable[R]]:
        method = self._method

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await owner.run(functools.partial(method, owner.ledger, *args, **kwargs))

        return call
