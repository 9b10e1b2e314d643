"""A large enqueue's events and queue rows by binary COPY, under the events-table lock.

``INSERT … unnest`` of one array per column makes psycopg pack every array element by element
in Python (~18% of a 5,000-job enqueue, profiled); binary COPY sends each row as the server
stores it. COPY cannot run in psycopg's pipeline mode and returns no ``notification_id``, so a
bulk write runs its statements one after another in the same transaction:

1. ``LOCK TABLE jl_events IN EXCLUSIVE MODE`` (unless this transaction holds it already) and
   the recorder's ``NOTIFY``;
2. COPY the events: the ``bigserial`` default gives each row the next notification id, in row
   order;
3. read the last id this session drew (``currval``). Under the lock no other session can draw
   from the sequence (an INSERT takes its ROW EXCLUSIVE lock before its defaults run), so the
   batch's ids are the ``n`` consecutive ones ending there — checked against the first row
   (a mismatch raises rather than file jobs under another job's position);
4. COPY the queue rows, whose ``enqueue_seq`` are those ids.

Each COPY carries at most :data:`COPY_ROWS` rows. Unique indexes hold as for an INSERT (COPY
checks them row by row); a violation fails the statement and the transaction, mapped to the
ledger's error as any other. The rest of the append (view writes, ``NOTIFY
jl_jobs_available``) follows on the same cursor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import DictRow

from ledger.core.errors import StoreError
from ledger.store.postgres.copy import copy_values
from ledger.store.schema import EVENTS_TABLE
from ledger.store.unit_of_work import EventRow
from ledger.views.queue import COLUMNS

COPY_THRESHOLD = 200
"""New jobs in one append from which it writes by COPY. Below it, the pipelined INSERTs win:
one round trip for the whole write phase instead of one per statement (measured in
``docs/architecture.md``)."""

COPY_ROWS = 10_000
"""Rows per COPY statement. The frozen-writer watchdog ends a COPY into jl_events or
jl_queue that has been silent for its bound (a COPY's data does not move ``state_change``),
so one statement is kept to milliseconds even for a million-job ``enqueue_many``."""

EVENT_COLUMNS = ("originator_id", "originator_version", "topic", "state")
EVENT_TYPES = ("uuid", "bigint", "text", "bytea")
QUEUE_TABLE = "jl_queue"
QUEUE_TYPES = {
    "job_id": "uuid", "job_type": "text", "queue": "text", "org": "text", "status": "text",
    "stage": "text", "priority": "integer", "run_at": "bigint", "enqueue_seq": "bigint",
    "lease_expires_at": "bigint", "run_number": "integer", "attempt": "integer",
    "worker_id": "text", "idempotency_key": "text", "source_id": "text", "uri": "text",
    "version": "integer", "updated_at": "bigint", "state": "bytea",
}  # fmt: skip
"""jl_queue's columns and their types (as ``queue_insert`` casts them; binary COPY needs
each exactly), in the order of the rows' values."""
if tuple(QUEUE_TYPES) != COLUMNS:  # pragma: no cover - a guard for whoever edits either
    raise ImportError("QUEUE_TYPES must name ledger.views.queue.COLUMNS in order")


def copy_events(
    cursor: psycopg.Cursor[DictRow], sql: Mapping[str, str], stored: Sequence[EventRow]
) -> list[int]:
    """COPY ``stored`` into the events table (the caller holds its lock); their
    notification ids, in order."""
    positions: list[int] = []
    for start in range(0, len(stored), COPY_ROWS):
        positions += _copy_events(cursor, sql, stored[start : start + COPY_ROWS])
    return positions


def _copy_events(
    cursor: psycopg.Cursor[DictRow], sql: Mapping[str, str], stored: Sequence[EventRow]
) -> list[int]:
    copy_values(cursor, EVENTS_TABLE, EVENT_COLUMNS, EVENT_TYPES, stored)
    cursor.execute(sql["events_copied_first"], {"count": len(stored)}, prepare=True)
    row = cursor.fetchone()
    first = stored[0]
    if row is None or (row["originator_id"], row["originator_version"]) != (
        first.originator_id,
        first.originator_version,
    ):
        # Someone drew from the sequence without the events-table lock.
        raise StoreError(
            f"the {len(stored)} events copied did not get consecutive notification ids"
        )
    start = int(row["notification_id"])
    return list(range(start, start + len(stored)))


def copy_queue_rows(cursor: psycopg.Cursor[DictRow], rows: list[tuple[Any, ...]]) -> None:
    """COPY new jobs' rows (:func:`ledger.views.queue.queue_values`) into jl_queue."""
    types = tuple(QUEUE_TYPES.values())
    for start in range(0, len(rows), COPY_ROWS):
        copy_values(cursor, QUEUE_TABLE, COLUMNS, types, rows[start : start + COPY_ROWS])
