"""The decorator ``@registry.job(...)`` returns: typed so that the job it makes is typed by its
handler's signature (:mod:`ledger.runtime.typed_jobs`).

Four shapes, tried in order: an ``async def`` or a plain ``def`` handler, taking one
:class:`msgspec.Struct` payload parameter (a :class:`~ledger.runtime.typed_jobs.TypedJob`)
or keyword parameters (a :class:`~ledger.runtime.typed_jobs.KeywordJob`). The output type is
the handler's return type (awaited, for an async one).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import msgspec

from ledger.runtime.handler_spec import HandlerSpec
from ledger.runtime.job_context import JobContext, SyncJobContext
from ledger.runtime.typed_jobs import KeywordJob, TypedJob, declare

PayloadT = TypeVar("PayloadT", bound=msgspec.Struct)
OutputT = TypeVar("OutputT")
P = ParamSpec("P")


class JobDeclaration:
    """``@registry.job("card.charge", ...)``: applied to the handler, it registers it (through
    ``register``, which answers the registered spec) and returns the typed job."""

    def __init__(self, job_type: str, register: Callable[[Any], HandlerSpec]) -> None:
        self._job_type = job_type
        self._register = register

    @overload
    def __call__(
        self, function: Callable[[JobContext, PayloadT], Coroutine[Any, Any, OutputT]]
    ) -> TypedJob[PayloadT, OutputT]: ...

    @overload
    def __call__(
        self, function: Callable[[SyncJobContext, PayloadT], OutputT]
    ) -> TypedJob[PayloadT, OutputT]: ...

    @overload
    def __call__(
        self, function: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, OutputT]]
    ) -> KeywordJob[P, OutputT]: ...

    @overload
    def __call__(
        self, function: Callable[Concatenate[SyncJobContext, P], OutputT]
    ) -> KeywordJob[P, OutputT]: ...

    def __call__(self, function: Callable[..., Any]) -> TypedJob[Any, Any] | KeywordJob[Any, Any]:
        return declare(self._job_type, function, self._register)
