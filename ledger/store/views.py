"""The store's side of rebuild and verify: one transaction over the history and the views.

:class:`ViewTables` pages through the events in notification order, reads a view's live rows
(normalised to the replay's Python types), and writes and swaps shadow tables. The rules that
decide the rows live in :mod:`projections.rules.replay`; this is only I/O.

Shadow DDL is derived from the live table's own ``schema_*`` statements in ``ledger/sql``, with
the table and index names suffixed ``__rebuild`` (whole-word substitution, names from the
catalogue only), so a shadow has the same columns, types, storage options and indexes.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar
from uuid import UUID

from ledger.core.codec import EventCodec
from ledger.store.queries import load
from projections.rules.catalog import SHADOW_SUFFIX, Projection
from projections.rules.replay import Key, Row, StreamEvent

_INDEX_NAME = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)
_SAFE_NAME = re.compile(r"^jl_[a-z_]+$")
_SAFE_COLUMN = re.compile(r"^[a-z_]+$")

StoredRow = tuple[int, UUID, int, str, bytes | memoryview]
"""(notification id, originator id, version, topic, state)."""


def shadow(name: str) -> str:
    return name + SHADOW_SUFFIX


def safe_name(name: str) -> str:
    """``name`` if it is a jobledger table or index name (they are spliced into DDL)."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"not a jobledger table or index name: {name!r}")
    return name


def safe_column(name: str) -> str:
    """``name`` if it is a plain lower-case column name (they are spliced into SQL)."""
    if not _SAFE_COLUMN.match(name):
        raise ValueError(f"not a column name: {name!r}")
    return name


def projection_schema(backend: str, projection: Projection) -> tuple[str, list[str]]:
    """The live ``CREATE TABLE`` statement of a projection and its ``CREATE INDEX`` ones."""
    statements = [
        sql
        for name, sql in load(backend).items()
        if name == projection.schema_prefix or name.startswith(projection.schema_prefix + "_")
    ]
    tables = [sql for sql in statements if _INDEX_NAME.search(sql) is None]
    indexes = [sql for sql in statements if _INDEX_NAME.search(sql) is not None]
    if len(tables) != 1:
        raise ValueError(f"expected one CREATE TABLE for {projection.name}, got {len(tables)}")
    return tables[0], indexes


def index_names(indexes: Sequence[str]) -> list[str]:
    names = []
    for sql in indexes:
        match = _INDEX_NAME.search(sql)
        assert match is not None
        names.append(safe_name(match.group(1)))
    return names


def upto(rows: list[StoredRow], end: int) -> list[StoredRow]:
    """``rows`` without those after ``end`` (a page can pass it where ids have gaps)."""
    if rows and rows[-1][0] > end:
        return [row for row in rows if row[0] <= end]
    return rows


def to_shadow(sql: str, projection: Projection) -> str:
    """A live schema statement rewritten for the shadow table (and shadow index names)."""
    table = safe_name(projection.table)
    sql = re.sub(rf"\b{table}\b", shadow(table), sql)
    for name in index_names([sql]) if _INDEX_NAME.search(sql) else []:
        sql = re.sub(rf"\b{name}\b", shadow(name), sql)
    return sql


class ViewTables(ABC):
    """One transaction (a read snapshot, or a write) over the events and the view tables."""

    concurrent_writers: ClassVar[bool] = False
    """Whether write transactions of other connections may run alongside this one (a
    shadow's index build during the next shadow's load)."""

    def __init__(self, codec: EventCodec) -> None:
        self._codec = codec

    @abstractmethod
    def head(self) -> int:
        """The newest position this transaction sees (0: no events)."""

    @abstractmethod
    def _events_after(self, position: int, limit: int) -> list[StoredRow]: ...

    def events_after(self, position: int, limit: int) -> list[StreamEvent]:
        """Up to ``limit`` events after ``position``, decoded, in notification order."""
        return self._decoded(self._events_after(position, limit))

    def pages(self, position: int, end: int, batch: int) -> Iterator[list[StreamEvent]]:
        """Every event after ``position`` up to ``end``, decoded, in notification order, in
        pages of at most ``batch``."""
        while position < end and (rows := self._events_after(position, min(batch, end - position))):
            rows = upto(rows, end)
            if not rows:
                return
            position = rows[-1][0]
            yield self._decoded(rows)

    def _decoded(self, rows: list[StoredRow]) -> list[StreamEvent]:
        # This runs per event: look the decoder up directly, and build the named tuple with
        # tuple.__new__ (its own __new__ is Python code).
        current = self._codec.current_decoders()
        decode = self._codec.decode
        make = tuple.__new__
        events = []
        for position, originator_id, version, topic, state in rows:
            decoder = current.get(topic)
            event = decoder(state) if decoder is not None else decode(topic, state)
            events.append(make(StreamEvent, (position, originator_id, version, event)))
        return events

    @abstractmethod
    def live_rows(self, projection: Projection) -> Iterator[Row]:
        """Every live row of the view, with the replay's types (``UUID`` ids, ``bool``s,
        ``bytes`` blobs), read in batches."""

    @abstractmethod
    def meta(self) -> dict[str, str]:
        """Every ``jl_meta`` value."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    # --- tracked projections ----------------------------------------------------------------

    @abstractmethod
    def fetch(self, query: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Run a named query; its rows (``row["column"]``), if it returns any."""

    @abstractmethod
    def fetch_composed(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """Run a statement composed of named fragments (every value bound in ``params``,
        never formatted into ``sql``); its rows, as :meth:`fetch`."""

    def tracking(self) -> dict[str, int]:
        """Every tracked projection's recorded position."""
        return {row["name"]: int(row["position"]) for row in self.fetch("tracking_all")}

    def lock_tracking(self, name: str) -> int:
        """A tracked projection's position (0 if none yet), locked until commit."""
        self.fetch("tracking_init", {"name": name})
        [row] = self.fetch("tracking_lock", {"name": name})
        return int(row["position"])

    def set_tracking(self, name: str, position: int) -> None:
        """Record a tracked projection's position (commits with its rows)."""
        self.fetch("tracking_set", {"name": name, "position": position})

    @abstractmethod
    def insert_audit(self, rows: list[Row]) -> None:
        """Insert audit rows; a position already present is left as it is."""

    @abstractmethod
    def job_origins(self, job_ids: Sequence[Any]) -> dict[Any, tuple[str, str | None]]:
        """Each existing job's ``(job_type, org)`` from ``jl_queue``, by ``UUID``."""

    # --- rebuild ----------------------------------------------------------------------------

    @abstractmethod
    def create_shadow(self, projection: Projection) -> None:
        """(Re)create the empty shadow table, without its secondary indexes."""

    @abstractmethod
    def index_shadow(self, projection: Projection) -> None:
        """After the bulk load: build what the shadow needs before the swap."""

    @abstractmethod
    def insert_shadow(self, projection: Projection, rows: list[Row]) -> None:
        """Insert rows (the replay's types) into the shadow, in one statement or batch."""

    @abstractmethod
    def delete_shadow(self, projection: Projection, keys: list[Key]) -> None:
        """Delete shadow rows by primary key."""

    @abstractmethod
    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """Exclude every appender and every user of the live tables until commit.

        Raises :class:`~ledger.core.errors.DatabaseBusyError` if a live table's lock is not had
        within ``timeout_s``; the transaction is then unusable and must be retried."""

    @abstractmethod
    def swap(self, projection: Projection) -> None:
        """Replace the live table by the shadow, with the live index names."""

    @abstractmethod
    def drop_shadow(self, projection: Projection) -> None: ...
