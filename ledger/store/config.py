"""Which database a ledger lives in: a URL, the ``JOBLEDGER_DB`` variable, or the default.

- ``postgresql://user@host:port/dbname`` (or ``postgres://``): PostgreSQL.
- ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, or a bare path: SQLite.
- nothing: ``$JOBLEDGER_DB``, else ``./jobledger.db``.
"""

from __future__ import annotations

import os

from ledger.core.errors import InvalidRequestError
from ledger.store.store import Store

ENV_VAR = "JOBLEDGER_DB"
DEFAULT_DATABASE = "./jobledger.db"


def resolve_url(url: str | None = None) -> str:
    """The database URL to use: ``url``, else ``$JOBLEDGER_DB``, else the default file."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_DATABASE


def is_postgres(url: str) -> bool:
    """A PostgreSQL URL, or a libpq ``key=value`` connection string."""
    return url.startswith(("postgresql://", "postgres://")) or (
        "=" in url and any(part.split("=", 1)[0] in _LIBPQ_KEYS for part in url.split())
    )


_LIBPQ_KEYS = {"host", "hostaddr", "port", "dbname", "user", "password", "service"}


def sqlite_path(url: str) -> str:
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        if not rest.startswith("/") or rest == "/":
            raise InvalidRequestError(f"bad SQLite URL {url!r}; use sqlite:///path/to/file.db")
        return rest[1:]
    if "://" in url:
        raise InvalidRequestError(
            f"unsupported database URL {url!r}; use postgresql://…, sqlite:///… or a file path"
        )
    return url


def open_store(
    url: str | None = None, *, pool_size: int | None = None, create: bool = False
) -> Store:
    """Connect to the database at ``url`` (resolved as :func:`resolve_url` says).

    Without ``create`` a SQLite file that does not exist is refused, not created."""
    resolved = resolve_url(url)
    if is_postgres(resolved):
        from ledger.store.postgres import PostgresStore

        return PostgresStore(resolved, pool_size=pool_size or 2)
    from ledger.store.sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(resolved), pool_size=pool_size or 5, create=create)
