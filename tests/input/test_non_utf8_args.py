"""Bytes that are not UTF-8 on the command line (``jobledger jobs --type $'\\xff'``) are a
usage error naming the option, on every command and option: never a traceback from a driver
or encoder that met the lone surrogate Python decoded them to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_tree import every_command
from click.testing import CliRunner

from jobledger_cli.main import cli
from jobledger_cli.text_args import Text
from ledger import Ledger

BAD = b"\xff".decode("utf-8", errors="surrogateescape")
"""What Python makes of the argument byte 0xff: the lone surrogate U+DCFF."""
SOME_ID = "00000000-0000-7000-8000-000000000000"
JOBLEDGER = Path(sys.executable).parent / "jobledger"


def _cases() -> list[tuple[str, list[str]]]:
    """``(id, argv)`` for each value-taking parameter of each command: the parameter given
    ``BAD`` first (click converts parameters in command-line order), the positional
    arguments before it given an id, which every command's arguments parse. A parameter of
    another type than text (a number, a choice, a UUID) is refused by that type instead."""
    cases = []
    for path, command in every_command():
        positional: list[str] = []
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            if isinstance(param.type, click.Path):
                continue  # a file name need not be UTF-8: open() takes the bytes back
            if isinstance(param, click.Argument):
                argv = [*path, *positional, BAD]
                positional.append(SOME_ID)
                name = param.human_readable_name
            else:
                argv = [*path, param.opts[0], BAD]
                name = param.opts[0]
            text = isinstance(param.type, Text)
            cases.append((f"{' '.join(path)} {name}{'' if text else ' (typed)'}", argv))
    return cases


CASES = _cases()


def test_the_walk_covers_the_commands_of_the_issue() -> None:
    """The walk reaches the ~15 commands the issue found failing, and all the others."""
    ids = {case_id for case_id, _ in CASES}
    for expected in (
        "enqueue PAYLOAD",
        "schedule add --payload",
        "jobs --type",
        "export --type",
        "dlq --type",
        "audit --type",
        "sync-state SOURCE",
        "replay --type",
        "token create --org",
        "retention set --type",
    ):
        assert expected in ids, sorted(ids)
    assert len(CASES) > 120


@pytest.mark.parametrize(("case_id", "argv"), CASES, ids=[case_id for case_id, _ in CASES])
def test_every_option_refuses_bytes_that_are_not_utf8(
    sqlite_url: str, case_id: str, argv: list[str]
) -> None:
    """One ``error:`` line naming the parameter, exit 2, nothing on stdout, nothing
    appended."""
    with Ledger.open(sqlite_url) as ledger:
        before = ledger.store.head_position()
    result = CliRunner().invoke(cli, ["--db", sqlite_url, *argv])
    assert isinstance(result.exception, SystemExit), (case_id, result.exception)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: Invalid value for "), line
    if not case_id.endswith("(typed)"):
        assert "b'\\xff' is not UTF-8 text" in line
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.store.head_position() == before


def test_a_non_utf8_database_url_is_refused_in_one_line(sqlite_url: str) -> None:
    """A PostgreSQL URL (from --db, --read-db or $JOBLEDGER_DB) that is not UTF-8 is
    config.invalid_url, exit 2; a SQLite file name that is not UTF-8 is just a name."""
    url = f"postgresql://postgres@127.0.0.1/d{BAD}b"
    for argv, env in (
        (["--db", url, "jobs"], {}),
        (["--db", sqlite_url, "--read-db", url, "jobs"], {}),
        (["jobs"], {"JOBLEDGER_DB": url}),
    ):
        result = CliRunner().invoke(cli, argv, env=env)
        assert isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 2
        assert result.stderr == "error: config.invalid_url: the PostgreSQL URL is not UTF-8 text\n"


def _run(*argv: bytes, url: str) -> subprocess.CompletedProcess[bytes]:
    """``jobledger`` as a real process given raw bytes, as a shell passes ``$'\\xff'``."""
    return subprocess.run(
        [os.fsencode(JOBLEDGER), b"--db", url.encode(), *argv],
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        [b"jobs", b"--type", b"\xff"],
        [b"enqueue", b"t", b'{"a": "\xff"}'],
        [b"schedule", b"add", b"s", b"--cron", b"* * * * *", b"--type", b"t", b"--payload",
         b'{"a": "\xff"}'],
        [b"export", b"--type", b"\xff"],
        [b"audit", b"--type", b"\xff"],
        [b"token", b"create", b"--role", b"read", b"--org", b"\xff"],
        [b"retention", b"set", b"--type", b"\xff", b"--after", b"30d"],
    ],
    ids=["jobs", "enqueue", "schedule add", "export", "audit", "token create", "retention set"],
)  # fmt: skip
def test_raw_bytes_from_a_shell_end_in_one_error_line(sqlite_url: str, argv: list[bytes]) -> None:
    """The real console script, given the byte 0xff in argv (decoded by Python with
    surrogateescape): exit 2, one ``error:`` line, no traceback."""
    done = _run(*argv, url=sqlite_url)
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(b"error: Invalid value for ") and b"is not UTF-8 text" in line
