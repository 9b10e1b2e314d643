"""``jobledger schedule``: each command in text and --json, and bad input (both backends)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from cli_helpers import Run, assert_one_error_line, event_count

from ledger import Ledger


def test_add_list_show_pause_resume_remove(run: Run, db_url: str) -> None:
    """The life of a schedule through the CLI; show names the job each fired slot made;
    stats counts the schedules and names the next fire."""
    assert run("define", "t").exit_code == 0
    added = run(
        "schedule", "add", "every", "--cron", "*/10 * * * *", "--type", "t",
        "--payload", '{"k": 1}', "--tz", "Europe/Paris", "--catch-up", "all", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    shaped = json.loads(added.stdout)
    assert shaped["status"] == "active" and shaped["catch_up"] == "all"
    assert shaped["payload"] == {"k": 1} and shaped["next_slot"] is not None
    with Ledger.open(db_url) as ledger:
        # The add's cursor is the wall clock's: fire through its next two slots exactly
        # (cursor + 21 minutes would cross a third when added in a slot's last minute).
        first = datetime.fromisoformat(shaped["next_slot"])
        report = ledger.schedules.fire_due(first + timedelta(minutes=10))
    assert len(report.fired) == 2
    listed = json.loads(run("schedule", "list", "--json").stdout)
    assert [(s["name"], s["fired"]) for s in listed] == [("every", 2)]
    assert "every" in run("schedule", "list").stdout
    shown = json.loads(run("schedule", "show", "every", "--json").stdout)
    assert [f["job_id"] for f in shown["fired_slots"]] == [str(f.job_id) for f in report.fired]
    assert len(shown["next_slots"]) == 10 and shown["missed_slots"] == []
    text = run("schedule", "show", "every").stdout
    assert str(report.fired[0].job_id) in text and "next slots:" in text
    figures = json.loads(run("stats", "--json").stdout)
    assert figures["schedules"] == {"active": 1} and figures["next_schedule"] == "every"
    assert figures["next_schedule_slot"] == shown["next_slot"]
    assert "next fire:" in run("stats").stdout
    paused = run("schedule", "pause", "every", "--json")
    assert json.loads(paused.stdout)["status"] == "paused"
    assert run("schedule", "resume", "every").stdout.startswith("resumed schedule every")
    assert "removed schedule every" in run("schedule", "remove", "every").stdout
    assert json.loads(run("schedule", "show", "every", "--json").stdout)["status"] == "removed"


def test_bad_input_is_refused_with_one_error_line(run: Run, db_url: str) -> None:
    """Bad cron or zone: exit 2 before any write; unknown type, taken name, unknown
    schedule, wrong status: exit 1 with the error's code."""
    assert run("define", "t").exit_code == 0
    before = event_count(db_url)
    add = ("schedule", "add", "s", "--type", "t")
    assert_one_error_line(run(*add, "--cron", "61 * * * *"), "error: Invalid value for '--cron'", 2)
    assert_one_error_line(
        run(*add, "--cron", "* * * * *", "--tz", "Mars/Olympus"),
        "error: Invalid value for '--tz'",
        2,
    )
    assert_one_error_line(run(*add, "--cron", "* * * * *", "--catch-up", "some"), "error:", 2)
    assert_one_error_line(
        run("schedule", "add", "s", "--cron", "* * * * *", "--type", "nope"),
        "error: job.definition_not_found_or_disabled",
    )
    assert event_count(db_url) == before
    assert run(*add, "--cron", "* * * * *").exit_code == 0
    assert_one_error_line(run(*add, "--cron", "* * * * *"), "error: schedule.exists")
    assert run(*add, "--cron", "*/2 * * * *", "--replace").exit_code == 0
    assert_one_error_line(run("schedule", "show", "nope"), "error: schedule.not_found")
    assert_one_error_line(run("schedule", "resume", "s"), "error: schedule.invalid_transition")
