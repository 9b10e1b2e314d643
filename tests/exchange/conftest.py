"""Fixtures for the exchange tests: an import target on each backend, not yet initialised."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sqlite_target(tmp_path: Path) -> str:
    """A SQLite path where no file exists yet (import must create the ledger)."""
    return f"sqlite:///{tmp_path / 'target.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def target_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An import target with no ledger in it yet, once on each backend (the PostgreSQL one is
    an empty database, separate from ``db_url``'s)."""
    if request.param == "sqlite":
        yield str(request.getfixturevalue("sqlite_target"))
    else:
        yield str(request.getfixturevalue("empty_pg_url"))
