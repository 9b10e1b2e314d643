"""Database errors as ledger errors, mapped by SQLSTATE or SQLite result code — never by
matching message text."""

from __future__ import annotations

import sqlite3

import psycopg

from ledger.core.errors import (
    ConcurrencyConflictError,
    DatabaseBusyError,
    DatabaseUnusableError,
    LedgerError,
    StoreError,
)

_PG_CONFLICT = {
    "40P01": "deadlock detected",
    "40001": "serialization failure",
    "23505": "another writer appended the same event first",
}
_PG_BUSY = {"55P03", "57014"}  # lock_not_available, query_canceled (statement/lock timeout)
# Connection exceptions, no such database, bad credentials, no privilege, server shutting
# down, idle-in-transaction timeout, too many connections.
_PG_UNUSABLE_CLASSES = ("08", "28", "3D", "42501", "57P", "25P03", "53300")


def from_postgres(exc: psycopg.Error, where: str) -> LedgerError:
    sqlstate = exc.sqlstate
    detail = str(exc).strip() or type(exc).__name__
    if sqlstate in _PG_CONFLICT:
        return ConcurrencyConflictError(f"{_PG_CONFLICT[sqlstate]}: {detail}", sqlstate=sqlstate)
    if sqlstate in _PG_BUSY:
        return DatabaseBusyError(f"{where}: {detail}", sqlstate=sqlstate)
    if sqlstate is None and isinstance(exc, psycopg.OperationalError):
        # No SQLSTATE: the connection itself failed (refused, timed out, pool exhausted).
        return DatabaseUnusableError(f"{where}: {detail}")
    if sqlstate is not None and sqlstate.startswith(_PG_UNUSABLE_CLASSES):
        return DatabaseUnusableError(f"{where}: {detail}", sqlstate=sqlstate)
    return StoreError(f"{where}: {detail}", sqlstate=sqlstate)


_SQLITE_BUSY = {"SQLITE_BUSY", "SQLITE_LOCKED"}
_SQLITE_UNUSABLE = {
    "SQLITE_NOTADB",
    "SQLITE_CANTOPEN",
    "SQLITE_READONLY",
    "SQLITE_PERM",
    "SQLITE_CORRUPT",
    "SQLITE_AUTH",
    "SQLITE_FULL",
    "SQLITE_IOERR",
}


def from_sqlite(exc: sqlite3.Error, where: str) -> LedgerError:
    name = getattr(exc, "sqlite_errorname", None) or ""
    primary = "_".join(name.split("_")[:2])  # SQLITE_BUSY_SNAPSHOT -> SQLITE_BUSY
    detail = str(exc) or type(exc).__name__
    if primary == "SQLITE_CONSTRAINT":
        return ConcurrencyConflictError(f"{where}: {detail}", sqlstate=name)
    if primary in _SQLITE_BUSY:
        return DatabaseBusyError(f"{where}: {detail}", sqlstate=name)
    if primary in _SQLITE_UNUSABLE:
        return DatabaseUnusableError(f"{where}: {detail}", sqlstate=name)
    return StoreError(f"{where}: {detail}", sqlstate=name or None)
