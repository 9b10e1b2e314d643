"""The PostgreSQL store: a pooled eventsourcing datastore, its recorder and the named queries.

Units of work: :mod:`ledger.store.postgres.unit_of_work`; the read seam's statements:
:mod:`ledger.store.postgres.session`; shadow tables: :mod:`ledger.store.postgres.shadows`;
``LISTEN``: :mod:`ledger.store.postgres.listener`; error mapping:
:mod:`ledger.store.postgres.errors`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from ledger.clock import SystemClock
from ledger.core.codec import EventCodec
from ledger.core.errors import DatabaseUnusableError
from ledger.core.retention import FINISHED_STATUSES, RETENTION_STREAM_ID
from ledger.store.archive import ArchiveMove, ArchiveUnit, archive_unsupported
from ledger.store.frozen_writers import FrozenWriter
from ledger.store.ids import id_adapter
from ledger.store.notifications import Topic
from ledger.store.postgres import partitions, view_partitions
from ledger.store.postgres.async_joined import PostgresLoopJoinedStore
from ledger.store.postgres.checkout import CheckedDatastore
from ledger.store.postgres.dead_peers import with_dead_peer_bounds
from ledger.store.postgres.errors import connection_lost, errors_mapped
from ledger.store.postgres.frozen_writers import FrozenWriterEnder, process_application_name
from ledger.store.postgres.guarded_ddl import guarded_ddl
from ledger.store.postgres.joined import LedgerDatabase, PostgresJoinedStore
from ledger.store.postgres.listener import TaskListening, ThreadListening
from ledger.store.postgres.migration_lock import migration_lock
from ledger.store.postgres.partitions import ddl_relations
from ledger.store.postgres.recorder import LedgerRecorder
from ledger.store.postgres.session import PostgresRunner
from ledger.store.postgres.shadows import PostgresShadowTables
from ledger.store.postgres.unit_of_work import PostgresUnitOfWork
from ledger.store.postgres.view_tables import PostgresViewTables
from ledger.store.queries import load, schema_statements
from ledger.store.reads import ReadSnapshot
from ledger.store.schema import EVENTS_TABLE, SCHEMA_VERSION
from ledger.store.store import ArchivedEvent, Store
from ledger.views.kinds import RETENTION

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

IDLE_IN_TRANSACTION_TIMEOUT_S = 60.0
"""How long a session may sit idle inside a transaction before the server ends it (and its
locks): eventsourcing's 5 s would kill long rebuild transactions; a worker passes less."""

log = logging.getLogger(__name__)

# Never pass eventsourcing's ``pool_open_timeout``: with it, every connection checkout calls
# psycopg_pool's ``wait()``, which blocks until the pool is *full* — until every other
# thread has returned its connection — serialising all database work (and tripping an
# assertion when two threads wait at once). The connect timeout still bounds checkouts.

_DATASTORE_KEYS = {"dbname", "host", "port", "user", "password", "connect_timeout"}


