"""Fixtures for the bad-input tests: an import target on each backend, not yet initialised."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def target_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An import target with no ledger in it yet, once on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'target.db'}"
    return str(request.getfixturevalue("empty_pg_url"))
