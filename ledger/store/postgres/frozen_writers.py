"""Ending the PostgreSQL sessions frozen inside a write that block others.

A client stopped (SIGSTOP, a paused VM, a debugger) inside a transaction keeps its locks, the
events table's among them, and every writer waits. The server ends a session that sits idle
inside a transaction for ``idle_in_transaction_session_timeout``, but not one frozen in the
middle of a pipelined write (psycopg's pipeline mode: Execute messages sent, no Sync yet):
the server sends no ReadyForQuery, so the session stays ``active``, waiting on its client
(``wait_event = 'ClientRead'``), and neither that timeout nor ``statement_timeout`` applies
(PostgreSQL 17's ``transaction_timeout`` would). And a process rarely freezes with one
session: its other threads' units of work are queued for the same lock, each holding its row
locks, and as the server ends one frozen session the next one of the same process gets the
lock and holds it in turn — every writer then waits one bound per session (measured by the
chaos suite: 6.7 s with a 2 s bound).

:meth:`FrozenWriterEnder.end` runs one statement (``sessions_frozen_end``) that ends each
session of the database that is

- frozen: in a transaction, waiting on its client (ClientRead) for more than ``silent_s``
  since its last statement began, not running a COPY (a projection rebuild's ``COPY FROM
  STDIN`` also waits on its client, and its data messages do not move ``state_change``) —
  except a large enqueue's COPY into jl_events or jl_queue, which holds the events-table lock
  and lasts milliseconds (:mod:`ledger.store.postgres.bulk_writes`) — and
  either ``active`` — mid-pipeline — or idle in its transaction *and opened by a jobledger
  store* (whose units of work never sit idle: statements follow each other; a session of
  another client idle in its transaction is left to its own server timeout);
- and a blocker (``pg_blocking_pids``) of a session waiting on a lock, or a jobledger
  session holding a transaction id: worker-path appends take no table lock, so nobody queues
  on such a writer, yet its transaction holds every tailing reader's frontier back and its
  locked rows are skipped by every claimer and reaper (``SKIP LOCKED``) — its leases would
  never be reaped. Another client's silent session that blocks nobody is left alone;

and with it every other session of the same process (a jobledger store names its sessions
``jobledger <pid>@<host>``: :func:`process_application_name`) that is in a transaction and has
done nothing for as long — the queued lock waits of the frozen process. The default
``silent_s`` is half the store's idle-in-transaction timeout, so the watchdog ends a frozen
process's sessions together before the server ends the first of them alone.

Why that is safe: a live client sends the next statement of a unit of work within
milliseconds, so a jobledger session silent for a second or more inside a transaction is
frozen (or its whole process starved, and then it stalls every writer as much); no COPY
is ended but an enqueue's; nothing is ended that blocks nobody; and what is ended is rolled
back — its client sees a lost connection, as after a server restart, which the runtime
survives.

It needs no table lock, so it runs while every writer is blocked. Ending another role's
session needs that role's privileges or ``pg_signal_backend`` (never a superuser's, unless
superuser); seeing its state needs the same or ``pg_read_all_stats``. Without them nothing is
ended: one warning is logged, and the store goes on (``docs/operations.md``).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg.rows import DictRow

from ledger.core.errors import LedgerError
from ledger.store.frozen_writers import FrozenWriter

log = logging.getLogger(__name__)

INSUFFICIENT_PRIVILEGE = "42501"
APPLICATION_NAME_BYTES = 63
"""PostgreSQL keeps this much of an ``application_name`` (NAMEDATALEN - 1)."""


def process_application_name() -> str:
    """``jobledger <pid>@<host>``: the ``application_name`` of this process's sessions, by which
    the watchdog finds a frozen process's other sessions (and an operator sees, in
    ``pg_stat_activity``, which process holds a lock). The host is cut, never the pid. Read
    when a store opens: open stores after a fork (psycopg's pools need that anyway)."""
    prefix = f"jobledger {os.getpid()}@"
    room = APPLICATION_NAME_BYTES - len(prefix.encode())
    host = socket.gethostname().encode()[:room].decode(errors="ignore")
    return prefix + host


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
        state=row["state"] or "",
        silent_s=row["silent_s"],
        transaction_s=row["transaction_s"],
        blocked_pids=tuple(row["blocked_pids"]),
        frozen_pid=row["frozen_pid"],
        query=row["query"] or "",
        ended=bool(row["ended"]),
    )
