"""The eventsourcing recorder the PostgreSQL store appends through.

The recorder takes ``LOCK TABLE jl_events IN EXCLUSIVE MODE`` so notification ids commit in
order (tailing readers never skip an event) and sends one ``NOTIFY jl_events`` per
transaction. ``POSTGRES_ENABLE_DB_FUNCTIONS`` is never set: it drops that table lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.rows import DictRow

from ledger.store.schema import EVENTS_TABLE


class LedgerRecorder(PostgresApplicationRecorder):  # type: ignore[misc]  # untyped base
    """eventsourcing's recorder with a faster append.

    The library inserts an array of a composite type, which psycopg dumps as text row by row
    (the largest client-side cost of a claim or completion batch, measured). This inserts one
    binary array per column instead. The table lock and the NOTIFY are still the library's.
    """

    def __init__(self, datastore: PostgresDatastore, sql: dict[str, str]) -> None:
        super().__init__(datastore, events_table_name=EVENTS_TABLE)
        self._sql = sql

    def _insert_stored_events(
        self,
        curs: psycopg.Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> None:
        if not kwargs.get("locked", False):
            # (Its SET LOCAL lock_timeout would also undo a timeout the caller set.)
            self._lock_table(curs)
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
