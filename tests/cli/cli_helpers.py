"""Helpers for the CLI tests: run ``jobledger`` in-process on a real database, count events."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from ledger import Ledger

Run = Callable[..., Result]


def invoke(url: str | None, *args: str, stdin: str | None = None) -> Result:
    """Run ``jobledger [--db url] args…`` in-process; stdout and stderr kept apart."""
    argv = [*(["--db", url] if url is not None else []), *args]
    return CliRunner().invoke(cli, argv, input=stdin)


def event_count(url: str) -> int | None:
    """The newest notification id: it moves iff something was appended (None: no events)."""
    with Ledger.open(url) as ledger:
        return ledger.store.head_position() or None


def assert_one_error_line(result: Result, starts: str, exit_code: int = 1) -> None:
    """The failure contract: one ``error:`` line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(starts), lines[0]
    assert "Traceback" not in result.stderr
