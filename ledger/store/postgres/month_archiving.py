"""Retention on PostgreSQL: past months of the events table detached into the archive.

:class:`MonthArchiving` is mixed into :class:`~ledger.store.postgres.store.PostgresStore`, and
overrides the store's retention hooks (:class:`~ledger.store.archive.Archiving`, decision 31).
The unit is a month partition of the events table, moved whole with its jobs' view rows when
every stream in it is a finished job still at the version the run chose it at; the DDL
itself is :mod:`ledger.store.postgres.partitions`. A database made before partitions (a plain
events table) archives nothing: the move is refused, and there are no units to report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from functools import cached_property
from uuid import UUID

import msgspec
import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from ledger.clock import SystemClock
from ledger.core.codec import EventCodec
from ledger.core.retention import FINISHED_STATUSES, RETENTION_STREAM_ID
from ledger.store.archive import (
    ArchivedEvent,
    ArchiveMove,
    ArchiveUnit,
    Archiving,
    archive_unsupported,
)
from ledger.store.ids import IdAdapter
from ledger.store.postgres import partitions
from ledger.store.postgres.guarded_ddl import guarded_ddl
from ledger.store.postgres.recorder import LedgerRecorder
from ledger.store.postgres.unit_of_work import PostgresUnitOfWork
from ledger.store.schema import EVENTS_TABLE
from ledger.views.kinds import RETENTION

Cursor = psycopg.Cursor[DictRow]


class MonthArchiving(Archiving):
    """The PostgreSQL store's retention hooks (see the module docstring)."""

    codec: EventCodec
    ids: IdAdapter
    recorder: LedgerRecorder
    sql: dict[str, str]
    where: str
    _cursor: Callable[[], AbstractContextManager[Cursor]]
    """A pooled connection's transaction (the store's)."""
    _schema_cursor: Callable[[], AbstractContextManager[Cursor]]
    """A transaction where the schema's DDL runs (:mod:`ledger.store.postgres.schema_changes`)."""

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
