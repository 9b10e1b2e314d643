"""The SQLite store: the embedded default.

Writers are serialised by ``BEGIN IMMEDIATE`` (:mod:`ledger.store.sqlite.unit_of_work`);
readers use WAL snapshots (a deferred ``BEGIN``). SQLite has no notifications: other
processes' commits are seen by polling. Shadow tables: :mod:`ledger.store.sqlite.shadows`;
error mapping: :mod:`ledger.store.sqlite.errors`.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import PersistenceError
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from ledger.core.errors import DatabaseNotInitialisedError, DatabaseUnusableError
from ledger.core.retention import FINISHED_STATUSES, RETENTION_STREAM_ID
from ledger.store.archive import ArchivedEvent, ArchiveMove
from ledger.store.ids import id_adapter
from ledger.store.queries import load, schema_statements
from ledger.store.reads import ReadSnapshot
from ledger.store.schema import EVENTS_TABLE, SCHEMA_VERSION
from ledger.store.sqlite import archive as archive_files
from ledger.store.sqlite.errors import errors_mapped, from_persistence, from_sqlite
from ledger.store.sqlite.session import SQLiteRunner
from ledger.store.store import Store
from ledger.views.kinds import RETENTION

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop
    from collections.abc import Iterator, Mapping
    from datetime import datetime
    from uuid import UUID

    from ledger.core.codec import EventCodec
    from ledger.store.sqlite.unit_of_work import SQLiteUnitOfWork
    from ledger.store.sqlite.view_tables import SQLiteViewTables

# The writers' modules (units of work, shadow tables, joined connections) are imported where
# they are used: a read command opens this store only to read (issue 17, part 10).

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
    def _connection(self, *, writer: bool, archive: bool = False) -> Iterator[SQLiteCursor]:
        """A pooled connection's transaction (``BEGIN IMMEDIATE`` for a writer), committed
        when the block exits normally; with ``archive``, the archive file attached for it
        (and detached after: pooled connections are shared)."""
        try:
            conn = self.datastore.pool.get_connection(is_writer=writer)
        except sqlite3.Error as exc:
            raise from_sqlite(exc, f"cannot open {self.where}") from exc
        except PersistenceError as exc:
            raise from_persistence(exc, self.where) from exc
        try:
            with errors_mapped(self.where):
                cursor = conn.cursor()
                self._prepare(conn, cursor)
                if archive:
                    archive_files.attach(cursor, self.archive_path)
                try:
                    cursor.execute("BEGIN IMMEDIATE" if writer else "BEGIN")
                    try:
                        yield cursor
                    except BaseException:
                        conn.rollback()
                        raise
                    else:
                        conn.commit()
                finally:
                    if archive:
                        archive_files.detach(cursor)
        finally:
            self.datastore.pool.put_connection(conn)

    def _prepare(self, conn: Any, cursor: SQLiteCursor) -> None:
        """Set a connection up once for this store (nothing here; see
        :class:`SQLiteArchiveReadStore`)."""

    @property
    def archive_path(self) -> str:
        """The archive file beside the ledger (it may not exist yet)."""
        return archive_files.archive_path(self.path)

    @property
    def archive_where(self) -> str | None:
        return Path(self.archive_path).name

    def move_to_archive(
        self,
        job_versions: Mapping[UUID, int],
        event_for: ArchivedEvent,
        *,
        now: datetime | None = None,
    ) -> ArchiveMove:
        """Move the jobs (each at the version it was chosen at) to the archive file: copy
        in one transaction, then under the write lock again delete from the hot tables the
        jobs still at that version, appending ``event_for(moved, rows)`` in the same
        transaction (decision 31: a WAL database commits several files atomically per file
        only, so the copy is durable before any hot row goes)."""
        ids = self.ids.keys(job_versions)
        with self._connection(writer=True, archive=True) as cursor:
            for statement in archive_files.create_statements():
                cursor.execute(statement)
            for statement in archive_files.copy_statements().values():
                cursor.execute(statement, {"ids": ids})
        with self._connection(writer=True, archive=True) as cursor:
            cursor.execute(self.sql["retention_hot_versions"], {"ids": ids})
            hot = {
                self.ids.uuid(r["job_id"]): (r["status"], r["version"]) for r in cursor.fetchall()
            }
            cursor.execute(self.sql["retention_archived_versions"], {"ids": ids})
            archived = {self.ids.uuid(r["job_id"]): r["version"] for r in cursor.fetchall()}
            moved = [
                job_id
                for job_id, version in job_versions.items()
                if hot.get(job_id, ("", -1))[1] == version == archived.get(job_id)
                and hot[job_id][0] in FINISHED_STATUSES
            ]
            # A job no longer hot was moved by another run meanwhile: its archive rows are
            # that run's, never to be undone here. A job still hot but changed keeps the hot
            # copy, the truth, and loses the archive's.
            kept = set(moved)
            changed = [j for j in job_versions if j in hot and j not in kept]
            if changed:
                changed_ids = self.ids.keys(changed)
                for statement in archive_files.delete_statements("archive").values():
                    cursor.execute(statement, {"ids": changed_ids})
            rows: dict[str, int] = {}
            if moved:
                moved_ids = self.ids.keys(moved)
                for table, statement in archive_files.delete_statements("main").items():
                    cursor.execute(statement, {"ids": moved_ids})
                    rows[table] = int(cursor.sqlite_cursor.rowcount)
                from ledger.store.sqlite.unit_of_work import SQLiteUnitOfWork

                uow = SQLiteUnitOfWork(self, cursor)
                uow.append([RETENTION.change(RETENTION_STREAM_ID, [event_for(moved, rows)])])
        return ArchiveMove(moved, changed, rows)

    def table_sizes(self) -> dict[str, int]:
        """Rows per table, hot and (``archive.<table>``) archived, and each file's bytes."""
        tables = [EVENTS_TABLE, *(v.table for v in archive_files.archived_views())]
        has_archive = Path(self.archive_path).exists()
        sizes: dict[str, int] = {}
        with self._connection(writer=False, archive=has_archive) as cursor:
            for schema in ("main", "archive") if has_archive else ("main",):
                for table in tables:
                    cursor.execute(f"SELECT count(*) AS n FROM {schema}.{table}")
                    prefix = "" if schema == "main" else "archive."
                    sizes[prefix + table] = int(cursor.fetchone()["n"])
        sizes["file_bytes"] = _file_bytes(self.path)
        if has_archive:
            sizes["archive.file_bytes"] = _file_bytes(self.archive_path)
        return sizes

    def _errors_mapped(self) -> AbstractContextManager[None]:
        return errors_mapped(self.where)

    def joining(self, connection: object, *, loop: AbstractEventLoop | None = None) -> Store:
        if self.read_only:
            return super().joining(connection)
        from ledger.store.sqlite.joined import SQLiteJoinedStore

        return SQLiteJoinedStore(self, self.path, self.where, connection)

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteUnitOfWork]:
        from ledger.store.sqlite.unit_of_work import SQLiteUnitOfWork

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
        from ledger.store.sqlite.shadows import SQLiteShadowTables
        from ledger.store.sqlite.view_tables import SQLiteViewTables

        with self._connection(writer=True) as cursor:
            shadows = SQLiteShadowTables(cursor, self.ids)
            yield SQLiteViewTables(cursor, self.sql, self.ids, self.codec, shadows)

    _migration_owner: int | None = None
    """The thread holding the migration lock through :meth:`schema_lock`."""

    @contextmanager
    def schema_lock(self, wait_s: float) -> Iterator[None]:
        """Hold the file's migration lock (:mod:`ledger.store.sqlite.migration_lock`);
        re-entrant on the holding thread (a migration's rebuild holds it already)."""
        if self._migration_owner == threading.get_ident():
            yield
            return
        from ledger.store.sqlite.migration_lock import migration_lock

        with migration_lock(self.path, self.where, wait_s):
            self._migration_owner = threading.get_ident()
            try:
                yield
            finally:
                self._migration_owner = None

    def _create_schema(self) -> None:
        with self._connection(writer=True) as cursor:
            for statement in self.recorder.create_table_statements:
                cursor.execute(statement)
            for statement in schema_statements(self.backend):
                cursor.execute(statement)
            cursor.execute(self.sql["meta_put"], {"key": "schema_version", "value": SCHEMA_VERSION})

    def close(self) -> None:
        self.datastore.close()


def _file_bytes(path: str) -> int:
    """A database file's bytes with its write-ahead log (what it holds on disk now)."""
    return sum(Path(p).stat().st_size for p in (path, f"{path}-wal") if Path(p).exists())


class SQLiteArchiveReadStore(SQLiteStore):
    """A ledger file read together with its archive: every connection attaches the archive
    and puts TEMP views of hot + archive in front of the hot tables (decision 31), so every
    read sees archived jobs as if they were hot. It only reads (a view is not writable), so
    nothing is caught up through it."""

    read_only = True

    def _prepare(self, conn: Any, cursor: SQLiteCursor) -> None:
        if getattr(conn, "_jl_archive_views", False) or not Path(self.archive_path).exists():
            return
        archive_files.attach(cursor, self.archive_path)
        for statement in archive_files.union_view_statements():
            cursor.execute(statement)
        conn._jl_archive_views = True
