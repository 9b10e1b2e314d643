"""The PostgreSQL store on an application's ``psycopg.Connection``, in its transaction.

Each unit of work (and read) is a ``SAVEPOINT`` of the application's transaction
(``conn.transaction()`` nested): an error inside rolls back only the ledger's part and is
raised, the application's transaction stays usable. What the owned unit of work does that
assumes it owns the transaction, and what it does here:

- ``SET LOCAL lock_timeout`` (the events-table lock, a claim's bound) would outlive the
  savepoint and bound the application's own later statements: the setting is read before
  and put back (``set_config(..., true)``) before the savepoint is released.
- ``NOTIFY jl_events`` / ``jl_jobs_available`` are queued by PostgreSQL until the
  transaction commits and dropped if it rolls back: workers wake for committed jobs only.
- ``LOCK TABLE jl_events`` (enqueue with an idempotency key, a subject, or auto-define; a
  batch large enough for COPY) is held until the *application* commits: every other append
  waits as long. Keep such transactions short (docs/transactions.md).
- No retry: a serialization failure or deadlock (``store.concurrency_conflict``) or a lock timeout
  (``store.busy``) is raised; only the application can run its transaction again.
- Pipeline mode runs on the application's connection inside the savepoint, as on a pooled
  one (its results are all read before the savepoint ends).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NamedTuple

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from ledger.core.errors import InvalidRequestError
from ledger.store.joined import JoinedStore
from ledger.store.postgres.errors import errors_mapped
from ledger.store.postgres.session import PostgresRunner
from ledger.store.postgres.unit_of_work import PostgresUnitOfWork
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.store.unit_of_work import EventRow


class PostgresJoinedStore(JoinedStore):
    """A :class:`~ledger.store.postgres.store.PostgresStore` (``owner``, ``where``) lent
    ``connection``."""

    rows_may_lag = True  # in-lease reports leave the row behind (ledger.views.queue_lag)

    backend = "postgres"
    has_notifications = True

    def __init__(self, owner: Store, where: LedgerDatabase, connection: object) -> None:
        super().__init__(owner)
        self.sql = owner.queries
        self.where = f"{where.where} (the application's transaction)"
        self._conn = checked_connection(connection, where, self.sql)

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[DictRow]]:
        """A savepoint of the application's transaction."""
        conn = self._conn
        with self.turn:
            check_joinable(conn)  # in turn: another thread's statement makes it "busy"
            with (
                errors_mapped(self.where),
                conn.transaction(),
                conn.cursor(row_factory=dict_row) as cursor,
            ):
                yield cursor

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    @contextmanager
    def _transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self._cursor() as cursor:
            uow = JoinedUnitOfWork(self, cursor)
            yield uow
            uow.put_lock_timeout_back()

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._cursor() as cursor:
            cursor.execute(self.sql[query], params or {})
            return cursor.fetchall()

    @contextmanager
    def read_snapshot(self) -> Iterator[ReadSnapshot]:
        # The application's transaction is the snapshot (its isolation is the app's choice).
        with self._cursor() as cursor:
            yield ReadSnapshot(
                PostgresRunner(cursor), self.sql, self.ids, self.codec, rows_may_lag=True
            )


class JoinedUnitOfWork(PostgresUnitOfWork):
    """A unit of work in a savepoint of the application's transaction: before its first
    ``SET LOCAL lock_timeout`` it reads the application's, to put it back at the end (a
    unit of work that takes no lock, a plain enqueue, costs no round trip for it)."""

    _saved_lock_timeout: DictRow | None = None

    def _keep_lock_timeout(self) -> None:
        if self._saved_lock_timeout is None:
            self._cursor.execute(self._sql["joined_lock_timeout_get"])
            self._saved_lock_timeout = self._cursor.fetchone()

    def serialise_appends(self) -> None:
        if not self._appends_serialised:
            self._keep_lock_timeout()
        super().serialise_appends()

    def set_lock_timeout(self, seconds: float) -> None:
        self._keep_lock_timeout()
        super().set_lock_timeout(seconds)

    def _insert_stored_events(
        self, stored: list[EventRow], *, positions_needed: bool
    ) -> Sequence[int] | None:
        if self._bulk and not self._appends_serialised:
            self._keep_lock_timeout()  # the COPY path takes the table lock
        return super()._insert_stored_events(stored, positions_needed=positions_needed)

    def put_lock_timeout_back(self) -> None:
        if self._saved_lock_timeout is not None:
            self._cursor.execute(self._sql["joined_lock_timeout_put"], self._saved_lock_timeout)


class LedgerDatabase(NamedTuple):
    """Which database a ledger is in, to check an application's connection against."""

    where: str
    """How the store names it in messages."""
    dbname: str
    conninfo: str


def checked_connection(
    connection: object, owner: LedgerDatabase, sql: Mapping[str, str]
) -> psycopg.Connection[Any]:
    """``connection`` if a ledger may join its transaction; else why not, as a
    ``request.invalid``. An idle connection with autocommit off starts its transaction here
    (psycopg's implicit ``BEGIN``): the application then commits or rolls it back."""
    if isinstance(connection, psycopg.AsyncConnection):
        raise InvalidRequestError(
            "a psycopg AsyncConnection cannot be used by the sync Ledger: "
            "use AsyncLedger.using(connection)"
        )
    if not isinstance(connection, psycopg.Connection):
        raise InvalidRequestError(
            f"a PostgreSQL ledger joins a psycopg.Connection's transaction, "
            f"not a {type(connection).__name__}"
        )
    check_joinable(connection)
    info = connection.info
    port = str(conninfo_to_dict(owner.conninfo).get("port") or "5432")
    if info.dbname != owner.dbname or str(info.port) != port:
        raise InvalidRequestError(
            f"the connection is to database {info.dbname!r} (port {info.port}), "
            f"the ledger is in {owner.where}"
        )
    with errors_mapped(owner.where), connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(sql["joined_ledger_present"])
        found = cursor.fetchone()
    if not (found and found["present"]):
        raise InvalidRequestError(
            f"the connection's database {info.dbname!r} holds no ledger (no jl_meta table)"
        )
    return connection


def check_joinable(connection: psycopg.Connection[Any]) -> None:
    """Raise ``request.invalid`` unless ``connection`` is open with a transaction to join
    (or, with autocommit off, about to start one)."""
    if connection.closed:
        raise InvalidRequestError("the connection is closed")
    status = connection.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise InvalidRequestError(
            "the connection's transaction has failed: roll it back before enqueueing"
        )
    if status == TransactionStatus.ACTIVE:
        raise InvalidRequestError("the connection is busy running a statement")
    if connection.autocommit and status == TransactionStatus.IDLE:
        raise InvalidRequestError(
            "the connection is in autocommit mode outside a transaction: a job enqueued on "
            "it would commit at once; enqueue inside `with conn.transaction():`"
        )
