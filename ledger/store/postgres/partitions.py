"""The partitioned events and view tables on PostgreSQL and their archive (docs/architecture.md,
31).

A new database's ``jl_events`` is range-partitioned on ``originator_id``: job ids are
version-7 UUIDs whose first 48 bits are the enqueue time in ms, so a month of jobs is one
range, one partition ``jl_events_pYYYYMM``. Streams with name-derived ids (job types, the
retention stream, schedules…) and jobs of a month with no partition land in
``jl_events_default``, which never moves. The primary key ``(originator_id,
originator_version)`` already holds the partition key, so no key changes and the stored
rows are the same bytes; the notification-id index is per partition (ids stay unique: one
sequence draws them all). The view tables retention moves (``jl_queue``, ``jl_audit``,
``jl_dead_letters``) are partitioned the same way on ``job_id``, a partition per month
beside the events' (:mod:`ledger.store.postgres.view_partitions`).

Retention detaches a past month whose every stream is a job past its rule and re-attaches
it to ``jl_archive.jl_events``, and each view table's partition of that month to the
same-named partitioned table of ``jl_archive``, in one transaction: catalogue changes, no
row copied or deleted, so the hot tables shrink at once (no dead rows for autovacuum). A
view partition holds only rows of that month's jobs (its key is the job id, and an audit
row's ``job_id`` is its stream's), every one of which the move has checked. A database
whose view tables predate this (plain tables beside a partitioned events table) has its
month's view rows copied and deleted instead, as before. Schema ``jl_all`` holds views
named like the hot tables over hot + archive: a store whose ``search_path`` starts with it
reads both with the ledger's own queries.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier, Literal

from ledger.store.postgres import view_partitions
from ledger.store.postgres.view_partitions import PARTITION_COLUMN, is_partitioned, key_of
from ledger.store.schema import EVENTS_TABLE, EXPECTED_TABLES
from ledger.views.view import Projection

ARCHIVE_SCHEMA = "jl_archive"
ALL_SCHEMA = "jl_all"
DEFAULT_PARTITION = f"{EVENTS_TABLE}_default"
ARCHIVED_VIEWS: tuple[Projection, ...] = view_partitions.PARTITIONED_VIEWS
EVENT_COLUMNS = (
    "originator_id",
    "originator_version",
    "topic",
    "state",
    "notification_id",
    "transaction_id",
)
MONTHS_AHEAD = 3
"""Partitions made ahead of the clock: a month's first job must find its partition, since a
month's rows once in the default partition keep that month from having one."""

Cursor = psycopg.Cursor[DictRow]


class Partition(NamedTuple):
    name: str
    bound: str
    """``FOR VALUES FROM (…) TO (…)``, as PostgreSQL prints it."""
    upper_ms: int
    """The first millisecond after the month."""


def month_start_ms(year: int, month: int) -> int:
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp() * 1000)


def uuid_of_ms(ms: int) -> str:
    """The smallest version-7 UUID of millisecond ``ms`` (a range bound)."""
    hexed = f"{ms:012x}"
    return f"{hexed[:8]}-{hexed[8:]}-0000-0000-000000000000"


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


def layout(cursor: Cursor) -> str | None:
    """``partitioned``, ``plain`` (a database made before partitions), or ``None`` (no events
    table yet)."""
    # The hot table by name, not through the search path: a reader of hot + archive finds
    # the view of both (``jl_all.jl_events``) first.
    cursor.execute(
        "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = %(t)s AND c.relkind IN ('r', 'p') "
        "AND n.nspname = ANY(current_schemas(false)) AND n.nspname <> ALL(%(ours)s) "
        "ORDER BY array_position(current_schemas(false), n.nspname) LIMIT 1",
        {"t": EVENTS_TABLE, "ours": [ARCHIVE_SCHEMA, ALL_SCHEMA]},
    )
    row = cursor.fetchone()
    if row is None:
        return None
    return "partitioned" if row["relkind"] == "p" else "plain"


