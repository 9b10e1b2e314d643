"""Failures: one ``error:`` line on stderr, a non-zero exit, no traceback, nothing appended."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from uuid import UUID

import psycopg
import pytest
from cli_helpers import assert_one_error_line, event_count, invoke
from click.testing import CliRunner

from jobledger_cli.database import display_url
from jobledger_cli.errors import redact
from jobledger_cli.main import cli
from ledger import Ledger
from ledger.store.config import is_postgres, sqlite_path
from ledger.store.streams import job_type_stream_id

MISSING_JOB = "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11"
USAGE, REFUSED = 2, 1


def _put_in_use(url: str) -> str:
    with Ledger.open(url) as ledger:
        ledger.define("send_email")
        ledger.define("resize", enabled=False)
        ledger.enqueue("send_email", {"a": 1}, idempotency_key="k1")
    return url


@pytest.fixture
def ledger_in_use(db_url: str) -> str:
    """A ledger with send_email enabled, resize disabled and one job keyed ``k1``."""
    return _put_in_use(db_url)


@pytest.fixture
def sqlite_ledger_in_use(sqlite_url: str) -> str:
    """As ``ledger_in_use``, on SQLite only."""
    return _put_in_use(sqlite_url)


BAD_INPUT = [
    # payloads
    pytest.param(
        ["enqueue", "send_email", '{"to": '],
        "error: Invalid value for '[PAYLOAD]': not valid JSON (Input data was truncated)",
        USAGE,
        id="truncated-json",
    ),
    pytest.param(
        ["enqueue", "send_email", "{to: 1}"],
        "error: Invalid value for '[PAYLOAD]': not valid JSON (JSON is malformed",
        USAGE,
        id="malformed-json",
    ),
    pytest.param(
        ["enqueue", "send_email", "-"],
        "error: Invalid value for '[PAYLOAD]': stdin is not valid JSON (",
        USAGE,
        id="empty-stdin",
    ),
    pytest.param(
        ["enqueue", "send_email", "[1, 2]"],
        "error: Invalid value for '[PAYLOAD]': the payload must be a JSON object, not an array",
        USAGE,
        id="payload-array",
    ),
    pytest.param(
        ["enqueue", "send_email", "null"],
        "error: Invalid value for '[PAYLOAD]': the payload must be a JSON object, not null",
        USAGE,
        id="payload-null",
    ),
    pytest.param(
        ["enqueue", "send_email", "@/nonexistent/payload.json"],
        "error: Invalid value for '[PAYLOAD]': cannot read payload file "
        "'/nonexistent/payload.json': No such file or directory",
        USAGE,
        id="unreadable-file",
    ),
    # job types
    pytest.param(
        ["enqueue", "nope"],
        "error: job.definition_not_found_or_disabled: job type 'nope' is not defined",
        REFUSED,
        id="unknown-type",
    ),
    pytest.param(
        ["enqueue", "resize"],
        "error: job.definition_not_found_or_disabled: job type 'resize' is disabled",
        REFUSED,
        id="disabled-type",
    ),
    pytest.param(
        ["enable", "nope"],
        "error: job.definition_not_found_or_disabled: job type 'nope' is not defined",
        REFUSED,
        id="enable-unknown-type",
    ),
    pytest.param(
        ["define", "send_email", "--backoff-base", "10", "--backoff-max", "5"],
        "error: request.invalid: backoff needs 0 <= base_s <= max_s",
        REFUSED,
        id="define-inverted-backoff",
    ),
    pytest.param(
        ["define", "send_email", "--max-attempts", "0"],
        "error: Invalid value for '--max-attempts': 0 is not in the range x>=1.",
        USAGE,
        id="define-zero-attempts",
    ),
    # job ids
    pytest.param(
        ["show", MISSING_JOB],
        f"error: job.not_found: no job {MISSING_JOB}",
        REFUSED,
        id="show-unknown-job",
    ),
    pytest.param(
        ["history", MISSING_JOB],
        f"error: job.not_found: no job {MISSING_JOB}",
        REFUSED,
        id="history-unknown-job",
    ),
    pytest.param(
        ["history", str(job_type_stream_id("send_email"))],
        "error: job.not_found: no job",
        REFUSED,
        id="history-of-a-job-type-stream",
    ),
    pytest.param(
        ["show", "not-a-uuid", "--json"],
        "error: Invalid value for 'JOB': 'not-a-uuid' is not a job id (a UUID)",
        USAGE,
        id="show-malformed-id",
    ),
    pytest.param(
        ["history", "12345"],
        "error: Invalid value for 'JOB': '12345' is not a job id (a UUID)",
        USAGE,
        id="history-malformed-id",
    ),
    # enqueue options
    pytest.param(
        ["enqueue", "send_email", "--priority", "high"],
        "error: Invalid value for '--priority': 'high' is not a valid integer.",
        USAGE,
        id="priority-not-integer",
    ),
    pytest.param(
        ["enqueue", "send_email", "--priority", str(2**31)],
        "error: request.invalid: priority must fit in 32 bits",
        REFUSED,
        id="priority-too-large",
    ),
    pytest.param(
        ["enqueue", "send_email", "--delay", "-5"],
        "error: Invalid value for '--delay': -5.0 is not in the range x>=0, at most 100 years.",
        USAGE,
        id="negative-delay",
    ),
    pytest.param(
        ["enqueue", "send_email", "--max-attempts", "0"],
        "error: Invalid value for '--max-attempts': 0 is not in the range x>=1.",
        USAGE,
        id="zero-max-attempts",
    ),
    pytest.param(
        ["enqueue", "send_email", "--timeout", "0"],
        "error: Invalid value for '--timeout': 0.0 is not in the range x>0, at most 100 years.",
        USAGE,
        id="zero-timeout",
    ),
    pytest.param(
        ["enqueue", "send_email", "--run-at", "2030-01-01T09:00:00"],
        "error: Invalid value for '--run-at': '2030-01-01T09:00:00' has no time zone",
        USAGE,
        id="naive-run-at",
    ),
    pytest.param(
        ["enqueue", "send_email", "--run-at", "tomorrow"],
        "error: Invalid value for '--run-at': 'tomorrow' is not an ISO 8601 time",
        USAGE,
        id="unparseable-run-at",
    ),
    pytest.param(
        ["enqueue", "send_email", "--run-at", "2030-01-01T09:00:00Z", "--delay", "5"],
        "error: request.invalid: give run_at or delay_s, not both",
        REFUSED,
        id="run-at-and-delay",
    ),
    pytest.param(
        ["enqueue", "send_email", "--source-id", "crm"],
        "error: --source-id and --uri must be given together",
        USAGE,
        id="source-id-without-uri",
    ),
    pytest.param(
        ["enqueue", "send_email", "--uri", "doc/1"],
        "error: --source-id and --uri must be given together",
        USAGE,
        id="uri-without-source-id",
    ),
    pytest.param(
        ["enqueue", "send_email", "--op", "delete"],
        "error: --op and --revision need --source-id and --uri",
        USAGE,
        id="op-without-subject",
    ),
    pytest.param(
        ["enqueue", "send_email", "--org", ""],
        "error: request.invalid: org must be a non-empty string",
        REFUSED,
        id="empty-org",
    ),
    pytest.param(
        ["enqueue", "send_email", '{"a": 2}', "--idempotency-key", "k1"],
        "error: job.idempotency_conflict: idempotency key 'k1' already names job ",
        REFUSED,
        id="idempotency-conflict",
    ),
    # the command line itself
    pytest.param(
        ["frobnicate"], "error: No such command 'frobnicate'.", USAGE, id="no-such-command"
    ),
    pytest.param(
        ["enqueue", "send_email", "--bogus"],
        "error: No such option '--bogus'.",
        USAGE,
        id="no-such-option",
    ),
    pytest.param(["enqueue"], "error: Missing argument 'JOB_TYPE'.", USAGE, id="missing-argument"),
]


# The ledger refuses these (exit 1) after the database is opened: run them on both backends.
REFUSED_INPUT = [case for case in BAD_INPUT if case.values[2] == REFUSED]
# These fail while the command line is parsed, before any database is opened (exit 2).
USAGE_INPUT = [case for case in BAD_INPUT if case.values[2] == USAGE]


def _check_bad_input(url: str, args: list[str], starts: str, exit_code: int) -> None:
    before = event_count(url)
    result = invoke(url, *args)
    assert_one_error_line(result, starts, exit_code)
    assert event_count(url) == before


@pytest.mark.parametrize(("args", "starts", "exit_code"), REFUSED_INPUT)
def test_input_the_ledger_refuses_is_one_error_line_and_appends_nothing(
    ledger_in_use: str, args: list[str], starts: str, exit_code: int
) -> None:
    """Each input the ledger refuses fails with its code on one line; nothing is appended."""
    _check_bad_input(ledger_in_use, args, starts, exit_code)


@pytest.mark.parametrize(("args", "starts", "exit_code"), USAGE_INPUT)
def test_bad_command_lines_are_one_error_line_and_append_nothing(
    sqlite_ledger_in_use: str, args: list[str], starts: str, exit_code: int
) -> None:
    """Each bad command line fails with one usage line before the database is touched.

    Parsing happens before any database is opened, so one backend is enough.
    """
    _check_bad_input(sqlite_ledger_in_use, args, starts, exit_code)


def test_usage_errors_point_at_the_commands_help(sqlite_ledger_in_use: str) -> None:
    """A usage error's line ends by naming the help of the command that was misused."""
    result = invoke(sqlite_ledger_in_use, "enqueue", "send_email", "--priority", "high")
    assert result.stderr.rstrip().endswith("(see 'jobledger enqueue --help')")


