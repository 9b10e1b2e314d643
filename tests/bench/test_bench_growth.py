"""bench/bench_growth.py end to end, small: the full ledger is built with the history it says,
reused by the next run, and every drained job is counted (not a timing: the bounds live in
``--check``, whose exit code must agree with the ratios it prints)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.sql import SQL, Identifier

BENCH = Path(__file__).resolve().parents[2] / "bench"
JOBS, MONTHS, DRAIN = 1_200, 2, 300


@pytest.fixture
def prefix(jobledger_postgres_server: str) -> Iterator[str]:
    name = f"jl_growth_test_{secrets.token_hex(4)}"
    yield name
    with psycopg.connect(f"{jobledger_postgres_server}/postgres", autocommit=True) as conn:
        for database in (f"{name}_{JOBS}_{MONTHS}", f"{name}_empty"):
            conn.execute(
                SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(Identifier(database))
            )


def _run(
    server: str, prefix: str, tmp_path: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path / f"growth-{len(list(tmp_path.iterdir()))}.json"
    args = ["--jobs", str(JOBS), "--months", str(MONTHS), "--drain", str(DRAIN)]
    args += ["--rounds", "1", "--prefix", prefix, "--pg-server", server, "--json", str(out)]
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_growth.py"), *args, *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return done, json.loads(out.read_text())


def test_the_full_ledger_holds_its_history_and_both_drains_finish_every_job(
    jobledger_postgres_server: str, prefix: str, tmp_path: Path
) -> None:
    server = jobledger_postgres_server
    done, figures = _run(server, prefix, tmp_path, "--check")
    assert "building" in done.stderr
    within = figures["jobs_per_s_ratio"] >= 0.95 and figures["claim_p99_ratio"] <= 1.1
    assert done.returncode == (0 if within else 1)
    for side in ("empty", "full"):
        assert figures[side]["jobs_per_s"] > 0
        assert figures[side]["claims"] > 0
        assert figures[side]["claim_p50_ms"] <= figures[side]["claim_p99_ms"]
    # The full ledger: every filler job finished with a worker's four events, in the past
    # months' partitions (one each), and the drain's jobs beside them in the current one's.
    with psycopg.connect(f"{server}/{prefix}_{JOBS}_{MONTHS}") as conn:
        statuses = dict(
            conn.execute(
                "SELECT status, count(*) FROM jl_queue WHERE job_type = 'bench.filler' "
                "GROUP BY status"
            ).fetchall()
        )
        events = conn.execute(
            "SELECT count(*) FROM jl_events e JOIN jl_queue q ON q.job_id = e.originator_id "
            "WHERE q.job_type = 'bench.filler'"
        ).fetchone()
        months = conn.execute(
            "SELECT count(DISTINCT tableoid) FROM jl_queue WHERE job_type = 'bench.filler'"
        ).fetchone()
        drained = conn.execute(
            "SELECT count(*) FROM jl_queue WHERE job_type = 'bench.drain' AND status = 'succeeded'"
        ).fetchone()
    assert statuses == {"succeeded": JOBS}
    assert events == (4 * JOBS,)
    assert months == (MONTHS,)
    assert drained == (DRAIN,)
    before = sum(figures["sizes_before"]["full"].values())
    after = sum(figures["sizes_after"]["full"].values())
    assert after > before

    again, _ = _run(server, prefix, tmp_path)
    assert "reusing" in again.stderr and "building" not in again.stderr
