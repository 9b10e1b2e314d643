"""Claim cost by queue, with and without ``jl_queue_claim_queue_idx``, over a deep queue.

Fills a scratch database per backend with ``--pending`` due jobs in queue ``bulk`` (higher
priority, so they come first in claim order) and a few in queue ``rare``, then times
``Ledger.claim(queues=[...], limit=1)`` (the whole claim transaction: the locking select and
the appended ``job_leased``), releasing each claimed job again outside the timing so every
round sees the same queue, and the claim's own select alone (the part an index changes). Then
it drops the index and times the select again (PostgreSQL plans it over
``jl_queue_claim_idx``; SQLite's query names its index, so the stand-in is the same query over
``jl_queue_claim_idx``). A claim without a queue filter is the baseline.

    .venv/bin/python bench/bench_claim_queues.py                      # 20,000 pending, both
    .venv/bin/python bench/bench_claim_queues.py --pending 100000 --backends postgres

Prints JSON: per backend, per case, the median and p90 milliseconds per claim.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from contextlib import closing
from time import perf_counter
from typing import Any

import psycopg
from scratch import scratch_database

from ledger import EnqueueRequest, Ledger
from ledger.store.queries import load

INDEX = "jl_queue_claim_queue_idx"
CASES: dict[str, list[str] | None] = {
    "rare queue": ["rare"],
    "bulk queue": ["bulk"],
    "rare + default": ["rare", "default"],
    "no queue filter": None,
}


def fill(ledger: Ledger, pending: int) -> None:
    ledger.define("t")
    for start in range(0, pending, 5_000):
        ledger.enqueue_many(
            [
                EnqueueRequest(job_type="t", queue="bulk", priority=200)
                for _ in range(min(5_000, pending - start))
            ]
        )
    ledger.enqueue_many([EnqueueRequest(job_type="t", queue="rare") for _ in range(5)])


def time_claims(ledger: Ledger, queues: list[str] | None, rounds: int) -> dict[str, float]:
    """Whole claim transactions of one job, each released again (untimed)."""
    times = []
    for _ in range(rounds):
        started = perf_counter()
        [job] = ledger.claim("bench", limit=1, queues=queues)
        times.append((perf_counter() - started) * 1000)
        assert job.lease is not None
        ledger.release(job.lease)
    return _summary(times)


def run_sql(url: str, sql: str) -> None:
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.encode())
            conn.execute(b"ANALYZE jl_queue")
    else:
        with closing(sqlite3.connect(url)) as conn:
            conn.execute(sql)
            conn.execute("ANALYZE")
            conn.commit()


def _summary(times: list[float]) -> dict[str, float]:
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(times[int(len(times) * 0.9)], 3),
    }


def time_selects(url: str, queues: list[str] | None, rounds: int, over: str) -> dict[str, float]:
    """The claim's own select (named query), alone: in a transaction rolled back each round
    on PostgreSQL (its row locks), plainly on SQLite. ``over``: the SQLite index named."""
    backend = "postgres" if url.startswith("postgresql") else "sqlite"
    name = "queue_claim" if queues is None else "queue_claim_queues"
    sql = load(backend)[name].replace("jl_queue_claim_queue_idx", over)
    params: dict[str, Any] = {"now": 2**62, "limit": 1}
    times = []
    if backend == "postgres":
        if queues is not None:
            params["queues"] = queues
        with psycopg.connect(url) as conn:
            for _ in range(rounds):
                started = perf_counter()
                conn.execute(sql.encode(), params).fetchall()
                times.append((perf_counter() - started) * 1000)
                conn.rollback()
    else:
        if queues is not None:
            params["queues"] = json.dumps(queues)
        with closing(sqlite3.connect(url)) as conn:
            for _ in range(rounds):
                started = perf_counter()
                conn.execute(sql, params).fetchall()
                times.append((perf_counter() - started) * 1000)
    return _summary(times)


def bench(backend: str, server: str, pending: int, rounds: int) -> dict[str, Any]:
    with scratch_database(backend, server) as url:
        Ledger.open(url, create=True).close()
        with Ledger.open(url) as ledger:
            fill(ledger, pending)
        run_sql(url, "SELECT 1")  # and ANALYZE: the planner's statistics
        results: dict[str, Any] = {"with index": {}, "without index": {}}
        with Ledger.open(url) as ledger:
            for case, queues in CASES.items():
                results["with index"][case] = {
                    "claim": time_claims(ledger, queues, rounds),
                    "select": time_selects(url, queues, rounds * 4, INDEX),
                }
        # SQLite's queries name their index (INDEXED BY): without it, the stand-in is the
        # same query over jl_queue_claim_idx, which is what a claim by queue would walk.
        run_sql(url, f"DROP INDEX {INDEX}")
        for case, queues in CASES.items():
            results["without index"][case] = {
                "select": time_selects(url, queues, rounds * 4, "jl_queue_claim_idx")
            }
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    report = {
        "pending": args.pending,
        "rounds": args.rounds,
        "backends": {
            backend: bench(backend, args.server, args.pending, args.rounds)
            for backend in args.backends.split(",")
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
