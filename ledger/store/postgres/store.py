"""The PostgreSQL store: a pooled eventsourcing datastore, its recorder and the named queries.

Units of work: :mod:`ledger.store.postgres.unit_of_work`; the read seam's statements:
:mod:`ledger.store.postgres.session`; shadow tables: :mod:`ledger.store.postgres.shadows`;
``LISTEN``: :mod:`ledger.store.postgres.listener`; error mapping:
:mod:`ledger.store.postgres.errors`. Two parts of the store are mixins of their own: its
schema changes, on the migration lock's session (:mod:`ledger.store.postgres.schema_changes`),
and retention's detached months (:mod:`ledger.store.postgres.month_archiving`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow

from ledger.core.codec import EventCodec
from ledger.core.errors import DatabaseUnusableError
from ledger.store.frozen_writers import FrozenWriter
from ledger.store.ids import id_adapter
from ledger.store.notifications import Topic
from ledger.store.postgres import unread_appends
from ledger.store.postgres.async_joined import PostgresLoopJoinedStore
from ledger.store.postgres.checkout import CheckedDatastore
from ledger.store.postgres.dead_peers import with_dead_peer_bounds
from ledger.store.postgres.errors import connection_lost, errors_mapped
from ledger.store.postgres.frozen_writers import FrozenWriterEnder, process_application_name
from ledger.store.postgres.joined import LedgerDatabase, PostgresJoinedStore
from ledger.store.postgres.listener import TaskListening, ThreadListening
from ledger.store.postgres.month_archiving import MonthArchiving
from ledger.store.postgres.queue_months import QueueMonths
from ledger.store.postgres.recorder import LedgerRecorder
from ledger.store.postgres.schema_changes import SchemaChanges
from ledger.store.postgres.session import PostgresRunner
from ledger.store.postgres.shadows import PostgresShadowTables
from ledger.store.postgres.unit_of_work import PostgresUnitOfWork
from ledger.store.postgres.view_tables import PostgresViewTables
from ledger.store.queries import load
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from ledger.core.events import JobEvent
    from ledger.core.state import JobState

IDLE_IN_TRANSACTION_TIMEOUT_S = 60.0
"""How long a session may sit idle inside a transaction before the server ends it (and its
locks): eventsourcing's 5 s would kill long rebuild transactions; a worker passes less."""

log = logging.getLogger(__name__)

# Never pass eventsourcing's ``pool_open_timeout``: with it, every connection checkout calls
# psycopg_pool's ``wait()``, which blocks until the pool is *full* — until every other
# thread has returned its connection — serialising all database work (and tripping an
# assertion when two threads wait at once). The connect timeout still bounds checkouts.

_DATASTORE_KEYS = {"dbname", "host", "port", "user", "password", "connect_timeout"}


