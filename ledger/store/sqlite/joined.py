"""The SQLite store on an application's ``sqlite3.Connection``, in its transaction.

The connection must be to the ledger's own file and already inside a transaction
(``conn.in_transaction``): SQLite has no second transaction to nest, and one begun here would
be committed by nobody. Each unit of work (and read) is a ``SAVEPOINT`` of it, rolled back
alone on error.

The owned unit of work starts with ``BEGIN IMMEDIATE`` so that its reads and writes happen
under the database's one write lock. A joined transaction may have begun deferred (Python's
default), so a unit of work here first takes the write lock with a write that changes nothing:
if another connection (a worker) committed since the transaction's snapshot, SQLite refuses
the upgrade at once (``SQLITE_BUSY``, no deadlock and no wait), raised as ``store.busy``;
start the application's transaction with ``BEGIN IMMEDIATE`` to avoid that. Once held, the
write lock stays with the application's transaction until it ends: workers' writes wait for
its commit (up to their busy timeout), so keep it short. No notification exists to send:
workers see the commit at their next poll.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from eventsourcing.sqlite import SQLiteCursor

from ledger.core.errors import InvalidRequestError
from ledger.store.joined import JoinedStore
from ledger.store.reads import ReadSnapshot
from ledger.store.sqlite.errors import errors_mapped
from ledger.store.sqlite.session import SQLiteRunner
from ledger.store.sqlite.unit_of_work import SQLiteUnitOfWork
from ledger.store.store import Store

_SAVEPOINT = "jl_joined"


class SQLiteJoinedStore(JoinedStore):
    """A :class:`~ledger.store.sqlite.store.SQLiteStore` (``owner``, its file at ``path``,
    named ``where`` in messages) lent ``connection``."""

    backend = "sqlite"

    def __init__(self, owner: Store, path: str, where: str, connection: object) -> None:
        super().__init__(owner)
        self.sql = owner.queries
        self.path = path
        self.where = f"{where} (the application's transaction)"
        self._conn = checked_connection(connection, path)

    @contextmanager
    def _cursor(self, *, writer: bool) -> Iterator[SQLiteCursor]:
        """A savepoint of the application's transaction (``writer``: under the write lock)."""
        conn = self._conn
        with self.turn, errors_mapped(self.where):
            check_joinable(conn)
            raw = conn.cursor()
            raw.row_factory = sqlite3.Row  # the app's own row factory is left alone
            cursor = SQLiteCursor(raw)
            try:
                if writer:
                    cursor.execute(self.sql["joined_write_lock"])  # as BEGIN IMMEDIATE would
                cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
                try:
                    yield cursor
                except BaseException:
                    cursor.execute(f"ROLLBACK TO {_SAVEPOINT}")
                    cursor.execute(f"RELEASE {_SAVEPOINT}")
                    raise
                cursor.execute(f"RELEASE {_SAVEPOINT}")
            finally:
                raw.close()

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteUnitOfWork]:
        with self._cursor(writer=True) as cursor:
            yield SQLiteUnitOfWork(self, cursor)

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._cursor(writer=False) as cursor:
            cursor.execute(self.sql[query], params or {})
            return list(cursor.fetchall())

    @contextmanager
    def read_snapshot(self) -> Iterator[ReadSnapshot]:
        with self._cursor(writer=False) as cursor:
            yield ReadSnapshot(SQLiteRunner(cursor, self.ids), self.sql, self.ids, self.codec)


def checked_connection(connection: object, path: str) -> sqlite3.Connection:
    """``connection`` if a ledger may join its transaction; else why not (``request.invalid``)."""
    if not isinstance(connection, sqlite3.Connection):
        raise InvalidRequestError(
            f"a SQLite ledger joins a sqlite3.Connection's transaction, "
            f"not a {type(connection).__name__}"
        )
    try:
        databases = connection.execute("PRAGMA database_list").fetchall()
    except sqlite3.ProgrammingError as exc:
        raise _unusable() from exc
    main = next((row[2] for row in databases if row[1] == "main"), "")
    if not main or not os.path.exists(main) or not os.path.samefile(main, path):
        raise InvalidRequestError(
            f"the connection is to {main or 'an in-memory database'!r}, the ledger is {path!r}"
        )
    check_joinable(connection)
    return connection


def check_joinable(connection: sqlite3.Connection) -> None:
    """Raise ``request.invalid`` unless ``connection`` is open and inside a transaction."""
    try:
        in_transaction = connection.in_transaction
    except sqlite3.ProgrammingError as exc:
        raise _unusable() from exc
    if not in_transaction:
        raise InvalidRequestError(
            "the connection has no open transaction: begin one first "
            '(conn.execute("BEGIN IMMEDIATE")), and commit or roll it back after'
        )


def _unusable() -> InvalidRequestError:
    # sqlite3 raises one ProgrammingError class for both, told apart only by its text.
    return InvalidRequestError(
        "the connection is closed, or was opened in another thread (a sqlite3 connection "
        "used from other threads needs check_same_thread=False)"
    )
