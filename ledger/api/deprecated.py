"""The facade's methods of before the feature namespaces, kept one release as aliases.

Issue 29 moved each feature's commands and reads into its namespace
(``ledger.start_workflow(...)`` is now ``ledger.workflows.submit(...)``). The old methods are
generated here from one table per class, each a thin alias that warns once
(:func:`ledger.deprecation.warn_once`) and calls the new spelling, so the facade's classes
stay their size and the whole list is readable in one place (CHANGELOG, 0.2.0). Four old
methods shared their name with a namespace (``reader.workflows(...)``,
``reader.sources(...)``, ``reader.tokens()``, ``ledger.schedules()``): their namespaces are
callable, with the same warning (``__call__`` of each reader class).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ledger.deprecation import warn_once

READER_ALIASES: Mapping[str, tuple[str, str]] = {
    "workflow_run": ("workflows", "run"),
    "workflow_history": ("workflows", "history"),
    "workflow_steps": ("workflows", "steps"),
    "workflow_timeline": ("workflows", "timeline"),
    "workflow_graph": ("workflows", "graph"),
    "sync_state": ("sources", "sync_state"),
    "sync_state_of_org": ("sources", "sync_state_of_org"),
    "source_polls": ("sources", "polls"),
    "source_history": ("sources", "history"),
    "source_overview": ("sources", "overview"),
    "revision_snapshot": ("sources", "revision_snapshot"),
    "known_uris": ("sources", "known_uris"),
    "token": ("tokens", "get"),
    "authenticate": ("tokens", "authenticate"),
    "queues": ("limits", "queues"),
    "concurrency_limits": ("limits", "concurrency"),
    "rate_buckets": ("limits", "rate_buckets"),
}
"""Old :class:`~ledger.api.reader.Reader` method → (namespace, its method)."""

LEDGER_ALIASES: Mapping[str, tuple[str, str]] = {
    "start_workflow": ("workflows", "submit"),
    "workflow": ("workflows", "handle"),
    "complete_step": ("workflows", "complete_step"),
    "cancel_workflow": ("workflows", "cancel"),
    "append_steps": ("workflows", "append_steps"),
    "recover_workflow": ("workflows", "recover"),
    "add_schedule": ("schedules", "add"),
    "pause_schedule": ("schedules", "pause"),
    "resume_schedule": ("schedules", "resume"),
    "remove_schedule": ("schedules", "remove"),
    "schedule": ("schedules", "get"),
    "fire_due": ("schedules", "fire_due"),
    "sync_source": ("sources", "sync"),
    "poll_source": ("sources", "poll"),
    "enqueue_source_poll": ("sources", "enqueue_poll"),
    "create_token": ("tokens", "create"),
    "revoke_token": ("tokens", "revoke"),
    "pause_queue": ("limits", "pause_queue"),
    "resume_queue": ("limits", "resume_queue"),
}
"""Old :class:`~ledger.api.ledger.Ledger` method → (namespace, its method)."""

ASYNC_LEDGER_ALIASES: Mapping[str, tuple[str, str]] = {
    "start_workflow": ("workflows", "submit"),
}
"""Old :class:`~ledger.api.async_ledger.AsyncLedger` method → (namespace, its method)."""

CALLABLE_NAMESPACES: Mapping[str, tuple[str, str]] = {
    "Reader.workflows": ("workflows", "runs"),
    "Reader.sources": ("sources", "all"),
    "Reader.tokens": ("tokens", "all"),
    "Ledger.schedules": ("schedules", "all"),
}
"""Old methods now namespaces, still callable (the namespace's ``__call__``) → the method."""


def _alias(owner: str, instance: str, old: str, namespace: str, new: str) -> Callable[..., Any]:
    new_spelling = f"{instance}.{namespace}.{new}()"

    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        warn_once(f"{owner}.{old}()", new_spelling)
        return getattr(getattr(self, namespace), new)(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = (
        f"Deprecated alias of ``{new_spelling}`` (warns once; goes in the next release)."
    )
    return alias


def _install(mixin: type, owner: str, instance: str, table: Mapping[str, tuple[str, str]]) -> None:
    for old, (namespace, new) in table.items():
        setattr(mixin, old, _alias(owner, instance, old, namespace, new))


class DeprecatedReaderMethods:
    """:data:`READER_ALIASES` as methods: a base of :class:`~ledger.api.reader.Reader`."""

    __slots__ = ()


class DeprecatedLedgerMethods:
    """:data:`LEDGER_ALIASES` as methods: a base of :class:`~ledger.api.ledger.Ledger`."""

    __slots__ = ()


class DeprecatedAsyncLedgerMethods:
    """:data:`ASYNC_LEDGER_ALIASES` as methods: a base of
    :class:`~ledger.api.async_ledger.AsyncLedger` (each returns the awaitable)."""

    __slots__ = ()


_install(DeprecatedReaderMethods, "Reader", "reader", READER_ALIASES)
_install(DeprecatedLedgerMethods, "Ledger", "ledger", LEDGER_ALIASES)
_install(DeprecatedAsyncLedgerMethods, "AsyncLedger", "async_ledger", ASYNC_LEDGER_ALIASES)
