"""Whole databases on a PostgreSQL server: made (empty, or as a copy of a template) and
dropped, for the pytest plugin's throwaway ledgers (:mod:`ledger.testing.pytest_plugin`).

``server`` is a URL without a database (``postgresql://postgres@127.0.0.1:5432``); these
statements run on its ``postgres`` database, outside any transaction, as ``CREATE DATABASE``
must.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

__all__ = ["create_database", "database_url", "drop_database"]

CONNECT_TIMEOUT_S = 5


def database_url(server: str, name: str) -> str:
    """The URL of database ``name`` on ``server``."""
    return f"{server.rstrip('/')}/{name}"


def create_database(server: str, name: str, *, template: str | None = None) -> str:
    """Create database ``name`` (a copy of ``template``, if given: ``CREATE DATABASE …
    TEMPLATE``, which needs no session on the template); its URL."""
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    _run(server, statement)
    return database_url(server, name)


def drop_database(server: str, name: str) -> None:
    """Drop database ``name`` if it exists, ending the sessions still on it (``FORCE``: a pool
    or listener a test left open must not keep it)."""
    _run(server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _run(server: str, statement: sql.Composed) -> None:
    with psycopg.connect(
        database_url(server, "postgres"), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
    ) as admin:
        admin.execute(statement)
