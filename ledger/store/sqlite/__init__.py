"""The SQLite backend (see :mod:`ledger.store.sqlite.store`)."""

from ledger.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