def create_partitioned_events(cursor: Cursor) -> None:
    """The events table as eventsourcing's recorder makes it, partitioned (run before the
    recorder's own ``IF NOT EXISTS`` statements, which then change nothing: its unique
    notification-id index is already here, not unique, under the same name)."""
    cursor.execute(
        SQL(
            "CREATE TABLE {t} (originator_id uuid NOT NULL, originator_version bigint NOT NULL, "
            "topic text, state bytea, notification_id bigserial, "
            "PRIMARY KEY (originator_id, originator_version)) PARTITION BY RANGE (originator_id)"
        ).format(t=Identifier(EVENTS_TABLE))
    )
    cursor.execute(
        SQL("CREATE INDEX {i} ON {t} (notification_id)").format(
            i=Identifier(f"{EVENTS_TABLE}_notification_id_idx"), t=Identifier(EVENTS_TABLE)
        )
    )
    cursor.execute(
        SQL("CREATE TABLE {p} PARTITION OF {t} DEFAULT").format(
            p=Identifier(DEFAULT_PARTITION), t=Identifier(EVENTS_TABLE)
        )
    )


def create_archive(cursor: Cursor) -> None:
    """The archive schema's tables and the hot + archive views (idempotent; after the hot
    tables have their every column)."""
    cursor.execute("SELECT current_schema() AS s")
    row = cursor.fetchone()
    assert row is not None
    hot = str(row["s"])
    a = Identifier(ARCHIVE_SCHEMA)
    cursor.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(a))
    cursor.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(ALL_SCHEMA)))
    cursor.execute(
        SQL(
            "CREATE TABLE IF NOT EXISTS {a}.{t} (LIKE {h}.{t}) PARTITION BY RANGE (originator_id)"
        ).format(a=a, t=Identifier(EVENTS_TABLE), h=Identifier(hot))
    )
    cursor.execute(
        SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {i} ON {a}.{t} (originator_id, originator_version)"
        ).format(i=Identifier(f"{EVENTS_TABLE}_key"), a=a, t=Identifier(EVENTS_TABLE))
    )  # unique, as the hot primary key: an attached partition's own key index is taken over
    _create_view(cursor, hot, EVENTS_TABLE, EVENT_COLUMNS)
    for view in ARCHIVED_VIEWS:
        table = Identifier(view.table)
        # Partitioned as the hot table is, so that its month partitions attach here.
        partitioned = is_partitioned(cursor, f"{hot}.{view.table}")
        by = SQL(" PARTITION BY RANGE ({})").format(Identifier(PARTITION_COLUMN))
        cursor.execute(
            SQL("CREATE TABLE IF NOT EXISTS {a}.{t} (LIKE {h}.{t})").format(
                a=a, t=table, h=Identifier(hot)
            )
            + (by if partitioned else SQL(""))
        )
        key = key_of(view) if is_partitioned(cursor, f"{ARCHIVE_SCHEMA}.{view.table}") else view.key
        cursor.execute(
            SQL("CREATE UNIQUE INDEX IF NOT EXISTS {i} ON {a}.{t} ({k})").format(
                i=Identifier(f"{view.table}_key"),
                a=a,
                t=table,
                k=SQL(", ").join(Identifier(k) for k in key),
            )
        )
        if key != view.key:  # reads by position alone, as the hot table's
            cursor.execute(
                SQL("CREATE INDEX IF NOT EXISTS {i} ON {a}.{t} ({k})").format(
                    i=Identifier(view_partitions.POSITION_INDEX),
                    a=a,
                    t=table,
                    k=SQL(", ").join(Identifier(k) for k in view.key),
                )
            )
        _create_view(cursor, hot, view.table, view.columns)
    cursor.execute(  # `audit --job --include-archive`: a job's rows in order, as hot
        SQL(
            "CREATE INDEX IF NOT EXISTS jl_audit_job_idx ON {a}.jl_audit (job_id, position)"
        ).format(a=a)
    )


