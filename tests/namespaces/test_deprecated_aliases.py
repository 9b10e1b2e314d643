"""The facade's methods of before the feature namespaces (issue 29) still work, warn once, and
call their new spelling."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from ledger import AsyncLedger, Ledger, Reader
from ledger.api.deprecated import (
    ASYNC_LEDGER_ALIASES,
    CALLABLE_NAMESPACES,
    LEDGER_ALIASES,
    READER_ALIASES,
)
from ledger.deprecation import forget_warnings
from ledger.limits.limit_commands import LimitCommands
from ledger.retention.retention_commands import RetentionCommands
from ledger.schedules.schedule_commands import ScheduleCommands
from ledger.sources.source_commands import SourceCommands
from ledger.tokens.token_commands import TokenCommands
from ledger.workflows.workflow_commands import WorkflowCommands

NAMESPACES = {
    "workflows": WorkflowCommands,
    "schedules": ScheduleCommands,
    "sources": SourceCommands,
    "tokens": TokenCommands,
    "retention": RetentionCommands,
    "limits": LimitCommands,
}
ROWS = [
    *(("Reader", old, *new) for old, new in READER_ALIASES.items()),
    *(("Ledger", old, *new) for old, new in LEDGER_ALIASES.items()),
]


class _Recorder:
    """A namespace that records what it was asked, and answers with the method's name."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> tuple[str, str]:
            self.calls.append((name, args, kwargs))
            return (self.namespace, name)

        return call


def _recording(ledger: Ledger) -> tuple[Ledger, dict[str, _Recorder]]:
    recorders = {name: _Recorder(name) for name in NAMESPACES}
    properties = {
        name: property(lambda self, r=recorder: r) for name, recorder in recorders.items()
    }
    recording = type("RecordingLedger", (Ledger,), properties)
    return recording(ledger.store, clock=ledger.clock), recorders


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    forget_warnings()
    yield
    forget_warnings()


@pytest.mark.parametrize(("owner", "old", "namespace", "new"), ROWS)
def test_each_deprecated_method_warns_once_and_calls_its_new_spelling(
    ledger: Ledger, owner: str, old: str, namespace: str, new: str
) -> None:
    """Each alias forwards its arguments to ``<namespace>.<new>``, which exists, and warns
    with a ``DeprecationWarning`` naming the new spelling the first time only."""
    assert hasattr(NAMESPACES[namespace], new)
    assert hasattr(Reader if owner == "Reader" else Ledger, old)
    recording, recorders = _recording(ledger)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = getattr(recording, old)("x", 2, key="k")
        second = getattr(recording, old)("x", 2, key="k")
    assert first == second == (namespace, new)
    assert recorders[namespace].calls == [(new, ("x", 2), {"key": "k"})] * 2
    assert [w.category for w in caught] == [DeprecationWarning]
    message = str(caught[0].message)
    assert f"{owner}.{old}()" in message and f".{namespace}.{new}()" in message
    assert caught[0].filename == __file__  # it points at the caller's line


def test_the_namespaces_that_were_methods_are_callable_and_warn_once(defined: Ledger) -> None:
    """``reader.workflows(...)``, ``reader.sources(...)``, ``reader.tokens()`` and
    ``ledger.schedules()`` answer what their new spelling does, warning once each."""
    defined.tokens.create(org="acme", role="read")
    defined.schedules.add("hourly", "0 * * * *", "t")
    for key, (namespace, new) in CALLABLE_NAMESPACES.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = getattr(defined, namespace)()
            again = getattr(defined, namespace)()
        assert old == again == getattr(getattr(defined, namespace), new)()
        assert [w.category for w in caught] == [DeprecationWarning], key
        assert f"{key}()" in str(caught[0].message)
    assert len(defined.tokens.all()) == 1 and len(defined.schedules.all()) == 1


def test_real_calls_through_the_aliases_do_what_the_namespaces_do(defined: Ledger) -> None:
    """A few aliases end to end on a real store: the same state as the new spelling's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        paused = defined.pause_queue("emails", reason="maintenance")
        assert paused is not None and paused.paused
        assert [q.queue for q in defined.queues()] == ["emails"]
        created = defined.create_token(org="acme", role="read")
        assert defined.token(created.token.token_id) == defined.tokens.get(created.token.token_id)
        assert defined.authenticate(created.secret) == created.token
        started = defined.start_workflow(_one_step())
        assert defined.workflow_run(started.run_id) == defined.workflows.run(started.run_id)
        assert defined.workflow(started.run_id).steps() == defined.workflows.steps(started.run_id)


async def test_the_async_ledgers_start_workflow_warns_once(sqlite_url: str) -> None:
    """``AsyncLedger.start_workflow`` is ``await async_ledger.workflows.submit(...)``."""
    async with await AsyncLedger.open(sqlite_url) as async_ledger:
        await async_ledger.run(lambda: async_ledger.ledger.define("t"))
        assert ASYNC_LEDGER_ALIASES == {"start_workflow": ("workflows", "submit")}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = await async_ledger.start_workflow(_one_step("k"))
            await async_ledger.start_workflow(_one_step("k"))
        new = await async_ledger.workflows.submit(_one_step("k"))
        assert old.run_id == new.run_id and not new.created  # the same idempotent run
        assert [w.category for w in caught] == [DeprecationWarning]


def _one_step(key: str | None = None) -> dict[str, Any]:
    step = {"kind": "job", "key": "a", "job_type": "t", "payload": {}, "depends_on": []}
    return {"workflow_type": "one", "steps": [step], "result_step": None, "idempotency_key": key}
