"""Shared fixtures: real SQLite files and real PostgreSQL databases, never mocks.

Built on the package's own pytest plugin (ledger/testing/pytest_plugin.py, docs/testing.md):
its template databases, SQLite template file, server option and fake clock; the suite
overrides only ``jobledger_pg_url``, with the reset-and-reuse pool below.

PostgreSQL: one template database with the ledger schema is built per test session; each test
gets a database of its own in the template's state: a ``CREATE DATABASE … TEMPLATE`` copy, or
one an earlier test used that was reset to exactly the template's state (otherwise it is
dropped ``WITH (FORCE)``; see tests/pg_databases.py for why and how). The
server comes from ``--jobledger-postgres``, else ``$JOBLEDGER_TEST_PG`` (default:
127.0.0.1:5432 as ``postgres``). If it is
not reachable the PostgreSQL tests fail; they are never skipped.

SQLite: one ledger file is initialised per session; each test gets a byte copy of it in its
own ``tmp_path`` (initialising writes the schema deterministically, so a copy is the same
file a fresh ``Ledger.open(create=True)`` writes, at a fraction of the cost).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_databases import TestDatabases

from ledger import FakeClock, Ledger
from ledger.store.postgres.databases import create_database, database_url, drop_database

# pytester: the pytest plugin's own tests (tests/plugin) run small test files through it.
pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def pg_template(jobledger_pg_template: str) -> str:
    """The plugin's session template database (ledger.testing.pytest_plugin)."""
    return jobledger_pg_template


_SESSION_DATABASES: list[TestDatabases] = []


@pytest.fixture(scope="session")
def pg_databases(jobledger_postgres_server: str, pg_template: str) -> Iterator[TestDatabases]:
    """The session's test databases: copies of the template, reset and reused when a reset
    restores the template's exact state (see tests/pg_databases.py)."""

    def url_for(dbname: str) -> str:
        return database_url(jobledger_postgres_server, dbname)

    databases = TestDatabases(
        pg_template,
        lambda dbname: psycopg.connect(url_for(dbname), autocommit=True, connect_timeout=5),
        url_for,
    )
    _SESSION_DATABASES.append(databases)
    try:
        yield databases
    finally:
        databases.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for databases in _SESSION_DATABASES:
        terminalreporter.write_line(databases.summary())


@pytest.fixture
def jobledger_pg_url(jobledger_postgres_server: str, pg_databases: TestDatabases) -> Iterator[str]:
    """The plugin's PostgreSQL ledger, overridden for this suite: a database in the template's
    state for this test alone, from the session's pool of reset copies (cheaper than the
    plugin's copy-and-drop per test; tests/pg_databases.py says why)."""
    name = pg_databases.take()
    try:
        yield database_url(jobledger_postgres_server, name)
    finally:
        pg_databases.give_back(name)


@pytest.fixture
def pg_url(jobledger_pg_url: str) -> str:
    """An initialised PostgreSQL database in the template's state, for this test alone."""
    return jobledger_pg_url


@pytest.fixture
def empty_pg_url(jobledger_postgres_server: str) -> Iterator[str]:
    """A fresh PostgreSQL database with no tables at all."""
    name = f"jl_empty_{uuid.uuid4().hex[:12]}"
    url = create_database(jobledger_postgres_server, name)
    try:
        yield url
    finally:
        drop_database(jobledger_postgres_server, name)


@pytest.fixture(scope="session")
def sqlite_template(jobledger_sqlite_template: Path) -> Path:
    """The plugin's session SQLite ledger file, closed and never opened again: what every
    test's ledger file is a byte copy of."""
    return jobledger_sqlite_template


@pytest.fixture
def sqlite_url(jobledger_sqlite_url: str) -> str:
    """A fresh, initialised SQLite ledger file for one test (the plugin's)."""
    return jobledger_sqlite_url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    """An initialised ledger database, once on each backend."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(request.getfixturevalue("sqlite_url"))


@pytest.fixture
def clock(jobledger_clock: FakeClock) -> FakeClock:
    """The plugin's fake clock (2026-01-01T00:00:00Z until moved)."""
    return jobledger_clock


@pytest.fixture
def ledger(db_url: str, clock: FakeClock) -> Iterator[Ledger]:
    """A ledger on each backend, with the fake clock and the job types tests use defined."""
    with Ledger.open(db_url, clock=clock) as opened:
        yield opened


@pytest.fixture
def defined(ledger: Ledger) -> Ledger:
    """The ledger with job type 't' defined (jitter-free backoff: 10 s doubling to 100 s)."""
    from ledger import BackoffPolicy

    ledger.define("t", backoff=BackoffPolicy(base_s=10.0, max_s=100.0, jitter=0.0))
    return ledger
