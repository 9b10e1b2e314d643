"""Cost flat in the history: the same drain on an empty ledger and on one that remembers a lot.

Issue 30's goal: on a ledger holding 5,000,000 finished jobs spread over 12 unarchived months,
a drain keeps >= 0.95x the empty ledger's jobs/s and its claim p99 within 1.1x. A queue must
not get slower because it has remembered more.

The full ledger is built once and kept (database ``<prefix>_<jobs>_<months>``, reused by
later runs until ``--rebuild``): for each past month, oldest first, a clock set to that month
makes its partitions and enqueues its share of the jobs (so their ids, and so their rows and
events, fall in that month), which are then claimed, started and succeeded in batches of
1,000 through the ledger's own API (``claim(starting=)``, ``finish_claimed``): every filler
job has the history a worker gives it (enqueued, leased, started, succeeded). The audit view
is rebuilt and the database vacuumed and analysed before any drain, as a ledger that has run
for a year would be (each month is vacuumed as it is filled: the shared test server runs
without autovacuum).

Each round then measures the drain on both ledgers, in alternating order: ``--drain`` no-op
jobs enqueued now (into the current month), then drained by a ``WorkerPool`` (C=10, its
defaults) in a fresh child process, which reports jobs/s (pool start to last handler), its
own CPU per job and every claim transaction's duration. The figures are the medians over the
rounds; the claim p99 is of all the rounds' claims pooled. Before each drain both ledgers are
vacuumed and analysed (untimed). The size of every table the drain writes is printed before
and after, on both ledgers.

    .venv/bin/python bench/bench_growth.py                        # 5M jobs, 12 months
    .venv/bin/python bench/bench_growth.py --jobs 500000 --months 6 --rounds 3
    .venv/bin/python bench/bench_growth.py --check --json F        # exit 1 past the bounds

The code measured is the one first on ``PYTHONPATH`` (this checkout's by default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from noop_drain import counting_noop

FILLER_TYPE = "bench.filler"
DRAIN_TYPE = "bench.drain"
ENQUEUE_CHUNK = 5_000
FINISH_BATCH = 1_000
VACUUM_EVERY_CHUNKS = 20
"""The build vacuums the month it fills after every this many enqueue chunks (100,000 jobs)."""
BUILT_KEY = "bench_growth_built"
"""jl_meta key the finished build records (``jobs,months``): a half-built ledger is rebuilt."""
JOBS_PER_S_BOUND = 0.95
CLAIM_P99_BOUND = 1.1
# The tables a drain writes, and their partitions, by name prefix.
HOT_TABLES = ("jl_queue", "jl_events", "jl_audit", "jl_tracking", "jl_pools")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the child: one drain ---------------------------------------------------------------------


async def drain(url: str, n: int, concurrency: int) -> dict[str, Any]:
    """Drain the ``n`` pending jobs of ``url`` with a pool; the figures."""
    from ledger import Ledger
    from ledger.runtime.pool import WorkerPool
    from ledger.runtime.pool_metrics import PoolMetrics

    claims: list[float] = []

    def claim_finished(self: PoolMetrics, seconds: float, jobs: list[Any]) -> None:
        claims.append(seconds)

    # Every claim transaction's duration, unbucketed (the pool's histogram is coarse).
    PoolMetrics.claim_finished = claim_finished  # type: ignore[method-assign]
    registry, done = counting_noop(DRAIN_TYPE, n)

    ledger = Ledger.open(url)
    try:
        pool = WorkerPool(ledger, registry, concurrency=concurrency)
        cpu = os.times()
        started = time.perf_counter()
        await pool.start()
        try:
            await asyncio.wait_for(done.wait(), timeout=600)
            seconds = time.perf_counter() - started
            used = os.times()
        finally:
            await pool.stop()
    finally:
        ledger.close()
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jl_queue WHERE job_type = %s AND status = 'succeeded'",
            (DRAIN_TYPE,),
        ).fetchone()
    counts = int(row[0]) if row else 0
    return {
        "jobs_per_s": n / seconds,
        "worker_cpu_us_per_job": (used.user + used.system - cpu.user - cpu.system) / n * 1e6,
        "claims": claims,
        "succeeded": counts,
    }


# --- the parent -------------------------------------------------------------------------------


@contextmanager
def admin(server: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        yield conn


def database_exists(server: str, name: str) -> bool:
    with admin(server) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            is not None
        )


def fresh_database(server: str, name: str) -> str:
    from psycopg.sql import SQL, Identifier

    with admin(server) as conn:
        conn.execute(SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(Identifier(name)))
        conn.execute(SQL("CREATE DATABASE {}").format(Identifier(name)))
    return f"{server}/{name}"


def drop_database(server: str, name: str) -> None:
    from psycopg.sql import SQL, Identifier

    with admin(server) as conn:
        conn.execute(SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(Identifier(name)))


def built(url: str) -> str | None:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT value FROM jl_meta WHERE key = %s", (BUILT_KEY,)).fetchone()
    return row[0] if row else None


def month_starts(months: int, now: datetime) -> list[datetime]:
    """The 15th of each of the ``months`` months before ``now``'s, oldest first."""
    first = now.replace(day=15, hour=12, minute=0, second=0, microsecond=0)
    starts = []
    for back in range(months, 0, -1):
        year, month = first.year, first.month - back
        while month <= 0:
            year, month = year - 1, month + 12
        starts.append(first.replace(year=year, month=month))
    return starts


