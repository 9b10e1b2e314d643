"""The PostgreSQL unit of work: lock the rows, then append in one pipelined round.

Claims and other multi-job units of work lock the view rows they change first (``FOR
UPDATE``, ``SKIP LOCKED`` for claims), then append. Appends take no table lock: each event
records its writing transaction, which is what keeps tailing readers in order (see
:mod:`ledger.store.postgres.recorder` and docs/architecture.md, "The order tailing readers
rely on"). ``LOCK TABLE jl_events IN EXCLUSIVE MODE`` remains the mutex of the writes whose
reads decide them (:meth:`PostgresUnitOfWork.serialise_appends`: enqueue with keys, subjects
or auto-definition, definitions) and of the COPY enqueue; it conflicts with every insert.
Writers that change existing rows lock them before their insert; enqueue, which takes the
table lock first, locks no existing row; rows a transaction creates are written after the
table lock. So writers cannot deadlock on the two. The workers' wake-up is ``NOTIFY
jl_jobs_available``, sent only by commits that may make jobs claimable.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import groupby
from typing import Any, Protocol
from uuid import UUID

import msgspec
import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Literal

from ledger.core.codec import EventCodec
from ledger.store.ids import IdAdapter
from ledger.store.postgres.bulk_writes import COPY_THRESHOLD, copy_events, copy_queue_rows
from ledger.store.postgres.errors import from_postgres
from ledger.store.postgres.pipeline import synced_pipeline
from ledger.store.postgres.recorder import LedgerRecorder
from ledger.store.unit_of_work import EventRow, UnitOfWork
from ledger.views.queue import COLUMNS
from ledger.views.writes import ViewWrite


def limit_lock_id(key: str) -> int:
    """A limited key's advisory lock id: a stable 64-bit hash of it (the same in every
    process and release; a collision only serialises two keys' claims together)."""
    digest = hashlib.blake2b(f"jobledger.limit:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class StoreParts(Protocol):
    """What a unit of work uses of the store that opened it (a protocol, so the unit of work
    does not import the store that imports it)."""

    @property
    def codec(self) -> EventCodec: ...

    @property
    def ids(self) -> IdAdapter: ...

    @property
    def sql(self) -> Mapping[str, str]: ...

    @property
    def where(self) -> str:
        """How the database is named in error messages."""

    @property
    def recorder(self) -> LedgerRecorder: ...


_json_encoder = msgspec.json.Encoder()


def _columns(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Queue rows (values in ``COLUMNS`` order) to one list per column, for ``unnest``."""
    return dict(zip(COLUMNS, map(list, zip(*rows, strict=True)), strict=True))


def lock_timeout(cursor: psycopg.Cursor[DictRow], seconds: float) -> None:
    """``SET LOCAL lock_timeout`` to ``seconds``, rounded up: 0 ms would mean no timeout."""
    millis = max(1, math.ceil(seconds * 1000))
    cursor.execute(SQL("SET LOCAL lock_timeout = {}").format(Literal(f"{millis}ms")))


class PostgresUnitOfWork(UnitOfWork):
    """A unit of work on one pooled connection's transaction (see the module docstring)."""

    _rows_may_lag = True  # in-lease reports leave the row behind (ledger.views.queue_lag)

    def __init__(self, store: StoreParts, cursor: psycopg.Cursor[DictRow]) -> None:
        super().__init__(store.codec, store.ids)
        self._store = store
        self._cursor = cursor
        self._sql = store.sql
        self._appends_serialised = False
        self._bulk = False

    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]:
        # Prepared: the claim, lock and find queries run on every unit of work.
        self._cursor.execute(self._sql[query], params, prepare=True)
        return self._cursor.fetchall()

    def _insert_stored_events(
        self, stored: list[EventRow], *, positions_needed: bool
    ) -> Sequence[int] | None:
        if self._bulk:
            recorder = self._store.recorder
            if not self._appends_serialised:
                recorder.lock_table(self._cursor)
                self._appends_serialised = True
            recorder._notify_channel(self._cursor)
            return copy_events(self._cursor, self._sql, stored)
        self._store.recorder._insert_stored_events(self._cursor, stored, returning=positions_needed)
        if not positions_needed:
            return None
        return [row["notification_id"] for row in self._cursor.fetchall()]

    @contextmanager
    def _write_phase(self, new_jobs: int) -> Iterator[None]:
        if new_jobs >= COPY_THRESHOLD:
            # COPY, which a pipeline cannot carry (ledger.store.postgres.bulk_writes).
            self._bulk = True
            try:
                yield
            finally:
                self._bulk = False
            return
        # Pipeline mode: the lock, NOTIFY, events insert and view writes go out without
        # waiting for each other's results; errors still surface before commit. Synced: its
        # end leaves the server's idle-in-transaction timer armed (psycopg's own exit
        # disarms it, so a writer frozen before its commit would hold the lock forever).
        with synced_pipeline(self._cursor.connection):
            yield

    def _write_queue(self, inserts: list[tuple[Any, ...]], updates: list[dict[str, Any]]) -> None:
        # One statement per batch (an array per column for inserts, one JSON array of the
        # rows for updates, see queue_update): one row per statement (executemany) costs a
        # server round of parse/plan/index upkeep per row.
        if inserts and self._bulk:
            copy_queue_rows(self._cursor, inserts)
        elif inserts:
            self._cursor.execute(self._sql["queue_insert"], _columns(inserts), prepare=True)
        if updates:
            rows = _json_encoder.encode(updates).decode()
            self._cursor.execute(self._sql["queue_update"], {"rows": rows}, prepare=True)

    def lock_limit_keys(self, keys: Sequence[str]) -> None:
        # A transaction advisory lock per key rather than a row per key locked FOR UPDATE:
        # per-org keys are open-ended (a row would have to be inserted first, racing), the
        # lock leaves no row to vacuum, and it ends with the transaction. One per statement,
        # in the caller's order (a single SELECT over them would not promise the order).
        for key in keys:
            self._cursor.execute(self._sql["limit_lock"], {"key": limit_lock_id(key)})

    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        for query, group in groupby(writes, key=lambda write: write.query):
            self._cursor.executemany(self._sql[query], [write.params for write in group])

    def _notify_jobs_available(self) -> None:
        self._cursor.execute(self._sql["jobs_available_notify"])

    def _notify_jobs_cancelled(self) -> None:
        self._cursor.execute(self._sql["jobs_cancelled_notify"])

    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        self._cursor.execute(self._sql["events_of_streams"], {"originator_ids": keys})
        return [
            (row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"]))
            for row in self._cursor.fetchall()
        ]

    def _remembered(self) -> dict[str, Any]:
        # A lock taken inside a savepoint is released when it is rolled back.
        return {**super()._remembered(), "_appends_serialised": self._appends_serialised}

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        try:
            with self._cursor.connection.transaction():  # nested: a SAVEPOINT
                yield
        except psycopg.Error as exc:
            raise from_postgres(exc, self._store.where) from exc

    def set_lock_timeout(self, seconds: float) -> None:
        lock_timeout(self._cursor, seconds)

    def _lock_run(self, key: int, *, wait: bool) -> bool:
        """A run's release lock: a transaction advisory lock, released at commit or
        rollback. Waiting is bounded by the transaction's ``lock_timeout`` (55P03 then)."""
        try:
            if wait:
                self._cursor.execute(self._sql["workflow_run_lock"], {"key": key}, prepare=True)
                return True
            self._cursor.execute(self._sql["workflow_run_try_lock"], {"key": key}, prepare=True)
            row = self._cursor.fetchone()
        except psycopg.Error as exc:
            raise from_postgres(exc, self._store.where) from exc
        return bool(row is not None and row["locked"])

    def lock_rate_types(self, job_types: Sequence[str]) -> None:
        """Advisory locks per job type until commit (``rate_types_lock``): two claims of one
        limited type count its tokens one after the other."""
        self._rows("rate_types_lock", {"job_types": sorted(job_types)})

    def serialise_appends(self) -> None:
        """Take the events-table lock now, so reads that decide an append cannot race (it
        waits for every transaction that has appended, and holds off every other append)."""
        if not self._appends_serialised:
            self._store.recorder.lock_table(self._cursor)
            self._appends_serialised = True
