"""``jobledger bench``: its figures, its refusal of a database holding other work, ``--yes``."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from cli_helpers import assert_one_error_line, invoke

from jobledger_cli.bench import verify
from jobledger_cli.bench_phases import BENCH_TYPE, WAKEUP_SAMPLES, JobsLostError
from ledger import EnqueueRequest, Ledger
from ledger.core.errors import StoreError
from ledger.store.server import analyze_queue, server_version

N = 300
SMALL = ("--n", str(N), "--chunk", "100")
FIGURES = (
    "enqueue_jobs_per_s",
    "process_jobs_per_s",
    "process_events_per_s",
    "wakeup_p50_ms",
    "wakeup_p95_ms",
)


def _bench_json(url: str, *args: str) -> Any:
    """Run ``bench --json`` with a small N; its report, after checking it succeeded."""
    result = invoke(url, "bench", *SMALL, "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_json_report_has_positive_figures_and_all_jobs_succeeded(db_url: str) -> None:
    """--json prints only JSON: positive figures, N succeeded, and the ledger agrees."""
    result = invoke(db_url, "bench", *SMALL, "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    postgres = db_url.startswith("postgresql")
    assert report["n"] == report["succeeded"] == N
    assert all(report[figure] > 0 for figure in FIGURES), report
    assert report["events_per_job"] >= 2.0  # at least job_leased and job_succeeded
    assert report["backend"] == ("postgresql" if postgres else "sqlite")
    assert report["analyzed"] is postgres
    assert report["wakeup_samples"] > 0
    notice = f"bench: writing {N + report['wakeup_samples']:,} {BENCH_TYPE} jobs"
    assert result.stderr.startswith(notice), result.stderr
    with Ledger.open(db_url) as ledger:
        assert ledger.counts() == {"succeeded": N + report["wakeup_samples"]}


def test_other_jobs_are_refused_without_yes_and_nothing_is_appended(db_url: str) -> None:
    """Jobs of another type present: one error line, no event appended; --yes then runs."""
    with Ledger.open(db_url) as ledger:
        ledger.define("app.email")
        ledger.enqueue("app.email", {"to": "ada@example.com"})
        before = ledger.store.head_position()
    refused = invoke(db_url, "bench", *SMALL)
    assert_one_error_line(refused, "error: ")
    assert "app.email" in refused.stderr and "--yes" in refused.stderr
    with Ledger.open(db_url) as ledger:
        assert ledger.store.head_position() == before
    report = _bench_json(db_url, "--yes")
    assert report["succeeded"] == N
    with Ledger.open(db_url) as ledger:
        assert ledger.counts() == {"pending": 1, "succeeded": N + report["wakeup_samples"]}


def test_text_report_on_a_new_file_then_again_without_yes(tmp_path: Path) -> None:
    """bench creates the ledger, prints facts and a figure table; earlier bench jobs are no bar."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    first = invoke(url, "bench", *SMALL)
    assert first.exit_code == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("database") and "SQLite database" in lines[0]
    assert any(line.startswith("server    SQLite 3.") for line in lines)
    assert any(line.startswith("FIGURE") and "VALUE" in line for line in lines)
    assert any(line.startswith("processing") and "jobs/s" in line for line in lines)
    assert lines[-1] == f"all {N + WAKEUP_SAMPLES:,} bench jobs succeeded"
    _bench_json(url)
    with Ledger.open(url) as ledger:
        assert ledger.counts() == {"succeeded": 2 * (N + WAKEUP_SAMPLES)}


def test_verify_fails_loudly_when_a_bench_job_did_not_succeed(sqlite_url: str) -> None:
    """Bench jobs unfinished or gone are reported as lost, with the statuses found."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define(BENCH_TYPE)
        ids = [
            i
            for i in [
                e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type=BENCH_TYPE)] * 2)
            ]
            if i
        ]
        with pytest.raises(JobsLostError, match=r"0 of 3 succeeded \(1 missing, 2 pending\)"):
            verify(ledger, ids, [uuid4()])


def test_jobs_left_by_an_interrupted_run_are_worked_first_and_not_timed(sqlite_url: str) -> None:
    """Bench jobs already due are worked before the timed phases and reported, not counted."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define(BENCH_TYPE)
        ledger.enqueue_many([EnqueueRequest(job_type=BENCH_TYPE)] * 7)
    report = _bench_json(sqlite_url)
    assert (report["leftover_jobs"], report["succeeded"]) == (7, N)
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.counts() == {"succeeded": 7 + N + WAKEUP_SAMPLES}


def test_server_version_names_the_backend_and_its_version(db_url: str) -> None:
    """The bench's "server" fact: PostgreSQL's own version string, or the linked SQLite's."""
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url) as conn:
            expected = conn.execute("SHOW server_version").fetchone()
        assert expected is not None
        assert server_version(db_url) == f"PostgreSQL {expected[0]}"
    else:
        assert server_version(db_url) == f"SQLite {sqlite3.sqlite_version}"


def test_analyze_queue_refreshes_statistics_on_postgres_only(db_url: str) -> None:
    """PostgreSQL: ANALYZE runs (the planner's row estimate of jl_queue becomes the real
    count); SQLite: nothing runs and it says so."""
    with Ledger.open(db_url) as ledger:
        ledger.define(BENCH_TYPE)
        ledger.enqueue_many([EnqueueRequest(job_type=BENCH_TYPE)] * 3)
    postgres = db_url.startswith("postgresql")
    assert analyze_queue(db_url) is postgres
    if postgres:
        with psycopg.connect(db_url) as conn:
            row = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'jl_queue'")
            assert row.fetchone() == (3.0,)


def test_an_unreachable_server_is_a_store_error_naming_what_failed() -> None:
    """A driver failure comes back as the ledger's StoreError (no driver error escapes the
    store), the message saying which call failed."""
    url = "postgresql://postgres@127.0.0.1:1/nothing"
    with pytest.raises(StoreError, match=re.escape("ANALYZE jl_queue failed: ")):
        analyze_queue(url)
    with pytest.raises(StoreError, match="reading the server version failed: "):
        server_version(url)
