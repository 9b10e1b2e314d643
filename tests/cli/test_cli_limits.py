"""Concurrency limits from the command line: `define --concurrency/--per-org/--resource`,
and what `show` and `stats` say about them."""

from __future__ import annotations

import json

from cli_helpers import Run

from ledger import EnqueueRequest, Ledger


def test_define_sets_limits_and_show_and_stats_report_them(run: Run, db_url: str) -> None:
    """A pending job of a type at its limits says why in `show` (text and JSON); `stats`
    lists each limit with the leases it counts."""
    defined = run("define", "card.charge", "--concurrency", "2", "--per-org", "1", "--json")
    assert defined.exit_code == 0, defined.output
    assert json.loads(defined.output)["concurrency"] == 2
    with Ledger.open(db_url) as ledger:
        ids = [
            e.job_id
            for e in ledger.enqueue_many(
                [EnqueueRequest(job_type="card.charge", org=org) for org in ("a", "a", "b")]
            )
        ]
        assert len(ledger.claim("w", limit=5)) == 2
    waiting = run("show", str(ids[1]))
    assert waiting.exit_code == 0, waiting.output
    assert "concurrency limit 2 of card.charge reached (2 leased)" in waiting.output
    assert "per-org concurrency limit 1 of card.charge reached for org a" in waiting.output
    shown = json.loads(run("show", str(ids[1]), "--json").output)
    assert [b["reason"] for b in shown["blocked_by"]] == [
        "concurrency_limit",
        "per_org_concurrency_limit",
    ]
    figures = json.loads(run("stats", "--json").output)
    assert figures["concurrency_limits"] == [
        {"kind": "type", "name": "card.charge", "limit": 2, "leased": 2},
        {"kind": "org", "name": "card.charge", "limit": 1, "leased": 1},
    ]
    assert "concurrency limits" in run("stats").output


def test_bad_limits_exit_2_and_record_nothing(run: Run) -> None:
    """A limit below 1, or --resource without --resource-limit, is a bad argument."""
    assert run("define", "t", "--concurrency", "0").exit_code == 2
    assert run("define", "t", "--resource", "db").exit_code == 2
    assert json.loads(run("definitions", "--json").output) == []


def test_a_resource_limit_shows_in_definitions(run: Run) -> None:
    """`definitions` lists a type's limits."""
    done = run("define", "t", "--resource", "db", "--resource-limit", "3")
    assert done.exit_code == 0, done.output
    assert "resource db (3)" in done.output
    assert "resource db (3)" in run("definitions").output
