"""Fixtures for the audit tests: the scenario history, fresh per test or shared read-only.

Creating a PostgreSQL database per test costs more than the tests that only read it, so the
read-only tests share one database per backend for the module (never written after build).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from audit_helpers import Scenario, build

from ledger import Ledger

# As in tests/conftest.py (not importable from here: both modules are named ``conftest``).
PG_SERVER = os.environ.get("JOBLEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=5)


def pg_url_for(dbname: str) -> str:
    return f"{PG_SERVER}/{dbname}"


@pytest.fixture
def scenario(db_url: str) -> Scenario:
    """The scenario in this test's own database (for tests that write)."""
    return build(db_url)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    """The scenario in a database shared by the module's read-only tests, on each backend."""
    if request.param == "sqlite":
        path = Path(tmp_path_factory.mktemp("audit")) / "ledger.db"
        Ledger.open(str(path), create=True).close()
        yield build(f"sqlite:///{path}")
        return
    template = request.getfixturevalue("pg_template")
    name = f"jl_audit_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield build(pg_url_for(name))
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
