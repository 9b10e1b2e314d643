"""Claim throughput with a concurrency limit on versus off, and the fair claim order's cost.

Per backend, in one scratch database and one run:

1. **Turns**: ``--threads`` workers each loop ``finish_and_claim`` (the pool's batch turn:
   record the jobs it holds as succeeded, claim up to ``--batch`` more) until ``--jobs`` jobs
   of one org have all succeeded; jobs/s for each case, the cases interleaved (off, on, …)
   and each repeated ``--repeat`` times (median taken):

   - ``off``: the type has no limit (the claim's candidates come back with their
     definitions; nothing else is asked);
   - ``on, not binding``: ``concurrency`` far above what the workers can hold, so it only
     costs (lock, count, admit) and never refuses;
   - ``on, binding``: ``concurrency`` half of what the workers would hold
     (``threads * batch / 2``): claims wait for each other's slots.

2. **Select**: the claim's own select over ``--pending`` due jobs of one org, fair (this
   release's ``queue_claim``) against the claim order before it (one ordered walk of
   ``jl_queue_claim_idx``, kept here as the baseline), and fair over two orgs
   (``--pending`` of one, 5 of another enqueued after them).

    .venv/bin/python bench/bench_claim_limits.py                     # both backends
    .venv/bin/python bench/bench_claim_limits.py --backends postgres --jobs 20000

Prints JSON: per backend, jobs/s per case and the ratios to ``off``; the selects' median and
p90 milliseconds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import threading
from contextlib import closing
from time import perf_counter
from typing import Any

import psycopg
from scratch import scratch_database

from ledger import EnqueueRequest, Ledger
from ledger.jobs.outcomes import Completion, Outcome
from ledger.store.queries import load

BEFORE_FAIR = {
    "postgres": """SELECT job_id, enqueue_seq, state FROM jl_queue
WHERE status = 'pending' AND run_at <= %(now)s
ORDER BY priority DESC, run_at, enqueue_seq
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED""",
    "sqlite": """SELECT job_id, enqueue_seq, state FROM jl_queue INDEXED BY jl_queue_claim_idx
WHERE status = 'pending' AND run_at <= :now
ORDER BY priority DESC, run_at, enqueue_seq
LIMIT :limit""",
}
"""The claim's select before the fair order (queue_claim as it was), the baseline."""


def fill(ledger: Ledger, job_type: str, count: int, org: str = "acme") -> None:
    for start in range(0, count, 5_000):
        size = min(5_000, count - start)
        ledger.enqueue_many([EnqueueRequest(job_type=job_type, org=org) for _ in range(size)])


def work_turns(ledger: Ledger, job_type: str, jobs: int, threads: int, batch: int) -> float:
    """Jobs/s of ``threads`` workers turning until every job of ``job_type`` succeeded."""
    done = threading.Event()
    finished = [0] * threads
    start = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        held: list[Outcome] = []
        start.wait()
        while not done.is_set():
            turn = ledger.finish_and_claim(held, f"bench-{index}", limit=batch, types=[job_type])
            finished[index] += len(turn.finished.accepted)
            held = [Completion(job.lease) for job in turn.claimed if job.lease is not None]
            if sum(finished) >= jobs:
                done.set()

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = perf_counter()
    for thread in pool:
        thread.join()
    elapsed = perf_counter() - began
    return round(sum(finished) / elapsed, 1)


def time_select(url: str, sql: str, rounds: int, limit: int) -> dict[str, float]:
    """One select, alone: rolled back each round on PostgreSQL (its row locks)."""
    params: dict[str, Any] = {
        "now": 2**62,
        "limit": limit,
        "full_types": [],
        "full_orgs": [],
        "taken": [],
    }
    times = []
    if url.startswith("postgresql"):
        with psycopg.connect(url) as conn:
            for _ in range(rounds):
                started = perf_counter()
                conn.execute(sql.encode(), params, prepare=True).fetchall()
                times.append((perf_counter() - started) * 1000)
                conn.rollback()
    else:
        params.update(full_types="[]", full_orgs="[]", taken="[]")
        with closing(sqlite3.connect(url)) as conn:
            for _ in range(rounds):
                started = perf_counter()
                conn.execute(sql, params).fetchall()
                times.append((perf_counter() - started) * 1000)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(times[int(len(times) * 0.9)], 3),
    }


def _analyse(url: str) -> None:
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(b"ANALYZE jl_queue")
    else:
        with closing(sqlite3.connect(url)) as conn:
            conn.execute("ANALYZE")
            conn.commit()


def bench(backend: str, server: str, args: argparse.Namespace) -> dict[str, Any]:
    capacity = args.threads * args.batch
    cases = {
        "off": None,
        "on, not binding": capacity * 100,
        "on, binding": max(1, capacity // 2),
    }
    with scratch_database(backend, server) as url:
        Ledger.open(url, create=True).close()
        turns: dict[str, list[float]] = {case: [] for case in cases}
        with Ledger.open(url) as ledger:
            for repeat in range(args.repeat):
                for index, (case, limit) in enumerate(cases.items()):
                    job_type = f"t{index}.{repeat}"
                    ledger.define(job_type, concurrency=limit)
                    fill(ledger, job_type, args.jobs)
                    turns[case].append(
                        work_turns(ledger, job_type, args.jobs, args.threads, args.batch)
                    )
            ledger.define("select.t")
            fill(ledger, "select.t", args.pending)
        _analyse(url)
        queries = load(backend)
        selects = {
            "before (one ordered walk)": time_select(
                url, BEFORE_FAIR[backend], args.rounds, args.batch
            ),
            "fair, one org": time_select(url, queries["queue_claim"], args.rounds, args.batch),
        }
        with Ledger.open(url) as ledger:
            fill(ledger, "select.t", 5, org="small")
        _analyse(url)
        selects["fair, two orgs (5 jobs of one)"] = time_select(
            url, queries["queue_claim"], args.rounds, args.batch
        )
        medians = {case: statistics.median(values) for case, values in turns.items()}
        return {
            "turns_jobs_per_s": {case: round(value, 1) for case, value in medians.items()},
            "turns_each_repeat": turns,
            "ratio_to_off": {
                case: round(value / medians["off"], 3) for case, value in medians.items()
            },
            "select": selects,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4_000, help="jobs per turns case")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pending", type=int, default=20_000, help="for the selects")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    report = {
        "jobs": args.jobs,
        "threads": args.threads,
        "batch": args.batch,
        "repeat": args.repeat,
        "pending": args.pending,
        "backends": {
            backend: bench(backend, args.server, args) for backend in args.backends.split(",")
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