class PostgresStore(Store):
    """A ledger in one PostgreSQL database (``conninfo``: a URL or libpq string)."""

    backend = "postgres"
    has_notifications = True
    ends_frozen_writers = True
    _migration_session: tuple[int, psycopg.Connection[DictRow]] | None = None
    """The thread holding the migration lock through :meth:`schema_lock`, and its session:
    only that thread's DDL runs on it (a connection serves one transaction at a time)."""

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
            yield ReadSnapshot(PostgresRunner(cursor), self.sql, self.ids, self.codec)

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

    # --- schema changes (init, migrate, rebuilds) ---------------------------------------------

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

    # --- retention (decision 31: detached month partitions) ----------------------------------

    @cached_property
    def partitioned(self) -> bool:
        """Whether the events table is partitioned (a database made since partitions)."""
        with self._cursor() as cursor:
            return partitions.layout(cursor) == "partitioned"

    @property
    def archive_where(self) -> str | None:
        return partitions.ARCHIVE_SCHEMA if self.partitioned else None

    def move_to_archive(
        self,
        job_versions: Mapping[UUID, int],
        event_for: ArchivedEvent,
        *,
        now: datetime | None = None,
    ) -> ArchiveMove:
        """Detach each past month partition whose every stream is one of these jobs, still at
        its version and finished, into ``jl_archive`` with its jobs' view rows, one
        ``jobs_archived`` per month in the transaction that detaches it. The events-table
        lock is held throughout: no event lands meanwhile, so what was checked is what moves.
        A month holding any other job (live, too young, a workflow step) stays whole."""
        if not self.partitioned:
            raise archive_unsupported(self.backend)
        now = now or SystemClock().now()
        now_ms = int(now.timestamp() * 1000)
        wanted = {str(job_id): version for job_id, version in job_versions.items()}
        moved: list[UUID] = []
        rows: dict[str, int] = {}
        self.ensure_partitions(now)
        for month in self._past_months(now_ms):
            # The month's scan runs before the lock (a month of events takes a while); under
            # the lock only its row count is checked again: with the lock held, every
            # transaction that appended has committed, so an event that came meanwhile
            # shows as another row.
            with self._cursor() as cursor:
                streams = partitions.streams_of(cursor, month.name)
            if not streams or any(wanted.get(s) != v for s, v in streams.items()):
                continue
            with self._cursor() as cursor:
                self.recorder.lock_table(cursor)
                if month not in partitions.attached_months(cursor):
                    continue  # another run moved it meanwhile
                if partitions.row_count(cursor, month.name) != sum(streams.values()):
                    continue  # (a version is its stream's event count: no gaps)
                ids = list(streams)
                cursor.execute(self.sql["retention_hot_versions"], {"ids": ids})
                hot = {str(r["job_id"]): (r["status"], r["version"]) for r in cursor.fetchall()}
                if not all(
                    i in hot and hot[i][1] == wanted[i] and hot[i][0] in FINISHED_STATUSES
                    for i in ids
                ):
                    continue
                moved_rows = partitions.move_month(cursor, month, ids)
                job_ids = [UUID(i) for i in ids]
                event = msgspec.structs.replace(
                    event_for(job_ids, moved_rows), partition=month.name
                )
                uow = PostgresUnitOfWork(self, cursor)
                uow.append([RETENTION.change(RETENTION_STREAM_ID, [event])])
            moved.extend(job_ids)
            for table, count in moved_rows.items():
                rows[table] = rows.get(table, 0) + count
        return ArchiveMove(moved, [], rows)

    def ensure_partitions(self, now: datetime, ahead: int = partitions.MONTHS_AHEAD) -> list[str]:
        """Make the month partitions of ``now`` and ``ahead`` months after (``migrate`` and
        every retention run do): those made. Creating one locks the events table and then a
        view table, against a worker's order: it is done as the schema change is
        (:mod:`ledger.store.postgres.guarded_ddl`), and only when a month is missing."""
        if not self.partitioned:
            return []
        with self._cursor() as cursor:
            if not partitions.months_to_make(cursor, now, ahead):
                return []
        return guarded_ddl(
            self._schema_cursor,
            self.sql,
            partitions.month_parents(),
            lambda cursor: partitions.ensure_months(cursor, now, ahead),
            where=self.where,
        )

    def archive_units(self, job_versions: Mapping[UUID, int], now: datetime) -> list[ArchiveUnit]:
        """The past hot months, each with how many of its streams a run may move now (a
        month moves when all may)."""
        if not self.partitioned:
            return []
        wanted = {str(job_id): version for job_id, version in job_versions.items()}
        units = []
        for month in self._past_months(int(now.timestamp() * 1000)):
            with self._cursor() as cursor:
                streams = partitions.streams_of(cursor, month.name)
            eligible = sum(wanted.get(s) == v for s, v in streams.items())
            units.append(ArchiveUnit(month.name, len(streams), eligible))
        return units

    def _past_months(self, now_ms: int) -> list[partitions.Partition]:
        with self._cursor() as cursor:
            return [m for m in partitions.attached_months(cursor) if m.upper_ms <= now_ms]

    def table_sizes(self) -> dict[str, int]:
        """Rows per table retention moves, hot and (``jl_archive.<table>``) archived, the
        month partitions hot and archived, and the database's bytes."""
        tables = [EVENTS_TABLE, *(v.table for v in partitions.ARCHIVED_VIEWS)]
        sizes: dict[str, int] = {}
        with self._cursor() as cursor:
            archived = self.partitioned
            for table in tables:
                cursor.execute(SQL("SELECT count(*) AS n FROM {}").format(Identifier(table)))
                sizes[table] = int(cursor.fetchone()["n"])  # type: ignore[index]
                if archived:
                    cursor.execute(
                        SQL("SELECT count(*) AS n FROM {}.{}").format(
                            Identifier(partitions.ARCHIVE_SCHEMA), Identifier(table)
                        )
                    )
                    n = int(cursor.fetchone()["n"])  # type: ignore[index]
                    sizes[f"{partitions.ARCHIVE_SCHEMA}.{table}"] = n
            if archived:
                sizes["partitions.hot"] = len(partitions.attached_months(cursor))
                sizes["partitions.archived"] = len(partitions.archived_months(cursor))
            cursor.execute("SELECT pg_database_size(current_database()) AS n")
            sizes["database_bytes"] = int(cursor.fetchone()["n"])  # type: ignore[index]
        return sizes

    def close(self) -> None:
        self.datastore.close()
