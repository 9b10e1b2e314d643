"""Comparing a view's live rows with the rows a replay expects: the verify report.

Blob columns (each view declares its own, :attr:`~ledger.views.view.Projection.blobs`)
are compared as the structs they encode, field by field, so a report names ``state.status``
rather than two unequal byte strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from ledger.views.catalog import Projection
from ledger.views.rows_from_history import Key, Replay, Row

DRIFT_SHOWN = 50
"""At most this many drifting rows per view are kept in a report (all are counted)."""


class ColumnDrift(msgspec.Struct, frozen=True):
    """One column (or ``column.field`` of a blob) whose live value differs."""

    column: str
    expected: Any
    live: Any


class RowDrift(msgspec.Struct, frozen=True):
    """A row missing from the view, extra in it, or differing from its replay."""

    kind: Literal["missing", "extra", "differs"]
    key: list[Any]
    columns: list[ColumnDrift] = []


class ViewReport(msgspec.Struct):
    """One view's verdict."""

    name: str
    table: str
    expected_rows: int
    live_rows: int
    drift_count: int = 0
    drift: list[RowDrift] = []

    @property
    def clean(self) -> bool:
        return self.drift_count == 0

    def add(self, drift: RowDrift) -> None:
        self.drift_count += 1
        if len(self.drift) < DRIFT_SHOWN:
            self.drift.append(drift)


class VerifyReport(msgspec.Struct):
    """What ``verify`` found: the position replayed to and each view's verdict."""

    position: int
    events: int
    views: list[ViewReport]

    @property
    def clean(self) -> bool:
        return all(view.clean for view in self.views)


def _builtin(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _blob_drift(column: str, expected: msgspec.Struct, live: msgspec.Struct) -> list[ColumnDrift]:
    if type(expected) is not type(live):
        return [ColumnDrift(column, _builtin(expected), _builtin(live))]
    return [
        ColumnDrift(f"{column}.{field}", _builtin(want), _builtin(have))
        for field in expected.__struct_fields__
        if (want := getattr(expected, field)) != (have := getattr(live, field))
    ]


def row_drift(projection: Projection, expected: Row, live: Row) -> list[ColumnDrift]:
    """The columns in which ``live`` differs from ``expected`` (empty: equal)."""
    drift: list[ColumnDrift] = []
    decoders = dict(projection.blobs)
    for column in projection.columns:
        want, have = expected[column], live[column]
        decoder = decoders.get(column)
        if decoder is not None:
            if want != have:
                try:
                    drift += _blob_drift(column, decoder(want), decoder(bytes(have)))
                except msgspec.DecodeError:
                    drift.append(ColumnDrift(column, "<blob>", "<undecodable blob>"))
        elif want != have:
            drift.append(ColumnDrift(column, _builtin(want), _builtin(have)))
    return drift


def diff_view(projection: Projection, replay: Replay, live_rows: Iterable[Row]) -> ViewReport:
    """Compare a view's live rows (as the store normalises them) with the replay's."""
    name = projection.name
    report = ViewReport(name, projection.table, replay.count(name), 0)
    key_of = _key_getter(projection.key)
    expected_row = replay.row
    # Keys are listed, not hashed into a set, on the way: only a missing row needs the sets.
    seen: list[Key] = []
    for live in live_rows:
        report.live_rows += 1
        key = key_of(live)
        expected = expected_row(name, key)
        if expected is None:
            report.add(RowDrift("extra", [_builtin(k) for k in key]))
            continue
        seen.append(key)
        if expected == live:
            continue  # the common case, decided in one C-level comparison
        columns = row_drift(projection, expected, live)
        if columns:
            report.add(RowDrift("differs", [_builtin(k) for k in key], columns))
    # Each live row has its own key (the table's primary key), so as many matches as
    # expected rows means none is missing.
    if len(seen) != report.expected_rows:
        for key in sorted(set(replay.keys(name)) - set(seen), key=str):
            report.add(RowDrift("missing", [_builtin(k) for k in key]))
    return report


def _key_getter(columns: tuple[str, ...]) -> Callable[[Row], Key]:
    if len(columns) == 1:
        [column] = columns
        return lambda row: (row[column],)
    return lambda row: tuple(row[column] for column in columns)