def _create_view(cursor: Cursor, hot: str, table: str, columns: tuple[str, ...]) -> None:
    """The hot + archive view of ``table``, made again (its columns may have changed); the
    archive table first gets any column a release added to the hot one.

    The view selects from a set-returning SQL function whose body is text: PostgreSQL
    records no dependency of it on the hot table, so a rebuild's swap (rename, drop the old
    table) or a dropped view table is not blocked by it, and the body names the current
    table each time it runs. Being ``STABLE`` and one ``SELECT``, the planner inlines it,
    so a read's conditions still reach each side's indexes."""
    cursor.execute(
        "SELECT h.attname AS name, format_type(h.atttypid, h.atttypmod) AS type, "
        "h.attname IN (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = "
        "to_regclass(%(archived)s) AND a.attnum > 0 AND NOT a.attisdropped) AS archived "
        "FROM pg_attribute h WHERE h.attrelid = to_regclass(%(hot)s) AND h.attnum > 0 "
        "AND NOT h.attisdropped ORDER BY h.attnum",
        {"hot": f"{hot}.{table}", "archived": f"{ARCHIVE_SCHEMA}.{table}"},
    )
    types: dict[str, str] = {}
    for row in cursor.fetchall():
        types[str(row["name"])] = str(row["type"])
        if not row["archived"]:
            cursor.execute(
                SQL("ALTER TABLE {a}.{t} ADD COLUMN {c} ").format(
                    a=Identifier(ARCHIVE_SCHEMA), t=Identifier(table), c=Identifier(row["name"])
                )
                + SQL(str(row["type"]))  # the catalogue's own text
            )
    if any(c not in types for c in columns):
        # The hot table predates a column (a view an upgrade rebuilds next): the view is made
        # again by the `migrate` after, over the rebuilt table.
        return
    listed = SQL(", ").join(Identifier(c) for c in columns)
    body = SQL("SELECT {c} FROM {h}.{t} UNION ALL SELECT {c} FROM {a}.{t}").format(
        c=listed, h=Identifier(hot), t=Identifier(table), a=Identifier(ARCHIVE_SCHEMA)
    )
    view = SQL("{}.{}").format(Identifier(ALL_SCHEMA), Identifier(table))
    rows = SQL("{}.{}").format(Identifier(ALL_SCHEMA), Identifier(f"{table}_rows"))
    cursor.execute(SQL("DROP VIEW IF EXISTS {}").format(view))
    cursor.execute(SQL("DROP FUNCTION IF EXISTS {}").format(rows))
    returned = SQL(", ").join(SQL("{} ").format(Identifier(c)) + SQL(types[c]) for c in columns)
    cursor.execute(
        SQL("CREATE FUNCTION {f}() RETURNS TABLE ({r}) LANGUAGE sql STABLE AS {b}").format(
            f=rows, r=returned, b=Literal(body.as_string(cursor))
        )
    )
    cursor.execute(SQL("CREATE VIEW {v} AS SELECT * FROM {f}()").format(v=view, f=rows))


def ensure_months(cursor: Cursor, now: datetime, ahead: int = MONTHS_AHEAD) -> list[str]:
    """Create the partitions of ``now``'s month and ``ahead`` more, the events' and each
    partitioned view table's (idempotent): those made (see :func:`months_to_make`)."""
    made: list[str] = []
    for parent, name, bound in months_to_make(cursor, now, ahead):
        if parent is None:
            cursor.execute(
                SQL("CREATE TABLE {p} PARTITION OF {t} ").format(
                    p=Identifier(name), t=Identifier(EVENTS_TABLE)
                )
                + bound
            )
        else:
            layout = view_partitions.layout_of(parent)
            view_partitions.create_partition(cursor, layout, name, bound.as_string(cursor))
        made.append(name)
    return made


