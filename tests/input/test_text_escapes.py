"""Text output escapes control characters in stored values: a history forged under the
ledger's checks (terminal escapes and CR/LF in org, queue, stage, worker id, failure code)
never repaints the terminal or fakes a line, in any text renderer; JSON stays exact."""

from __future__ import annotations

import json
import unicodedata
from uuid import UUID, uuid4

import pytest
from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from jobledger_cli.render import printable, table
from ledger import BackoffPolicy, EnqueueRequest, Failure, FailureKind, FakeClock, Ledger
from ledger.core.events import (
    JobDeadLettered,
    JobEnqueued,
    JobFailed,
    JobLeased,
    JobStageChanged,
)
from ledger.views.kinds import JOBS

FORGED = "\x1b[2J\x1b]0;owned\x07\r\nforged line\u202e"
"""Clears the screen, retitles the window, starts a fake line, reverses the rest."""


def _forge(url: str) -> UUID:
    """A dead job whose org, queue, stage, worker id and failure code all hold ``FORGED``,
    appended through the store directly, as a writer that skips the decisions would."""
    clock = FakeClock()
    job_id = uuid4()
    now = clock.now()
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("t")
        request = EnqueueRequest(job_type="t", org=f"org{FORGED}", queue=f"q{FORGED}")
        failure = Failure(kind=FailureKind.TERMINAL, code=f"c{FORGED}", message=f"m{FORGED}")
        events = [
            JobEnqueued(
                at=now,
                job_id=job_id,
                request=request,
                definition_version=1,
                priority=0,
                run_at=now,
                max_attempts=1,
                timeout_s=60.0,
                backoff=BackoffPolicy(),
                workflow=None,
            ),
            JobLeased(
                at=now,
                run_number=1,
                attempt=1,
                worker_id=f"w{FORGED}",
                lease_expires_at=now.replace(year=now.year + 1),
            ),
            JobStageChanged(at=now, run_number=1, attempt=1, stage=f"s{FORGED}"),
            JobFailed(at=now, run_number=1, attempt=1, worker_id=f"w{FORGED}", failure=failure),
            JobDeadLettered(at=now, run_number=1, attempt=1, failure=failure),
        ]
        with ledger.store.unit_of_work() as uow:
            uow.append([JOBS.change(job_id, events)])
        ledger.catch_up()
    return job_id


def _invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


def _unprintable(text: str) -> list[str]:
    """Characters a terminal would act on, other than the line breaks the renderer made."""
    return sorted(
        {c for c in text if c != "\n" and (unicodedata.category(c) == "Cc" or c == "\u202e")}
    )


TEXT_COMMANDS = [
    ("jobs",),
    ("jobs", "--status", "dead"),
    ("audit",),
    ("dlq",),
    ("show", "{job}"),
    ("history", "{job}"),
    ("timeline", "{job}"),
    ("diagnose", "{job}"),
    ("replay", "{job}", "--to-event", "5"),
    ("stats",),
]


@pytest.mark.parametrize("command", TEXT_COMMANDS, ids=" ".join)
def test_text_output_escapes_control_characters_in_stored_values(
    db_url: str, command: tuple[str, ...]
) -> None:
    """No stored escape or CR/LF reaches the terminal raw; no line starts with the forgery."""
    job_id = _forge(db_url)
    result = _invoke(db_url, *(part.format(job=job_id) for part in command))
    assert result.exit_code == 0, result.output
    assert _unprintable(result.stdout) == []
    assert not any(line.startswith("forged line") for line in result.stdout.splitlines())


def test_json_output_keeps_the_stored_values_exact(db_url: str) -> None:
    """--json is for machines: the forged org comes back byte for byte (JSON escapes it)."""
    job_id = _forge(db_url)
    result = _invoke(db_url, "show", str(job_id), "--json")
    assert result.exit_code == 0, result.output
    assert not [c for c in result.stdout if c != "\n" and unicodedata.category(c) == "Cc"]
    assert json.loads(result.stdout)["org"] == f"org{FORGED}"


def test_printable_spells_every_control_character_as_an_escape() -> None:
    """ESC, CR, LF, TAB, C1 and bidi overrides become escapes; other text is untouched."""
    assert printable("a\x1b[1mb\r\n\t\x9b\u202ez é✓") == "a\\x1b[1mb\\r\\n\\t\\x9b\\u202ez é✓"
    assert table(["A", "B"], [["x\ny", "z"]]) == "A     B\nx\\ny  z"
