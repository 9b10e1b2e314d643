"""The PostgreSQL backend (see :mod:`ledger.store.postgres.store`)."""

from ledger.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
