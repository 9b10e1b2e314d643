"""Reading a kind of state's rows by key: the one reader behind ``UnitOfWork.state`` and
``Store.state`` (each kind declares its queries; see :mod:`ledger.views.kind`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ledger.store.ids import IdAdapter
from ledger.views.kind import StateKind

RunQuery = Callable[[str, dict[str, Any]], Sequence[Any]]
"""Run one named query; rows indexable by column name."""


def read_states(
    kind: StateKind[Any, Any], keys: Iterable[Any], run: RunQuery, ids: IdAdapter
) -> dict[Any, Any]:
    """The states of those of ``keys`` that ``kind``'s view (or, for a stream without one,
    the events table) holds, by key: one query for a kind with ``get_many``, else one per
    key."""
    of_row = kind.of_row
    if of_row is None:
        raise ValueError(f"kind {kind.name!r} has no rows to read")
    if kind.get_many:
        assert kind.key_of is not None, "a kind read by get_many declares key_of"
        values = ids.values([kind.bind_key(key) for key in keys])
        states = [of_row(row) for row in run(kind.get_many, {kind.key_param: values})]
        return {kind.key_of(state): state for state in states}
    found = {}
    for key in keys:
        value = ids.key(key) if kind.binds_id else kind.bind_key(key)
        rows = run(kind.get, {kind.key_param: value})
        if rows:
            found[key] = of_row(rows[0])
    return found


def read_all(
    kind: StateKind[Any, Any], run: Callable[[str], Sequence[Mapping[str, Any]]]
) -> list[Any]:
    """Every state of ``kind``, in its ``all`` query's order."""
    of_row = kind.of_row
    if of_row is None or not kind.all:
        raise ValueError(f"kind {kind.name!r} has no rows to read")
    return [of_row(row) for row in run(kind.all)]
