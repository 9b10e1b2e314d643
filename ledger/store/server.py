"""Facts about the database server behind a URL, and the one maintenance statement a benchmark
runs: the driver calls a front end needs outside a :class:`~ledger.store.store.Store`, kept here
so that drivers stay in the store.

Each call opens its own short connection (autocommit) rather than borrowing one from a
store's pool: a statement like ``ANALYZE`` must not run inside a unit of work's transaction.
"""

from __future__ import annotations

import sqlite3

import psycopg

from ledger.core.errors import StoreError
from ledger.store.config import is_postgres

ANALYZE_QUEUE = "ANALYZE jl_queue"
"""Fresh planner statistics for the queue view. A maintenance statement, not a ledger query
(so not among the named queries): after a bulk insert the claim query is otherwise planned
from an empty table's statistics and crawls until autovacuum analyses the table."""


def server_version(url: str) -> str:
    """The database product and its version, e.g. ``PostgreSQL 15.4`` or ``SQLite 3.45.1``
    (for SQLite, the library this process links: the "server" is in-process)."""
    if not is_postgres(url):
        return f"SQLite {sqlite3.sqlite_version}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            version = conn.info.parameter_status("server_version") or "unknown"
    except psycopg.Error as exc:
        raise StoreError(
            f"reading the server version failed: {exc}", sqlstate=exc.sqlstate
        ) from None
    return f"PostgreSQL {version}"


def analyze_queue(url: str) -> bool:
    """Refresh the queue view's planner statistics; whether the backend needed it.

    PostgreSQL runs :data:`ANALYZE_QUEUE`. On SQLite nothing runs: the claim query there has
    never needed it (its figures have always been measured without). A failure is a
    :class:`StoreError` whose message starts with the statement.
    """
    if not is_postgres(url):
        return False
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ANALYZE_QUEUE)
    except psycopg.Error as exc:
        raise StoreError(f"{ANALYZE_QUEUE} failed: {exc}", sqlstate=exc.sqlstate) from None
    return True
