"""Which database a ledger lives in: a URL, the ``JOBLEDGER_DB`` variable, or the default.

- ``postgresql://user@host:port/dbname`` (or ``postgres://``): PostgreSQL.
- ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, or a bare path: SQLite.
- nothing: ``$JOBLEDGER_DB``, else ``./jobledger.db``.

A read database (``$JOBLEDGER_READ_DB``; :func:`open_replica_store`) is a PostgreSQL
streaming replica of that ledger, for reads only; there is no default.

A PostgreSQL URL that does not parse, or whose options are malformed, is refused before any
connection with :class:`DatabaseUrlError` (``config.invalid_url``), whose message never
quotes the URL: a URL may carry a password, and a parser's message quotes the part it
choked on, which may be the password itself.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING

from ledger.core.errors import InvalidRequestError, LedgerError

if TYPE_CHECKING:  # the store's module loads every query and view: not for parsing a URL
    from ledger.store.store import Store

ENV_VAR = "JOBLEDGER_DB"
READ_ENV_VAR = "JOBLEDGER_READ_DB"
DEFAULT_DATABASE = "./jobledger.db"


def resolve_url(url: str | None = None) -> str:
    """The database URL to use: ``url``, else ``$JOBLEDGER_DB``, else the default file."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_DATABASE


def resolve_read_url(url: str | None = None) -> str | None:
    """The replica to read from: ``url``, else ``$JOBLEDGER_READ_DB``, else none; checked
    as :func:`check_read_url` says."""
    resolved = url or os.environ.get(READ_ENV_VAR) or None
    if resolved is not None:
        check_read_url(resolved)
    return resolved


def check_read_url(url: str) -> None:
    """Refuse a read database that cannot be a streaming replica: anything but a PostgreSQL
    URL (SQLite has no replicas; a copy of the file would be a fork of the ledger, not a
    view of it), or one that does not parse. Raises :class:`DatabaseUrlError`."""
    if not is_postgres(url):
        raise DatabaseUrlError(
            "a read database must be a PostgreSQL streaming replica (postgresql://…): "
            "SQLite has no replicas, so a SQLite ledger is read where it is written"
        )
    postgres_params(url)


def is_postgres(url: str) -> bool:
    """A PostgreSQL URL, or a libpq ``key=value`` connection string."""
    return url.startswith(("postgresql://", "postgres://")) or (
        "=" in url and any(part.split("=", 1)[0] in _LIBPQ_KEYS for part in url.split())
    )


_LIBPQ_KEYS = {"host", "hostaddr", "port", "dbname", "user", "password", "service"}


class DatabaseUrlError(LedgerError):
    """A database URL (or libpq string) that does not parse, or a malformed option in it."""

    code = "config.invalid_url"


_QUOTED = re.compile(r'"([^"]*)"')
_SAFE_WORDS = _LIBPQ_KEYS | {"connect_timeout", "sslmode", "options", "application_name"}


def _without_quotes(message: str) -> str:
    """A libpq parse message without the URL it quotes, nor any other quoted fragment of
    the URL (the fragment may be a password): only keyword names are kept."""
    for marker in (' in URI: "', " in connection info string"):
        message = message.split(marker, 1)[0]
    return _QUOTED.sub(_mask, message)


def _mask(quoted: re.Match[str]) -> str:
    """A quoted fragment of a parse message, masked unless a keyword or a single mark."""
    fragment = quoted.group(1)
    return quoted.group(0) if len(fragment) < 2 or fragment in _SAFE_WORDS else '"…"'


def postgres_params(url: str) -> dict[str, str]:
    """The connection parameters of a PostgreSQL URL or libpq string, checked: the string
    parses, ``port`` is one or more ports (1-65535, comma-separated), ``connect_timeout`` a
    number of seconds >= 0, no host name holds ``@`` (the tail of a password with a raw
    ``@`` in it). Raises :class:`DatabaseUrlError`, never quoting the URL."""
    from psycopg import ProgrammingError  # here: opening a SQLite ledger loads no psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        url.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in argv or the environment: libpq takes text
        raise DatabaseUrlError("the PostgreSQL URL is not UTF-8 text") from None
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(url).items()}
    except ProgrammingError as exc:
        raise DatabaseUrlError(
            f"the PostgreSQL URL does not parse: {_without_quotes(str(exc))}"
        ) from None
    for host in params.get("host", "").split(","):
        if "@" in host and not host.startswith("/"):
            # libpq splits user info at the first "@": a raw "@" in the password leaves the
            # password's tail in the host name, which every connection error then quotes.
            raise DatabaseUrlError(
                "the host name holds '@': write an '@' in the user or password as %40"
            )
    for port in filter(None, params.get("port", "").split(",")):
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise DatabaseUrlError("port must be a number from 1 to 65535")
    timeout = params.get("connect_timeout")
    if timeout is not None:
        try:
            seconds = float(timeout)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise DatabaseUrlError("connect_timeout must be a number of seconds >= 0")
    return params


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
    url: str | None = None,
    *,
    pool_size: int | None = None,
    create: bool = False,
    idle_in_transaction_s: float | None = None,
) -> Store:
    """Connect to the database at ``url`` (resolved as :func:`resolve_url` says).

    Without ``create`` a SQLite file that does not exist is refused, not created.
    ``idle_in_transaction_s`` (PostgreSQL): how long a session may sit idle inside a
    transaction before the server ends it, releasing its locks (60 s by default)."""
    resolved = resolve_url(url)
    if is_postgres(resolved):
        from ledger.store.postgres import PostgresStore

        postgres_params(resolved)
        return PostgresStore(
            resolved, pool_size=pool_size or 2, idle_in_transaction_s=idle_in_transaction_s
        )
    from ledger.store.sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(resolved), pool_size=pool_size or 5, create=create)


def open_archive_store(url: str | None = None, *, pool_size: int | None = None) -> Store | None:
    """A read-only store over the ledger at ``url`` and its archive together (decision 31),
    or ``None`` where there is no archive to read (a ledger never archived)."""
    resolved = resolve_url(url)
    if is_postgres(resolved):
        from ledger.store.postgres.archive_read_store import PostgresArchiveReadStore

        postgres_params(resolved)
        store = PostgresArchiveReadStore(resolved, pool_size=pool_size or 2)
        if store.has_archive():
            return store
        store.close()
        return None
    from ledger.store.sqlite.archive import archive_exists
    from ledger.store.sqlite.store import SQLiteArchiveReadStore

    path = sqlite_path(resolved)
    if not archive_exists(path):
        return None
    return SQLiteArchiveReadStore(path, pool_size=pool_size or 5)


def open_replica_store(
    url: str, *, primary: str | None = None, pool_size: int | None = None
) -> Store:
    """Connect, for reads only, to the PostgreSQL streaming replica at ``url`` (see
    :mod:`ledger.store.postgres.replica`); ``primary``, its primary's URL if known, lets
    :meth:`~ledger.store.store.Store.replica_lag` count the WAL not yet replayed."""
    check_read_url(url)
    if primary is not None:
        if not is_postgres(primary):
            raise DatabaseUrlError("a replica's primary must be a PostgreSQL URL")
        postgres_params(primary)
    from ledger.store.postgres.replica import PostgresReplicaStore

    return PostgresReplicaStore(url, primary=primary, pool_size=pool_size or 2)
