"""The PostgreSQL store on an application's ``psycopg.AsyncConnection``, in its transaction.

The unit of work is sync code that reads, decides and writes statement by statement; psycopg's
async connection is driven by the event loop. Rather than a second, async unit of work (every
read and fold written twice), the sync one runs in a worker thread over a
:class:`LoopCursor`: each statement is handed to the loop
(``asyncio.run_coroutine_threadsafe``) and sent on the application's connection there, the
worker thread waiting for its result while the loop serves other tasks. The application's
connection is only ever touched by its own loop, as psycopg requires.

What differs from :mod:`ledger.store.postgres.joined` (same savepoint, same
``lock_timeout`` put back, same no-retry rule): no pipeline mode and no COPY (an async
connection's pipeline and copy would need the loop's side of each; a large batch is sent as
one ``unnest`` insert instead), and savepoints are plain ``SAVEPOINT`` statements. The loop's
thread must never call this store itself: it would wait for the very loop it blocks, so that
is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from ledger.core.errors import InvalidRequestError
from ledger.store.joined import JoinedStore
from ledger.store.postgres.errors import errors_mapped, from_postgres
from ledger.store.postgres.joined import JoinedUnitOfWork, LedgerDatabase
from ledger.store.postgres.unit_of_work import PostgresUnitOfWork, StoreParts
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store

T = TypeVar("T")

_SAVEPOINT = "jl_joined"
_ITEM_SAVEPOINT = "jl_item"


class LoopCursor:
    """The sync face of an async psycopg cursor, for a thread other than its loop's: the
    few cursor methods the unit of work, the recorder and the read seam call."""

    def __init__(
        self, cursor: psycopg.AsyncCursor[DictRow], loop: asyncio.AbstractEventLoop
    ) -> None:
        self._cursor = cursor
        self._loop = loop

    def _run(self, step: Coroutine[Any, Any, T]) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            step.close()
            raise InvalidRequestError(
                "a ledger on an AsyncConnection was called from its event loop's thread: "
                "await it through AsyncLedger.using(connection)"
            )
        return asyncio.run_coroutine_threadsafe(step, self._loop).result()

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> LoopCursor:
        self._run(self._cursor.execute(query, params, prepare=prepare, binary=binary))
        return self

    def executemany(self, query: Any, params_seq: Sequence[Any]) -> None:
        self._run(self._cursor.executemany(query, params_seq))

    def fetchall(self) -> list[DictRow]:
        return self._run(self._cursor.fetchall())

    def fetchone(self) -> DictRow | None:
        return self._run(self._cursor.fetchone())

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def statusmessage(self) -> str | None:
        return self._cursor.statusmessage

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


class LoopUnitOfWork(JoinedUnitOfWork):
    """:class:`JoinedUnitOfWork` over a :class:`LoopCursor` (see the module docstring)."""

    def __init__(self, store: StoreParts, cursor: LoopCursor) -> None:
        # A LoopCursor has every method the unit of work calls on a psycopg cursor.
        super().__init__(store, cast(psycopg.Cursor[DictRow], cursor))
        self._loop_cursor = cursor

    @contextmanager
    def _write_phase(self, new_jobs: int) -> Iterator[None]:
        yield  # no pipeline and no COPY on the loop's connection

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        cursor = self._loop_cursor
        cursor.execute(f"SAVEPOINT {_ITEM_SAVEPOINT}")
        try:
            yield
        except psycopg.Error as exc:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_ITEM_SAVEPOINT}")
            raise from_postgres(exc, self._store.where) from exc
        except BaseException:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_ITEM_SAVEPOINT}")
            raise
        cursor.execute(f"RELEASE SAVEPOINT {_ITEM_SAVEPOINT}")


class PostgresLoopJoinedStore(JoinedStore):
    """A :class:`~ledger.store.postgres.store.PostgresStore` lent an ``AsyncConnection``
    of ``loop``; called from threads other than the loop's."""

    rows_may_lag = True  # in-lease reports leave the row behind (ledger.views.queue_lag)

    backend = "postgres"
    has_notifications = True

    def __init__(
        self,
        owner: Store,
        where: LedgerDatabase,
        connection: object,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__(owner)
        self.sql = owner.queries
        self.where = f"{where.where} (the application's transaction)"
        self._conn = checked_async_connection(connection, where)
        self._loop = loop
        self._ledger_checked = False

    @contextmanager
    def _cursor(self) -> Iterator[LoopCursor]:
        """A savepoint of the application's transaction."""
        with self.turn, errors_mapped(self.where):
            check_async_joinable(self._conn)
            cursor = LoopCursor(self._conn.cursor(row_factory=dict_row), self._loop)
            if not self._ledger_checked:
                # Here, not in __init__: a query needs the loop, and __init__ runs in it.
                cursor.execute(self.sql["joined_ledger_present"])
                found = cursor.fetchone()
                if not (found and found["present"]):
                    raise InvalidRequestError(
                        f"the connection's database {self._conn.info.dbname!r} holds no "
                        "ledger (no jl_meta table)"
                    )
                self._ledger_checked = True
            cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                yield cursor
            except BaseException:
                if not self._conn.closed:
                    cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
                raise
            cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    @contextmanager
    def _transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self._cursor() as cursor:
            uow = LoopUnitOfWork(self, cursor)
            yield uow
            uow.put_lock_timeout_back()

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._cursor() as cursor:
            cursor.execute(self.sql[query], params or {})
            return cursor.fetchall()

    def read_snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        # The snapshot's event reads open cursors of their own on the connection; not
        # bridged (the transaction's jobs are read through `get`; histories after commit).
        raise InvalidRequestError(
            "histories and snapshots are not read through an AsyncConnection's transaction: "
            "read them through the AsyncLedger after the commit"
        )


def checked_async_connection(
    connection: object, owner: LedgerDatabase
) -> psycopg.AsyncConnection[Any]:
    """``connection`` if a ledger may join its transaction (what can be checked without a
    query; the schema is checked at the first statement); else ``request.invalid``."""
    if not isinstance(connection, psycopg.AsyncConnection):
        raise InvalidRequestError(
            f"AsyncLedger.using takes a psycopg.AsyncConnection, not a "
            f"{type(connection).__name__} (a sync connection: Ledger.using)"
        )
    check_async_joinable(connection)
    info = connection.info
    port = str(conninfo_to_dict(owner.conninfo).get("port") or "5432")
    if info.dbname != owner.dbname or str(info.port) != port:
        raise InvalidRequestError(
            f"the connection is to database {info.dbname!r} (port {info.port}), "
            f"the ledger is in {owner.where}"
        )
    return connection


def check_async_joinable(connection: psycopg.AsyncConnection[Any]) -> None:
    """As :func:`ledger.store.postgres.joined.check_joinable`, for an async connection."""
    if connection.closed:
        raise InvalidRequestError("the connection is closed")
    status = connection.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise InvalidRequestError(
            "the connection's transaction has failed: roll it back before enqueueing"
        )
    if connection.autocommit and status == TransactionStatus.IDLE:
        raise InvalidRequestError(
            "the connection is in autocommit mode outside a transaction: a job enqueued on "
            "it would commit at once; enqueue inside `async with conn.transaction():`"
        )
