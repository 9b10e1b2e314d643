"""``jobledger projections``: list, status, rebuild and verify, in text and JSON."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result
from projection_helpers import populate, raw

from jobledger_cli.main import cli
from ledger.views.catalog import PROJECTIONS, get, version_key


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, "projections", *args])


def test_list_names_every_projection(db_url: str) -> None:
    """``list`` shows the eleven inline projections, in text and JSON."""
    result = run(db_url, "list")
    assert result.exit_code == 0, result.output
    for name in ("queue", "definitions", "sync_state", "dead_letters"):
        assert name in result.stdout
    listed = json.loads(run(db_url, "list", "--json").stdout)
    assert [p["name"] for p in listed] == [
        "queue",
        "definitions",
        "workflow_runs",
        "workflow_steps",
        "tokens",
        "schedules",
        "source_polls",
        "queue_states",
        "sync_state",
        "dead_letters",
        "rate_buckets",
        "audit",
    ]
    assert [p["mode"] for p in listed] == ["inline"] * 11 + ["tracked"]
    assert {p["name"]: p["version"] for p in listed} == {p.name: p.version for p in PROJECTIONS}
    assert {p["name"]: p["events"] for p in listed}["dead_letters"] == [
        "job_dead_lettered",
        "job_requeued",
        "job_succeeded",
    ]


def test_status_shows_versions_and_stale_projections(db_url: str) -> None:
    """``status`` shows code and recorded versions, position and lag; a stale one says so."""
    populate(db_url)
    raw(db_url, "UPDATE jl_meta SET value = '0' WHERE key = ?", (version_key("queue"),))
    result = run(db_url, "status")
    assert result.exit_code == 0, result.output
    [queue_line] = [line for line in result.stdout.splitlines() if line.startswith("queue ")]
    assert queue_line.split()[2:5] == [str(get("queue").version), "0", "stale"]
    assert "jobledger migrate" in result.stderr
    statuses = {s["name"]: s for s in json.loads(run(db_url, "status", "--json").stdout)}
    assert statuses["queue"]["stale"] is True
    assert statuses["definitions"]["recorded_version"] == get("definitions").version
    assert statuses["definitions"]["lag"] == 0
    assert statuses["definitions"]["position"] > 0


def test_verify_exits_non_zero_with_a_readable_diff_on_drift(db_url: str) -> None:
    """A clean ledger verifies with exit 0; a corrupted row gives exit 1 and names the row
    and column, in text and in JSON."""
    populate(db_url)
    clean = run(db_url, "verify")
    assert clean.exit_code == 0, clean.output
    assert "queue  ok" in clean.stdout
    raw(db_url, "UPDATE jl_sync_state SET revision = 'zz' WHERE uri = 'a'")
    drift = run(db_url, "verify", "sync_state")
    assert drift.exit_code == 1
    assert "sync_state  DRIFT in 1 row(s)" in drift.stdout
    assert "differs jl_sync_state [src, a]" in drift.stdout
    assert 'revision: expected "r1", live "zz"' in drift.stdout
    as_json = run(db_url, "verify", "--json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["clean"] is False
    [view] = [v for v in report["views"] if v["drift_count"]]
    assert view["drift"][0]["columns"] == [{"column": "revision", "expected": "r1", "live": "zz"}]


def test_rebuild_restores_and_reports(db_url: str) -> None:
    """``rebuild NAME`` restores a deleted row; ``--all`` in JSON reports rows and position;
    neither or both of NAME and --all is a usage error."""
    populate(db_url)
    raw(db_url, "DELETE FROM jl_dead_letters")
    result = run(db_url, "rebuild", "dead_letters")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("rebuilt dead_letters to position ")
    assert run(db_url, "verify").exit_code == 0
    report = json.loads(run(db_url, "rebuild", "--all", "--json").stdout)
    assert report["rows"] == {
        "queue": 12,
        "definitions": 2,
        "workflow_runs": 0,
        "workflow_steps": 0,
        "tokens": 0,
        "schedules": 0,
        "source_polls": 0,
        "queue_states": 0,
        "sync_state": 2,
        "dead_letters": 2,
        "rate_buckets": 0,
        "audit": 35,
    }
    assert run(db_url, "rebuild").exit_code == 2
    assert run(db_url, "rebuild", "queue", "--all").exit_code == 2
    assert run(db_url, "rebuild", "nope").exit_code == 2
