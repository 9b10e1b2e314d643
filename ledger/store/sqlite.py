"""The SQLite backend: the embedded default.

Writers are serialised by ``BEGIN IMMEDIATE`` (taking the write lock before the first read,
so a unit of work that reads before it writes cannot fail on the lock upgrade), and within a
process by the eventsourcing pool's writer interlock. Readers use WAL snapshots.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from ledger.core.codec import EventCodec
from ledger.core.errors import (
    DatabaseBusyError,
    DatabaseNotInitialisedError,
    DatabaseUnusableError,
    LedgerError,
)
from ledger.core.state import DefinitionState
from ledger.store.base import (
    EVENTS_TABLE,
    SCHEMA_VERSION,
    LoadedJob,
    Store,
    UnitOfWork,
    decode_definition_row,
)
from ledger.store.errors import from_sqlite
from ledger.store.queries import load, schema_statements
from ledger.store.views import (
    StoredRow,
    ViewTables,
    index_names,
    projection_schema,
    safe_column,
    safe_name,
    shadow,
    to_shadow,
)
from projections.rules.catalog import Projection
from projections.rules.queue import decode_state
from projections.rules.replay import Key, Row
from projections.rules.writes import ViewWrite

BUSY_TIMEOUT_S = 30


class SQLiteUnitOfWork(UnitOfWork):
    def __init__(self, store: SQLiteStore, cursor: SQLiteCursor) -> None:
        super().__init__(store.codec)
        self._store = store
        self._cursor = cursor
        self._sql = store.sql

    def _fetch_jobs(self, query: str, params: dict[str, Any]) -> list[LoadedJob]:
        self._cursor.execute(self._sql[query], params)
        return [
            LoadedJob(decode_state(row["state"]), row["enqueue_seq"])
            for row in self._cursor.fetchall()
        ]

    def _fetch_definitions(self, job_types: Sequence[str]) -> list[DefinitionState]:
        self._cursor.execute(self._sql["definitions_get"], {"job_types": json.dumps(job_types)})
        return [
            decode_definition_row(row["state"], row["stream_version"])
            for row in self._cursor.fetchall()
        ]

    def _insert_stored_events(
        self, stored: list[StoredEvent], *, positions_needed: bool
    ) -> Sequence[int] | None:
        # One executemany instead of the recorder's execute per event. The positions are
        # consecutive rowids: BEGIN IMMEDIATE excludes other writers, and jl_events rows are
        # never deleted, so each new rowid is the previous maximum plus one.
        self._cursor.executemany(
            self._sql["events_insert"],
            [(s.originator_id.hex, s.originator_version, s.topic, s.state) for s in stored],
        )
        if not positions_needed:
            return None
        self._cursor.execute("SELECT last_insert_rowid()")
        last = int(self._cursor.fetchone()[0])
        return list(range(last - len(stored) + 1, last + 1))

    def _write_queue(self, inserts: list[dict[str, Any]], updates: list[dict[str, Any]]) -> None:
        if inserts:
            self._cursor.executemany(self._sql["queue_insert"], inserts)
        if updates:
            self._cursor.executemany(self._sql["queue_update"], updates)

    def _write_definitions(self, rows: list[dict[str, Any]]) -> None:
        self._cursor.executemany(self._sql["definitions_upsert"], rows)

    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        for query, group in groupby(writes, key=lambda write: write.query):
            rows = [
                {k: v.hex if isinstance(v, UUID) else v for k, v in write.params.items()}
                for write in group
            ]
            self._cursor.executemany(self._sql[query], rows)

    def _notify_jobs_available(self) -> None:
        """Nothing to send: SQLite has no notifications; other processes poll."""

    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        self._cursor.execute(self._sql["events_of_streams"], {"originator_ids": keys})
        return [
            (UUID(row["originator_id"]), row["originator_version"], row["topic"], row["state"])
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
            raise from_sqlite(exc, f"SQLite database {self._store.path}") from exc
        except BaseException:
            self._cursor.execute("ROLLBACK TO jl_item")
            self._cursor.execute("RELEASE jl_item")
            raise
        self._cursor.execute("RELEASE jl_item")

    def _job_key(self, job_id: UUID) -> str:
        return job_id.hex

    def _id_list(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def serialise_appends(self) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already holds the database's write lock."""


