"""PostgreSQL errors as ledger errors, mapped by SQLSTATE — never by matching message text.

eventsourcing wraps psycopg's errors in its own ``PersistenceError``; those are unwrapped and
mapped the same way, and one the mapping cannot classify is a
:class:`~ledger.core.errors.StoreError`, so no driver or eventsourcing error leaves the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from eventsourcing.persistence import PersistenceError
from psycopg_pool import PoolTimeout

from ledger.core.errors import (
    ConcurrencyConflictError,
    DatabaseBusyError,
    DatabaseUnusableError,
    LedgerError,
    ReadOnlyDatabaseError,
    StoreError,
)

_PG_CONFLICT = {
    "40P01": "deadlock detected",
    "40001": "serialization failure",
    "23505": "another writer appended the same event first",
}
_PG_READ_ONLY = "25006"  # read_only_sql_transaction: a hot standby, or a read-only session
_PG_BUSY = {"55P03", "57014"}  # lock_not_available, query_canceled (statement/lock timeout)
# Connection exceptions, no such database, bad credentials, no privilege, server shutting
# down, idle-in-transaction timeout, too many connections.
_PG_UNUSABLE_CLASSES = ("08", "28", "3D", "42501", "57P", "25P03", "53300")
# The connection broke under a statement: a network error (class 08) or the server ending
# the session (terminated by an administrator, crash shutdown, shutting down).
_PG_CONNECTION_LOST = ("08", "57P01", "57P02", "57P03")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (a ledger error, or any error with a psycopg one in its causes) says the
    connection broke under a statement, so that the same statement on a fresh connection
    may well succeed. A pool that could not hand out a connection in time is not that: the
    server is down or saturated, and a retry would only wait as long again."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, PoolTimeout):
            return False
        if isinstance(cause, psycopg.OperationalError):
            return cause.sqlstate is None or cause.sqlstate.startswith(_PG_CONNECTION_LOST)
        cause = cause.__cause__
    return False


def from_postgres(exc: psycopg.Error, where: str) -> LedgerError:
    """The ledger error for a psycopg error (``where``: which database, for the message)."""
    sqlstate = exc.sqlstate
    detail = str(exc).strip() or type(exc).__name__
    if sqlstate in _PG_CONFLICT:
        return ConcurrencyConflictError(f"{_PG_CONFLICT[sqlstate]}: {detail}", sqlstate=sqlstate)
    if sqlstate == _PG_READ_ONLY:
        return ReadOnlyDatabaseError(
            f"{where} only reads (a hot standby, or a read-only session): writes go to the "
            f"primary: {detail}",
            sqlstate=sqlstate,
        )
    if sqlstate in _PG_BUSY:
        return DatabaseBusyError(f"{where}: {detail}", sqlstate=sqlstate)
    if sqlstate is None and isinstance(exc, psycopg.OperationalError):
        # No SQLSTATE: the connection itself failed (refused, timed out, pool exhausted).
        return DatabaseUnusableError(f"{where}: {detail}")
    if sqlstate is not None and sqlstate.startswith(_PG_UNUSABLE_CLASSES):
        return DatabaseUnusableError(f"{where}: {detail}", sqlstate=sqlstate)
    return StoreError(f"{where}: {detail}", sqlstate=sqlstate)


def from_persistence(exc: PersistenceError, where: str) -> LedgerError:
    """eventsourcing wraps psycopg's errors; map the original by its SQLSTATE."""
    cause = exc.__cause__
    if isinstance(cause, psycopg.Error):
        return from_postgres(cause, where)
    return StoreError(f"{where}: {exc}")


@contextmanager
def errors_mapped(where: str) -> Iterator[None]:
    """Raise psycopg and eventsourcing errors from inside as ledger errors (``where``: which
    database, for the message)."""
    try:
        yield
    except psycopg.Error as exc:
        raise from_postgres(exc, where) from exc
    except PersistenceError as exc:
        raise from_persistence(exc, where) from exc
