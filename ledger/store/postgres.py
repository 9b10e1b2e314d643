"""The PostgreSQL backend.

Claims and other multi-job units of work lock the view rows they change first (``FOR UPDATE``,
``SKIP LOCKED`` for claims), then append: the eventsourcing recorder takes ``LOCK TABLE
jl_events IN EXCLUSIVE MODE`` so notification ids commit in order (tailing readers never skip
an event) and sends one ``NOTIFY`` per transaction on its own channel; the workers' wake-up is
``jl_jobs_available``, notified only by commits that may make jobs claimable.
Writers that change existing rows lock them before the table lock; enqueue, which takes the
table lock first, locks no existing row; rows a transaction creates are written after the
table lock. So writers cannot deadlock on the two.

``POSTGRES_ENABLE_DB_FUNCTIONS`` is never set: it drops that table lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow
from psycopg.sql import SQL, Literal

from ledger.codec import EventCodec
from ledger.errors import LedgerError, StoreError
from ledger.state import DefinitionState, JobState
from ledger.store.base import (
    EVENTS_TABLE,
    SCHEMA_VERSION,
    LoadedJob,
    Store,
    UnitOfWork,
    decode_definition_row,
)
from ledger.store.errors import from_postgres
from ledger.store.queries import load, schema_statements
from projections.queue import decode_state
from projections.writes import ViewWrite

IDLE_IN_TRANSACTION_TIMEOUT_S = 60.0

# Never pass eventsourcing's ``pool_open_timeout``: with it, every connection checkout calls
# psycopg_pool's ``wait()``, which blocks until the pool is *full* — until every other
# thread has returned its connection — serialising all database work (and tripping an
# assertion when two threads wait at once). The connect timeout still bounds checkouts.


_DATASTORE_KEYS = {"dbname", "host", "port", "user", "password", "connect_timeout"}


def _from_persistence(exc: PersistenceError, where: str) -> LedgerError:
    """eventsourcing wraps psycopg's errors; map the original by its SQLSTATE."""
    cause = exc.__cause__
    if isinstance(cause, psycopg.Error):
        return from_postgres(cause, where)
    return StoreError(f"{where}: {exc}")


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts to one list per column, for ``unnest`` statements."""
    return {name: [row[name] for row in rows] for name in rows[0]}


class PostgresUnitOfWork(UnitOfWork):
    def __init__(self, store: PostgresStore, cursor: psycopg.Cursor[DictRow]) -> None:
        super().__init__(store.codec)
        self._store = store
        self._cursor = cursor
        self._sql = store.sql
        self._appends_serialised = False

    def _fetch_jobs(self, query: str, params: dict[str, Any]) -> list[LoadedJob]:
        self._cursor.execute(self._sql[query], params, prepare=True)
        return [
            LoadedJob(decode_state(row["state"]), row["enqueue_seq"])
            for row in self._cursor.fetchall()
        ]

    def _fetch_definitions(self, job_types: Sequence[str]) -> list[DefinitionState]:
        self._cursor.execute(self._sql["definitions_get"], {"job_types": list(job_types)})
        return [
            decode_definition_row(row["state"], row["stream_version"])
            for row in self._cursor.fetchall()
        ]

    def _insert_stored_events(
        self, stored: list[StoredEvent], *, positions_needed: bool
    ) -> Sequence[int] | None:
        self._store.recorder._insert_stored_events(
            self._cursor, stored, returning=positions_needed, locked=self._appends_serialised
        )
        self._appends_serialised = True
        if not positions_needed:
            return None
        return [row["notification_id"] for row in self._cursor.fetchall()]

    @contextmanager
    def _write_phase(self) -> Iterator[None]:
        # Pipeline mode: the lock, NOTIFY, events insert and view writes go out without
        # waiting for each other's results; errors still surface before commit.
        with self._cursor.connection.pipeline():
            yield

    def _write_queue(self, inserts: list[dict[str, Any]], updates: list[dict[str, Any]]) -> None:
        # One statement per batch with a parameter array per column: one row per statement
        # (executemany) costs a server round of parse/plan/index upkeep per row.
        if inserts:
            self._cursor.execute(self._sql["queue_insert"], _columns(inserts), prepare=True)
        if updates:
            self._cursor.execute(self._sql["queue_update"], _columns(updates), prepare=True)

    def _write_definitions(self, rows: list[dict[str, Any]]) -> None:
        self._cursor.executemany(self._sql["definitions_upsert"], rows)

    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        for query, group in groupby(writes, key=lambda write: write.query):
            self._cursor.executemany(self._sql[query], [write.params for write in group])

    def _notify_jobs_available(self) -> None:
        self._cursor.execute(self._sql["jobs_available_notify"])

    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        self._cursor.execute(self._sql["events_of_streams"], {"originator_ids": keys})
        return [
            (row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"]))
            for row in self._cursor.fetchall()
        ]

    def _remembered(self) -> dict[str, Any]:
        # A lock taken inside a savepoint is released when it is rolled back.
        return {**super()._remembered(), "_appends_serialised": self._appends_serialised}

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        try:
            with self._cursor.connection.transaction():  # nested: a SAVEPOINT
                yield
        except psycopg.Error as exc:
            raise from_postgres(exc, self._store._where) from exc

    def set_lock_timeout(self, seconds: float) -> None:
        # Round up: 0 ms would mean no timeout at all.
        millis = max(1, math.ceil(seconds * 1000))
        self._cursor.execute(SQL("SET LOCAL lock_timeout = {}").format(Literal(f"{millis}ms")))

    def _job_key(self, job_id: UUID) -> UUID:
        return job_id

    def _id_list(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def serialise_appends(self) -> None:
        """Take the events-table lock now, so reads that decide an append cannot race."""
        if not self._appends_serialised:
            self._store.recorder._lock_table(self._cursor)
            self._appends_serialised = True


class LedgerRecorder(PostgresApplicationRecorder):  # type: ignore[misc]  # untyped base
    """eventsourcing's recorder with a faster append.

    The library inserts an array of a composite type, which psycopg dumps as text row by row
    (the largest client-side cost of a claim or completion batch, measured). This inserts one
    binary array per column instead. The table lock and the NOTIFY are still the library's.
    """

    def __init__(self, datastore: PostgresDatastore, sql: dict[str, str]) -> None:
        super().__init__(datastore, events_table_name=EVENTS_TABLE)
        self._sql = sql

    def _insert_stored_events(
        self,
        curs: psycopg.Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> None:
        if not kwargs.get("locked", False):
            # (Its SET LOCAL lock_timeout would also undo a timeout the caller set.)
            self._lock_table(curs)
        self._notify_channel(curs)
        query = "events_insert_returning" if kwargs.get("returning", True) else "events_insert"
        curs.execute(
            self._sql[query],
            {
                "originator_id": [e.originator_id for e in stored_events],
                "originator_version": [e.originator_version for e in stored_events],
                "topic": [e.topic for e in stored_events],
                "state": [e.state for e in stored_events],
            },
            prepare=True,
        )


class PostgresStore(Store):
    backend = "postgres"

    def __init__(
        self,
        conninfo: str,
        codec: EventCodec | None = None,
        pool_size: int = 2,
        max_overflow: int = 8,
    ) -> None:
        super().__init__()
        if codec is not None:
            self.codec = codec
        self.conninfo = conninfo
        params = conninfo_to_dict(conninfo)
        self.dbname = str(params.get("dbname", ""))
        self.sql = load("postgres")
        connect_timeout = float(str(params.get("connect_timeout", 5)))
        where = f"PostgreSQL database {self.dbname!r} on {params.get('host') or 'localhost'}"
        self._where = where
        try:
            # One direct connection first: a refused connection or a missing database is
            # reported at once and precisely, not as a pool timeout seconds later.
            psycopg.connect(conninfo, connect_timeout=max(1, int(connect_timeout))).close()
            self.datastore = PostgresDatastore(
                dbname=self.dbname,
                host=str(params.get("host", "")),
                port=str(params.get("port", "5432")),
                user=str(params.get("user", "")),
                password=str(params.get("password", "")),
                connect_timeout=connect_timeout,
                idle_in_transaction_session_timeout=IDLE_IN_TRANSACTION_TIMEOUT_S,
                pool_size=pool_size,
                max_overflow=max_overflow,
            )
            # eventsourcing builds the pool's connection arguments from a fixed set of keys;
            # add the URL's others (sslmode, application_name, options…) so pooled
            # connections honour them too. The pool opens on first use, just below.
            extra = {k: v for k, v in params.items() if k not in _DATASTORE_KEYS}
            assert isinstance(self.datastore.pool.kwargs, dict)
            self.datastore.pool.kwargs.update(extra)
            self.recorder = LedgerRecorder(self.datastore, self.sql)
        except psycopg.Error as exc:
            raise from_postgres(exc, f"cannot use {where}") from exc
        except PersistenceError as exc:
            raise _from_persistence(exc, f"cannot use {where}") from exc

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[DictRow]]:
        try:
            with (
                self.datastore.get_connection() as conn,
                conn.transaction(),
                conn.cursor() as cursor,
            ):
                yield cursor
        except psycopg.Error as exc:
            raise from_postgres(exc, self._where) from exc
        except PersistenceError as exc:
            raise _from_persistence(exc, self._where) from exc

    @contextmanager
    def _errors_mapped(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise from_postgres(exc, self._where) from exc
        except PersistenceError as exc:
            raise _from_persistence(exc, self._where) from exc

    @contextmanager
    def _transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self._cursor() as cursor:
            yield PostgresUnitOfWork(self, cursor)

    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[DictRow]:
        with self._cursor() as cursor:
            cursor.execute(self.sql[query], params or {})
            return cursor.fetchall()

    def _id_param(self, job_ids: Sequence[UUID]) -> list[UUID]:
        return list(job_ids)

    def get_job(self, job_id: UUID) -> JobState | None:
        rows = self._read("queue_get", {"job_id": job_id})
        return decode_state(rows[0]["state"]) if rows else None

    def all_definitions(self) -> list[DefinitionState]:
        return [
            decode_definition_row(row["state"], row["stream_version"])
            for row in self._read("definitions_all")
        ]

    def count_by_status(self) -> dict[str, int]:
        return {row["status"]: row["n"] for row in self._read("queue_counts")}

    def _select_stored_events(self, originator_id: UUID) -> Sequence[StoredEvent]:
        stored: Sequence[StoredEvent] = self.recorder.select_events(originator_id)
        return stored

    def _tables_and_marker(self) -> tuple[set[str], str | None]:
        tables = {row["table_name"] for row in self._read("tables_present")}
        marker = None
        if "jl_meta" in tables:
            rows = self._read("meta_get", {"key": "schema_version"})
            marker = rows[0]["value"] if rows else None
        return tables, marker

    def _create_schema(self) -> None:
        with self._errors_mapped():
            self.recorder.create_table()
        with self._cursor() as cursor:
            for statement in schema_statements(self.backend):
                cursor.execute(statement)
            cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})

    def close(self) -> None:
        self.datastore.close()
