"""Retention: table sizes and timings before and after a run (issue 16, part 6's figure).

Creates its own database (PostgreSQL: ``jl_bench_<random>``, dropped afterwards; SQLite: a
temporary file and its archive), enqueues N jobs, finishes them (claim and succeed in
batches; ``--live`` of them are left pending), catches the audit view up, moves the fake
clock 31 days on, sets a 30-day rule and times: ``projections verify`` before, the dry run
(choosing), the run (the move), verify on the hot tables and on hot + archive, and (SQLite)
a ``VACUUM`` of the hot file, which a move leaves at its size (SQLite reuses freed pages).
It prints the rows per table and the files' bytes (SQLite) or the tables' total relation
sizes (PostgreSQL) before and after. On PostgreSQL the jobs are enqueued in January and
the ``--live`` ones in February, so January's partition is the one a run detaches whole
(decision 31); its sizes count the hot tables and, after, ``jl_archive``'s.

    .venv/bin/python bench/bench_retention.py [--n 100000] [--live 1000]
        [--backends sqlite,postgres] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from scratch import scratch_database

from ledger import EnqueueRequest, FakeClock, Ledger
from ledger.api.reader import Reader
from ledger.jobs.outcomes import Completion
from ledger.retention.retention_runs import choose, policy_of, run_retention, set_rule
from ledger.store.postgres.store import PostgresStore

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
TABLES = ("jl_events", "jl_queue", "jl_audit", "jl_dead_letters")
START = datetime(2026, 1, 1, tzinfo=UTC)
FEBRUARY = datetime(2026, 2, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 3, tzinfo=UTC)


def build(ledger: Ledger, clock: FakeClock, n: int, live: int) -> float:
    """N jobs enqueued and all but ``live`` succeeded; the seconds it took."""
    began = time.perf_counter()
    ledger.define("bench.retention")
    for first in range(0, n, 5000):
        batch = [EnqueueRequest(job_type="bench.retention") for _ in range(min(5000, n - first))]
        ledger.enqueue_many(batch)
    clock.advance(60)
    finished = 0
    while finished < n - live:
        claimed = ledger.claim("bench-worker", limit=min(1000, n - live - finished))
        result = ledger.succeed_many([Completion(s.lease) for s in claimed if s.lease])
        if result.rejected or not claimed:
            raise SystemExit(f"succeed_many refused {result.rejected}")
        finished += len(claimed)
    ledger.catch_up()
    return time.perf_counter() - began


def pg_sizes(url: str) -> dict[str, int]:
    """Rows and bytes per hot table (a partitioned one: all its partitions') and, once there
    is one, per archive table."""
    sizes: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in ("public", "jl_archive"):
            for table in TABLES:
                name = f"{schema}.{table}"
                if conn.execute("SELECT to_regclass(%s)", [name]).fetchone() == (None,):
                    continue
                row = conn.execute(
                    "SELECT CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum("
                    "pg_total_relation_size(t.relid)), 0) FROM pg_partition_tree(c.oid) t) "
                    "ELSE pg_total_relation_size(c.oid) END FROM pg_class c "
                    "WHERE c.oid = %s::regclass",
                    [name],
                )
                (size,) = row.fetchone() or (0,)
                count = conn.execute(f"SELECT count(*) FROM {name}").fetchone() or (0,)
                label = table if schema == "public" else name
                sizes[label] = int(count[0])
                sizes[f"{label}.bytes"] = int(size)
    return sizes


def sizes_of(ledger: Ledger, url: str) -> dict[str, int]:
    return pg_sizes(url) if url.startswith("postgresql") else ledger.store.table_sizes()


def measure(url: str, n: int, live: int) -> dict[str, Any]:
    clock = FakeClock(START)
    figures: dict[str, Any] = {"n": n, "live": live}
    postgres = url.startswith("postgresql")
    with Ledger.open(url, create=True, clock=clock, pool_size=2) as ledger:
        if postgres:
            assert isinstance(ledger.store, PostgresStore)
            ledger.store.ensure_partitions(START, ahead=2)
            figures["build_s"] = build(ledger, clock, n, 0)
            clock.set(FEBRUARY)  # the live jobs in a month of their own: January moves
            ledger.enqueue_many([EnqueueRequest(job_type="bench.retention")] * live)
            ledger.catch_up()
            clock.set(MARCH)
        else:
            figures["build_s"] = build(ledger, clock, n, live)
            clock.advance(31 * 86_400)
        set_rule(ledger.store, clock.now(), job_type=None, status=None, after_s=30 * 86_400)
        ledger.catch_up()
        figures["before"] = sizes_of(ledger, url)
        began = time.perf_counter()
        if not ledger.projections().verify().clean:
            raise SystemExit("verify found drift before the run")
        figures["verify_before_s"] = time.perf_counter() - began
        began = time.perf_counter()
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        figures["dry_run_s"] = time.perf_counter() - began
        figures["eligible"] = len(choice.eligible)
        began = time.perf_counter()
        done = run_retention(ledger.store, clock.now(), actor="bench")
        figures["run_s"] = time.perf_counter() - began
        figures["moved"] = done.moved
        figures["batches"] = done.batches
        figures["after"] = sizes_of(ledger, url)
        began = time.perf_counter()
        hot = ledger.projections().verify()
        figures["verify_hot_s"] = time.perf_counter() - began
    if postgres:
        figures["vacuum_s"] = 0.0  # a detach leaves no dead rows in the events table
        figures["after_vacuum_bytes"] = sum(
            v
            for k, v in figures["after"].items()
            if k.endswith(".bytes") and not k.startswith("jl_archive.")
        )
        return _verify_both(url, figures, hot.clean, done.moved, n - (0 if postgres else live))
    began = time.perf_counter()
    with sqlite3.connect(url, isolation_level=None) as conn:
        conn.execute("VACUUM")  # the freed pages back to the file system
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    figures["vacuum_s"] = time.perf_counter() - began
    with Ledger.open(url, pool_size=1) as ledger:
        figures["after_vacuum_bytes"] = ledger.store.table_sizes()["file_bytes"]
    return _verify_both(url, figures, hot.clean, done.moved, n - live)


def _verify_both(
    url: str, figures: dict[str, Any], hot_clean: bool, moved: int, expected: int
) -> dict[str, Any]:
    both = Reader.open_with_archive(url)
    assert both is not None
    with both:
        began = time.perf_counter()
        together = both.projections().verify()
        figures["verify_both_s"] = time.perf_counter() - began
    if not (hot_clean and together.clean) or moved != expected:
        raise SystemExit(f"moved {moved} of {expected}; verify {hot_clean}/{together.clean}")
    return figures


def _line(backend: str, f: dict[str, Any]) -> str:
    lines = [
        f"{backend}: {f['n']:,} jobs ({f['live']:,} left pending) built in {f['build_s']:.1f} s",
        f"  before: {_sizes(f['before'])}; verify {f['verify_before_s']:.2f} s",
        f"  dry run: {f['eligible']:,} eligible, chosen in {f['dry_run_s']:.2f} s",
    ]
    if "run_s" in f:
        lines += [
            f"  run: {f['moved']:,} jobs moved in {f['batches']} batches, {f['run_s']:.2f} s "
            f"({f['moved'] / f['run_s']:,.0f} jobs/s)",
            f"  after: {_sizes(f['after'])}",
            f"  hot sizes right after the move: {_hot_bytes(f)}",
            f"  verify: hot {f['verify_hot_s']:.2f} s, hot + archive {f['verify_both_s']:.2f} s",
        ]
        if f["vacuum_s"]:
            lines.append(
                f"  VACUUM of the hot file: {f['vacuum_s']:.1f} s, "
                f"then {f['after_vacuum_bytes']:,} bytes"
            )
    else:
        lines.append("  run: not on this backend yet (retention.unsupported)")
    return "\n".join(lines)


def _hot_bytes(f: dict[str, Any]) -> str:
    """Each hot table's bytes before → after (PostgreSQL: a detached partition's are gone at
    once; a DELETE's stay until autovacuum reuses them; SQLite: until a VACUUM)."""
    before, after = f["before"], f["after"]
    return (
        ", ".join(
            f"{t} {before[f'{t}.bytes'] / 1e6:,.1f} → {after[f'{t}.bytes'] / 1e6:,.1f} MB"
            for t in TABLES
            if f"{t}.bytes" in before and f"{t}.bytes" in after
        )
        or "(file sizes above)"
    )


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{name} {value:,}" for name, value in sizes.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=1_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", dest="json_path", help="Also write the figures here.")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for backend in args.backends.split(","):
        with scratch_database(backend, PG_SERVER) as url:
            results[backend] = measure(url, args.n, args.live)
        print(_line(backend, results[backend]), flush=True)
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