def months_to_make(
    cursor: Cursor, now: datetime, ahead: int = MONTHS_AHEAD
) -> list[tuple[Projection | None, str, Composed]]:
    """The month partitions of ``now``'s month and ``ahead`` more that are missing, in the
    order to make them: ``(view, name, bound)``, ``view`` ``None`` for the events table's. A
    month whose rows are already in a default partition (jobs enqueued before its partition
    existed) is left without one: those jobs stay hot. A view table gets a month only beside
    the events' month, so a view partition never holds a job whose events stay in the
    default partition."""
    at = now.astimezone(UTC)
    year, month = at.year, at.month
    views = [v for v in ARCHIVED_VIEWS if is_partitioned(cursor, v.table)]
    wanted: list[tuple[Projection | None, str, Composed]] = []
    for _ in range(ahead + 1):
        suffix = f"_p{year:04d}{month:02d}"
        low = uuid_of_ms(month_start_ms(year, month))
        year, month = _next_month(year, month)
        high = uuid_of_ms(month_start_ms(year, month))
        bound = SQL("FOR VALUES FROM ({lo}) TO ({hi})").format(lo=Literal(low), hi=Literal(high))
        events = EVENTS_TABLE + suffix
        state = _month_state(cursor, EVENTS_TABLE, events, "originator_id", low=low, high=high)
        if state == "free":
            wanted.append((None, events, bound))
        elif state != "attached":
            continue
        for view in views:
            name = view.table + suffix
            state = _month_state(cursor, view.table, name, PARTITION_COLUMN, low=low, high=high)
            if state == "free":
                wanted.append((view, name, bound))
    return wanted


def month_parents() -> list[str]:
    """The tables a new month partition is made under, events first: what making one locks."""
    return [EVENTS_TABLE, *(view.table for view in ARCHIVED_VIEWS)]


def ddl_relations() -> list[str]:
    """Every relation the schema statements may lock on a live ledger, the events table first
    (the order an enqueue takes them in): the hot tables, the archive's and the hot +
    archive views (``jl_all``). Those that do not exist are skipped by the locker."""
    archived = [EVENTS_TABLE, *(view.table for view in ARCHIVED_VIEWS)]
    return [
        EVENTS_TABLE,
        *sorted(EXPECTED_TABLES - {EVENTS_TABLE}),
        *(f"{ARCHIVE_SCHEMA}.{table}" for table in archived),
        *(f"{ALL_SCHEMA}.{table}" for table in archived),
    ]


def _month_state(cursor: Cursor, table: str, name: str, column: str, *, low: str, high: str) -> str:
    """``attached`` (the partition is here), ``archived`` (detached already: a clock set
    back, never made twice), ``defaulted`` (its rows are in the default partition) or
    ``free`` (it may be made)."""
    cursor.execute("SELECT to_regclass(%(n)s) IS NOT NULL AS here", {"n": name})
    row = cursor.fetchone()
    if row is not None and row["here"]:
        return "attached"
    cursor.execute(
        "SELECT to_regclass(%(n)s) IS NOT NULL AS here", {"n": f"{ARCHIVE_SCHEMA}.{name}"}
    )
    row = cursor.fetchone()
    if row is not None and row["here"]:
        return "archived"
    default = table + view_partitions.DEFAULT_SUFFIX
    cursor.execute(
        SQL("SELECT 1 FROM {d} WHERE {c} >= {lo} AND {c} < {hi} LIMIT 1").format(
            d=Identifier(default), c=Identifier(column), lo=Literal(low), hi=Literal(high)
        )
    )
    return "defaulted" if cursor.fetchone() is not None else "free"


def attached_months(cursor: Cursor) -> list[Partition]:
    """The hot month partitions, oldest first (the default partition is not one)."""
    cursor.execute(
        "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound "
        "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%(t)s) AND c.relname <> %(d)s ORDER BY c.relname",
        {"t": EVENTS_TABLE, "d": DEFAULT_PARTITION},
    )
    months = []
    for row in cursor.fetchall():
        name = str(row["name"])
        year, month = _next_month(int(name[-6:-2]), int(name[-2:]))
        months.append(Partition(name, str(row["bound"]), month_start_ms(year, month)))
    return months


def archived_months(cursor: Cursor) -> list[str]:
    cursor.execute(
        "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%(t)s) ORDER BY c.relname",
        {"t": f"{ARCHIVE_SCHEMA}.{EVENTS_TABLE}"},
    )
    return [str(row["name"]) for row in cursor.fetchall()]


def streams_of(cursor: Cursor, partition: str) -> dict[str, int]:
    """Each stream in a hot partition with its newest version (none once it is detached)."""
    cursor.execute(
        "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%(p)s) "
        "AND inhparent = to_regclass(%(t)s)",
        {"p": partition, "t": EVENTS_TABLE},
    )
    if cursor.fetchone() is None:
        return {}
    cursor.execute(
        SQL(
            "SELECT originator_id::text AS id, max(originator_version) AS version FROM {p} "
            "GROUP BY originator_id"
        ).format(p=Identifier(partition))
    )
    return {str(row["id"]): int(row["version"]) for row in cursor.fetchall()}


