"""Audit query latency: the first page (50 rows) of each typical question over N events.

Makes its own database (PostgreSQL ``jl_bench_<random>``, dropped ``WITH (FORCE)`` even on
error; SQLite in a temporary directory), fills it with about ``--events`` events quickly
(``enqueue_many``, batched ``claim`` and ``finish_many``) across 5 types, 10 orgs and 20
workers, with retried and dead-lettered failures under 5 codes (one rare), one simulated hour
per round, then catches the audit view up (timed), and times the first page of each question:
``cold`` is the first run in a fresh connection pool (the OS page cache stays warm), ``warm``
the median of 5 more. PostgreSQL also records each statement's plan (``EXPLAIN``).

Then the path a user runs: ``jobledger --db URL audit`` (the unfiltered first page, the audit
view caught up first: nothing left to apply) as a subprocess, wall time, median of 5; and,
as a separate figure, the start-up alone (``jobledger --version``: the interpreter and the
command line's imports, no database).

    .venv/bin/python bench/bench_audit.py                                # 1,000,000, postgres
    .venv/bin/python bench/bench_audit.py --events 200000 --backends sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from time import perf_counter
from typing import Any

import psycopg
from scratch import scratch_database

from ledger import AuditQuery, Completion, EnqueueRequest, Failure, FailureKind, FakeClock, Ledger
from ledger.api.ledger import FailureReport, Outcome
from ledger.store.audit_reads import audit_sql
from ledger.store.queries import load

BATCH = 1000
JOBLEDGER = Path(sys.executable).parent / "jobledger"
CLI_RUNS = 5
TYPES = [f"type-{i}" for i in range(5)]
ORGS = [f"org-{i}" for i in range(10)]
WORKERS = [f"worker-{i}" for i in range(20)]
CODES = ["E_TIMEOUT", "E_HTTP_500", "E_DB", "E_PARSE"]
RARE_CODE = "E_RARE"


def _outcome(lease: Any, n: int) -> Outcome:
    """~90% successes, ~7% retryable failures, ~3% terminal (dead letters); 1 in 2,000
    retried with the rare code."""
    if n % 2000 == 7:
        return FailureReport(
            lease, Failure(kind=FailureKind.RETRYABLE, code=RARE_CODE, message="m")
        )
    if n % 100 < 7:
        code = CODES[n % len(CODES)]
        return FailureReport(lease, Failure(kind=FailureKind.RETRYABLE, code=code, message="m"))
    if n % 100 < 10:
        code = CODES[n % len(CODES)]
        return FailureReport(lease, Failure(kind=FailureKind.TERMINAL, code=code, message="m"))
    return Completion(lease=lease)


def fill(ledger: Ledger, clock: FakeClock, events: int) -> int:
    """Append about ``events`` events, one round of ``BATCH`` jobs per simulated hour."""
    for job_type in TYPES:
        ledger.define(job_type, max_attempts=3)
    made = n = round_no = 0
    while made < events:
        size = min(BATCH, max(1, (events - made) // 3))
        requests = [
            EnqueueRequest(job_type=TYPES[(n + i) % len(TYPES)], org=ORGS[(n + i) // 7 % len(ORGS)])
            for i in range(size)
        ]
        ledger.enqueue_many(requests)
        jobs = ledger.claim(WORKERS[round_no % len(WORKERS)], limit=size, lease_s=600)
        outcomes = [_outcome(job.lease, n + i) for i, job in enumerate(jobs) if job.lease]
        ledger.finish_many(outcomes)
        failures = sum(isinstance(o, FailureReport) for o in outcomes)
        made += size + len(jobs) + len(outcomes) + failures
        n += size
        round_no += 1
        clock.advance(3600)
        if round_no % 50 == 0:
            print(f"  {made:,} events", file=sys.stderr)
    return ledger.store.head_position()


def questions(ledger: Ledger, clock: FakeClock) -> dict[str, AuditQuery]:
    now = clock.now()
    [job] = ledger.audit(AuditQuery(org="org-3", limit=1), catch_up=False).rows
    week = now - timedelta(days=7)
    day3, day4 = now - timedelta(days=9), now - timedelta(days=8)
    first = ledger.audit(AuditQuery(org="org-3", since=day3, until=day4), catch_up=False)
    return {
        "no filter (newest first)": AuditQuery(),
        "dead letters of type T, last week": AuditQuery(
            events=("job_dead_lettered",), job_type="type-1", since=week
        ),
        "jobs worker W leased": AuditQuery(events=("job_leased",), worker="worker-7"),
        "retries with code C": AuditQuery(events=("job_retry_scheduled",), code="E_HTTP_500"),
        "retries with a rare code": AuditQuery(events=("job_retry_scheduled",), code=RARE_CODE),
        "org O between two times (a day)": AuditQuery(org="org-3", since=day3, until=day4),
        "  same, second page (cursor)": AuditQuery(
            org="org-3", since=day3, until=day4, cursor=first.next_cursor
        ),
        "  same, oldest first": AuditQuery(org="org-3", since=day3, until=day4, order="oldest"),
        "failures and dead letters with code C": AuditQuery(
            events=("job_failed", "job_dead_lettered"), code="E_DB"
        ),
        "code C, any event (incl. retries)": AuditQuery(code="E_DB"),
        "rare code, any event": AuditQuery(code=RARE_CODE),
        "type + org + failed": AuditQuery(job_type="type-2", org="org-5", events=("job_failed",)),
        "type + pending now (status join)": AuditQuery(job_type="type-3", status="pending"),
        "worker + last 2 days": AuditQuery(worker="worker-3", since=now - timedelta(days=2)),
        "one job's trail": AuditQuery(job=job.job_id),
        "time window only (an hour, a week ago)": AuditQuery(
            since=week, until=week + timedelta(hours=1)
        ),
    }


def explain(url: str, query: AuditQuery) -> list[str]:
    sql, params = audit_sql(load("postgres"), "postgres", query)
    with psycopg.connect(url) as conn:
        rows = conn.execute(("EXPLAIN (ANALYZE, COSTS OFF) " + sql).encode(), params).fetchall()
    return [row[0] for row in rows]


def wall_ms(*args: str) -> float:
    """Milliseconds one ``jobledger …`` process took, start to exit (it must exit 0)."""
    env = {key: value for key, value in os.environ.items() if key != "JOBLEDGER_DB"}
    started = perf_counter()
    subprocess.run([str(JOBLEDGER), *args], check=True, capture_output=True, env=env)
    return (perf_counter() - started) * 1000


def cli_timings(url: str) -> dict[str, Any]:
    """``jobledger --db URL audit`` and ``jobledger --version``, alternated, medians in ms."""
    audit, startup = [], []
    for _ in range(CLI_RUNS):
        audit.append(wall_ms("--db", url, "audit"))
        startup.append(wall_ms("--version"))
    return {
        "audit_ms": round(statistics.median(audit), 1),
        "audit_ms_range": [round(min(audit), 1), round(max(audit), 1)],
        "startup_ms": round(statistics.median(startup), 1),
        "startup_ms_range": [round(min(startup), 1), round(max(startup), 1)],
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def run(backend: str, server: str, events: int) -> dict[str, Any]:
    clock = FakeClock()
    with scratch_database(backend, server) as url:
        with Ledger.open(url, create=True, clock=clock, pool_size=2) as ledger:
            started = perf_counter()
            head = fill(ledger, clock, events)
            fill_s = perf_counter() - started
            print(f"{backend}: {head:,} events appended in {fill_s:.1f}s", file=sys.stderr)
            started = perf_counter()
            [caught] = ledger.catch_up(["audit"])
            catch_up_s = perf_counter() - started
            print(
                f"{backend}: audit caught up: {caught.applied:,} events in {catch_up_s:.1f}s",
                file=sys.stderr,
            )
            if backend == "postgres":
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE jl_audit")
                    conn.execute("VACUUM ANALYZE jl_queue")
            asked = questions(ledger, clock)
        timings: list[dict[str, Any]] = []
        with Ledger.open(url, clock=clock, pool_size=2) as ledger:
            for label, query in asked.items():
                started = perf_counter()
                result = ledger.audit(query, catch_up=False)
                cold = perf_counter() - started
                warm = []
                for _ in range(5):
                    started = perf_counter()
                    ledger.audit(query, catch_up=False)
                    warm.append(perf_counter() - started)
                plan = explain(url, query) if backend == "postgres" else []
                timings.append(
                    {
                        "question": label,
                        "rows": len(result.rows),
                        "cold_ms": round(cold * 1000, 1),
                        "warm_ms": round(statistics.median(warm) * 1000, 1),
                        "plan": plan,
                    }
                )
        cli = cli_timings(url)
    return {
        "backend": backend,
        "events": head,
        "fill_s": round(fill_s, 1),
        "catch_up_s": round(catch_up_s, 1),
        "catch_up_events_per_s": round(caught.applied / catch_up_s),
        "queries": timings,
        "cli": cli,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--backends", default="postgres")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", default="bench/results/audit.json")
    args = parser.parse_args()
    results = [run(b, args.pg_server, args.events) for b in args.backends.split(",")]
    for result in results:
        print(
            f"\n{result['backend']}: {result['events']:,} events; audit catch-up "
            f"{result['catch_up_s']}s = {result['catch_up_events_per_s']:,} events/s"
        )
        print(f"{'question (first page, limit 50)':44} {'rows':>4} {'cold ms':>8} {'warm ms':>8}")
        for q in result["queries"]:
            print(f"{q['question']:44} {q['rows']:>4} {q['cold_ms']:>8} {q['warm_ms']:>8}")
        cli = result["cli"]
        print(
            f"`jobledger --db URL audit` (a process, median of {CLI_RUNS}): {cli['audit_ms']} ms "
            f"{cli['audit_ms_range']}; start-up alone (`jobledger --version`): "
            f"{cli['startup_ms']} ms {cli['startup_ms_range']}; load {' '.join(cli['loadavg'])}"
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
