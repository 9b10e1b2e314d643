"""JSON text whose object names a key twice is refused, naming the key, at every door that
takes JSON text (the CLI's payloads, workflow specs and outputs here; the HTTP API's bodies in
tests/http), instead of the last value silently winning."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from input_helpers import head

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.core.json_text import duplicate_key


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"a": 1, "a": 2}', "a"),
        ('{"a": 1, "b": {"c": 1, "c": 1}}', "c"),
        ('[{"x": 1}, {"y": 1, "y": 2}]', "y"),
        ('{"\\u0061": 1, "a": 2}', "a"),  # the same key, spelled with an escape
        ('{"a": 1, "b": {"a": 2}, "c": [{"a": 3}]}', None),  # one per object: fine
        ('{"a": 1}', None),
        ('{"a": NaN, "b": 1}', None),  # not JSON: its door's decoder refuses it
        ("not json: at all", None),
    ],
)
def test_duplicate_key_finds_the_first_key_an_object_repeats(text: str, key: str | None) -> None:
    """The check, on text and on bytes alike."""
    assert duplicate_key(text) == key
    assert duplicate_key(text.encode()) == key


@pytest.mark.parametrize("where", ["literal", "file", "stdin"])
def test_enqueue_refuses_a_payload_with_a_repeated_key(
    db_url: str, tmp_path: Path, where: str
) -> None:
    """``enqueue t '{"a":1,"a":2}'`` (or @file, or -): exit 2 naming the key, nothing
    appended; it used to enqueue ``{"a": 2}``."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        before = head(ledger)
    text = '{"to": "x", "amount": 1, "amount": 100}'
    path = tmp_path / "p.json"
    path.write_text(text)
    arg = {"literal": text, "file": f"@{path}", "stdin": "-"}[where]
    result = CliRunner().invoke(cli, ["--db", db_url, "enqueue", "t", arg], input=text)
    assert result.exit_code == 2, (result.stdout, result.exception)
    [line] = result.stderr.splitlines()
    assert "names the key 'amount' twice in one object" in line, line
    with Ledger.open(db_url) as ledger:
        assert head(ledger) == before


def test_schedule_payload_workflow_spec_and_output_refuse_a_repeated_key(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The other JSON-text options: ``schedule add --payload``, ``workflow start SPEC``,
    ``workflow complete --output``."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define("t")
    spec = tmp_path / "spec.json"
    spec.write_text('{"workflow_type": "w", "workflow_type": "v", "steps": []}')
    run = "00000000-0000-7000-8000-000000000000"
    for args, key in (
        (["schedule", "add", "s", "--cron", "* * * * *", "--type", "t", "--payload",
          '{"k": 1, "k": 2}'], "k"),
        (["workflow", "start", str(spec)], "workflow_type"),
        (["workflow", "complete", run, "step", "--status", "succeeded", "--output",
          '{"o": 1, "o": 2}'], "o"),
    ):  # fmt: skip
        result = CliRunner().invoke(cli, ["--db", sqlite_url, *args])
        assert result.exit_code == 2, (args, result.stderr, result.exception)
        assert f"names the key '{key}' twice" in result.stderr, result.stderr
