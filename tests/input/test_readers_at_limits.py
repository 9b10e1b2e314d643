"""What the bounds let in, every reader reads back: a job whose payload, checkpoint and
output sit at the depth limit, with a cut failure message, goes through export, import into
the other backend, every --json view, audit, projections verify and replay --check."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from input_helpers import DEEPEST, nested

from jobledger_cli.main import cli
from ledger import Failure, FailureKind, Ledger
from ledger.core.limits import INT64_MAX, INT64_MIN, MAX_MESSAGE_BYTES

EDGE_PAYLOAD = {"deep": nested(63), "low": INT64_MIN, "high": INT64_MAX, "text": "ü✓ \u2028 tab\t"}


def _invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


def _edge_jobs(url: str) -> list[str]:
    """One job succeeded with edge values, one dead with an over-long failure message."""
    with Ledger.open(url) as ledger:
        ledger.define("t")
        ok = ledger.enqueue("t", EDGE_PAYLOAD).job_id
        dead = ledger.enqueue("t", {"n": 1}).job_id
        [job] = ledger.claim("w", types=["t"])
        assert job.lease is not None
        ledger.progress(job.lease, stage="running", done=2**63 - 1, total=2**63 - 1,
                        checkpoint=DEEPEST)  # fmt: skip
        ledger.succeed(job.lease, output=DEEPEST)
        [job] = ledger.claim("w", types=["t"])
        assert job.lease is not None
        message = "boom\x00 " + "x" * (2 * MAX_MESSAGE_BYTES)
        ledger.fail(job.lease, Failure(kind=FailureKind.TERMINAL, code="e.x", message=message))
    return [str(ok), str(dead)]


@pytest.mark.parametrize(
    "command",
    [
        ("jobs", "--json"),
        ("show", "{ok}", "--json"),
        ("show", "{dead}"),
        ("history", "{ok}", "--json"),
        ("timeline", "{ok}"),
        ("audit", "--format", "json"),
        ("dlq", "--json"),
        ("projections", "verify"),
        ("replay", "--check", "--all"),
    ],
    ids=" ".join,
)
def test_every_reader_reads_values_at_the_limits(db_url: str, command: tuple[str, ...]) -> None:
    """No RecursionError, no finding, exit 0."""
    ok, dead = _edge_jobs(db_url)
    result = _invoke(db_url, *(part.format(ok=ok, dead=dead) for part in command))
    assert result.exit_code == 0, (result.output, result.exception)


def test_an_export_at_the_limits_imports_into_the_other_backend(
    sqlite_url: str, pg_url: str, tmp_path: Path
) -> None:
    """A SQLite export of edge values imports into PostgreSQL, and exports back the same."""
    _edge_jobs(sqlite_url)
    exported = _invoke(sqlite_url, "export", "-o", str(tmp_path / "a.jsonl"))
    assert exported.exit_code == 0, exported.output
    with Ledger.open(pg_url, create=True) as target:
        assert target.store.head_position() == 0
    imported = _invoke(pg_url, "import", str(tmp_path / "a.jsonl"))
    assert imported.exit_code == 0, imported.output
    again = _invoke(pg_url, "export", "-o", str(tmp_path / "b.jsonl"))
    assert again.exit_code == 0, again.output
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
