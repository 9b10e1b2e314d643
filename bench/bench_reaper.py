"""Reaper throughput: how fast expired leases are failed (issue 4's figure).

Creates its own database (PostgreSQL: ``jl_bench_reaper_<random>``, dropped afterwards;
SQLite: a temporary file), enqueues N jobs, claims them all with a short lease, moves the
injectable clock past the leases, and times reaper passes until none is left.

    .venv/bin/python bench/bench_reaper.py [--n 10000] [--limit 500] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import time

import psycopg
from scratch import scratch_database

from ledger import EnqueueRequest, FakeClock, Ledger
from ledger.maintenance.reaper import Reaper, ReaperConfig

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


def measure(url: str, n: int, limit: int) -> dict[str, float]:
    clock = FakeClock()
    with Ledger.open(url, create=True, clock=clock, pool_size=2) as ledger:
        ledger.define("bench.reap", max_attempts=3)
        for first in range(0, n, 5000):
            ledger.enqueue_many(
                [EnqueueRequest(job_type="bench.reap") for _ in range(min(5000, n - first))]
            )
        for _ in range(0, n, 1000):
            ledger.claim("bench-worker", limit=1000, lease_s=1)
        if url.startswith("postgresql"):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")  # untimed: fresh statistics for the lease index
        clock.advance(10)
        before = ledger.store.head_position()
        reaper = Reaper(ledger, ReaperConfig(limit=limit, retry_delay_s=60))
        started = time.perf_counter()
        reaped = passes = 0
        while (report := reaper.run_once()).processed:
            reaped += report.processed
            passes += 1
        elapsed = time.perf_counter() - started
        events = ledger.store.head_position() - before
        if reaped != n or ledger.counts() != {"pending": n}:
            raise SystemExit(f"reaped {reaped} of {n}; counts {ledger.counts()}")
    return {
        "leases": reaped,
        "passes": passes,
        "seconds": elapsed,
        "leases_per_s": reaped / elapsed,
        "events_per_s": events / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        with scratch_database(backend, PG_SERVER) as url:
            figures = measure(url, args.n, args.limit)
        print(
            f"{backend:9} {figures['leases']:,.0f} expired leases in {figures['seconds']:.2f} s "
            f"({figures['passes']:.0f} passes of {args.limit}): "
            f"{figures['leases_per_s']:,.0f} leases/s, {figures['events_per_s']:,.0f} events/s"
        )


if __name__ == "__main__":
    main()
