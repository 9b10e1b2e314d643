"""Handlers: the registry that maps job types to code, the context a handler receives, and
the errors and result a handler uses to say how its job went.

A handler is ``async def handler(ctx: JobContext) -> output`` or a plain
``def handler(ctx: SyncJobContext) -> output`` (run on one of the pool's handler threads so it
cannot stall the event loop). Both report the same way: ``ctx.progress(...)`` and
``ctx.heartbeat()`` — awaited in an async handler, plain calls that block until written in a
sync one — and a workflow step's handler reads its prerequisites' outputs the same way
(``ctx.prerequisite_outputs()``). Its return value is the job's output; return a :class:`Result`
to also report the revision and content hash a sync subject's state should record. What a
handler's return or exception becomes in the ledger is decided in
:mod:`ledger.runtime.executor`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ledger.core.source_polls.decide import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_THRESHOLD,
    BreakerPolicy,
    SourceConfig,
)
from ledger.core.values import BackoffPolicy
from ledger.runtime.handler_spec import AsyncHandler, Handler, HandlerSpec, SyncHandler
from ledger.runtime.job_context import (
    PERMANENT_ERROR_CODE,
    TRANSIENT_ERROR_CODE,
    JobContext,
    PermanentError,
    ReadPrerequisites,
    Result,
    SyncJobContext,
    TransientError,
)
from ledger.runtime.job_declaration import JobDeclaration
from ledger.runtime.source_listers import SourceLister, SourceSpec

__all__ = [
    "PERMANENT_ERROR_CODE",
    "TRANSIENT_ERROR_CODE",
    "AsyncHandler",
    "Handler",
    "HandlerSpec",
    "JobContext",
    "JobDeclaration",
    "PermanentError",
    "ReadPrerequisites",
    "Registry",
    "Result",
    "SyncHandler",
    "SyncJobContext",
    "TransientError",
]


def _is_async(function: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    call = getattr(function, "__call__", None)  # noqa: B004 - we want the method itself
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


H = TypeVar("H", bound=Handler)
L = TypeVar("L", bound=SourceLister)


@dataclass
class Registry:
    """Job type → handler. ``@registry.handler("email.send", max_attempts=3)`` (the handler
    reads ``ctx.payload``, a dict), or a typed job: ``@registry.job("card.charge")`` (the
    handler takes a :class:`msgspec.Struct` or keyword parameters, see
    :mod:`ledger.runtime.typed_jobs`); and source →
    lister: ``registry.source("docs", lister, job_type="docs.sync")``, whose polls a pool
    of this registry runs (the built-in ``jobledger.source_poll`` type,
    :mod:`ledger.runtime.source_poller`)."""

    _handlers: dict[str, HandlerSpec] = field(default_factory=dict)
    _sources: dict[str, SourceSpec] = field(default_factory=dict)

    def source(
        self,
        name: str,
        lister: L | None = None,
        *,
        job_type: str,
        org: str | None = None,
        breaker_threshold: int = DEFAULT_THRESHOLD,
        breaker_cooldown_s: float = DEFAULT_COOLDOWN_S,
    ) -> Any:
        """Register ``lister`` for source ``name``: its polls enqueue ``job_type`` jobs (of
        ``org``) for the changes; ``breaker_threshold`` consecutive failed polls skip the
        source's polls for ``breaker_cooldown_s``. Without ``lister``, a decorator."""

        def register(function: L) -> L:
            if not isinstance(name, str) or not name:
                raise ValueError("a source's name must be a non-empty string")
            if name in self._sources:
                raise ValueError(f"a lister for source {name!r} is already registered")
            breaker = BreakerPolicy(breaker_threshold, breaker_cooldown_s)
            config = SourceConfig(job_type=job_type, org=org, breaker=breaker)
            self._sources[name] = SourceSpec(name, function, config)
            return function

        return register if lister is None else register(lister)

    def source_spec(self, name: str) -> SourceSpec | None:
        return self._sources.get(name)

    def sources(self) -> list[SourceSpec]:
        """The registered sources, by name."""
        return [self._sources[name] for name in sorted(self._sources)]

    def handler(
        self,
        job_type: str,
        *,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        backoff: BackoffPolicy | None = None,
        lease_s: float | None = None,
        priority: int | None = None,
        concurrency: int | None = None,
        per_org_concurrency: int | None = None,
    ) -> Callable[[H], H]:
        """Register the decorated function for ``job_type`` with optional per-type defaults
        (what a pool defines an undefined type with: :mod:`ledger.runtime.definitions`)."""

        def register(function: H) -> H:
            if job_type in self._handlers:
                raise ValueError(f"a handler for {job_type!r} is already registered")
            self._handlers[job_type] = HandlerSpec(
                job_type=job_type,
                function=function,
                is_async=_is_async(function),
                max_attempts=max_attempts,
                timeout_s=timeout_s,
                backoff=backoff,
                lease_s=lease_s,
                priority=priority,
                concurrency=concurrency,
                per_org_concurrency=per_org_concurrency,
            )
            return function

        return register

    def job(
        self,
        job_type: str,
        *,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        backoff: BackoffPolicy | None = None,
        lease_s: float | None = None,
        priority: int | None = None,
        concurrency: int | None = None,
        per_org_concurrency: int | None = None,
    ) -> JobDeclaration:
        """Declare a typed job: the decorated handler's payload type (a struct parameter, or
        its keyword parameters) and return type, with its type's definition options (what a
        pool, or the first enqueue through it, defines an undefined type with). The decorator
        returns the :class:`~ledger.runtime.typed_jobs.TypedJob` (or ``KeywordJob``) to
        enqueue through."""
        decorate = self.handler(
            job_type,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            backoff=backoff,
            lease_s=lease_s,
            priority=priority,
            concurrency=concurrency,
            per_org_concurrency=per_org_concurrency,
        )

        def register(function: Handler) -> HandlerSpec:
            decorate(function)
            return self._handlers[job_type]

        return JobDeclaration(job_type, register)

    def get(self, job_type: str) -> HandlerSpec | None:
        return self._handlers.get(job_type)

    def job_types(self) -> list[str]:
        return sorted(self._handlers)

    def specs(self) -> list[HandlerSpec]:
        return [self._handlers[t] for t in self.job_types()]

    def lease_lengths(self, default_s: float) -> dict[str, float]:
        """Seconds of lease per registered type: the handler's ``lease_s``, else ``default_s``."""
        return {spec.job_type: spec.lease_s or default_s for spec in self.specs()}
