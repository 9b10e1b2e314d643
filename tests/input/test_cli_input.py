"""The command line refuses bad input in one clean line: malformed database URLs (never
showing the password), cursors past 64 bits, payloads nested too deep."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from input_helpers import TOO_DEEP
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from jobledger_cli.database import display_url
from jobledger_cli.errors import redact
from jobledger_cli.main import cli
from ledger import Ledger

SECRET = "S3cret"
JOBLEDGER = Path(sys.executable).parent / "jobledger"

BAD_URLS = [
    f"postgresql://u:{SECRET}@[127.0.0.1:5432/db",
    f"postgresql://u:{SECRET}@127.0.0.1:5432/db?connect_timeout=abc",
    f"postgresql://u:{SECRET}@127.0.0.1:5432/db?connect_timeout=-1",
    f"postgresql://u:{SECRET}@127.0.0.1:99999/db",
    f"postgresql://u:{SECRET}@127.0.0.1:port/db",
    f"postgresql://u:{SECRET}%@127.0.0.1/db",
    f"postgresql://u:{SECRET}@127.0.0.1/db?{SECRET}=1",
    f"host=127.0.0.1 password={SECRET} {SECRET}",
    f"postgresql://u:abc@{SECRET}@127.0.0.1:5432/db",
    f"postgresql://u:abc@{SECRET}@127.0.0.1,other:5432/db",
]


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``jobledger`` as a real process, so a traceback would reach stderr."""
    return subprocess.run(
        [str(JOBLEDGER), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_malformed_database_url_is_one_line_exit_2_without_the_password(url: str) -> None:
    """config.invalid_url on stderr, exit 2, no traceback, the secret in neither stream."""
    done = _run(["--db", url, "jobs"])
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("error: config.invalid_url: "), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("url", BAD_URLS)
def test_init_refuses_a_malformed_url_as_every_other_command_does(url: str) -> None:
    """``init`` names the database before opening it: a URL that does not split
    (``Invalid IPv6 URL``) is config.invalid_url, exit 2, not a ValueError traceback."""
    done = _run(["--db", url, "init"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: config.invalid_url: "), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_a_password_with_a_raw_at_sign_is_masked_to_its_end() -> None:
    """Redaction masks up to the last "@" before the host part: a password holding a raw
    "@" leaks no tail, in a URL quoted inside a message or one shown as the database."""
    message = f"cannot reach postgresql://u:abc@{SECRET}@host:5432/db: timeout"
    assert redact(message) == "cannot reach postgresql://u:***@host:5432/db: timeout"
    assert display_url(f"postgresql://u:abc@{SECRET}@host/db") == "postgresql://u@host/db"
    shown = display_url(f"host=127.0.0.1 user=u password={SECRET} dbname=d")
    assert shown == "host=127.0.0.1 user=u password=*** dbname=d"
    assert SECRET not in display_url(f"postgresql://u:{SECRET}@[127.0.0.1:5432/db")


def test_init_on_a_libpq_string_does_not_print_its_password(empty_pg_url: str) -> None:
    """``init`` names the database it initialised without the ``password=`` of a libpq
    ``key=value`` string (it was printed whole)."""
    params = conninfo_to_dict(empty_pg_url)
    conninfo = make_conninfo(**{**params, "password": SECRET})  # trust auth: not checked
    result = CliRunner().invoke(cli, ["--db", conninfo, "init"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert result.stdout.startswith("initialised PostgreSQL database ")
    assert SECRET not in result.stdout and "password=***" in result.stdout


def test_a_malformed_url_in_the_environment_is_refused_the_same_way() -> None:
    """$JOBLEDGER_DB is checked like --db."""
    done = _run(["jobs"], env={"JOBLEDGER_DB": BAD_URLS[0]})
    assert done.returncode == 2 and done.stderr.startswith("error: config.invalid_url: ")
    assert SECRET not in done.stdout + done.stderr


def _invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


def _audit_cursor(position: int) -> str:
    return base64.urlsafe_b64encode(f"1.n.{position}".encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "args",
    [("jobs", "--cursor", str(2**63)), ("audit", "--cursor", _audit_cursor(2**63))],
    ids=["jobs", "audit"],
)
def test_a_cursor_beyond_64_bits_is_refused_cleanly(db_url: str, args: tuple[str, ...]) -> None:
    """No OverflowError from SQLite: request.invalid or a usage error, in one line."""
    result = _invoke(db_url, *args)
    assert result.exit_code in (1, 2), result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1


def test_the_largest_cursor_is_an_empty_page_not_an_error(db_url: str) -> None:
    """2**63 - 1 is a legal cursor on both backends."""
    result = _invoke(db_url, "jobs", "--cursor", str(2**63 - 1))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("depth", [65, 5_000])
def test_a_cli_payload_nested_too_deep_is_refused_and_nothing_appended(
    db_url: str, tmp_path: Path, depth: int
) -> None:
    """Over the limit: request.invalid (exit 1); past what a decoder takes: exit 2; never a
    RecursionError, and nothing appended."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        before = ledger.store.head_position()
    path = tmp_path / "deep.json"
    path.write_text('{"a":' * depth + "1" + "}" * depth)
    result = _invoke(db_url, "enqueue", "t", f"@{path}")
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == (1 if depth == 65 else 2), result.output
    assert "nested" in result.stderr and len(result.stderr.splitlines()) == 1
    with Ledger.open(db_url) as ledger:
        assert ledger.store.head_position() == before
    assert TOO_DEEP  # the API-level twin is in test_enqueue_limits.py
