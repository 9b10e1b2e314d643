"""``jobledger audit`` on both backends: the four typical questions as one command each, every
format parsing back to the same rows, paging by the printed cursor, and usage errors."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

from audit_helpers import Scenario, read_all
from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from jobledger_cli.render import when
from ledger import AuditQuery, AuditRow, Ledger


def audit(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, "audit", *args])


def as_records(rows: list[AuditRow]) -> list[dict[str, Any]]:
    """Rows as the CLI's json/jsonl/csv print them (ids and times as text)."""
    return [
        {
            "position": r.position,
            "at": when(r.at),
            "event": r.event,
            "job_id": str(r.job_id),
            "job_type": r.job_type,
            "org": r.org,
            "worker_id": r.worker_id,
            "run_number": r.run_number,
            "attempt": r.attempt,
            "code": r.code,
            "workflow_run": None if r.workflow_run is None else str(r.workflow_run),
            "step_key": r.step_key,
        }
        for r in rows
    ]


def json_rows(result: Result) -> list[dict[str, Any]]:
    """The rows of a ``--json`` run."""
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)["rows"]
    return rows


def test_the_four_typical_questions_are_one_command_each(shared: Scenario) -> None:
    """Dead letters of a type last week; what a vanished worker leased; retries with a code;
    an org between two times: each one command, each exactly the matching rows."""
    with Ledger.open(shared.url) as ledger:
        everything = read_all(ledger, AuditQuery())
    dead = json_rows(
        audit(
            shared.url,
            "--event",
            "job_dead_lettered",
            "--type",
            "report",
            "--since",
            "7d",
            "--json",
        )
    )
    assert dead and {(r["event"], r["job_type"]) for r in dead} == {("job_dead_lettered", "report")}
    # The history starts ten days ago: "7d" keeps only the dead letters of the last 7 days.
    all_dead = [r for r in everything if r.event == "job_dead_lettered" and r.job_type == "report"]
    assert 0 < len(dead) < len(all_dead)

    leased = json_rows(
        audit(shared.url, "--worker", "w2", "--event", "job_leased", "--status", "leased", "--json")
    )
    assert [r["job_id"] for r in leased] == [str(shared.vanished_job)]

    retries = json_rows(
        audit(shared.url, "--event", "job_retry_scheduled", "--code", "E2", "--json")
    )
    assert len(retries) == 4 and {(r["event"], r["code"]) for r in retries} == {
        ("job_retry_scheduled", "E2")
    }

    since, until = shared.start + timedelta(days=2), shared.start + timedelta(days=5)
    window = json_rows(
        audit(shared.url, "--org", "beta", "--since", when(since), "--until", when(until), "--json")
    )
    expected = [r for r in everything if r.org == "beta" and since <= r.at < until]
    assert window == as_records(expected) and window


def test_json_jsonl_and_csv_parse_back_to_the_same_rows(shared: Scenario) -> None:
    """json, jsonl and csv of one query hold the same rows as the API, field for field."""
    with Ledger.open(shared.url) as ledger:
        expected = as_records(read_all(ledger, AuditQuery(org="beta", limit=10_000)))
    args = ("--org", "beta", "--limit", "10000")
    as_json = audit(shared.url, *args, "--format", "json")
    assert json.loads(as_json.stdout) == {"rows": expected, "next_cursor": None}
    jsonl = audit(shared.url, *args, "--format", "jsonl")
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == expected
    as_csv = audit(shared.url, *args, "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert parsed == [{k: "" if v is None else str(v) for k, v in r.items()} for r in expected]
    assert as_json.stderr == jsonl.stderr == as_csv.stderr == ""


def test_paging_by_the_printed_cursor_and_all_pages(shared: Scenario) -> None:
    """The next cursor (json body, jsonl/csv stderr, the table's last line) leads through
    every row once; ``--all`` streams the same rows in one command."""
    with Ledger.open(shared.url) as ledger:
        expected = as_records(read_all(ledger, AuditQuery(worker="w1")))
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        extra = ("--cursor", cursor) if cursor else ()
        body = json.loads(
            audit(shared.url, "--worker", "w1", "--limit", "7", "--json", *extra).stdout
        )
        rows += body["rows"]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert rows == expected

    first = audit(shared.url, "--worker", "w1", "--limit", "7", "--format", "jsonl")
    [line] = first.stderr.splitlines()
    assert line.startswith("next cursor: ")
    text = audit(shared.url, "--worker", "w1", "--limit", "7")
    last = text.stdout.splitlines()[-1]
    assert last == f"next page: jobledger audit --worker w1 --limit 7 --cursor {line[13:]}"

    streamed = audit(shared.url, "--worker", "w1", "--limit", "7", "--all", "--format", "csv")
    assert len(list(csv.DictReader(io.StringIO(streamed.stdout)))) == len(expected)
    assert streamed.stderr == ""
    table = audit(shared.url, "--worker", "w1", "--limit", "7", "--all")
    assert len(table.stdout.splitlines()) == len(expected) + 1  # one header, no next page


def test_oldest_first_table(shared: Scenario) -> None:
    """``--oldest`` starts at the first event; its next-page command keeps ``--oldest``."""
    result = audit(shared.url, "--oldest", "--limit", "2", "--event", "job_enqueued")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["POSITION", "AT", "EVENT"]
    assert int(lines[1].split()[0]) < int(lines[2].split()[0])
    assert "--oldest --cursor" in lines[-1]


def assert_usage_error(result: Result, fragment: str) -> None:
    """Exit 2, one ``error:`` line on stderr naming the problem, nothing on stdout."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and fragment in line, line


def test_bad_cursors_and_times_are_usage_errors(shared: Scenario) -> None:
    """A malformed cursor, a cursor of the other order, an unreadable or zone-less time and an
    unknown event are refused with exit 2 and one line, before any query."""
    newest = json.loads(audit(shared.url, "--limit", "1", "--json").stdout)["next_cursor"]
    assert_usage_error(audit(shared.url, "--cursor", "not-a-cursor"), "malformed cursor")
    assert_usage_error(audit(shared.url, "--cursor", "x" * 40), "malformed cursor")
    assert_usage_error(audit(shared.url, "--oldest", "--cursor", newest), "newest-first")
    assert_usage_error(audit(shared.url, "--since", "last tuesday"), "is not a time")
    assert_usage_error(audit(shared.url, "--until", "2026-11-29T10:00"), "no time zone")
    assert_usage_error(audit(shared.url, "--event", "job_exploded"), "job_exploded")
    assert_usage_error(audit(shared.url, "--limit", "0"), "--limit")


def test_no_match_says_so(shared: Scenario) -> None:
    """A query without rows prints a clear line (text) or an empty list (json)."""
    assert audit(shared.url, "--org", "nobody").stdout == "no audit rows match\n"
    assert json_rows(audit(shared.url, "--org", "nobody", "--json")) == []
