"""The partitioned layout of the view tables retention moves (docs/architecture.md, 31).

On a database made with the partitioned events table, ``jl_queue``, ``jl_audit`` and
``jl_dead_letters`` are range-partitioned on ``job_id`` with the events table's month bounds
(``jl_queue_p202612`` beside ``jl_events_p202612``, and ``jl_queue_default`` for rows of a
job id in no month), so retention detaches a month's view rows as it detaches its events.

Everything here is derived from the tables' own ``schema_*`` statements (one place for the
columns), with three changes PostgreSQL requires of a partitioned table:

- *Keys hold the partition key.* ``jl_queue`` and ``jl_dead_letters`` are keyed by
  ``job_id`` already. ``jl_audit``'s key is ``position`` (the event's notification id); it
  becomes ``(job_id, position)``. That is as strict: a position names one event and so one
  stream, and an audit row's ``job_id`` is its stream's id, so two rows with the same
  position have the same ``job_id`` and the pair refuses a second row exactly when
  ``position`` alone did (a re-delivery is the same pair). Reads by position alone keep an
  index of their own, ``jl_audit_position_idx``.
- *Storage options* (``fillfactor``…) belong to each partition, not the parent.
- *Unique indexes across jobs* (one job per idempotency key, one live job per sync subject)
  cannot be partitioned indexes without ``job_id``. The parent keeps the index by its name,
  not unique (the lookups walk it in every partition); each partition gets the unique index
  of its own rows. Across months the rule holds as it always has: every enqueue that
  decides on a key or a subject holds the events-table lock from the lookup to its commit
  (``serialise_appends``), so no two can both find the key free; the per-partition index
  is the database's backstop within a month, where a batch's jobs are.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from ledger.store.shadow_ddl import projection_schema, shadow, to_shadow
from ledger.views.catalog import AUDIT, DEAD_LETTERS, QUEUE, Projection

PARTITIONED_VIEWS: tuple[Projection, ...] = (QUEUE, AUDIT, DEAD_LETTERS)
PARTITION_COLUMN = "job_id"
DEFAULT_SUFFIX = "_default"
POSITION_INDEX = "jl_audit_position_idx"
"""``jl_audit`` by position alone (tailing pages, the copy's re-delivery check), now that its
key starts with ``job_id``."""

Cursor = psycopg.Cursor[DictRow]

_INDEX = re.compile(
    r"CREATE\s+(UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(\w+)\s*(.*)$", re.I | re.S
)
_STORAGE = re.compile(r"\)\s*WITH\s*(\(.*\))\s*$", re.S)


class Layout(NamedTuple):
    """One view table's partitioned DDL (for the live table or, named so, its shadow)."""

    table: str
    create: str
    """``CREATE TABLE … PARTITION BY RANGE (job_id)``."""
    storage: str
    """``WITH (…)`` for each partition, or empty."""
    indexes: list[str]
    """The parent's ``CREATE INDEX`` statements (unique ones across jobs made plain)."""
    partition_uniques: list[str]
    """What follows ``ON <partition>`` in each partition's own unique index."""


def key_of(view: Projection) -> tuple[str, ...]:
    """The partitioned table's primary key: the view's key, led by ``job_id`` if it lacks it."""
    return view.key if PARTITION_COLUMN in view.key else (PARTITION_COLUMN, *view.key)


def _columns_end(sql: str) -> int:
    """The index of the parenthesis closing a ``CREATE TABLE``'s column list."""
    depth = 0
    for i, char in enumerate(sql):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced CREATE TABLE")


def layout_of(view: Projection, *, shadowed: bool = False) -> Layout:
    """The partitioned DDL of ``view``'s table (``shadowed``: of its rebuild shadow)."""
    create, statements = projection_schema("postgres", view)
    if shadowed:
        create = to_shadow(create, view)
        statements = [to_shadow(s, view) for s in statements]
    table = shadow(view.table) if shadowed else view.table
    storage = ""
    found = _STORAGE.search(create[_columns_end(create) :])
    if found is not None:
        storage = "WITH " + found.group(1)
    end = _columns_end(create)
    columns = create[:end]
    key = key_of(view)
    if key != view.key:
        # The column's own PRIMARY KEY goes; the table's names the partition column first.
        [own] = view.key
        columns, swapped = re.subn(rf"\b({own}\s+\w+)\s+PRIMARY\s+KEY", r"\1 NOT NULL", columns)
        if swapped != 1:
            raise ValueError(f"no PRIMARY KEY column {own} in {view.table}")
        columns += ",\n    PRIMARY KEY (" + ", ".join(key) + ")\n"
    parent = columns + f") PARTITION BY RANGE ({PARTITION_COLUMN})"
    indexes: list[str] = []
    uniques: list[str] = []
    for statement in statements:
        match = _INDEX.search(statement)
        if match is None:
            raise ValueError(f"not a CREATE INDEX: {statement[:60]}")
        unique, name, _, rest = match.groups()
        if unique and not re.search(rf"\b{PARTITION_COLUMN}\b", rest.split(")")[0]):
            indexes.append(f"CREATE INDEX IF NOT EXISTS {name} ON {table} {rest}")
            uniques.append(rest)
        else:
            indexes.append(statement)
    if key != view.key:
        position = shadow(POSITION_INDEX) if shadowed else POSITION_INDEX
        indexes.append(f"CREATE INDEX IF NOT EXISTS {position} ON {table} ({', '.join(view.key)})")
    return Layout(table, parent, storage, indexes, uniques)


def extra_indexes(view: Projection) -> list[str]:
    """Index names the partitioned layout adds to the live ones (a swap renames them too)."""
    return [POSITION_INDEX] if key_of(view) != view.key else []


def is_partitioned(cursor: Cursor, table: str) -> bool:
    """Whether ``table`` (as the search path finds it) is a partitioned table."""
    cursor.execute(
        "SELECT relkind = 'p' AS p FROM pg_class WHERE oid = to_regclass(%(t)s)", {"t": table}
    )
    row = cursor.fetchone()
    return bool(row and row["p"])


def create_partition(cursor: Cursor, layout: Layout, name: str, bound: str | None) -> None:
    """A partition of ``layout``'s table: ``bound`` as PostgreSQL prints it (``FOR VALUES
    FROM (…) TO (…)``), ``None`` for the default one; with its own unique indexes."""
    where = SQL(bound) if bound is not None else SQL("DEFAULT")  # PostgreSQL's own text
    cursor.execute(
        SQL("CREATE TABLE {p} PARTITION OF {t} ").format(
            p=Identifier(name), t=Identifier(layout.table)
        )
        + where
        + SQL(" " + layout.storage)  # from the catalogue's own DDL
    )
    for rest in layout.partition_uniques:
        # Unnamed: PostgreSQL picks a free name from the partition's (a shadow's partition
        # and its live namesake never clash).
        cursor.execute(SQL("CREATE UNIQUE INDEX ON {p} ").format(p=Identifier(name)) + SQL(rest))


def schema_for(cursor: Cursor, statements: list[str]) -> list[str]:
    """The ``schema_*`` statements with each partitioned view table's indexes as its layout
    makes them (PostgreSQL refuses a unique index without ``job_id`` on it even when one of
    that name exists); the layout's own additions follow the table's last index."""
    adapted: dict[str, list[str]] = {}
    for view in PARTITIONED_VIEWS:
        if not is_partitioned(cursor, view.table):
            continue
        _, live = projection_schema("postgres", view)
        indexes = layout_of(view).indexes
        adapted.update({raw: [made] for raw, made in zip(live, indexes, strict=False)})
        adapted[live[-1]] = indexes[len(live) - 1 :]
    return [made for statement in statements for made in adapted.get(statement, [statement])]


def create_tables(cursor: Cursor) -> None:
    """The partitioned view tables of a new database with their default partitions and
    indexes (before the ``schema_*`` statements, whose ``IF NOT EXISTS`` then change
    nothing)."""
    for view in PARTITIONED_VIEWS:
        layout = layout_of(view)
        cursor.execute(layout.create.encode())
        create_partition(cursor, layout, view.table + DEFAULT_SUFFIX, None)
        for statement in layout.indexes:
            cursor.execute(statement.encode())


def partitions_of(cursor: Cursor, table: str) -> dict[str, str | None]:
    """``table``'s partitions by name with their bounds (``None``: the default one)."""
    cursor.execute(
        "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound "
        "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%(t)s) ORDER BY c.relname",
        {"t": table},
    )
    return {
        str(row["name"]): None if row["bound"] == "DEFAULT" else str(row["bound"])
        for row in cursor.fetchall()
    }


def create_shadow(cursor: Cursor, view: Projection) -> None:
    """The rebuild shadow of a partitioned view table: its parent and a partition for each
    of the live table's, named ``<partition>__rebuild`` (indexes come after the load)."""
    layout = layout_of(view, shadowed=True)
    cursor.execute(layout.create.encode())
    add_shadow_partitions(cursor, view)


def add_shadow_partitions(cursor: Cursor, view: Projection) -> None:
    """Give the shadow each live partition it lacks (one ``ensure_months`` made meanwhile)."""
    layout = layout_of(view, shadowed=True)
    have = partitions_of(cursor, layout.table)
    for name, bound in partitions_of(cursor, view.table).items():
        if shadow(name) not in have:
            create_partition(cursor, layout, shadow(name), bound)


def rename_shadow_partitions(cursor: Cursor, view: Projection) -> None:
    """After the swap (the old table and its partitions dropped): the partitions and their
    indexes take the live names again, so a later retention move finds ``<table>_pYYYYMM``."""
    suffix = shadow("")
    for name in partitions_of(cursor, view.table):
        if not name.endswith(suffix):
            continue
        canonical = name[: -len(suffix)]
        cursor.execute(
            SQL("ALTER TABLE {} RENAME TO {}").format(Identifier(name), Identifier(canonical))
        )
        cursor.execute(
            "SELECT c.relname AS name FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE x.indrelid = to_regclass(%(p)s) AND strpos(c.relname, %(s)s) > 0",
            {"p": canonical, "s": suffix},
        )
        for row in cursor.fetchall():
            index = str(row["name"])
            cursor.execute(
                SQL("ALTER INDEX {} RENAME TO {}").format(
                    Identifier(index), Identifier(index.replace(suffix, "", 1))
                )
            )
