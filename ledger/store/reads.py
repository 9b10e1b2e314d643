"""The one read seam: a consistent snapshot of the events and the views.

Feature reads (audit pages, job lists, time travel, decision replay, export, import checks,
stats) and the projection runners read only through a :class:`ReadSnapshot`: run a named
query, run a statement composed of named fragments, page through the events in notification
order, decode stored events, and spell ids with the snapshot's
:class:`~ledger.store.ids.IdAdapter`. Nothing outside the store touches a cursor, a
backend's private members or a driver.

A backend supplies the :class:`StatementRunner` (how one transaction's cursor executes and
returns rows); everything here is backend-neutral. On PostgreSQL a snapshot is one
``REPEATABLE READ READ ONLY`` transaction; on SQLite a deferred ``BEGIN`` (a WAL snapshot).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.core.events import Event
from ledger.store.ids import IdAdapter
from projections.rules.catalog import Projection
from projections.rules.replay import Row, StreamEvent

StoredRow = tuple[int, UUID, int, str, bytes | memoryview]
"""(notification id, originator id, version, topic, state)."""


class StatementRunner(Protocol):
    """One transaction's cursor, as a backend drives it."""

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        """Execute ``sql``; its rows (``row["column"]``), or none if it returns none."""
        ...

    def stored_events(self, sql: str, params: Mapping[str, Any]) -> list[StoredRow]:
        """Execute an ``events_after``-shaped query; its rows as :data:`StoredRow` tuples."""
        ...

    def table_rows(self, projection: Projection) -> Iterator[Row]:
        """Every row of the projection's live table with the replay's types (``UUID`` ids,
        ``bool``\\ s, ``bytes`` blobs), streamed in batches."""
        ...


def upto(rows: list[StoredRow], end: int) -> list[StoredRow]:
    """``rows`` without those after ``end`` (a page can pass it where ids have gaps)."""
    if rows and rows[-1][0] > end:
        return [row for row in rows if row[0] <= end]
    return rows


def decode_records(
    codec: EventCodec, ids: IdAdapter, rows: Iterable[Any], originator_id: UUID | None = None
) -> list[Record]:
    """Rows with ``originator_version``, ``topic`` and ``state`` (and ``originator_id``,
    unless all are of ``originator_id``) as decoded records, in the rows' order."""
    return [
        Record(
            originator_id if originator_id is not None else ids.uuid(row["originator_id"]),
            int(row["originator_version"]),
            codec.decode(row["topic"], bytes(row["state"])),
        )
        for row in rows
    ]


class ReadSnapshot:
    """One read transaction over the events and the views (see the module docstring)."""

    def __init__(
        self,
        runner: StatementRunner,
        queries: Mapping[str, str],
        ids: IdAdapter,
        codec: EventCodec,
    ) -> None:
        self._runner = runner
        self.queries = queries
        """The backend's named queries and fragments (to compose statements from)."""
        self.ids = ids
        self.codec = codec

    # --- statements -------------------------------------------------------------------------

    def fetch(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run a named query; its rows (``row["column"]``), if it returns any."""
        return self._runner.rows(self.queries[query], params or {})

    def fetch_composed(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        """Run a statement composed of named fragments (every value bound in ``params``,
        never formatted into ``sql``); its rows, as :meth:`fetch`."""
        return self._runner.rows(sql, params)

    # --- the history ------------------------------------------------------------------------

    def head(self) -> int:
        """The newest position this transaction sees (0: no events)."""
        [row] = self.fetch("events_head")
        return int(row["head"])

    def events_after(self, position: int, limit: int) -> list[StreamEvent]:
        """Up to ``limit`` events after ``position``, decoded, in notification order."""
        return self._decoded(self._stored_after(position, limit))

    def pages(self, position: int, end: int, batch: int) -> Iterator[list[StreamEvent]]:
        """Every event after ``position`` up to ``end``, decoded, in notification order, in
        pages of at most ``batch``."""
        while position < end and (rows := self._stored_after(position, min(batch, end - position))):
            rows = upto(rows, end)
            if not rows:
                return
            position = rows[-1][0]
            yield self._decoded(rows)

    def decode(self, topic: str, state: bytes | memoryview) -> Event:
        """One stored event's payload, upcast to the current schema."""
        return self.codec.decode(topic, bytes(state))

    def records(self, rows: Iterable[Any], originator_id: UUID | None = None) -> list[Record]:
        """Stored-event rows as decoded records (see :func:`decode_records`)."""
        return decode_records(self.codec, self.ids, rows, originator_id)

    def histories(self, stream_ids: Iterable[UUID]) -> dict[UUID, list[Record]]:
        """Every event of each stream, in order (an empty list for a stream with none)."""
        wanted = list(stream_ids)
        found: dict[UUID, list[Record]] = {stream_id: [] for stream_id in wanted}
        if not wanted:
            return found
        rows = self.fetch("events_of_streams", {"originator_ids": self.ids.keys(wanted)})
        for record in self.records(rows):
            found[record.originator_id].append(record)
        return found

    def _stored_after(self, position: int, limit: int) -> list[StoredRow]:
        params = {"position": position, "limit": limit}
        return self._runner.stored_events(self.queries["events_after"], params)

    def _decoded(self, rows: list[StoredRow]) -> list[StreamEvent]:
        # This runs per event: look the decoder up directly, and build the named tuple with
        # tuple.__new__ (its own __new__ is Python code).
        current = self.codec.current_decoders()
        decode = self.codec.decode
        make = tuple.__new__
        events = []
        for position, originator_id, version, topic, state in rows:
            decoder = current.get(topic)
            event = decoder(state) if decoder is not None else decode(topic, state)
            events.append(make(StreamEvent, (position, originator_id, version, event)))
        return events

    # --- the views --------------------------------------------------------------------------

    def live_rows(self, projection: Projection) -> Iterator[Row]:
        """Every live row of the view, with the replay's types, read in batches."""
        return self._runner.table_rows(projection)

    def meta(self) -> dict[str, str]:
        """Every ``jl_meta`` value."""
        return {row["key"]: row["value"] for row in self.fetch("meta_all")}

    def tracking(self) -> dict[str, int]:
        """Every tracked projection's recorded position."""
        return {row["name"]: int(row["position"]) for row in self.fetch("tracking_all")}

    def job_origins(self, job_ids: Iterable[UUID]) -> dict[UUID, tuple[str, str | None]]:
        """Each existing job's ``(job_type, org)`` from ``jl_queue``."""
        keys = list(job_ids)
        if not keys:
            return {}
        rows = self.fetch("queue_origins", {"job_ids": self.ids.keys(keys)})
        return {self.ids.uuid(row["job_id"]): (row["job_type"], row["org"]) for row in rows}
