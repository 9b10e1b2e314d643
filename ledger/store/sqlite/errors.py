"""SQLite errors as ledger errors, mapped by result code — never by matching message text.

eventsourcing wraps sqlite3's errors in its own ``PersistenceError``; those are unwrapped and
mapped the same way, so no driver or eventsourcing error leaves the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from eventsourcing.persistence import PersistenceError

from ledger.core.errors import (
    ConcurrencyConflictError,
    DatabaseBusyError,
    DatabaseUnusableError,
    LedgerError,
    StoreError,
)

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
    """The ledger error for a sqlite3 error (``where``: which database, for the message)."""
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


def from_persistence(exc: PersistenceError, where: str) -> LedgerError:
    """eventsourcing wraps sqlite3's errors; map the original by its result code."""
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error):
        return from_sqlite(cause, where)
    if isinstance(exc, TimeoutError):
        # The pool's writer slot: another thread of this process holds the write lock.
        return DatabaseBusyError(f"{where}: {exc}")
    return DatabaseUnusableError(f"{where}: {exc}")


@contextmanager
def errors_mapped(where: str) -> Iterator[None]:
    """Raise sqlite3 and eventsourcing errors from inside as ledger errors (``where``: which
    database, for the message)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise from_sqlite(exc, where) from exc
    except PersistenceError as exc:
        raise from_persistence(exc, where) from exc