def vacuum_month(url: str, start: datetime) -> None:
    """Vacuum the month's partitions of the tables the build rewrites: what autovacuum does
    on a server that runs it (the shared test server does not), or each batch's lookups
    walk ever more dead row versions (the build slowed to a few hundred jobs/s without)."""
    import psycopg
    from psycopg.sql import SQL, Identifier

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("jl_queue", "jl_events"):
            name = f"{table}_p{start:%Y%m}"
            conn.execute(SQL("VACUUM {}").format(Identifier(name)))


def build_full(url: str, jobs: int, months: int) -> None:
    """The big ledger (see the module docstring): ``jobs`` finished jobs over ``months``."""
    from ledger import EnqueueRequest, Ledger
    from ledger.clock import FakeClock, SystemClock
    from ledger.jobs.outcomes import Completion

    starts = month_starts(months, SystemClock().now())
    clock = FakeClock(starts[0])
    began = time.perf_counter()
    with Ledger.open(url, create=True, clock=clock) as ledger:
        ledger.define(FILLER_TYPE)
        made = 0
        for index, start in enumerate(starts):
            clock.set(start)
            ledger.store.ensure_partitions(start)
            share = jobs // months + (1 if index < jobs % months else 0)
            for first in range(0, share, ENQUEUE_CHUNK):
                count = min(ENQUEUE_CHUNK, share - first)
                ledger.enqueue_many(
                    [
                        EnqueueRequest(job_type=FILLER_TYPE, payload={"i": made + i})
                        for i in range(count)
                    ]
                )
                clock.advance(seconds=1)
                while claimed := ledger.claim(
                    "bench-filler", limit=FINISH_BATCH, starting=FINISH_BATCH
                ):
                    leases = [(state, state.lease) for state in claimed]
                    ledger.finish_claimed(
                        [(state, Completion(lease)) for state, lease in leases if lease]
                    )
                made += count
                if (first // ENQUEUE_CHUNK) % VACUUM_EVERY_CHUNKS == VACUUM_EVERY_CHUNKS - 1:
                    vacuum_month(url, start)
            vacuum_month(url, start)
            elapsed = time.perf_counter() - began
            log(f"  month {start:%Y-%m}: {made:,}/{jobs:,} jobs finished ({made / elapsed:,.0f}/s)")
        # Rebuilt rather than caught up: the tracked runner applies ~9,000 events/s in one
        # process (the audit rows are built in Python), the rebuild loads by COPY.
        log("  rebuilding the audit view")
        ledger.projections().rebuild(["audit"])
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        log("  VACUUM ANALYZE")
        conn.execute("VACUUM ANALYZE")
        conn.execute(
            "INSERT INTO jl_meta (key, value) VALUES (%s, %s)", (BUILT_KEY, f"{jobs},{months}")
        )
    log(f"  built in {time.perf_counter() - began:,.0f} s")


def sizes(url: str) -> dict[str, int]:
    """Bytes (table, indexes and TOAST) of every table a drain writes, partitions each."""
    import psycopg

    pattern = "|".join(HOT_TABLES)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            f"AND c.relname ~ '^({pattern})(_|$)' ORDER BY c.relname"
        ).fetchall()
    return {name: int(size) for name, size in rows}


def enqueue_drain(url: str, n: int) -> None:
    from ledger import EnqueueRequest, Ledger

    with Ledger.open(url) as ledger:
        ledger.define(DRAIN_TYPE)
        for first in range(0, n, ENQUEUE_CHUNK):
            count = min(ENQUEUE_CHUNK, n - first)
            ledger.enqueue_many(
                [
                    EnqueueRequest(job_type=DRAIN_TYPE, payload={"i": first + i})
                    for i in range(count)
                ]
            )
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        # VACUUM too: the full ledger is reused, and without autovacuum (the shared test
        # server runs without) the dead rows of every earlier drain stayed in its current
        # month's claim indexes, on that side only; the months filled before are all-visible
        # and skipped.
        conn.execute("VACUUM ANALYZE")