def row_count(cursor: Cursor, partition: str) -> int:
    cursor.execute(SQL("SELECT count(*) AS n FROM {p}").format(p=Identifier(partition)))
    counted = cursor.fetchone()
    return int(counted["n"]) if counted else 0


def move_month(cursor: Cursor, partition: Partition, job_ids: list[str]) -> dict[str, int]:
    """Detach ``partition`` into the archive and each view table's partition of the same
    month with it (in the caller's transaction, under the events-table lock); the rows moved
    per table. ``job_ids`` are the month's streams, every one a job the caller checked."""
    rows = {EVENTS_TABLE: row_count(cursor, partition.name)}
    _detach(cursor, EVENTS_TABLE, partition.name, partition.bound)
    suffix = partition.name[len(EVENTS_TABLE) :]
    for view in ARCHIVED_VIEWS:
        name = view.table + suffix
        bound = _attached_bound(cursor, view.table, name)
        if bound is not None and is_partitioned(cursor, f"{ARCHIVE_SCHEMA}.{view.table}"):
            rows[view.table] = row_count(cursor, name)
            _detach(cursor, view.table, name, bound)
            _drop_hot_only_indexes(cursor, name)
        else:  # a view table made before it was partitioned
            rows[view.table] = _copy_and_delete(cursor, view, job_ids)
    return rows


def _attached_bound(cursor: Cursor, table: str, name: str) -> str | None:
    cursor.execute(
        "SELECT pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%(t)s) AND i.inhrelid = to_regclass(%(p)s)",
        {"t": table, "p": name},
    )
    row = cursor.fetchone()
    return str(row["bound"]) if row is not None else None


def _detach(cursor: Cursor, table: str, name: str, bound: str) -> None:
    """Move one partition from the hot table to the archive's (a catalogue change; the
    attach scans it once to check its bound, reading, not writing)."""
    t = Identifier(table)
    part = Identifier(name)
    a = Identifier(ARCHIVE_SCHEMA)
    cursor.execute(SQL("ALTER TABLE {t} DETACH PARTITION {p}").format(t=t, p=part))
    cursor.execute(SQL("ALTER TABLE {p} SET SCHEMA {a}").format(p=part, a=a))
    cursor.execute(
        SQL("ALTER TABLE {a}.{t} ATTACH PARTITION {a}.{p} ").format(a=a, t=t, p=part)
        + SQL(bound)  # PostgreSQL's own text
    )


def _drop_hot_only_indexes(cursor: Cursor, name: str) -> None:
    """Drop an archived view partition's indexes that no archive index took over (the
    claim, listing and per-partition unique ones): the archive is read by key, job and
    position only, and keeps the size it had when its rows were copied."""
    cursor.execute(
        "SELECT c.relname AS name FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%(p)s) "
        "AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = x.indexrelid) "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)",
        {"p": f"{ARCHIVE_SCHEMA}.{name}"},
    )
    a = Identifier(ARCHIVE_SCHEMA)
    for row in cursor.fetchall():
        cursor.execute(SQL("DROP INDEX {a}.{i}").format(a=a, i=Identifier(row["name"])))


def _copy_and_delete(cursor: Cursor, view: Projection, job_ids: list[str]) -> int:
    table = Identifier(view.table)
    a = Identifier(ARCHIVE_SCHEMA)
    listed = SQL(", ").join(Identifier(c) for c in view.columns)
    cursor.execute(
        SQL(
            "INSERT INTO {a}.{t} ({c}) SELECT {c} FROM {t} WHERE job_id = ANY(%(ids)s::uuid[])"
        ).format(a=a, t=table, c=listed),
        {"ids": job_ids},
    )
    cursor.execute(
        SQL("DELETE FROM {t} WHERE job_id = ANY(%(ids)s::uuid[])").format(t=table),
        {"ids": job_ids},
    )
    return cursor.rowcount
