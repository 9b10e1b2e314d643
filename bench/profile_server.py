"""Where a drain's server cost goes: per statement, per WAL record type, per process.

Issue 30 asks that a goal out of reach be shown with the profile that says where the remaining
cost is: the server's time per statement (``pg_stat_statements``), the WAL records by type
(``pg_walinspect``) and the CPU of each process. Both need a server started with
``pg_stat_statements`` preloaded, which the shared one is not (and is never restarted), so this
makes a throwaway cluster of its own (``initdb`` in a temporary directory, its own port, the
shared server's durability settings: fsync and synchronous_commit on), enqueues N no-op jobs,
then resets the statistics and drains them with a ``WorkerPool`` (C=10, prefetch its default)
in this process, and prints, per job:

- each statement's calls, server time (execution + planning) and WAL bytes, the heaviest first;
- the WAL written, by resource manager and record type (``pg_get_wal_stats``);
- CPU: this process (the pool) and the server's processes (``/proc``, every child of the
  cluster's postmaster: backends, WAL writer, checkpointer, autovacuum).

    .venv/bin/python bench/profile_server.py [--n 20000] [-c 10] [--top 15] [--json F]

The code measured is the one first on ``PYTHONPATH`` (this checkout's by default).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from noop_drain import counting_noop

JOB_TYPE = "bench.noop"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise SystemExit(f"no PostgreSQL {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


def _as_postgres(*argv: str) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)


@contextmanager
def throwaway_cluster() -> Iterator[tuple[str, Path]]:
    """A server of our own with pg_stat_statements preloaded: its URL and data directory."""
    root = Path(tempfile.mkdtemp(prefix="jl_profile_"))
    data = root / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 "
        "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all "
        "-c track_io_timing=on"
    )
    try:
        _as_postgres(_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-N")
        _as_postgres(
            _bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"
        )
        yield f"postgresql://postgres@127.0.0.1:{port}", data
    finally:
        if (data / "postmaster.pid").exists():
            _as_postgres(_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def server_cpu_s(data: Path) -> float:
    """CPU seconds (user + system) of the postmaster's children so far."""
    postmaster = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    total = 0
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == postmaster:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


async def drain(url: str, n: int, concurrency: int, data: Path) -> tuple[float, float, float]:
    """Drain the ``n`` jobs of ``url``: seconds, the server's CPU seconds and this process's
    over the drain (the server's read before the pool's connections close, whose backends'
    CPU would leave ``/proc`` with them)."""
    from ledger import Ledger
    from ledger.runtime.pool import WorkerPool

    registry, done = counting_noop(JOB_TYPE, n)

    with Ledger.open(url) as ledger:
        pool = WorkerPool(ledger, registry, concurrency=concurrency)
        server_before, own_before = server_cpu_s(data), os.times()
        started = time.perf_counter()
        await pool.start()
        try:
            await asyncio.wait_for(done.wait(), timeout=600)
            seconds = time.perf_counter() - started
        finally:
            await pool.stop()
        own_after, server_after = os.times(), server_cpu_s(data)
    own = own_after.user + own_after.system - own_before.user - own_before.system
    return seconds, server_after - server_before, own


STATEMENTS = """
SELECT calls, total_exec_time + total_plan_time AS ms, rows, wal_bytes,
       regexp_replace(left(query, 200), '\\s+', ' ', 'g') AS query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY ms DESC
"""
WAL = """
SELECT "resource_manager/record_type" AS kind, count, combined_size
FROM pg_get_wal_stats(%(start)s::pg_lsn, %(end)s::pg_lsn, per_record => true)
WHERE count > 0 ORDER BY combined_size DESC
"""


def profile(n: int, concurrency: int) -> dict[str, Any]:
    import psycopg

    from ledger import EnqueueRequest, Ledger

    with throwaway_cluster() as (server, data):
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute("CREATE DATABASE bench")
        url = f"{server}/bench"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE EXTENSION pg_walinspect")
        with Ledger.open(url, create=True) as ledger:
            ledger.define(JOB_TYPE)
            for first in range(0, n, 5000):
                count = min(5000, n - first)
                ledger.enqueue_many(
                    [
                        EnqueueRequest(job_type=JOB_TYPE, payload={"i": first + i})
                        for i in range(count)
                    ]
                )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")
            conn.execute("SELECT pg_stat_statements_reset()")
            start = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            seconds, server_s, own = asyncio.run(drain(url, n, concurrency, data))
            end = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            assert start is not None and end is not None
            statements = conn.execute(STATEMENTS).fetchall()
            wal = conn.execute(WAL, {"start": start[0], "end": end[0]}).fetchall()
            wal_bytes = conn.execute(
                "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (end[0], start[0])
            ).fetchone()
    return {
        "n": n,
        "concurrency": concurrency,
        "jobs_per_s": n / seconds,
        "worker_cpu_us_per_job": own / n * 1e6,
        "server_cpu_us_per_job": server_s / n * 1e6,
        "wal_bytes_per_job": float(wal_bytes[0]) / n if wal_bytes else 0.0,
        "statements": [
            {
                "calls": calls,
                "server_us_per_job": ms * 1000 / n,
                "rows_per_call": rows / calls if calls else 0,
                "wal_bytes_per_job": float(wal) / n,
                "query": query,
            }
            for calls, ms, rows, wal, query in statements
        ],
        "wal": [
            {"record": kind, "per_job": count / n, "bytes_per_job": float(size) / n}
            for kind, count, size in wal
        ],
    }


def report(result: dict[str, Any], top: int) -> None:
    n = result["n"]
    print(
        f"drain of {n:,} jobs, C={result['concurrency']}: {result['jobs_per_s']:,.0f} jobs/s; "
        f"per job: worker CPU {result['worker_cpu_us_per_job']:,.0f} us, server CPU "
        f"{result['server_cpu_us_per_job']:,.0f} us, WAL {result['wal_bytes_per_job']:,.0f} B"
    )
    statement_us = sum(s["server_us_per_job"] for s in result["statements"])
    print(f"\nstatements (server time per job: {statement_us:,.1f} us in all), heaviest first:")
    print(f"  {'us/job':>7} {'WAL B/job':>9} {'calls':>7} {'rows/call':>9}  query")
    for s in result["statements"][:top]:
        print(
            f"  {s['server_us_per_job']:>7.1f} {s['wal_bytes_per_job']:>9.0f} {s['calls']:>7,} "
            f"{s['rows_per_call']:>9.1f}  {s['query'][:110]}"
        )
    print("\nWAL by record type, largest first:")
    print(f"  {'B/job':>7} {'records/job':>11}  record")
    for w in result["wal"][:top]:
        print(f"  {w['bytes_per_job']:>7.0f} {w['per_job']:>11.2f}  {w['record']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("-c", "--concurrency", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    result = profile(args.n, args.concurrency)
    report(result, args.top)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