def measure(url: str, n: int, concurrency: int) -> dict[str, Any]:
    enqueue_drain(url, n)
    args = [sys.executable, __file__, "--child", url, "--drain", str(n), "-c", str(concurrency)]
    done = subprocess.run(
        args, check=False, capture_output=True, text=True, env=os.environ, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"the drain failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    claims = [c for run in runs for c in run["claims"]]
    return {
        "jobs_per_s": statistics.median(r["jobs_per_s"] for r in runs),
        "jobs_per_s_runs": [round(r["jobs_per_s"], 1) for r in runs],
        "worker_cpu_us_per_job": statistics.median(r["worker_cpu_us_per_job"] for r in runs),
        "claims": len(claims),
        "claim_p50_ms": percentile(claims, 0.50) * 1000,
        "claim_p99_ms": percentile(claims, 0.99) * 1000,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    server = args.pg_server
    full_name = f"{args.prefix}_{args.jobs}_{args.months}"
    empty_name = f"{args.prefix}_empty"
    full_url = f"{server}/{full_name}"
    if (
        args.rebuild
        or not database_exists(server, full_name)
        or built(full_url) != f"{args.jobs},{args.months}"
    ):
        log(f"building {full_name}: {args.jobs:,} finished jobs over {args.months} months")
        fresh_database(server, full_name)
        build_full(full_url, args.jobs, args.months)
    else:
        log(f"reusing {full_name} (--rebuild builds it again)")
    empty_url = fresh_database(server, empty_name)
    from ledger import Ledger

    Ledger.open(empty_url, create=True).close()
    before = {"empty": sizes(empty_url), "full": sizes(full_url)}
    runs: dict[str, list[dict[str, Any]]] = {"empty": [], "full": []}
    try:
        for round_ in range(args.rounds):
            order = ["empty", "full"] if round_ % 2 == 0 else ["full", "empty"]
            for side in order:
                url = empty_url if side == "empty" else full_url
                result = measure(url, args.drain, args.concurrency)
                if result["succeeded"] < args.drain * (len(runs[side]) + 1):
                    raise RuntimeError(f"{side}: jobs were lost ({result['succeeded']})")
                runs[side].append(result)
                log(f"  round {round_ + 1} {side}: {result['jobs_per_s']:,.0f} jobs/s")
        after = {"empty": sizes(empty_url), "full": sizes(full_url)}
    finally:
        drop_database(server, empty_name)
    empty, full = summary(runs["empty"]), summary(runs["full"])
    return {
        "jobs": args.jobs,
        "months": args.months,
        "drain": args.drain,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "empty": empty,
        "full": full,
        "jobs_per_s_ratio": full["jobs_per_s"] / empty["jobs_per_s"],
        "claim_p99_ratio": full["claim_p99_ms"] / empty["claim_p99_ms"],
        "sizes_before": before,
        "sizes_after": after,
        "load": Path("/proc/loadavg").read_text().split(" ", 1)[0],
    }


def report(result: dict[str, Any]) -> None:
    empty, full = result["empty"], result["full"]
    print(
        f"drain of {result['drain']:,} jobs, C={result['concurrency']}, "
        f"{result['rounds']} rounds (load {result['load']}):"
    )
    for side, figures in (
        ("empty", empty),
        (f"full ({result['jobs']:,} jobs, {result['months']} months)", full),
    ):
        print(
            f"  {side:<34} {figures['jobs_per_s']:>8,.0f} jobs/s {figures['jobs_per_s_runs']}, "
            f"worker CPU {figures['worker_cpu_us_per_job']:,.0f} us/job, claim p50 "
            f"{figures['claim_p50_ms']:.2f} ms, p99 {figures['claim_p99_ms']:.2f} ms "
            f"({figures['claims']:,} claims)"
        )
    print(
        f"  full / empty: jobs/s {result['jobs_per_s_ratio']:.3f}x (bound >= {JOBS_PER_S_BOUND}), "
        f"claim p99 {result['claim_p99_ratio']:.3f}x (bound <= {CLAIM_P99_BOUND})"
    )
    for side in ("empty", "full"):
        print(f"  {side} ledger, the tables a drain writes, MB before -> after (partitions):")
        for family, (count, before, after) in families(result, side).items():
            print(f"    {family:<12} {before / 1e6:>10,.2f} -> {after / 1e6:>10,.2f}  ({count})")


def families(result: dict[str, Any], side: str) -> dict[str, tuple[int, int, int]]:
    """Per table a drain writes: its partitions, bytes before and after (all partitions)."""
    before, after = result["sizes_before"][side], result["sizes_after"][side]
    out: dict[str, tuple[int, int, int]] = {}
    for family in HOT_TABLES:
        partition = re.compile(rf"^{family}(_p\d{{6}}|_default)?$")
        names = [n for n in set(before) | set(after) if partition.match(n)]
        out[family] = (
            len(names),
            sum(before.get(n, 0) for n in names),
            sum(after.get(n, 0) for n in names),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--jobs", type=int, default=5_000_000, help="finished jobs of the full ledger"
    )
    parser.add_argument("--months", type=int, default=12, help="past months they span")
    parser.add_argument("--drain", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("-c", "--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prefix", default="jl_growth", help="of the two databases' names")
    parser.add_argument("--rebuild", action="store_true", help="build the full ledger again")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 unless full/empty jobs/s >= {JOBS_PER_S_BOUND} "
        f"and claim p99 <= {CLAIM_P99_BOUND}x",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(drain(args.child, args.drain, args.concurrency))))
        return
    result = run(args)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.check and (
        result["jobs_per_s_ratio"] < JOBS_PER_S_BOUND or result["claim_p99_ratio"] > CLAIM_P99_BOUND
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
