"""A registered handler's spec (:class:`HandlerSpec`) and what its job type is defined with:
the handler's options as definition fields, and :func:`define_from_handler`, which defines an
undefined type from them (the rule for a defined one: :mod:`ledger.runtime.definitions`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.core.values import BackoffPolicy, JobDefinition
from ledger.runtime.job_context import JobContext, SyncJobContext

if TYPE_CHECKING:
    from ledger.api.ledger import Ledger

log = logging.getLogger("jobledger.definitions")

AsyncHandler = Callable[[JobContext], Awaitable[Any]]
SyncHandler = Callable[[SyncJobContext], Any]
Handler = AsyncHandler | SyncHandler
"""An ``async def`` handler takes a :class:`JobContext`; a plain ``def`` one a
:class:`SyncJobContext`."""


@dataclass(frozen=True)
class HandlerSpec:
    """A registered handler and the defaults its job type is defined with."""

    job_type: str
    function: Handler
    is_async: bool
    max_attempts: int | None = None
    timeout_s: float | None = None
    backoff: BackoffPolicy | None = None
    lease_s: float | None = None
    priority: int | None = None
    concurrency: int | None = None
    per_org_concurrency: int | None = None


def handler_options(spec: HandlerSpec) -> dict[str, Any]:
    """The definition fields the handler sets, under the definition's names."""
    options: dict[str, Any] = {}
    if spec.max_attempts is not None:
        options["max_attempts"] = spec.max_attempts
    if spec.timeout_s is not None:
        options["default_timeout_s"] = float(spec.timeout_s)
    if spec.backoff is not None:
        options["backoff"] = spec.backoff
    if spec.priority is not None:
        options["default_priority"] = spec.priority
    if spec.concurrency is not None:
        options["concurrency"] = spec.concurrency
    if spec.per_org_concurrency is not None:
        options["per_org_concurrency"] = spec.per_org_concurrency
    return options


def define_from_handler(ledger: Ledger, spec: HandlerSpec) -> bool:
    """Define ``spec``'s type from its handler's options if it is undefined (logged); a
    defined type is left as it is. Whether this defined it."""
    if ledger.definition(spec.job_type) is not None:
        return False
    defined = ledger.define(spec.job_type, **handler_options(spec))
    log.info("defined job type %s from its handler: %s", spec.job_type, summary(defined))
    return True


def summary(definition: JobDefinition) -> str:
    """A definition in one line, for the log."""
    backoff = definition.backoff
    return (
        f"max attempts {definition.max_attempts}, timeout {definition.default_timeout_s:g}s, "
        f"priority {definition.default_priority}, "
        f"backoff {backoff.base_s:g}s..{backoff.max_s:g}s ±{backoff.jitter:g}"
    )
