"""bench/profile_server.py end to end, small: on its own throwaway cluster, the drain's
statements, WAL records and CPU come back per job (not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
N = 300


def test_a_small_profile_names_the_claim_and_the_events_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    subprocess.run(
        [sys.executable, str(BENCH / "profile_server.py"), "--n", str(N), "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    figures = json.loads(out.read_text())
    assert figures["n"] == N
    assert figures["worker_cpu_us_per_job"] > 0
    assert figures["server_cpu_us_per_job"] > 0
    queries = [s["query"] for s in figures["statements"]]
    assert any(q.startswith("WITH RECURSIVE orgs") for q in queries)  # the claim
    # Every drained job appended its lease, start and success: three heap inserts or more.
    records = {w["record"]: w["per_job"] for w in figures["wal"]}
    assert records["Heap/INSERT"] >= 3 * 0.9
    assert figures["wal_bytes_per_job"] >= sum(w["bytes_per_job"] for w in figures["wal"]) * 0.99
