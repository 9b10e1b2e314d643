"""The one-line confirmations a write command prints (``defined T``, ``enabled T``,
``paused queue Q``, ``added schedule S`` …) escape control characters and bidi overrides as
the listings do: a name the ledger accepts (``d\\u202eevil``: U+202E is a format character,
not a control one) never reorders the terminal's line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from jobledger_cli.main import cli

RLO = "\u202e"
NAME = f"d{RLO}evil"
"""Shown raw, the terminal prints ``dlive``: the override reverses what follows it."""
SHOWN = "d\\u202eevil"

STEPS: list[tuple[str, list[str]]] = [
    ("define", ["define", NAME]),
    ("disable", ["disable", NAME]),
    ("enable", ["enable", NAME]),
    ("queue pause", ["queue", "pause", NAME]),
    ("jobs (paused queues line)", ["jobs"]),
    ("queue resume", ["queue", "resume", NAME]),
    ("schedule add", ["schedule", "add", NAME, "--cron", "* * * * *", "--type", NAME]),
    ("schedule pause", ["schedule", "pause", NAME]),
    ("schedule resume", ["schedule", "resume", NAME]),
    ("schedule remove", ["schedule", "remove", NAME]),
    ("dlq (none of a type)", ["dlq", "--type", NAME]),
    ("sync-state (none)", ["sync-state", NAME]),
    (
        "enqueue (subject has a live job)",
        ["enqueue", NAME, "--source-id", NAME, "--uri", NAME],
    ),
    (
        "enqueue again (nothing enqueued)",
        ["enqueue", NAME, "--source-id", NAME, "--uri", NAME],
    ),
]
"""In order: each step's name is the one the earlier steps defined, paused or added."""


def test_every_confirmation_line_escapes_a_bidi_override(db_url: str) -> None:
    """Run in turn, each command succeeds and prints the name escaped (``\\u202e``), never
    the raw override, on stdout or stderr."""
    runner = CliRunner()
    seen = 0
    for step, args in STEPS:
        result = runner.invoke(cli, ["--db", db_url, *args])
        assert result.exit_code == 0, (step, result.stderr, result.exception)
        printed = result.stdout + result.stderr
        assert RLO not in printed, (step, printed)
        if step != "enqueue (subject has a live job)":  # prints the job id alone
            assert SHOWN in printed, (step, printed)
            seen += 1
    assert seen == len(STEPS) - 1


@pytest.mark.parametrize("char", ["\u2066", "\u200f", "\u202a"])
def test_other_bidi_controls_are_escaped_in_define_and_enable(db_url: str, char: str) -> None:
    """The isolates and marks too: every character the listings escape."""
    name = f"t{char}x"
    for args in (["define", name], ["enable", name]):
        result = CliRunner().invoke(cli, ["--db", db_url, *args])
        assert result.exit_code == 0, result.stderr
        assert char not in result.stdout and f"\\u{ord(char):04x}" in result.stdout