class PostgresStore(SchemaChanges, MonthArchiving, Store):
    """A ledger in one PostgreSQL database (``conninfo``: a URL or libpq string)."""

    rows_may_lag = True  # in-lease reports leave the row behind (ledger.views.queue_lag)

    backend = "postgres"
    has_notifications = True
    ends_frozen_writers = True

    def __init__(
        self,
        conninfo: str,
        codec: EventCodec | None = None,
        pool_size: int = 2,
        max_overflow: int = 8,
        idle_in_transaction_s: float | None = None,
    ) -> None:
        super().__init__()
        if codec is not None:
            self.codec = codec
        self.ids = id_adapter(self.backend)
        # Every connection below (pooled, own, LISTEN) is built from these parameters.
        conninfo = self.conninfo = with_dead_peer_bounds(conninfo)
        params = conninfo_to_dict(conninfo)
        self.dbname = str(params.get("dbname", ""))
        self.sql = self.queries = load("postgres")
        connect_timeout = float(str(params.get("connect_timeout", 5)))
        self.where = f"PostgreSQL database {self.dbname!r} on {params.get('host') or 'localhost'}"
        if idle_in_transaction_s is None:
            idle_in_transaction_s = IDLE_IN_TRANSACTION_TIMEOUT_S
        self.idle_in_transaction_s = idle_in_transaction_s
        # Half: a frozen process's sessions are ended together before the server ends the
        # first alone. 0 turns the server's timeout off: then none is too silent either.
        self.frozen_writer_bound_s = self.idle_in_transaction_s / 2 or None
        self._frozen_writers = FrozenWriterEnder(self._cursor, self.sql, self.where)
        with errors_mapped(f"cannot use {self.where}"):
            # One direct connection first: a refused connection or a missing database is
            # reported at once and precisely, not as a pool timeout seconds later.
            psycopg.connect(conninfo, connect_timeout=max(1, int(connect_timeout))).close()
            self.datastore = CheckedDatastore(
                dbname=self.dbname,
                host=str(params.get("host", "")),
                port=str(params.get("port", "5432")),
                user=str(params.get("user", "")),
                password=str(params.get("password", "")),
                connect_timeout=connect_timeout,
                idle_in_transaction_session_timeout=self.idle_in_transaction_s,
                pool_size=pool_size,
                max_overflow=max_overflow,
            )
            # eventsourcing builds the pool's connection arguments from a fixed set of keys;
            # add the URL's others (sslmode, application_name, options…) so pooled
            # connections honour them too. The pool opens on first use.
            extra = {k: v for k, v in params.items() if k not in _DATASTORE_KEYS}
            # Our sessions are named after this process, unless the URL names them: the
            # watchdog ends a frozen process's stuck sessions together by that name.
            extra.setdefault("application_name", process_application_name())
            assert isinstance(self.datastore.pool.kwargs, dict)
            self.datastore.pool.kwargs.update(extra)
            self.recorder = LedgerRecorder(self.datastore, self.sql)
        self.queue_months = QueueMonths(
            lambda: [str(row["name"]) for row in self.read("queue_month_partitions")]
        )

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[DictRow]]:
        """A pooled connection's transaction, committed when the block exits normally.

        The connection answered a ping at checkout (:class:`CheckedDatastore`)."""
        with (
            errors_mapped(self.where),
            self.datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as cursor,
        ):
            yield cursor

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    @contextmanager
    def _transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self._cursor() as cursor:
            yield PostgresUnitOfWork(self, cursor)

    def append_if_unchanged(
        self, changes: Sequence[tuple[JobState, Sequence[JobEvent]]]
    ) -> dict[UUID, JobState]:
        """One statement, no read first, when the fold touches only the jobs' rows
        (:mod:`ledger.store.postgres.unread_appends`); else the unit of work's way."""
        if not changes or self.read_only:
            return super().append_if_unchanged(changes)
        fold = unread_appends.rows_only_fold(changes, self.policies)
        if fold is None:
            return super().append_if_unchanged(changes)
        known = {state.job_id: state for state, _ in changes}
        parameters = unread_appends.statement_parameters(
            fold, known, self.codec, self.ids, self.recorder.channel_name
        )
        sql = self.sql["jobs_append_if_unchanged"]
        month = self.queue_months.partition_of(known)
        with errors_mapped(self.where), self.datastore.get_connection() as conn:
            assert conn.autocommit, "the statement is its own transaction"
            with conn.cursor() as cursor:
                try:
                    written = self._run_unread(cursor, sql, month, parameters)
                except psycopg.errors.UniqueViolation:
                    # An event committed after the statement's snapshot took a version it
                    # meant to write: it failed whole, nothing was written; decided again.
                    written = set()
        return {job_id: state for job_id, state in fold.states.items() if job_id in written}

    def _run_unread(
        self,
        cursor: psycopg.Cursor[DictRow],
        sql: str,
        month: str | None,
        parameters: dict[str, Any],
    ) -> set[UUID]:
        """``jobs_append_if_unchanged`` on the month partition ``month`` names, if any, else
        (or if it is gone) on the parent: the job ids written."""
        if month is not None:
            try:
                return unread_appends.run(cursor, unread_appends.in_month(sql, month), parameters)
            except psycopg.errors.UndefinedTable:
                # Archived since it was looked up; nothing was written (the one statement
                # failed whole): on the parent instead.
                self.queue_months.forget(month)
        return unread_appends.run(cursor, sql, parameters)

    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """One named read; run once more on a fresh connection if its connection broke under
        it (safe: a read changes nothing). Writes are never re-run here: a commit whose
        acknowledgement was lost may have landed, and only the caller knows whether running
        its unit of work again is harmless."""
        try:
            return self._read_once(query, params)
        except DatabaseUnusableError as exc:
            if not connection_lost(exc):
                raise
            log.info("read %s lost its connection (%s); running it once more", query, exc)
            return self._read_once(query, params)

    def _read_once(self, query: str, params: Mapping[str, Any] | None) -> list[Any]:
        with self._cursor() as cursor:
            cursor.execute(self.sql[query], params or {})
            return cursor.fetchall()

    def write_operational(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with self._cursor() as cursor:
            cursor.execute(self.sql[query], params or {})
            return int(cursor.rowcount)

    @contextmanager
    def read_snapshot(self) -> Iterator[ReadSnapshot]:
        with self._cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield ReadSnapshot(
                PostgresRunner(cursor), self.sql, self.ids, self.codec, rows_may_lag=True
            )

    @contextmanager
    def view_tables(self) -> Iterator[PostgresViewTables]:
        with self._cursor() as cursor:
            shadows = PostgresShadowTables(cursor, self.recorder)
            yield PostgresViewTables(cursor, self.sql, self.ids, self.codec, shadows)

    def end_frozen_writers(
        self, silent_s: float | None = None, stalled_s: float | None = None
    ) -> list[FrozenWriter]:
        """See :mod:`ledger.store.postgres.frozen_writers` for the criteria and why they
        are safe; the default bound is half this store's idle-in-transaction timeout, and
        ``stalled_s`` twice the bound (that timeout)."""
        bound = self.frozen_writer_bound_s if silent_s is None else silent_s
        if bound is None:
            return []
        return self._frozen_writers.end(bound, 2 * bound if stalled_s is None else stalled_s)

    def joining(self, connection: object, *, loop: AbstractEventLoop | None = None) -> Store:
        if self.read_only:
            return super().joining(connection)
        where = LedgerDatabase(self.where, self.dbname, self.conninfo)
        if isinstance(connection, psycopg.AsyncConnection) and loop is not None:
            return PostgresLoopJoinedStore(self, where, connection, loop)
        return PostgresJoinedStore(self, where, connection)

    def listen(self, topic: Topic, on_notify: Callable[[], None]) -> ThreadListening:
        return ThreadListening(self.conninfo, topic, on_notify)

    async def listen_async(
        self,
        topic: Topic,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> TaskListening:
        return await TaskListening(self.conninfo, topic, on_notify, on_payload).started()

    def close(self) -> None:
        self.datastore.close()
