"""bench/bench_http.py runs end to end on a tiny ledger (a smoke test, not a timing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH)]

import bench_http  # noqa: E402


def test_the_http_bench_makes_a_ledger_once_and_measures_every_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first run makes the cached SQLite ledger and reports each request's p50/p95 and
    the concurrent rate; a second run reuses the ledger."""
    argv = ["--events", "1500", "--backends", "sqlite", "--cache", str(tmp_path)]
    argv += ["--requests", "3", "--clients", "2", "--seconds", "0.2"]
    [first] = bench_http.main([*argv, "--json"])
    assert first["made_now"] is True and first["events"] >= 1500 * bench_http.REUSE_FRACTION
    assert set(first["latency"]) == {
        "GET /api/v1/jobs?limit=50",
        "GET /api/v1/jobs/{id}",
        "GET /metrics",
        "GET /health",
        "GET /api/v1/jobs?limit=50 (org token)",
    }
    assert all(f["p50_ms"] > 0 and f["p95_ms"] >= f["p50_ms"] for f in first["latency"].values())
    assert first["throughput"]["requests_per_s"] > 0
    [again] = bench_http.main(argv)
    assert again["made_now"] is False
    assert "requests/s" in capsys.readouterr().out
