"""Shared fixtures: real SQLite files and real PostgreSQL databases, never mocks.

PostgreSQL: one template database with the ledger schema is built per test session; each test
gets a database of its own in the template's state: a ``CREATE DATABASE … TEMPLATE`` copy, or
one an earlier test used that was reset to exactly the template's state (otherwise it is
dropped ``WITH (FORCE)``; see tests/pg_databases.py for why and how). The
server comes from ``$JOBLEDGER_TEST_PG`` (default: 127.0.0.1:5432 as ``postgres``). If it is
not reachable the PostgreSQL tests fail; they are never skipped.

SQLite: one ledger file is initialised per session; each test gets a byte copy of it in its
own ``tmp_path`` (initialising writes the schema deterministically, so a copy is the same
file a fresh ``Ledger.open(create=True)`` writes, at a fraction of the cost).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_databases import TestDatabases

from ledger import FakeClock, Ledger

# pytester: the pytest plugin's own tests (tests/plugin) run small test files through it.
pytest_plugins = ["pytester"]

PG_SERVER = os.environ.get("JOBLEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=5)


def pg_url_for(dbname: str) -> str:
    return f"{PG_SERVER}/{dbname}"


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    name = f"jl_tpl_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        Ledger.open(pg_url_for(name), create=True).close()
        yield name
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_SESSION_DATABASES: list[TestDatabases] = []


@pytest.fixture(scope="session")
def pg_databases(pg_template: str) -> Iterator[TestDatabases]:
    """The session's test databases: copies of the template, reset and reused when a reset
    restores the template's exact state (see tests/pg_databases.py)."""
    databases = TestDatabases(
        pg_template,
        lambda dbname: psycopg.connect(pg_url_for(dbname), autocommit=True, connect_timeout=5),
        pg_url_for,
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
def pg_url(pg_databases: TestDatabases) -> Iterator[str]:
    """An initialised PostgreSQL database in the template's state, for this test alone."""
    name = pg_databases.take()
    try:
        yield pg_url_for(name)
    finally:
        pg_databases.give_back(name)


@pytest.fixture
def empty_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database with no tables at all."""
    name = f"jl_empty_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield pg_url_for(name)
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised SQLite ledger file, closed (its WAL checkpointed into it) and never
    opened again: what every test's ledger file is a byte copy of."""
    path = tmp_path_factory.mktemp("template") / "ledger.db"
    Ledger.open(str(path), create=True).close()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh, initialised SQLite ledger file for one test."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    """An initialised ledger database, once on each backend."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(request.getfixturevalue("sqlite_url"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


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