class SQLiteViewTables(ViewTables):
    """Rebuild and verify on SQLite: a deferred ``BEGIN`` reads a WAL snapshot; a write is
    ``BEGIN IMMEDIATE``, which already excludes every other writer (so
    :meth:`lock_for_swap` has nothing to take)."""

    def __init__(self, store: SQLiteStore, cursor: SQLiteCursor) -> None:
        super().__init__(store.codec)
        self._cursor = cursor
        self._sql = store.sql

    def head(self) -> int:
        self._cursor.execute(self._sql["events_head"])
        return int(self._cursor.fetchone()["head"])

    def _events_after(self, position: int, limit: int) -> list[StoredRow]:
        self._cursor.execute(self._sql["events_after"], {"position": position, "limit": limit})
        return [(row[0], UUID(row[1]), row[2], row[3], row[4]) for row in self._cursor.fetchall()]

    def live_rows(self, projection: Projection) -> Iterator[Row]:
        columns = ", ".join(safe_column(c) for c in projection.columns)
        self._cursor.execute(f"SELECT {columns} FROM {safe_name(projection.table)}")
        cursor = self._cursor.sqlite_cursor  # eventsourcing's wrapper has no fetchmany
        while batch := cursor.fetchmany(10_000):
            for row in batch:
                values = dict(zip(projection.columns, row, strict=True))
                if "job_id" in values:
                    values["job_id"] = UUID(values["job_id"])
                if "enabled" in values:
                    values["enabled"] = bool(values["enabled"])
                yield values

    def meta(self) -> dict[str, str]:
        self._cursor.execute(self._sql["meta_all"])
        return {row["key"]: row["value"] for row in self._cursor.fetchall()}

    def set_meta(self, key: str, value: str) -> None:
        self._cursor.execute(self._sql["meta_set"], {"key": key, "value": value})

    def fetch(self, query: str, params: dict[str, Any] | None = None) -> list[Any]:
        return self.fetch_composed(self._sql[query], params or {})

    def fetch_composed(self, sql: str, params: dict[str, Any]) -> list[Any]:
        self._cursor.execute(sql, params)
        return list(self._cursor.fetchall())

    def insert_audit(self, rows: list[Row]) -> None:
        if rows:
            stored = [{k: _stored(v) for k, v in row.items()} for row in rows]
            self._cursor.executemany(self._sql["audit_insert"], stored)

    def job_origins(self, job_ids: Sequence[Any]) -> dict[Any, tuple[str, str | None]]:
        if not job_ids:
            return {}
        rows = self.fetch("queue_origins", {"job_ids": json.dumps([i.hex for i in job_ids])})
        return {UUID(row["job_id"]): (row["job_type"], row["org"]) for row in rows}

    def create_shadow(self, projection: Projection) -> None:
        self.drop_shadow(projection)
        table, _ = projection_schema("sqlite", projection)
        self._cursor.execute(to_shadow(table, projection))

    def index_shadow(self, projection: Projection) -> None:
        """Nothing yet: SQLite cannot rename an index, so :meth:`swap` builds them."""

    def insert_shadow(self, projection: Projection, rows: list[Row]) -> None:
        if not rows:
            return
        columns = projection.columns
        names = ", ".join(safe_column(c) for c in columns)
        marks = ", ".join("?" for _ in columns)
        values = itemgetter(*columns) if len(columns) > 1 else lambda row: (row[columns[0]],)
        # Inline, not _stored() per value: this runs for every column of every row.
        self._cursor.executemany(
            f"INSERT INTO {shadow(safe_name(projection.table))} ({names}) VALUES ({marks})",
            [[v.hex if type(v) is UUID else v for v in values(row)] for row in rows],
        )

    def delete_shadow(self, projection: Projection, keys: list[Key]) -> None:
        if not keys:
            return
        where = " AND ".join(f"{safe_column(c)} = ?" for c in projection.key)
        self._cursor.executemany(
            f"DELETE FROM {shadow(safe_name(projection.table))} WHERE {where}",
            [tuple(_stored(v) for v in key) for key in keys],
        )

    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """Nothing to take: ``BEGIN IMMEDIATE`` holds the database's write lock."""

    def swap(self, projection: Projection) -> None:
        live = safe_name(projection.table)
        self._cursor.execute(f"ALTER TABLE {live} RENAME TO {live}__old")
        self._cursor.execute(f"ALTER TABLE {shadow(live)} RENAME TO {live}")
        self._cursor.execute(f"DROP TABLE {live}__old")
        # The old table's indexes went with it; build the shadow's under their live names.
        _, indexes = projection_schema("sqlite", projection)
        for statement in indexes:
            self._cursor.execute(statement)

    def drop_shadow(self, projection: Projection) -> None:
        self._cursor.execute(f"DROP TABLE IF EXISTS {shadow(safe_name(projection.table))}")
        _, indexes = projection_schema("sqlite", projection)
        for name in index_names(indexes):
            self._cursor.execute(f"DROP INDEX IF EXISTS {shadow(name)}")


