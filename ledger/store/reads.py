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

from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.views.stream_events import StreamEvent, TailPosition

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from ledger.core.events import Event
    from ledger.store.ids import IdAdapter
    from ledger.views.audit import Origin
    from ledger.views.catalog import Projection
    from ledger.views.view import Row

StoredRow = (
    tuple[int, UUID, int, str, bytes | memoryview]
    | tuple[int, UUID, int, str, bytes | memoryview, int]
)
"""(notification id, originator id, version, topic, state), and the writing transaction's id
where a tailing read asks for it."""

LAG_BATCH = 1_000
"""Queue rows checked for events after them per query, as verify reads the view."""


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


class Frontier(NamedTuple):
    """Where the final prefix of the history ends, as this transaction sees it."""

    oldest_in_flight: int
    """Every transaction older than this has ended: their events are final (0 on SQLite)."""
    next_transaction_id: int
    """Every transaction that had committed is older than this (0 on SQLite)."""


class ReadSnapshot:
    """One read transaction over the events and the views (see the module docstring)."""

    def __init__(
        self,
        runner: StatementRunner,
        queries: Mapping[str, str],
        ids: IdAdapter,
        codec: EventCodec,
        *,
        rows_may_lag: bool = False,
    ) -> None:
        self._runner = runner
        self._rows_may_lag = rows_may_lag
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
        """Up to ``limit`` events after ``position``, decoded, in notification order.

        Complete only within this snapshot: on PostgreSQL a transaction in flight may still
        commit events with lower ids, so a reader that comes back later for more reads
        :meth:`events_tail` (or :meth:`events_since`) instead."""
        return self._decoded(self._stored_after(position, limit))

    def stored_rows(self, query: str, params: Mapping[str, Any]) -> list[StoredRow]:
        """Run an ``events_after``-shaped named query; its rows as stored, undecoded
        (:data:`StoredRow` tuples, ids as ``UUID``: what the hash chain hashes)."""
        return self._runner.stored_events(self.queries[query], params)

    def events_tail(self, after: TailPosition, limit: int) -> list[StreamEvent]:
        """Up to ``limit`` events of the final prefix after ``after``, decoded, in tail order
        (writing transaction, then notification id), each with its transaction id. Final:
        no event can be committed before them any more, so a reader that records the last
        one's :class:`TailPosition` and comes back for the next never skips or repeats one."""
        params = {"transaction_id": after.transaction_id, "position": after.position}
        rows = self._runner.stored_events(self.queries["events_tail"], {**params, "limit": limit})
        return self._decoded(rows)

    def tail_head(self) -> TailPosition:
        """The tail position of the last event of the final prefix (the start if none)."""
        rows = self.fetch("events_tail_head")
        if not rows:
            return TailPosition()
        return TailPosition(int(rows[0]["transaction_id"]), int(rows[0]["position"]))

    def tail_position_of(self, position: int) -> TailPosition | None:
        """The tail position of the event at notification id ``position`` (``None``: none)."""
        rows = self.fetch("events_tail_position_of", {"position": position})
        if not rows:
            return None
        return TailPosition(int(rows[0]["transaction_id"]), int(rows[0]["position"]))

    def prime_frontier(self) -> None:
        """Fix which sessions this transaction sees running as of now, before a tailing read
        (see ``events_frontier_prime``): call it first in a transaction that reads the tail."""
        self.fetch("events_frontier_prime")

    def pending_before(self, at: TailPosition, before: int) -> bool:
        """Whether an event after ``at`` was written by a transaction older than ``before``
        (a :attr:`Frontier.next_transaction_id`): one a catch-up has yet to apply."""
        params = {"transaction_id": at.transaction_id, "position": at.position, "before": before}
        [row] = self.fetch("events_pending_before", params)
        return bool(row["pending"])

    def frontier(self) -> Frontier:
        """This transaction's :class:`Frontier`."""
        [row] = self.fetch("events_frontier")
        return Frontier(int(row["xmin"]), int(row["xmax"]))

    def snapshot_mark(self) -> str:
        """A mark of what this transaction sees, for a later :meth:`events_since`
        (PostgreSQL: its ``pg_snapshot``; SQLite: its newest id)."""
        [row] = self.fetch("events_snapshot")
        return str(row["snapshot"])

    def events_since(self, mark: str, batch: int) -> Iterator[list[StreamEvent]]:
        """Every event this transaction sees that the one that took ``mark`` did not, in
        pages of at most ``batch``, in notification order (each stream in version order)."""
        position = 0
        while rows := self._runner.stored_events(
            self.queries["events_since"], {"since": mark, "position": position, "limit": batch}
        ):
            position = rows[-1][0]
            yield self._decoded(rows)

    def positions_after(self, at: TailPosition) -> list[int]:
        """The notification ids of every event this transaction sees after ``at`` in tail
        order, final or not."""
        params = {"transaction_id": at.transaction_id, "position": at.position}
        return [int(row["position"]) for row in self.fetch("events_positions_after", params)]

    def count_after(self, at: TailPosition) -> int:
        """How many events this transaction sees after ``at`` in tail order, final or not: a
        tracked view's lag (never ``head - at.position``, which stays above 0 on PostgreSQL
        when the last event in tail order is not the newest id)."""
        params = {"transaction_id": at.transaction_id, "position": at.position}
        [row] = self.fetch("events_count_after", params)
        return int(row["n"])

    def count_since(self, mark: str) -> int:
        """How many events :meth:`events_since` would return."""
        [row] = self.fetch("events_since_count", {"since": mark})
        return int(row["n"])

    def pages(
        self, position: int, end: int, batch: int, *, transactions: bool = False
    ) -> Iterator[list[StreamEvent]]:
        """Every event after ``position`` up to ``end``, decoded, in notification order, in
        pages of at most ``batch`` (complete within this snapshot only, as
        :meth:`events_after`); ``transactions``: with their writing transactions' ids."""
        query = "events_after_transactions" if transactions else "events_after"
        while position < end and (
            rows := self._stored_after(position, min(batch, end - position), query)
        ):
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

    def in_log_order(self, stream_ids: Iterable[UUID]) -> list[Record]:
        """Every event of the streams, in the log's order (notification id)."""
        wanted = list(stream_ids)
        if not wanted:
            return []
        rows = self.fetch(
            "events_of_streams_in_log_order", {"originator_ids": self.ids.keys(wanted)}
        )
        return self.records(rows)

    def _stored_after(
        self, position: int, limit: int, query: str = "events_after"
    ) -> list[StoredRow]:
        params = {"position": position, "limit": limit}
        return self._runner.stored_events(self.queries[query], params)

    def _decoded(self, rows: list[StoredRow]) -> list[StreamEvent]:
        # This runs per event: look the decoder up directly, and build the named tuple with
        # tuple.__new__ (its own __new__ is Python code).
        current = self.codec.current_decoders()
        decode = self.codec.decode
        make = tuple.__new__
        events = []
        if rows and len(rows[0]) > 5:  # a tailing read's rows carry their transaction ids
            for position, originator_id, version, topic, state, xid in rows:  # type: ignore[misc]
                decoder = current.get(topic)
                event = decoder(state) if decoder is not None else decode(topic, state)
                events.append(make(StreamEvent, (position, originator_id, version, event, xid)))
            return events
        for position, originator_id, version, topic, state in rows:  # type: ignore[misc]
            decoder = current.get(topic)
            event = decoder(state) if decoder is not None else decode(topic, state)
            events.append(make(StreamEvent, (position, originator_id, version, event, 0)))
        return events

    # --- the views --------------------------------------------------------------------------

    def live_rows(self, projection: Projection) -> Iterator[Row]:
        """Every live row of the view, with the replay's types, read in batches; a queue
        row that is behind its stream rolled forward by the events after it, as this
        snapshot sees them (:mod:`ledger.views.queue_lag`: only its lagging columns)."""
        from ledger.views.queue import PROJECTION as QUEUE

        rows = self._runner.table_rows(projection)
        if self._rows_may_lag and projection.name == QUEUE.name:
            return self._queue_rows_caught_up(rows)
        return rows

    def _queue_rows_caught_up(self, rows: Iterator[Row]) -> Iterator[Row]:
        from ledger.store.trailing_events import trailing_events
        from ledger.views.queue import decode_state
        from ledger.views.queue_lag import caught_up, rolled_forward

        while batch := list(islice(rows, LAG_BATCH)):
            leased = {
                i: decode_state(row["state"])
                for i, row in enumerate(batch)
                if row["status"] == "leased"
            }
            trailing = trailing_events(self.fetch, self.codec, self.ids, list(leased.values()))
            for i, row in enumerate(batch):
                state = leased.get(i)
                if state is not None and state.job_id in trailing:
                    [ahead] = caught_up([state], trailing)
                    yield rolled_forward(row, ahead)
                else:
                    yield row

    def meta(self) -> dict[str, str]:
        """Every ``jl_meta`` value."""
        return {row["key"]: row["value"] for row in self.fetch("meta_all")}

    def tracking(self) -> dict[str, int]:
        """Every tracked projection's recorded position: the notification id of the last event
        it applied (what users are shown; :meth:`tail_positions` is where it reads on)."""
        return {name: at.position for name, at in self.tail_positions().items()}

    def tail_positions(self) -> dict[str, TailPosition]:
        """Every tracked projection's recorded tail position."""
        return {
            row["name"]: TailPosition(int(row["transaction_id"]), int(row["position"]))
            for row in self.fetch("tracking_all")
        }

    def job_origins(self, job_ids: Iterable[UUID]) -> dict[UUID, Origin]:
        """Each existing job's type, org and workflow link, from ``jl_queue``."""
        from ledger.views.audit import Origin
        from ledger.views.queue import decode_state

        keys = list(job_ids)
        if not keys:
            return {}
        origins = {}
        for row in self.fetch("queue_origins", {"job_ids": self.ids.keys(keys)}):
            link = decode_state(row["state"]).workflow
            origins[self.ids.uuid(row["job_id"])] = Origin(
                row["job_type"],
                row["org"],
                None if link is None else link.run_id,
                None if link is None else link.step_key,
            )
        return origins

    def run_origins(self, run_ids: Iterable[UUID]) -> dict[UUID, Origin]:
        """Each existing workflow run's type and org, from ``jl_workflow_runs``."""
        from ledger.views.audit import Origin

        keys = list(run_ids)
        if not keys:
            return {}
        rows = self.fetch("workflow_run_origins", {"run_ids": self.ids.keys(keys)})
        return {
            (run_id := self.ids.uuid(row["run_id"])): Origin(
                row["workflow_type"], row["org"], run_id
            )
            for row in rows
        }
