"""bench/bench_light_load.py end to end, small: every job enqueued reaches a handler in the
worker process and the figures come back (not a timing: the bounds live in ``--check``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_small_run_reports_every_job_it_sent() -> None:
    args = ["--rate", "200", "--n", "200", "--json"]
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_light_load.py"), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["n"] == 200 - 200 // 20  # all but the warm-up's 5%
    assert 0 < figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert figures["rate_sent"] > 0
