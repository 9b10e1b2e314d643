"""``jobledger retention`` on both backends: rules and dry runs everywhere; a run moves jobs
on SQLite and refuses on PostgreSQL, whose partitioned archive is not built (decision 31)."""

from __future__ import annotations

import json

from retention_helpers import invoke, make_jobs

from ledger import Ledger


def _head(url: str) -> int:
    with Ledger.open(url) as ledger:
        return ledger.store.head_position()


def test_rules_show_and_dry_run_record_only_the_rules(db_url: str) -> None:
    """``set`` appends one event per rule, ``show`` and ``run --dry-run`` append nothing and
    agree on what would move; per-type rules keep their type's jobs."""
    jobs = make_jobs(db_url)
    assert invoke(db_url, "retention", "set", "--after", "30d").exit_code == 0
    result = invoke(db_url, "retention", "set", "--type", "slow", "--after", "5000w", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["policy_version"] == 2
    head = _head(db_url)

    dry = invoke(db_url, "retention", "run", "--dry-run", "--json")
    shown = invoke(db_url, "retention", "show", "--json")

    assert dry.exit_code == 0 and shown.exit_code == 0, (dry.stderr, shown.stderr)
    planned = json.loads(dry.stdout)
    assert set(planned["job_ids"]) == {str(j) for j in jobs.finished}
    assert (planned["moved"], planned["eligible"]) == (0, 5)
    overview = json.loads(shown.stdout)
    assert overview["eligible"] == 5
    assert [(r["job_type"], r["after"]) for r in overview["rules"]] == [
        (None, "30d"),
        ("slow", "5000w"),
    ]
    assert [e["event"] for e in overview["events"]] == ["retention_policy_set"] * 2
    assert _head(db_url) == head  # a dry run and show record nothing


def test_bad_arguments_exit_2_and_a_run_with_nothing_to_move_appends_nothing(
    db_url: str,
) -> None:
    """A malformed age, a live status or neither --after nor --off are usage errors (exit
    2, nothing appended); a run with nothing past a rule moves nothing and appends nothing."""
    head = _head(db_url)
    for args in (["--after", "3x"], ["--status", "pending", "--after", "1d"], []):
        result = invoke(db_url, "retention", "set", *args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
    assert _head(db_url) == head
    result = invoke(db_url, "retention", "run")
    assert result.exit_code == 0 and "moved 0 jobs" in result.stdout
    assert _head(db_url) == head
