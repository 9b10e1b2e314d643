"""Helpers for the bad-input tests: nested values, and "was anything appended?"."""

from __future__ import annotations

from typing import Any

from ledger import Lease, Ledger
from ledger.core.limits import MAX_JSON_DEPTH


def nested(depth: int) -> dict[str, Any]:
    """An object nested ``depth`` levels deep (``nested(1) == {"a": 1}``)."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


def nested_list(depth: int) -> list[Any]:
    """An array nested ``depth`` levels deep (``nested_list(1) == [1]``)."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    assert isinstance(value, list)
    return value


TOO_DEEP = nested(MAX_JSON_DEPTH + 1)
DEEPEST = nested(MAX_JSON_DEPTH)


def head(ledger: Ledger) -> int:
    """The newest notification id: it moves iff something was appended."""
    return ledger.store.head_position()


def claimed(ledger: Ledger, worker: str = "w") -> Lease:
    """Enqueue a job of type ``t`` and lease it to ``worker``."""
    ledger.enqueue("t")
    [job] = ledger.claim(worker)
    assert job.lease is not None
    return job.lease
