"""Ending the PostgreSQL sessions that are frozen inside a write and block others.

The server ends a session that sits idle inside a transaction for longer than its
``idle_in_transaction_session_timeout``, and with it the locks it holds. A client frozen in
the middle of a pipelined write (psycopg's pipeline mode: Execute messages sent, no Sync
yet) escapes that: the server sends no ReadyForQuery, so the session stays ``active``,
waiting on its client (``wait_event = 'ClientRead'``), and neither that timeout nor
``statement_timeout`` applies (PostgreSQL 17's ``transaction_timeout`` would). It keeps the
events table's lock, and every writer waits until the client resumes or dies.

:func:`end_frozen_writers` does what the idle timeout would do there, with the same bound:
one statement (``sessions_frozen_end``) ends each session of the database that is

- in a transaction, ``active`` and waiting on its client for more than ``silent_s`` since its
  last statement began — a live client sends its next statement within milliseconds — and
  not running a COPY (a projection rebuild's ``COPY FROM STDIN`` also waits on its client,
  and its data messages do not move ``state_change``);
- and a blocker (``pg_blocking_pids``) of a session waiting on a lock: a silent session that
  holds nothing anyone waits for costs nothing and is left alone.

It needs no table lock, so it runs while every writer is blocked. Ending another role's
session needs that role's privileges or ``pg_signal_backend`` (never a superuser's, unless
superuser); seeing its state needs the same or ``pg_read_all_stats``. Without them nothing is
ended: one warning is logged, and the store goes on (``docs/operations.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg.rows import DictRow

from ledger.core.errors import LedgerError
from ledger.store.frozen_writers import FrozenWriter

log = logging.getLogger(__name__)

INSUFFICIENT_PRIVILEGE = "42501"


class FrozenWriterEnder:
    """Runs ``sessions_frozen_end`` for one store, and warns once when it lacks privileges."""

    def __init__(
        self,
        cursor: Callable[[], AbstractContextManager[psycopg.Cursor[DictRow]]],
        sql: Mapping[str, str],
        where: str,
    ) -> None:
        self._cursor = cursor
        self._sql = sql
        self._where = where
        self._warned = False

    def end(self, silent_s: float) -> list[FrozenWriter]:
        """End the frozen sessions that block others (see the module docstring); the ones
        found, each with whether the server ended it. Privileges missing: ``[]``."""
        if silent_s < 0:
            raise ValueError("silent_s must be >= 0")
        try:
            with self._cursor() as cursor:
                cursor.execute(self._sql["sessions_frozen_end"], {"silent_s": float(silent_s)})
                rows = cursor.fetchall()
        except LedgerError as exc:  # the store's cursor maps driver errors
            if exc.sqlstate != INSUFFICIENT_PRIVILEGE:
                raise
            self._warn_once(exc)
            return []
        return [_frozen_writer(row) for row in rows]

    def _warn_once(self, exc: LedgerError) -> None:
        level = logging.DEBUG if self._warned else logging.WARNING
        log.log(
            level,
            "cannot end a writer frozen inside a transaction on %s: %s; grant this role "
            "pg_signal_backend (or run every ledger client as one role), or writers wait "
            "until the frozen one resumes",
            self._where,
            str(exc).strip(),
        )
        self._warned = True


def _frozen_writer(row: Mapping[str, Any]) -> FrozenWriter:
    return FrozenWriter(
        pid=row["pid"],
        user=row["user_name"] or "",
        application_name=row["application_name"] or "",
        client_addr=row["client_addr"],
        silent_s=row["silent_s"],
        transaction_s=row["transaction_s"],
        blocked_pids=tuple(row["blocked_pids"]),
        query=row["query"] or "",
        ended=bool(row["ended"]),
    )
