"""Schema DDL on a live PostgreSQL ledger that cannot deadlock with its writers.

``migrate`` beside a running enqueuer ended in ``deadlock detected`` (2 rounds of 2): its one
DDL transaction ran ``CREATE INDEX IF NOT EXISTS … ON jl_queue`` (a ``SHARE`` lock on
``jl_queue``, taken even when the index exists) and then ``ALTER TABLE jl_events ADD COLUMN
IF NOT EXISTS`` (``ACCESS EXCLUSIVE`` on ``jl_events``), while an enqueue holds the events
table first and then writes ``jl_queue``: the opposite order. No single order fits every
writer (an enqueue takes the events table first; a worker's completion locks its queue rows
first and appends last), so the DDL takes all its locks at the start, in one ``LOCK TABLE``
(the events table first, as an enqueue does), each wait bounded by a ``lock_timeout`` below
the server's ``deadlock_timeout`` (the query ``ddl_lock_timeout``: half of it, at most 500 ms). In a
lock cycle with a writer, this transaction's wait therefore ends first, it rolls back having
changed nothing, and it is run again after a short pause; the writer never sees an error. The
timeout stays set for the whole transaction, so an unforeseen wait gives up the same way.
The same reasoning as the rebuild's swap (:meth:`PostgresShadowTables.lock_for_swap`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from ledger.core.errors import DatabaseBusyError
from ledger.store.postgres.unit_of_work import lock_timeout

DDL_ATTEMPTS = 50
"""Tries before a schema change gives up on locking tables that writers keep busy (with the
pauses between, about a minute)."""

LOCK_NOT_AVAILABLE = "55P03"

log = logging.getLogger(__name__)

T = TypeVar("T")
Cursor = psycopg.Cursor[DictRow]


def lock_relations(cursor: Cursor, sql: Mapping[str, str], relations: Sequence[str]) -> None:
    """``ACCESS EXCLUSIVE`` on those of ``relations`` that exist, in their order, each wait
    bounded below ``deadlock_timeout``; the bound stays for the rest of the transaction."""
    cursor.execute(sql["ddl_lock_timeout"])
    row = cursor.fetchone()
    assert row is not None
    lock_timeout(cursor, int(row["ms"]) / 1000)
    cursor.execute(sql["ddl_relations_present"], {"names": list(relations)})
    present = [str(r["name"]) for r in cursor.fetchall()]
    if present:
        names = SQL(", ").join(Identifier(*name.split(".")) for name in present)
        cursor.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(names))


def guarded_ddl(
    transaction: Callable[[], AbstractContextManager[Cursor]],
    sql: Mapping[str, str],
    relations: Sequence[str],
    work: Callable[[Cursor], T],
    *,
    where: str,
    attempts: int = DDL_ATTEMPTS,
    pause: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``work`` in a transaction that first locks ``relations`` (see the module), again
    after a pause each time a lock was not had in time; its result. Past ``attempts`` a
    :class:`DatabaseBusyError` says what to do."""
    for attempt in range(1, attempts + 1):
        try:
            with transaction() as cursor:
                lock_relations(cursor, sql, relations)
                return work(cursor)
        except DatabaseBusyError as exc:
            if exc.sqlstate != LOCK_NOT_AVAILABLE:
                raise
            if attempt == attempts:
                raise DatabaseBusyError(
                    f"{where}: could not lock the ledger's tables for a schema change in "
                    f"{attempts} tries (writers kept them busy); nothing was changed: run it "
                    "again, with the workers running or not",
                    sqlstate=exc.sqlstate,
                ) from exc
            log.info("schema change: tables busy (try %d of %d); trying again", attempt, attempts)
            pause(min(0.05 * attempt, 1.0))
    raise AssertionError("unreachable")
