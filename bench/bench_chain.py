"""The hash chain's cost (issue 31, docs/integrity.md): a pool with its chain witness on
against off, interleaved, and the witness alone.

1. **Pool drains, witness off and on.** Each measurement runs in a child interpreter on a
   fresh PostgreSQL database: N no-op jobs are enqueued (untimed), then a :class:`WorkerPool`
   (C=10) runs from ``start()`` until the N-th success, with ``integrity_interval_s=0`` (off)
   or ``--interval`` (on; 1 s by default, ten times as often as a pool's default, so the
   witness runs several passes inside the drain). Reported: jobs/s, the client process's CPU
   per job (every thread: the witness runs on the maintenance thread), WAL bytes per job, and
   how many events the witness chained during the drain. Pairs alternate (off, on, off, ...)
   so the host's load falls on both alike; figures are on/off ratios of the medians.
2. **The witness alone**, after the last drain: the chain caught up over every event of a
   drained ledger in one go: events/s, CPU µs per event, and the witness's bytes per event
   (``jl_integrity_blocks``); then ``verify`` over the same: events/s.

    .venv/bin/python bench/bench_chain.py --n 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TYPE = "noop"


def wal_lsn(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        [(lsn,)] = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchall()
    return int(lsn)


async def drain(url: str, n: int, interval_s: float, witness_alone: bool) -> dict[str, Any]:
    """One measurement in this interpreter (the child's side)."""
    from ledger import EnqueueRequest, Ledger
    from ledger.runtime.handlers import JobContext, Registry
    from ledger.runtime.health import PoolStats
    from ledger.runtime.pool import WorkerPool

    drained = asyncio.Event()
    count_recorded = PoolStats.count_recorded

    def counting(stats: PoolStats, state: Any) -> None:
        count_recorded(stats, state)
        if stats.succeeded >= n:
            drained.set()

    PoolStats.count_recorded = counting  # type: ignore[method-assign]
    registry = Registry()

    @registry.handler(TYPE)
    async def noop(ctx: JobContext) -> None:
        return None

    result: dict[str, Any] = {}
    with Ledger.open(url, create=True) as ledger:
        ledger.define(TYPE)
        for start in range(0, n, 5000):
            batch = range(start, min(n, start + 5000))
            ledger.enqueue_many([EnqueueRequest(job_type=TYPE, payload={"i": i}) for i in batch])
        if interval_s > 0:
            ledger.integrity.catch_up()  # the enqueues: the drain's witness starts level
        chained_before = ledger.integrity.head().events
        pool = WorkerPool(ledger, registry, concurrency=10, integrity_interval_s=interval_s)
        wal_began = wal_lsn(url)
        cpu_began, began = time.process_time(), time.perf_counter()
        await pool.start()
        try:
            await drained.wait()
            seconds = time.perf_counter() - began
            cpu = time.process_time() - cpu_began
        finally:
            await pool.stop()
        wal = wal_lsn(url) - wal_began
        assert ledger.counts() == {"succeeded": n}, ledger.counts()
        result.update(
            jobs_s=n / seconds,
            cpu_us=cpu / n * 1e6,
            wal_b=wal / n,
            chained_in_drain=ledger.integrity.head().events - chained_before,
        )
        if witness_alone:
            result.update(alone(ledger, url))
    return result


def alone(ledger: Any, url: str) -> dict[str, Any]:
    """The witness over the whole drained ledger at once, then verify."""
    import psycopg

    from ledger.core.integrity import GENESIS

    # A fresh chain over everything: from the ledger's first event.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jl_integrity_blocks")
        conn.execute(
            "UPDATE jl_integrity_head SET transaction_id = 0, position = 0, events = 0, "
            "blocks = 0, chain = %s, start_transaction_id = 0, start_position = 0",
            [GENESIS],
        )
    cpu_began, began = time.process_time(), time.perf_counter()
    report = ledger.integrity.catch_up(checkpoint_every=None)
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    with psycopg.connect(url, autocommit=True) as conn:
        [(size,)] = conn.execute("SELECT pg_total_relation_size('jl_integrity_blocks')").fetchall()
    began = time.perf_counter()
    verified = ledger.integrity.verify()
    verify_s = time.perf_counter() - began
    assert verified.ok, verified.findings
    return {
        "alone_events": report.applied,
        "alone_events_s": report.applied / seconds,
        "alone_cpu_us_per_event": cpu / report.applied * 1e6,
        "witness_b_per_event": size / report.applied,
        "verify_events_s": verified.checked / verify_s,
    }


def measure(server: str, *, n: int, interval_s: float, witness_alone: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from scratch import scratch_database

    with scratch_database("postgres", server) as url:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"}
        args = [sys.executable, __file__, "--child", url, "--n", str(n)]
        args += ["--interval", str(interval_s)]
        args += ["--witness-alone"] if witness_alone else []
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--child", metavar="URL")
    parser.add_argument("--witness-alone", action="store_true")
    args = parser.parse_args()
    if args.child:
        result = asyncio.run(drain(args.child, args.n, args.interval, args.witness_alone))
        print(json.dumps(result))
        return
    sides: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for round_ in range(args.rounds):
        for side, interval in (("off", 0.0), ("on", args.interval)):
            last = round_ == args.rounds - 1 and side == "on"
            got = measure(args.server, n=args.n, interval_s=interval, witness_alone=last)
            sides[side].append(got)
            print(side, json.dumps({k: round(v, 1) for k, v in got.items()}), flush=True)

    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in sides[side])

    print(f"\nN={args.n}, C=10, witness every {args.interval} s, {args.rounds} rounds")
    print("figure            off        on     on/off")
    for key, label in (("jobs_s", "jobs/s"), ("cpu_us", "CPU us/job"), ("wal_b", "WAL B/job")):
        off, on = median("off", key), median("on", key)
        print(f"{label:<14}{off:>9.1f}{on:>10.1f}{on / off:>10.3f}")
    print(f"events chained during an 'on' drain: {median('on', 'chained_in_drain'):.0f}")
    last = sides["on"][-1]
    print(
        f"witness alone: {last['alone_events']} events at {last['alone_events_s']:.0f} "
        f"events/s, {last['alone_cpu_us_per_event']:.1f} us CPU/event, "
        f"{last['witness_b_per_event']:.1f} B/event in jl_integrity_blocks; "
        f"verify {last['verify_events_s']:.0f} events/s"
    )


if __name__ == "__main__":
    main()