# --- databases that cannot be used -----------------------------------------------------------


def test_unreachable_postgres_is_one_line_without_the_password() -> None:
    """A PostgreSQL server that refuses connections: store.unusable, password not shown."""
    # connect_timeout bounds the first, direct connection attempt (the default is 5 s).
    url = "postgresql://postgres:s3cret@127.0.0.1:1/nope?connect_timeout=1"
    result = invoke(url, "show", MISSING_JOB)
    assert_one_error_line(result, "error: store.unusable: cannot use PostgreSQL database 'nope'")
    assert "s3cret" not in result.stderr


def test_unsupported_url_is_refused_without_the_password() -> None:
    """A URL of another database is refused with its password masked."""
    result = invoke("mysql://user:s3cret@db.example/jobs", "init")
    assert_one_error_line(result, "error: request.invalid: unsupported database URL")
    assert "mysql://user:***@db.example/jobs" in result.stderr
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_sqlite_read_db_is_refused(sqlite_ledger_in_use: str, given: str) -> None:
    """--read-db (or $JOBLEDGER_READ_DB) naming a SQLite file, even the ledger's own, is a
    bad command line: SQLite has no replicas. Nothing is read or appended."""
    path = sqlite_path(sqlite_ledger_in_use)
    before = event_count(sqlite_ledger_in_use)
    argv = ["--db", sqlite_ledger_in_use, "jobs"]
    if given == "option":
        result = CliRunner().invoke(cli, ["--read-db", path, *argv])
    else:
        result = CliRunner().invoke(cli, argv, env={"JOBLEDGER_READ_DB": f"sqlite:///{path}"})
    assert_one_error_line(
        result, "error: config.invalid_url: a read database must be a PostgreSQL", USAGE
    )
    assert "SQLite has no replicas" in result.stderr
    assert event_count(sqlite_ledger_in_use) == before


