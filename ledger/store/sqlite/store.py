"""The SQLite store: the embedded default.

Writers are serialised by ``BEGIN IMMEDIATE`` (:mod:`ledger.store.sqlite.unit_of_work`);
readers use WAL snapshots (a deferred ``BEGIN``). SQLite has no notifications: other
processes' commits are seen by polling. Shadow tables: :mod:`ledger.store.sqlite.shadows`;
error mapping: :mod:`ledger.store.sqlite.errors`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from eventsourcing.persistence import PersistenceError
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from ledger.core.codec import EventCodec
from ledger.core.errors import DatabaseNotInitialisedError, DatabaseUnusableError
from ledger.store.ids import id_adapter
from ledger.store.queries import load, schema_statements
from ledger.store.reads import ReadSnapshot
from ledger.store.schema import EVENTS_TABLE, SCHEMA_VERSION
from ledger.store.sqlite.errors import errors_mapped, from_persistence, from_sqlite
from ledger.store.sqlite.session import SQLiteRunner
from ledger.store.sqlite.shadows import SQLiteShadowTables
from ledger.store.sqlite.unit_of_work import SQLiteUnitOfWork
from ledger.store.sqlite.view_tables import SQLiteViewTables
from ledger.store.store import Store

BUSY_TIMEOUT_S = 30


class SQLiteStore(Store):
    """A ledger in one SQLite file (refused if missing, unless ``create``)."""

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
        self.ids = id_adapter(self.backend)
        self.path = str(Path(path).expanduser())
        self.where = f"SQLite database {self.path}"
        parent = Path(self.path).resolve().parent
        if not parent.is_dir():
            raise DatabaseUnusableError(f"cannot open {path}: directory {parent} does not exist")
        if not create and not Path(self.path).exists():
            # Opening would create an empty file; refuse without leaving one behind.
            raise DatabaseNotInitialisedError(
                f"no database file at {path}; run `jobledger init` first"
            )
        self.sql = self.queries = load("sqlite")
        with errors_mapped(f"cannot open {self.where}"):
            self.datastore = SQLiteDatastore(
                db_name=self.path, lock_timeout=BUSY_TIMEOUT_S, pool_size=pool_size, max_overflow=10
            )
            self.recorder = SQLiteApplicationRecorder(
                self.datastore, events_table_name=EVENTS_TABLE
            )

    @contextmanager
    def _connection(self, *, writer: bool) -> Iterator[SQLiteCursor]:
        """A pooled connection's transaction (``BEGIN IMMEDIATE`` for a writer), committed
        when the block exits normally."""
        try:
            conn = self.datastore.pool.get_connection(is_writer=writer)
        except sqlite3.Error as exc:
            raise from_sqlite(exc, f"cannot open {self.where}") from exc
        except PersistenceError as exc:
            raise from_persistence(exc, self.where) from exc
        try:
            with errors_mapped(self.where):
                cursor = conn.cursor()
                cursor.execute("BEGIN IMMEDIATE" if writer else "BEGIN")
                try:
                    yield cursor
                except BaseException:
                    conn.rollback()
                    raise
                else:
                    conn.commit()
        finally:
            self.datastore.pool.put_connection(conn)

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteUnitOfWork]:
        with self._connection(writer=True) as cursor:
            yield SQLiteUnitOfWork(self, cursor)

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._connection(writer=False) as cursor:
            cursor.execute(self.sql[query], params or {})
            return list(cursor.fetchall())

    def write_operational(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with self._connection(writer=True) as cursor:
            cursor.execute(self.sql[query], params or {})
            return int(cursor.sqlite_cursor.rowcount)

    @contextmanager
    def read_snapshot(self) -> Iterator[ReadSnapshot]:
        with self._connection(writer=False) as cursor:
            yield ReadSnapshot(SQLiteRunner(cursor, self.ids), self.sql, self.ids, self.codec)

    @contextmanager
    def view_tables(self) -> Iterator[SQLiteViewTables]:
        with self._connection(writer=True) as cursor:
            shadows = SQLiteShadowTables(cursor, self.ids)
            yield SQLiteViewTables(cursor, self.sql, self.ids, self.codec, shadows)

    def _create_schema(self) -> None:
        with self._connection(writer=True) as cursor:
            for statement in self.recorder.create_table_statements:
                cursor.execute(statement)
            for statement in schema_statements(self.backend):
                cursor.execute(statement)
            cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})

    def close(self) -> None:
        self.datastore.close()
