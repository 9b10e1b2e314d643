"""Fixtures for the CLI tests (the helpers they use live in ``cli_helpers``)."""

from __future__ import annotations

import pytest
from cli_helpers import Run, invoke
from click.testing import Result


@pytest.fixture
def run(db_url: str) -> Run:
    """``run(*args, stdin=None)``: the CLI against this test's database (both backends)."""

    def _run(*args: str, stdin: str | None = None) -> Result:
        return invoke(db_url, *args, stdin=stdin)

    return _run