def _stored(value: Any) -> Any:
    """A replay value as SQLite stores it (job ids as 32-hex text)."""
    return value.hex if isinstance(value, UUID) else value


def _from_persistence(exc: PersistenceError, where: str) -> LedgerError:
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error):
        return from_sqlite(cause, where)
    if isinstance(exc, TimeoutError):
        # The pool's writer slot: another thread of this process holds the write lock.
        return DatabaseBusyError(f"{where}: {exc}")
    return DatabaseUnusableError(f"{where}: {exc}")


class SQLiteStore(Store):
    backend = "sqlite"

    def __init__(
        self,
        path: str,
        codec: EventCodec | None = None,
        pool_size: int = 5,
        *,
        create: bool = False,
    ) -> None:
        super().__init__()
        if codec is not None:
            self.codec = codec
        self.path = str(Path(path).expanduser())
        parent = Path(self.path).resolve().parent
        if not parent.is_dir():
            raise DatabaseUnusableError(f"cannot open {path}: directory {parent} does not exist")
        if not create and not Path(self.path).exists():
            # Opening would create an empty file; refuse without leaving one behind.
            raise DatabaseNotInitialisedError(
                f"no database file at {path}; run `jobledger init` first"
            )
        self.sql = load("sqlite")
        self.datastore = SQLiteDatastore(
            db_name=self.path, lock_timeout=BUSY_TIMEOUT_S, pool_size=pool_size, max_overflow=10
        )
        self.recorder = SQLiteApplicationRecorder(self.datastore, events_table_name=EVENTS_TABLE)

    @contextmanager
    def _connection(self, *, writer: bool) -> Iterator[SQLiteCursor]:
        where = f"SQLite database {self.path}"
        try:
            conn = self.datastore.pool.get_connection(is_writer=writer)
        except sqlite3.Error as exc:
            raise from_sqlite(exc, f"cannot open {where}") from exc
        except PersistenceError as exc:
            raise _from_persistence(exc, where) from exc
        try:
            cursor = conn.cursor()
            cursor.execute("BEGIN IMMEDIATE" if writer else "BEGIN")
            try:
                yield cursor
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()
        except sqlite3.Error as exc:
            raise from_sqlite(exc, where) from exc
        finally:
            self.datastore.pool.put_connection(conn)

    @contextmanager
    def _errors_mapped(self) -> Iterator[None]:
        where = f"SQLite database {self.path}"
        try:
            yield
        except sqlite3.Error as exc:
            raise from_sqlite(exc, where) from exc
        except PersistenceError as exc:
            raise _from_persistence(exc, where) from exc

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteUnitOfWork]:
        with self._connection(writer=True) as cursor:
            yield SQLiteUnitOfWork(self, cursor)

    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[sqlite3.Row]:
        with self._connection(writer=False) as cursor:
            cursor.execute(self.sql[query], params or {})
            return list(cursor.fetchall())

    def _id_param(self, job_ids: Sequence[UUID]) -> str:
        return json.dumps([job_id.hex for job_id in job_ids])

    @contextmanager
    def view_tables(self, *, write: bool) -> Iterator[SQLiteViewTables]:
        with self._connection(writer=write) as cursor:
            yield SQLiteViewTables(self, cursor)

    def _create_schema(self) -> None:
        with self._connection(writer=True) as cursor:
            for statement in self.recorder.create_table_statements:
                cursor.execute(statement)
            for statement in schema_statements(self.backend):
                cursor.execute(statement)
            cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})

    def close(self) -> None:
        self.datastore.close()