def test_a_malformed_read_db_is_refused_without_the_password() -> None:
    """A --read-db PostgreSQL URL that does not parse: config.invalid_url, password unshown."""
    result = CliRunner().invoke(cli, ["--read-db", "postgresql://u:s3cret@h:99999/x", "jobs"])
    assert_one_error_line(result, "error: config.invalid_url: port must be", USAGE)
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize("command", [["init"], ["show", MISSING_JOB], ["definitions"]])
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(
    tmp_path: Path, command: list[str]
) -> None:
    """Any command, init too, refuses a non-database file and does not modify it."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    result = invoke(str(path), *command)
    assert_one_error_line(
        result, f"error: store.unusable: cannot open SQLite database {path}: file is not a database"
    )
    assert path.read_bytes() == b"these are my notes, not a database\n" * 200


def test_a_missing_sqlite_file_says_to_run_init_and_is_not_created(tmp_path: Path) -> None:
    """A command on a missing file asks for `jobledger init` instead of creating the file."""
    path = tmp_path / "typo.db"
    result = invoke(str(path), "definitions", "--json")
    assert_one_error_line(result, f"error: store.not_initialised: no database file at {path}")
    assert "run `jobledger init` first" in result.stderr
    assert not path.exists()


def test_an_empty_sqlite_file_says_to_run_init(tmp_path: Path) -> None:
    """An existing file without the ledger's tables asks for `jobledger init`."""
    path = tmp_path / "empty.db"
    path.touch()
    result = invoke(str(path), "show", MISSING_JOB)
    assert_one_error_line(
        result, "error: store.not_initialised: database has no jobledger tables; "
        "run `jobledger init` first",
    )  # fmt: skip


def test_an_uninitialised_postgres_database_says_to_run_init(empty_pg_url: str) -> None:
    """A PostgreSQL database without the ledger's tables asks for `jobledger init`."""
    result = invoke(empty_pg_url, "enqueue", "send_email")
    assert_one_error_line(
        result, "error: store.not_initialised: database has no jobledger tables; "
        "run `jobledger init` first",
    )  # fmt: skip


def _drop_state_column(url: str) -> None:
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE jl_queue DROP COLUMN state")
    else:
        with sqlite3.connect(sqlite_path(url)) as conn:
            conn.execute("ALTER TABLE jl_queue DROP COLUMN state")


def test_an_unexpected_database_error_is_one_line(ledger_in_use: str) -> None:
    """A database error nothing anticipates (a view column dropped by hand) is one line
    with the store.error code."""
    with Ledger.open(ledger_in_use) as ledger:
        job_id = ledger.enqueue("send_email").job_id
    assert isinstance(job_id, UUID)
    _drop_state_column(ledger_in_use)
    result = invoke(ledger_in_use, "show", str(job_id))
    assert_one_error_line(result, "error: store.error: ")
    assert "state" in result.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/jobs", "postgresql://app@db:5432/jobs"),
        (
            "postgresql://app@db/jobs?password=s3cret&sslmode=require",
            "postgresql://app@db/jobs?sslmode=require",
        ),
        ("postgres://db/jobs", "postgres://db/jobs"),
    ],
)
def test_display_url_drops_the_password(url: str, shown: str) -> None:
    """The database named in output keeps user, host and options but never the password."""
    assert display_url(url) == shown


def test_redact_masks_passwords_inside_messages() -> None:
    """Passwords quoted in a message, as URL userinfo or password=…, are masked."""
    message = "cannot use 'postgresql://app:s3cret@db/jobs' (password=s3cret host=db)"
    assert redact(message) == "cannot use 'postgresql://app:***@db/jobs' (password=*** host=db)"
