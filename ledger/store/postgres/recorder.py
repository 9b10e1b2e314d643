"""The eventsourcing recorder the PostgreSQL store appends through.

Appends take no table lock: each row records its writing transaction (``transaction_id xid8
DEFAULT pg_current_xact_id()``, added by our schema step), and tailing readers read only
the final prefix of the history in ``(transaction_id, notification_id)`` order (below
``pg_snapshot_xmin(pg_current_snapshot())``; see docs/architecture.md, "The order tailing
readers rely on"). So concurrent writers append side by side and notification ids may
commit out of order. ``LOCK TABLE jl_events IN EXCLUSIVE MODE`` (:meth:`lock_table`)
remains a mutex for the few read-then-decide writes (``serialise_appends``), the COPY
enqueue (its id read-back) and the rebuild's swap: it still conflicts with every INSERT.
Each appending transaction sends one ``NOTIFY jl_events`` (the tailing readers' wake-up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.rows import DictRow
from psycopg.sql import Composed

from ledger.store.schema import EVENTS_TABLE

if TYPE_CHECKING:
    from ledger.store.unit_of_work import EventRow


class LedgerRecorder(PostgresApplicationRecorder):  # type: ignore[misc]  # untyped base
    """eventsourcing's recorder with a faster, lock-free append.

    The library inserts an array of a composite type, which psycopg dumps as text row by row
    (the largest client-side cost of a claim or completion batch, measured). This inserts one
    binary array per column instead, and skips the library's table lock (see the module
    docstring). ``POSTGRES_ENABLE_DB_FUNCTIONS`` is never set (its functions would insert
    without our columns' reasoning).
    """

    def __init__(self, datastore: PostgresDatastore, sql: dict[str, str]) -> None:
        super().__init__(datastore, events_table_name=EVENTS_TABLE)
        self._sql = sql

    def _create_statements(self, *, partitioned: bool) -> list[Composed]:
        """The library's schema statements; over an events table already made partitioned
        (:mod:`ledger.store.postgres.partitions`) without its unique notification-id index:
        a partitioned table's unique index must hold the partition key, and the ids are
        unique by their sequence anyway."""
        statements: list[Composed] = getattr(self, "sql_create_statements")  # noqa: B009  # untyped base
        if not partitioned:
            return statements
        return [s for s in statements if self.notification_id_index_name not in s.as_string()]

    def create_types_on(self, conn: psycopg.Connection[DictRow]) -> None:
        """The library's composite types, each in a transaction of its own on ``conn`` (there
        is no ``CREATE TYPE IF NOT EXISTS``: one that exists fails and is skipped, as the
        library's ``create_table`` does)."""
        for statement in self._create_statements(partitioned=False):
            if "CREATE TYPE" in statement.as_string():
                with contextlib.suppress(psycopg.errors.DuplicateObject), conn.transaction():
                    conn.execute(statement, prepare=False)

    def create_tables_on(self, curs: psycopg.Cursor[DictRow], *, partitioned: bool) -> None:
        """The library's other schema statements (tables, indexes; all ``IF NOT EXISTS``), on
        ``curs``'s transaction: the caller's, so they run under the locks it took."""
        for statement in self._create_statements(partitioned=partitioned):
            if "CREATE TYPE" not in statement.as_string():
                curs.execute(statement, prepare=False)

    def lock_table(self, curs: psycopg.Cursor[DictRow]) -> None:
        """``LOCK TABLE jl_events IN EXCLUSIVE MODE`` until commit: no other transaction
        appends meanwhile (and those that have appended have committed)."""
        self._lock_table(curs)  # the library's: SET LOCAL lock_timeout, then the lock

    def _insert_stored_events(
        self,
        curs: psycopg.Cursor[DictRow],
        stored_events: Sequence[StoredEvent] | Sequence[EventRow],
        **kwargs: Any,
    ) -> None:
        self._notify_channel(curs)
        query = "events_insert_returning" if kwargs.get("returning", True) else "events_insert"
        curs.execute(
            self._sql[query],
            {
                "originator_id": [e.originator_id for e in stored_events],
                "originator_version": [e.originator_version for e in stored_events],
                "topic": [e.topic for e in stored_events],
                "state": [e.state for e in stored_events],
            },
            prepare=True,
        )
