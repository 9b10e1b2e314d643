"""The SQLite archive: ``<db>.archive.db`` beside the ledger, attached as schema ``archive``.

It holds the archived jobs' events (their notification ids kept) and their rows of the views
that are per job (``jl_queue``, ``jl_audit``, ``jl_dead_letters``), in tables named like the
hot ones. The statements are derived from the projection catalogue's columns, so a column a
release adds to a view is archived too. Reading hot + archive puts TEMP views named like the
hot tables in front of them: SQLite resolves an unqualified name in ``temp`` first, so the
ledger's own queries run unchanged over both, the hot copy of a row winning (a move a crash
interrupted leaves one in each file until the next run; docs/architecture.md, decision 31).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eventsourcing.sqlite import SQLiteCursor

from ledger.store.schema import EVENTS_TABLE
from ledger.store.shadow_ddl import safe_column, safe_name

if TYPE_CHECKING:
    from ledger.views.view import Projection

ARCHIVE_SCHEMA = "archive"
EVENT_COLUMNS = "originator_id, originator_version, topic, state"


def archived_views() -> tuple[Projection, ...]:
    """The per-job views whose rows move with their jobs' events (the catalogue is imported
    here, not with the module: a store that only reads opens this module, never the catalogue)."""
    from ledger.views.catalog import AUDIT, DEAD_LETTERS, QUEUE

    return (QUEUE, AUDIT, DEAD_LETTERS)


def archive_path(db_path: str) -> str:
    """Where a ledger file's archive lives: beside it, ``<db>.archive.db``."""
    return f"{db_path}.archive.db"


def attach(cursor: SQLiteCursor, path: str) -> None:
    """Attach the archive file (created if missing) outside any transaction, in WAL mode as
    the ledger is (a rollback journal made each batch's commit a journal file's creation,
    sync and deletion more)."""
    cursor.execute(f"ATTACH DATABASE ? AS {ARCHIVE_SCHEMA}", (path,))
    try:
        cursor.execute(f"PRAGMA {ARCHIVE_SCHEMA}.journal_mode=WAL")
    except BaseException:
        detach(cursor)  # a pooled connection must not keep it attached
        raise


def detach(cursor: SQLiteCursor) -> None:
    cursor.execute(f"DETACH DATABASE {ARCHIVE_SCHEMA}")


def _columns(projection: Projection) -> str:
    return ", ".join(safe_column(c) for c in projection.columns)


def _key_match(projection: Projection, left: str, right: str) -> str:
    return " AND ".join(
        f"{left}.{safe_column(k)} = {right}.{safe_column(k)}" for k in projection.key
    )


def create_statements() -> list[str]:
    """The archive's tables and indexes (idempotent; the archive must be attached)."""
    a = ARCHIVE_SCHEMA
    statements = [
        f"CREATE TABLE IF NOT EXISTS {a}.{EVENTS_TABLE} (notification_id INTEGER PRIMARY KEY, "
        "originator_id TEXT NOT NULL, originator_version INTEGER NOT NULL, topic TEXT, "
        "state BLOB, UNIQUE (originator_id, originator_version))"
    ]
    for view in archived_views():
        table = safe_name(view.table)
        keys = ", ".join(safe_column(k) for k in view.key)
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {a}.{table} AS "
            f"SELECT {_columns(view)} FROM main.{table} WHERE 0"
        )
        statements.append(f"CREATE UNIQUE INDEX IF NOT EXISTS {a}.{table}_key ON {table} ({keys})")
    statements.append(
        f"CREATE INDEX IF NOT EXISTS {a}.jl_audit_job_idx ON jl_audit (job_id, position)"
    )
    return statements


def union_view_statements() -> list[str]:
    """TEMP views naming hot + archive like the hot tables (the archive attached). The
    events view exposes the hot rowid, and the archive's kept notification id, as ``rowid``,
    the column the ledger's queries read positions from."""
    a = ARCHIVE_SCHEMA
    statements = [
        f"CREATE TEMP VIEW IF NOT EXISTS {EVENTS_TABLE} AS "
        f"SELECT rowid AS rowid, {EVENT_COLUMNS} FROM main.{EVENTS_TABLE} "
        f"UNION ALL SELECT a.notification_id, a.originator_id, a.originator_version, a.topic, "
        f"a.state FROM {a}.{EVENTS_TABLE} AS a WHERE NOT EXISTS (SELECT 1 FROM "
        f"main.{EVENTS_TABLE} AS h WHERE h.originator_id = a.originator_id "
        "AND h.originator_version = a.originator_version)"
    ]
    for view in archived_views():
        table = safe_name(view.table)
        columns = _columns(view)
        statements.append(
            f"CREATE TEMP VIEW IF NOT EXISTS {table} AS SELECT {columns} FROM main.{table} "
            f"UNION ALL SELECT {columns} FROM {a}.{table} AS a WHERE NOT EXISTS "
            f"(SELECT 1 FROM main.{table} AS h WHERE {_key_match(view, 'h', 'a')})"
        )
    return statements


def copy_statements() -> dict[str, str]:
    """Per table, the statement copying the jobs in the JSON array ``:ids`` (32-hex) into the
    archive; a repeat (a move a crash interrupted) changes nothing."""
    a = ARCHIVE_SCHEMA
    ids = "(SELECT value FROM json_each(:ids))"
    copies = {
        EVENTS_TABLE: f"INSERT OR IGNORE INTO {a}.{EVENTS_TABLE} (notification_id, "
        f"{EVENT_COLUMNS}) SELECT rowid, {EVENT_COLUMNS} FROM main.{EVENTS_TABLE} "
        f"WHERE originator_id IN {ids}"
    }
    for view in archived_views():
        table = safe_name(view.table)
        columns = _columns(view)
        copies[table] = (
            f"INSERT OR REPLACE INTO {a}.{table} ({columns}) SELECT {columns} "
            f"FROM main.{table} WHERE job_id IN {ids}"
        )
    return copies


def delete_statements(schema: str) -> dict[str, str]:
    """Per table, the statement deleting the jobs in ``:ids`` from ``schema`` (``main``: the
    move's second half; ``archive``: undoing a copy whose job changed meanwhile)."""
    ids = "(SELECT value FROM json_each(:ids))"
    deletes = {EVENTS_TABLE: f"DELETE FROM {schema}.{EVENTS_TABLE} WHERE originator_id IN {ids}"}
    for view in archived_views():
        table = safe_name(view.table)
        deletes[table] = f"DELETE FROM {schema}.{table} WHERE job_id IN {ids}"
    return deletes


def archive_exists(db_path: str) -> bool:
    return Path(archive_path(db_path)).exists()
