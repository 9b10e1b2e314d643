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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.conninfo import conninfo_to_dict
from psycopg.copy import QueuedLibpqWriter
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Composable, Identifier, Literal, Placeholder

from ledger.core.codec import EventCodec
from ledger.core.errors import LedgerError, StoreError
from ledger.core.state import DefinitionState
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
from ledger.store.views import (
    StoredRow,
    ViewTables,
    index_names,
    projection_schema,
    shadow,
    to_shadow,
)
from projections.rules.catalog import AUDIT, Projection
from projections.rules.queue import decode_state
from projections.rules.replay import Key, Row
from projections.rules.writes import ViewWrite

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


# Array casts for the column types the views use (spliced into SQL, so a fixed set).
_ARRAY_TYPES: dict[str, Composable] = {
    name: SQL(name + "[]")  # from this fixed set only
    for name in ("uuid", "text", "integer", "bigint", "bytea", "boolean")
}


def _values(columns: Sequence[str]) -> Callable[[Row], Sequence[Any]]:
    """A row's values in ``columns`` order (itemgetter: a C call per row)."""
    if len(columns) == 1:
        return lambda row: (row[columns[0]],)
    return itemgetter(*columns)


INDEX_BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` for a shadow's index builds: a million-row sort fits in memory."""


def _checked_type(name: str) -> str:
    """A column type the shadow load knows how to send (the fixed set of :data:`_ARRAY_TYPES`)."""
    if name not in _ARRAY_TYPES:
        raise ValueError(f"a view column of unexpected type {name!r}")
    return name


class PostgresViewTables(ViewTables):
    """Rebuild and verify on PostgreSQL: reads run in one ``REPEATABLE READ READ ONLY``
    snapshot; writes run at READ COMMITTED, and the swap locks the events table, then the
    live tables (see :meth:`lock_for_swap`)."""

    concurrent_writers = True

    def __init__(self, store: PostgresStore, cursor: psycopg.Cursor[DictRow]) -> None:
        super().__init__(store.codec)
        self._store = store
        self._cursor = cursor
        self._sql = store.sql

    def head(self) -> int:
        self._cursor.execute(self._sql["events_head"])
        row = self._cursor.fetchone()
        assert row is not None
        return int(row["head"])

    def _events_after(self, position: int, limit: int) -> list[StoredRow]:
        # Binary results: bytea arrives as raw bytes instead of hex text to parse, uuid as 16
        # bytes; tuple rows, as StoredRow wants them, skip building a dict per event.
        with self._cursor.connection.cursor(row_factory=tuple_row) as cursor:
            cursor.execute(
                self._sql["events_after"],
                {"position": position, "limit": limit},
                prepare=True,
                binary=True,
            )
            return cursor.fetchall()

    def live_rows(self, projection: Projection) -> Iterator[Row]:
        query = SQL("SELECT {} FROM {}").format(
            SQL(", ").join(Identifier(c) for c in projection.columns), Identifier(projection.table)
        )
        # A server-side cursor: the rows stream in batches instead of all at once.
        connection = self._cursor.connection
        columns = projection.columns
        with connection.cursor(name=f"jl_rows_{projection.name}", row_factory=tuple_row) as rows:
            rows.itersize = 10_000
            # Binary results: bytea arrives as bytes, uuid without text to parse.
            rows.execute(query, binary=True)
            while batch := rows.fetchmany(10_000):
                for row in batch:
                    yield dict(zip(columns, row, strict=True))

    def meta(self) -> dict[str, str]:
        self._cursor.execute(self._sql["meta_all"])
        return {row["key"]: row["value"] for row in self._cursor.fetchall()}

    def set_meta(self, key: str, value: str) -> None:
        self._cursor.execute(self._sql["meta_set"], {"key": key, "value": value})

    def fetch(self, query: str, params: dict[str, Any] | None = None) -> list[Any]:
        return self.fetch_composed(self._sql[query], params or {})

    def fetch_composed(self, sql: str, params: dict[str, Any]) -> list[Any]:
        self._cursor.execute(sql.encode(), params)
        return self._cursor.fetchall() if self._cursor.description else []

    def insert_audit(self, rows: list[Row]) -> None:
        # Binary COPY, as a shadow load (a third of the runner's time went into building
        # arrays for INSERT … unnest). COPY cannot skip a row that is already there, so
        # rows at or below the highest stored position are left out first: rows are only
        # ever written as a prefix of the positions (runner batches in order, or a rebuild
        # to the head), so those are re-deliveries — e.g. after jl_tracking was set back.
        if not rows:
            return
        self._cursor.execute(self._sql["audit_top"])
        top = self._cursor.fetchone()
        highest = int(top["position"]) if top and top["position"] is not None else 0
        self._copy_rows(AUDIT.table, AUDIT.columns, [r for r in rows if r["position"] > highest])

    def job_origins(self, job_ids: Sequence[Any]) -> dict[Any, tuple[str, str | None]]:
        if not job_ids:
            return {}
        rows = self.fetch("queue_origins", {"job_ids": list(job_ids)})
        return {row["job_id"]: (row["job_type"], row["org"]) for row in rows}

    def create_shadow(self, projection: Projection) -> None:
        self.drop_shadow(projection)
        table, _ = projection_schema("postgres", projection)
        self._cursor.execute(to_shadow(table, projection).encode())

    def _bulk(self) -> None:
        """Settings for a transaction that only writes a shadow table.

        ``synchronous_commit = off``: a crash may lose the last such commits, but a shadow is
        derived data that no reader sees before the swap, and a rebuild that did not finish
        starts again from a fresh shadow (the swap's own commit stays synchronous)."""
        self._cursor.execute("SET LOCAL synchronous_commit = off")

    def index_shadow(self, projection: Projection) -> None:
        """Build the shadow's indexes (under shadow names) after the load, and analyse it,
        outside the swap's locks; with room to sort in memory."""
        self._bulk()
        self._cursor.execute(f"SET LOCAL maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
        _, indexes = projection_schema("postgres", projection)
        for statement in indexes:
            self._cursor.execute(to_shadow(statement, projection).encode())
        self._cursor.execute(SQL("ANALYZE {}").format(Identifier(shadow(projection.table))))

    def _column_types(self, table: str) -> dict[str, str]:
        # Asked of the shadow, not the live table: a new version may add a column.
        self._cursor.execute(
            "SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            (table,),
        )
        return {row["attname"]: _checked_type(row["type"]) for row in self._cursor.fetchall()}

    def insert_shadow(self, projection: Projection, rows: list[Row]) -> None:
        if rows:
            self._bulk()
            self._copy_rows(shadow(projection.table), projection.columns, rows)

    def _copy_rows(self, table: str, columns: Sequence[str], rows: list[Row]) -> None:
        # Binary COPY: no SQL to parse, no arrays to build and unpack, values sent as the
        # server stores them.
        if not rows:
            return
        types = self._column_types(table)
        query = SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            Identifier(table), SQL(", ").join(Identifier(c) for c in columns)
        )
        values = _values(columns)
        # The queued writer sends on its own thread while this one formats the next rows.
        with self._cursor.copy(query, writer=QueuedLibpqWriter(self._cursor)) as copy:
            copy.set_types([types[c] for c in columns])
            write_row = copy.write_row
            for row in rows:
                write_row(values(row))

    def delete_shadow(self, projection: Projection, keys: list[Key]) -> None:
        if not keys:
            return
        types = self._column_types(shadow(projection.table))
        query = SQL("DELETE FROM {} AS t USING unnest({}) AS d({}) WHERE {}").format(
            Identifier(shadow(projection.table)),
            SQL(", ").join(
                SQL("{}::{}").format(Placeholder(c, format="b"), _ARRAY_TYPES[types[c]])
                for c in projection.key
            ),
            SQL(", ").join(Identifier(c) for c in projection.key),
            SQL(" AND ").join(SQL("t.{0} = d.{0}").format(Identifier(c)) for c in projection.key),
        )
        self._cursor.execute(
            query, {c: [key[i] for key in keys] for i, c in enumerate(projection.key)}
        )

    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """The events-table lock first (appenders wait), then ``ACCESS EXCLUSIVE`` on the live
        tables within ``timeout_s``.

        A writer that locked queue rows before asking for the events lock now waits on us
        while we wait on it: a deadlock. Keeping ``timeout_s`` below ``deadlock_timeout``
        (1 s) makes the rebuild, not the writer, give up (``store.busy``); it retries."""
        self._store.recorder._lock_table(self._cursor)
        millis = max(1, math.ceil(timeout_s * 1000))
        self._cursor.execute(SQL("SET LOCAL lock_timeout = {}").format(Literal(f"{millis}ms")))
        names = [p.table for p in projections]
        if any(p.mode == "tracked" for p in projections):
            # A tracked runner locks its jl_tracking row before writing its table; take the
            # whole table here too, so the two cannot deadlock (the runner waits or we retry).
            names.append("jl_tracking")
        tables = SQL(", ").join(Identifier(name) for name in names)
        self._cursor.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tables))
        self._cursor.execute("SET LOCAL lock_timeout = 0")

    def swap(self, projection: Projection) -> None:
        live = projection.table
        old = live + "__old"
        execute = self._cursor.execute
        execute(SQL("ALTER TABLE {} RENAME TO {}").format(Identifier(live), Identifier(old)))
        execute(
            SQL("ALTER TABLE {} RENAME TO {}").format(Identifier(shadow(live)), Identifier(live))
        )
        execute(SQL("DROP TABLE {}").format(Identifier(old)))
        _, indexes = projection_schema("postgres", projection)
        rename = SQL("ALTER INDEX {} RENAME TO {}")
        execute(rename.format(Identifier(f"{shadow(live)}_pkey"), Identifier(f"{live}_pkey")))
        for name in index_names(indexes):
            execute(rename.format(Identifier(shadow(name)), Identifier(name)))

    def drop_shadow(self, projection: Projection) -> None:
        self._cursor.execute(
            SQL("DROP TABLE IF EXISTS {}").format(Identifier(shadow(projection.table)))
        )


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

    @contextmanager
    def view_tables(self, *, write: bool) -> Iterator[PostgresViewTables]:
        with self._cursor() as cursor:
            if not write:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield PostgresViewTables(self, cursor)

    def _create_schema(self) -> None:
        with self._errors_mapped():
            self.recorder.create_table()
        with self._cursor() as cursor:
            for statement in schema_statements(self.backend):
                cursor.execute(statement)
            cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})

    def close(self) -> None:
        self.datastore.close()
