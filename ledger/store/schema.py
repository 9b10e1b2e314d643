"""The ledger's tables: which exist, the recorded schema version, creating what is missing.

``jobledger init`` (and the migration plan in :mod:`ledger.api.migrate`) create the tables;
workers run with table creation off and only check (concurrent DDL from several workers fails
with "tuple concurrently updated"). Every ``schema_*`` statement is ``IF NOT EXISTS``, so
running them on an initialised database only adds tables a newer release of the same schema
version introduced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.core.errors import DatabaseNotInitialisedError, DatabaseUnusableError
from ledger.views.kind import REGISTERED

SCHEMA_VERSION = "1"
"""The version of the tables jobledger creates; ``jobledger init`` records it in ``jl_meta``."""

MIGRATION_WAIT_S = 600.0
"""How long ``init``/``migrate`` (and ``Ledger.open(create=True)``) wait for another process's
schema change of the same database to finish before giving up (:meth:`Store.schema_lock`):
long enough for a rebuild of a few million events."""

EVENTS_TABLE = "jl_events"
EXPECTED_TABLES = frozenset(
    {
        EVENTS_TABLE,
        "jl_meta",
        "jl_queue",
        "jl_definitions",
        "jl_sync_state",
        "jl_dead_letters",
        "jl_tracking",
        "jl_audit",
        "jl_workflow_runs",
        "jl_workflow_steps",
        "jl_tokens",
        "jl_schedules",
        "jl_source_polls",
        "jl_queue_states",
        "jl_rate_buckets",
        "jl_pools",
        "jl_integrity_head",
        "jl_integrity_blocks",
    }
)


def expected_tables() -> frozenset[str]:
    """:data:`EXPECTED_TABLES` and the views of the kinds of state registered beyond the
    ledger's own (:func:`ledger.views.registry.register_kind`)."""
    extra = {kind.projection.table for kind in REGISTERED if kind.projection is not None}
    return EXPECTED_TABLES | extra if extra else EXPECTED_TABLES


ReadQuery = Callable[[str, dict[str, Any] | None], Sequence[Any]]

_CREATE_INDEX = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(\w+)", re.I
)
_ADD_COLUMN = re.compile(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)


def schema_indexes(queries: Mapping[str, str]) -> dict[str, str]:
    """The indexes the ``schema_*`` statements create: name -> table."""
    return {
        index: table
        for name, sql in queries.items()
        if name.startswith("schema_")
        for index, table in _CREATE_INDEX.findall(sql)
    }


def schema_columns(queries: Mapping[str, str]) -> set[tuple[str, str]]:
    """The columns the ``schema_*`` statements add to existing tables: (table, column)."""
    return {
        (table, column)
        for name, sql in queries.items()
        if name.startswith("schema_")
        for table, column in _ADD_COLUMN.findall(sql)
    }


class Schema:
    """Schema management over a store's one-query read and its backend's DDL."""

    def __init__(
        self, read: ReadQuery, create: Callable[[], None], queries: Callable[[], Mapping[str, str]]
    ) -> None:
        self._read = read
        self._create = create
        self._queries = queries

    def missing_indexes(self, tables: set[str]) -> list[str]:
        """The indexes this code's schema creates on ``tables`` (those that exist) that the
        database lacks: a release that adds one needs ``migrate`` to run its statement, and a
        query that names the index (SQLite's ``INDEXED BY``) fails without it."""
        present = {row["index_name"] for row in self._read("indexes_present", None)}
        expected = schema_indexes(self._queries())
        return sorted(i for i, table in expected.items() if table in tables and i not in present)

    def missing_columns(self, tables: set[str]) -> list[str]:
        """The columns a release added to tables the database has (``table.column``) that it
        lacks: the queries this code runs name them, so a database without them fails on its
        first read of one (a tail read: "column transaction_id does not exist") unless
        ``migrate`` adds them first."""
        expected = {c for c in schema_columns(self._queries()) if c[0] in tables}
        if not expected:
            return []  # SQLite's schema adds no columns: nothing to ask
        present = {
            (row["table_name"], row["column_name"]) for row in self._read("columns_present", None)
        }
        return sorted(f"{table}.{column}" for table, column in expected - present)

    def state(self) -> tuple[set[str], str | None]:
        """The jobledger tables present and the recorded schema version (``None``: none)."""
        tables = {row["table_name"] for row in self._read("tables_present", None)}
        marker = None
        if "jl_meta" in tables:
            rows = self._read("meta_get", {"key": "schema_version"})
            marker = rows[0]["value"] if rows else None
        return tables, marker

    def create_missing(self) -> list[str]:
        """Run every schema statement; the tables that were missing."""
        tables, _ = self.state()
        self._create()
        return sorted(expected_tables() - tables)

    def initialise(self) -> bool:
        """Create what is missing. Idempotent; returns whether anything was created."""
        tables, marker = self.state()
        if marker is not None and marker != SCHEMA_VERSION:
            raise _other_version(marker)
        if marker is not None and tables >= expected_tables():
            return False
        self._create()
        return True

    def check_initialised(self) -> None:
        """Raise unless this database holds this code's schema, all of it."""
        tables, marker = self.state()
        if marker is None:
            state = "is partly initialised" if tables else "has no jobledger tables"
            raise DatabaseNotInitialisedError(f"database {state}; run `jobledger init` first")
        if marker != SCHEMA_VERSION:
            raise _other_version(marker)
        missing = expected_tables() - tables
        if missing:
            raise DatabaseNotInitialisedError(
                f"database lacks tables {sorted(missing)}; run `jobledger init` to add them"
            )
        lacking = self.missing_columns(tables)
        if lacking:
            raise DatabaseNotInitialisedError(
                f"database lacks columns {lacking} that this release added; "
                "run `jobledger migrate` to add them"
            )
        without = self.missing_indexes(tables)
        if without:  # the claim names one by INDEXED BY on SQLite: every claim would fail
            raise DatabaseNotInitialisedError(
                f"database lacks indexes {without} that this release added; "
                "run `jobledger migrate` to add them"
            )


def _other_version(marker: str) -> DatabaseUnusableError:
    return DatabaseUnusableError(
        f"database holds jobledger schema {marker}; this code uses {SCHEMA_VERSION}"
    )
