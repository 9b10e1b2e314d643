"""Rate limits, queue pause and "why is this job not running" from the command line (both
backends): define --rate, queue pause/resume/list, show and stats, text and --json."""

from __future__ import annotations

import json

from cli_helpers import Run, event_count

from ledger import Ledger


def _enqueue(run: Run, *args: str) -> str:
    result = run("enqueue", *args, "--json")
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["job_id"])


def test_define_rate_and_show_says_rate_limited_until(run: Run, db_url: str) -> None:
    """define --rate 1/1h: the second job stays pending and show (text and JSON) and stats
    say it is rate limited until the next token; a bad rate is a usage error (exit 2)."""
    assert run("define", "api", "--rate", "1/1h").exit_code == 0
    listed = json.loads(run("definitions", "--json").stdout)
    assert listed[0]["rate"] == {"limit": 1, "period_s": 3600.0, "per_org": False}
    assert "1/1h" in run("definitions").stdout
    _enqueue(run, "api")
    second = _enqueue(run, "api")
    with Ledger.open(db_url) as ledger:
        assert len(ledger.claim("w", limit=5)) == 1
    shown = run("show", second)
    assert shown.exit_code == 0, shown.output
    assert "not running" in shown.stdout and "rate limited until" in shown.stdout
    details = json.loads(run("show", second, "--json").stdout)
    assert details["status"] == "pending"
    assert [b["reason"] for b in details["blocked_by"]] == ["rate_limited"]
    stats = json.loads(run("stats", "--json").stdout)
    assert [h["reason"] for h in stats["held_back"]] == ["rate_limited"]
    assert "api rate limited until" in run("stats").stdout
    before = event_count(db_url)
    bad = run("define", "api", "--rate", "ten/1m")
    assert bad.exit_code == 2
    assert run("define", "api", "--rate-per-org").exit_code == 2
    assert event_count(db_url) == before


def test_queue_pause_resume_list_and_the_reasons(run: Run, db_url: str) -> None:
    """queue pause marks the queue paused (list, jobs, stats, show say so), resume clears
    it; a repeat is unchanged and appends nothing."""
    assert run("define", "t").exit_code == 0
    job = _enqueue(run, "t", "--queue", "mail")
    paused = run("queue", "pause", "mail", "--reason", "smtp down", "--json")
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.stdout)["change"] == "paused"
    before = event_count(db_url)
    assert json.loads(run("queue", "pause", "mail", "--json").stdout)["change"] == "unchanged"
    assert event_count(db_url) == before
    [mail] = json.loads(run("queue", "list", "--json").stdout)
    assert (mail["queue"], mail["paused"], mail["pending"], mail["reason"]) == (
        "mail",
        True,
        1,
        "smtp down",
    )
    assert "paused" in run("queue", "list").stdout
    assert json.loads(run("jobs", "--json").stdout)["paused_queues"] == ["mail"]
    assert "paused queues (not claimed): mail" in run("jobs").stderr
    shown = run("show", job)
    assert "queue 'mail' paused by cli" in shown.stdout and "smtp down" in shown.stdout
    assert "queue_paused: queue 'mail' paused" in run("stats").stdout
    resumed = run("queue", "resume", "mail", "--json")
    assert json.loads(resumed.stdout)["change"] == "resumed"
    assert json.loads(run("show", job, "--json").stdout)["blocked_by"] == []
    assert run("projections", "verify").exit_code == 0
    assert run("replay", "--check", "--all").exit_code == 0
