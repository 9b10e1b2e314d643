"""The SQLite unit of work: the write lock first, then read, fold and append.

Writers are serialised by ``BEGIN IMMEDIATE`` (taking the write lock before the first read,
so a unit of work that reads before it writes cannot fail on the lock upgrade), and within a
process by the eventsourcing pool's writer interlock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import groupby
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.sqlite import SQLiteCursor

from ledger.core.codec import EventCodec
from ledger.store.ids import IdAdapter
from ledger.store.sqlite.errors import from_sqlite
from ledger.store.unit_of_work import EventRow, UnitOfWork
from ledger.views.writes import ViewWrite


class StoreParts(Protocol):
    """What a unit of work uses of the store that opened it (a protocol, so the unit of work
    does not import the store that imports it)."""

    @property
    def codec(self) -> EventCodec: ...

    @property
    def ids(self) -> IdAdapter: ...

    @property
    def sql(self) -> Mapping[str, str]: ...

    @property
    def where(self) -> str:
        """How the database is named in error messages."""


class SQLiteUnitOfWork(UnitOfWork):
    """A unit of work in one ``BEGIN IMMEDIATE`` transaction (the database's write lock)."""

    def __init__(self, store: StoreParts, cursor: SQLiteCursor) -> None:
        super().__init__(store.codec, store.ids)
        self._store = store
        self._cursor = cursor
        self._sql = store.sql

    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]:
        self._cursor.execute(self._sql[query], params)
        rows: Sequence[Any] = self._cursor.fetchall()
        return rows

    def _insert_stored_events(
        self, stored: list[EventRow], *, positions_needed: bool
    ) -> Sequence[int] | None:
        # One executemany instead of the recorder's execute per event. The positions are
        # consecutive rowids: BEGIN IMMEDIATE excludes other writers, and the row holding the
        # maximum is never deleted (retention moves only older rows to the archive: decision
        # 30), so each new rowid is the previous maximum plus one.
        self._cursor.executemany(
            self._sql["events_insert"],
            [(s.originator_id.hex, s.originator_version, s.topic, s.state) for s in stored],
        )
        if not positions_needed:
            return None
        self._cursor.execute("SELECT last_insert_rowid()")
        last = int(self._cursor.fetchone()[0])
        return list(range(last - len(stored) + 1, last + 1))

    def _write_queue(self, inserts: list[tuple[Any, ...]], updates: list[dict[str, Any]]) -> None:
        if inserts:
            # queue_insert's placeholders are positional, in COLUMNS order.
            self._cursor.executemany(self._sql["queue_insert"], inserts)
        if updates:
            self._cursor.executemany(self._sql["queue_update"], updates)

    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        for query, group in groupby(writes, key=lambda write: write.query):
            rows = [self._ids.stored_params(write.params) for write in group]
            self._cursor.executemany(self._sql[query], rows)

    def _notify_jobs_available(self) -> None:
        """Nothing to send: SQLite has no notifications; other processes poll."""

    def _notify_jobs_cancelled(self) -> None:
        """Nothing to send: pools learn of a cancel from their next heartbeat's answer."""

    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        self._cursor.execute(self._sql["events_of_streams"], {"originator_ids": keys})
        return [
            (
                self._ids.uuid(row["originator_id"]),
                row["originator_version"],
                row["topic"],
                row["state"],
            )
            for row in self._cursor.fetchall()
        ]

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        self._cursor.execute("SAVEPOINT jl_item")
        try:
            yield
        except sqlite3.Error as exc:
            self._cursor.execute("ROLLBACK TO jl_item")
            self._cursor.execute("RELEASE jl_item")
            raise from_sqlite(exc, self._store.where) from exc
        except BaseException:
            self._cursor.execute("ROLLBACK TO jl_item")
            self._cursor.execute("RELEASE jl_item")
            raise
        self._cursor.execute("RELEASE jl_item")

    def serialise_appends(self) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already holds the database's write lock."""
