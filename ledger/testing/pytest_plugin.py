"""The pytest plugin jobledger ships (registered as ``jobledger`` by a ``pytest11`` entry
point, so installing the package is enough): throwaway ledgers, a fake clock, a registry,
inline mode and the enqueue assertions, as fixtures named ``jobledger_*`` (docs/testing.md).

Databases: a ledger on SQLite is a byte copy, in the test's ``tmp_path``, of one ledger file
initialised per session; one on PostgreSQL is a ``CREATE DATABASE … TEMPLATE`` copy of a
template database initialised once per session, dropped ``WITH (FORCE)`` after the test (and
the template after the session). The server: ``--jobledger-postgres URL``, else
``$JOBLEDGER_TEST_PG``, else ``postgresql://postgres@127.0.0.1:5432`` (a URL without a
database; the databases are named ``jl_tpl_*`` and ``jl_test_*``).

The module imports only pytest: the ledger (and its drivers) is imported by the fixtures that
need it, so that a test run that uses none of them pays nothing for the plugin.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ledger.api.ledger import Ledger
    from ledger.api.reader import Reader
    from ledger.clock import FakeClock
    from ledger.runtime.handlers import Registry
    from ledger.testing.enqueued import EnqueuedJobs
    from ledger.testing.inline import InlineLedger

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432"
POSTGRES_ENV = "JOBLEDGER_TEST_PG"
_URL_FIXTURES = {"sqlite": "jobledger_sqlite_url", "postgres": "jobledger_pg_url"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jobledger")
    group.addoption(
        "--jobledger-postgres",
        default=None,
        metavar="URL",
        help=(
            "PostgreSQL server for the jobledger_* fixtures, a URL without a database "
            f"(default: ${POSTGRES_ENV}, else {DEFAULT_POSTGRES})"
        ),
    )


def postgres_server(config: pytest.Config) -> str:
    """The PostgreSQL server the plugin's databases are made on (see the module's docstring)."""
    chosen = config.getoption("--jobledger-postgres") or os.environ.get(POSTGRES_ENV)
    return str(chosen or DEFAULT_POSTGRES).rstrip("/")


@pytest.fixture(scope="session")
def jobledger_postgres_server(pytestconfig: pytest.Config) -> str:
    """The PostgreSQL server URL (no database) the plugin makes its databases on."""
    return postgres_server(pytestconfig)


@pytest.fixture(scope="session")
def jobledger_pg_template(jobledger_postgres_server: str) -> Iterator[str]:
    """The name of a database with the ledger's schema, made once per session (dropped
    after it): what every ``jobledger_pg_url`` is a copy of. Nothing may connect to it."""
    from ledger.api.ledger import Ledger
    from ledger.store.postgres.databases import create_database, drop_database

    name = f"jl_tpl_{uuid.uuid4().hex[:12]}"
    url = create_database(jobledger_postgres_server, name)
    try:
        Ledger.open(url, create=True).close()
        yield name
    finally:
        drop_database(jobledger_postgres_server, name)


@pytest.fixture
def jobledger_pg_url(jobledger_postgres_server: str, jobledger_pg_template: str) -> Iterator[str]:
    """The URL of a fresh PostgreSQL database with the ledger's schema, for this test alone
    (a copy of the template, dropped after the test)."""
    from ledger.store.postgres.databases import create_database, drop_database

    name = f"jl_test_{uuid.uuid4().hex[:12]}"
    url = create_database(jobledger_postgres_server, name, template=jobledger_pg_template)
    try:
        yield url
    finally:
        drop_database(jobledger_postgres_server, name)


@pytest.fixture(scope="session")
def jobledger_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised SQLite ledger file, closed (its WAL checkpointed into it) and never
    opened again: what every ``jobledger_sqlite_url`` is a byte copy of (initialising writes
    the schema deterministically, so the copy is the file ``Ledger.open(create=True)``
    writes, at a fraction of the cost)."""
    from ledger.api.ledger import Ledger

    path = tmp_path_factory.mktemp("jobledger-template") / "ledger.db"
    Ledger.open(str(path), create=True).close()
    return path


@pytest.fixture
def jobledger_sqlite_url(jobledger_sqlite_template: Path, tmp_path: Path) -> str:
    """The URL of a fresh SQLite ledger file in the test's ``tmp_path``."""
    path = tmp_path / "ledger.db"
    shutil.copyfile(jobledger_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def jobledger_backend() -> str:
    """Which backend ``jobledger_url`` (and so ``jobledger_ledger``) is on: ``"sqlite"``.
    Parametrize it to run a test on both:
    ``@pytest.mark.parametrize("jobledger_backend", ["sqlite", "postgres"])``."""
    return "sqlite"


@pytest.fixture
def jobledger_url(jobledger_backend: str, request: pytest.FixtureRequest) -> str:
    """A fresh, initialised ledger database on ``jobledger_backend``."""
    fixture = _URL_FIXTURES.get(jobledger_backend)
    if fixture is None:
        known = list(_URL_FIXTURES)
        raise ValueError(f"jobledger_backend is {jobledger_backend!r}; one of {known}")
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def jobledger_clock() -> FakeClock:
    """The test's clock: starts at 2026-01-01T00:00:00Z and moves only by ``advance``/``set``."""
    from ledger.clock import FakeClock

    return FakeClock()


@pytest.fixture
def jobledger_registry() -> Registry:
    """An empty registry for the test's handlers (``@jobledger_registry.handler("t")``)."""
    from ledger.runtime.handlers import Registry

    return Registry()


@pytest.fixture
def jobledger_ledger(jobledger_url: str, jobledger_clock: FakeClock) -> Iterator[Ledger]:
    """A ledger on ``jobledger_url`` with ``jobledger_clock``, defining unknown job types at
    enqueue with the defaults (``auto_define``); closed after the test."""
    from ledger.api.ledger import Ledger

    with Ledger.open(jobledger_url, clock=jobledger_clock, auto_define=True) as opened:
        yield opened


@pytest.fixture
def jobledger_inline(jobledger_ledger: Ledger, jobledger_registry: Registry) -> InlineLedger:
    """``jobledger_ledger`` in inline mode: every enqueue runs ``jobledger_registry``'s
    handlers for the due jobs before it returns (:mod:`ledger.testing.inline`)."""
    from ledger.testing.inline import InlineLedger

    return InlineLedger(jobledger_ledger, jobledger_registry)


@pytest.fixture
def jobledger_enqueued(
    jobledger_ledger: Ledger,
) -> Callable[..., AbstractContextManager[EnqueuedJobs]]:
    """``with jobledger_enqueued() as enqueued: ...`` then ``enqueued.assert_jobs([...])``:
    the jobs the block enqueued on ``jobledger_ledger`` (or on the reader passed:
    ``jobledger_enqueued(other_ledger)``)."""
    from ledger.testing.enqueued import enqueued

    def block(reader: Reader | None = None) -> AbstractContextManager[EnqueuedJobs]:
        return enqueued(jobledger_ledger if reader is None else reader)

    return block
