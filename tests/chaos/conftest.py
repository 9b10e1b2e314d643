"""Fixtures of the chaos suite: a PostgreSQL cluster of the test's own, and the admin URL of
the shared server (used only to terminate connections to the test's own database)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from chaos_faults import ThrowawayPostgres

from ledger import Ledger

PG_SERVER = os.environ.get("JOBLEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


@pytest.fixture
def pg_admin_url() -> str:
    return f"{PG_SERVER}/postgres"


@pytest.fixture
def throwaway_pg() -> Iterator[ThrowawayPostgres]:
    """A fresh cluster (initdb in a temp dir, its own port), destroyed after the test."""
    server = ThrowawayPostgres()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def throwaway_pg_url(throwaway_pg: ThrowawayPostgres) -> str:
    """An initialised ledger database on the test's own cluster."""
    url = throwaway_pg.create_database(f"jl_chaos_{uuid.uuid4().hex[:8]}")
    Ledger.open(url, create=True).close()
    return url
