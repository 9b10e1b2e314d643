"""The PostgreSQL store's schema changes (``init``, ``migrate``, rebuilds): where the DDL runs.

:class:`SchemaChanges` is mixed into :class:`~ledger.store.postgres.store.PostgresStore`. A
schema change holds the database's migration lock
(:mod:`ledger.store.postgres.migration_lock`) on a session of its own, and the thread holding
it runs its DDL on that same session: the lock and the change it guards are one session's.
A new database is made partitioned by month (decision 31) in one transaction; a live ledger's
schema is completed under :func:`~ledger.store.postgres.guarded_ddl.guarded_ddl`, which takes
every lock first, within a bound, so the DDL cannot deadlock with the ledger's writers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import psycopg
from psycopg.rows import DictRow

from ledger.clock import SystemClock
from ledger.store.postgres import partitions, view_partitions
from ledger.store.postgres.checkout import CheckedDatastore
from ledger.store.postgres.errors import errors_mapped
from ledger.store.postgres.guarded_ddl import guarded_ddl
from ledger.store.postgres.migration_lock import migration_lock
from ledger.store.postgres.partitions import ddl_relations
from ledger.store.postgres.recorder import LedgerRecorder
from ledger.store.queries import schema_statements
from ledger.store.schema import SCHEMA_VERSION


class SchemaChanges:
    """The migration lock's session and the schema's DDL (see the module docstring)."""

    backend: ClassVar[str]
    datastore: CheckedDatastore
    recorder: LedgerRecorder
    sql: dict[str, str]
    where: str
    _migration_session: tuple[int, psycopg.Connection[DictRow]] | None = None
    """The thread holding the migration lock through :meth:`schema_lock`, and its session:
    only that thread's DDL runs on it (a connection serves one transaction at a time)."""

    @contextmanager
    def schema_lock(self, wait_s: float) -> Iterator[None]:
        """Hold the migration lock (:mod:`ledger.store.postgres.migration_lock`) on a session
        of its own, which also runs this store's schema DDL until the block ends; re-entrant
        (a migration's rebuild holds it already)."""
        if self._session_of_this_thread() is not None:
            yield
            return
        with (
            errors_mapped(f"cannot use {self.where}"),
            self.datastore.unpooled() as conn,
            migration_lock(conn, self.sql, self.where, wait_s),
        ):
            self._migration_session = (threading.get_ident(), conn)
            try:
                yield
            finally:
                self._migration_session = None

    def _session_of_this_thread(self) -> psycopg.Connection[DictRow] | None:
        held = self._migration_session
        return held[1] if held is not None and held[0] == threading.get_ident() else None

    @contextmanager
    def _schema_connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        """The migration lock's session while this thread holds it (the DDL runs where the
        lock is), else a pooled connection; autocommit either way."""
        session = self._session_of_this_thread()
        if session is not None:
            yield session
            return
        with errors_mapped(self.where), self.datastore.get_connection() as conn:
            yield conn

    @contextmanager
    def _schema_cursor(self) -> Iterator[psycopg.Cursor[DictRow]]:
        """A transaction on :meth:`_schema_connection`, committed when the block exits."""
        with (
            self._schema_connection() as conn,
            errors_mapped(self.where),
            conn.transaction(),
            conn.cursor() as cursor,
        ):
            yield cursor

    def _create_schema(self) -> None:
        with self._schema_cursor() as cursor:
            fresh = partitions.layout(cursor) is None
        with self._schema_connection() as conn, errors_mapped(self.where):
            self.recorder.create_types_on(conn)
        if fresh:
            # A new database: the events table partitioned by month of job id (decision
            # 31), everything in one transaction (nobody else uses these tables yet).
            with self._schema_cursor() as cursor:
                partitions.create_partitioned_events(cursor)
                view_partitions.create_tables(cursor)
                self._complete_schema(cursor)
        else:
            # A live ledger: take every lock first, within a bound (guarded_ddl).
            guarded_ddl(
                self._schema_cursor,
                self.sql,
                ddl_relations(),
                self._complete_schema,
                where=self.where,
            )
        with errors_mapped(self.where):
            self.datastore.register_type_adapters()

    def _complete_schema(self, cursor: psycopg.Cursor[DictRow]) -> None:
        """Every ``IF NOT EXISTS`` statement of the schema (the library's, ours, the archive's
        and the months ahead), and the schema version, on ``cursor``'s transaction (one that
        made a database made before partitions keeps its plain events table)."""
        partitioned = partitions.layout(cursor) == "partitioned"
        self.recorder.create_tables_on(cursor, partitioned=partitioned)
        for statement in view_partitions.schema_for(cursor, schema_statements(self.backend)):
            cursor.execute(statement)
        if partitioned:
            partitions.create_archive(cursor)
            partitions.ensure_months(cursor, SystemClock().now())
        cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})
