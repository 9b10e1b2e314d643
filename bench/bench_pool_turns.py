"""A/B of issue 13's lever 2 (one transaction per batch turn): a WorkerPool drained in process.

Each measurement runs in a child interpreter whose ``PYTHONPATH`` picks the code: ``--old``
(e.g. ``git archive main | tar -x -C /tmp/old-turns``) and ``--new`` (default: this checkout);
the new side runs with ``batch_turns=True``, ``new-noturns`` with ``batch_turns=False``.
The child makes a fresh database, enqueues N jobs of a no-op async handler (untimed), then
times a :class:`WorkerPool` at its defaults (default prefetch) from ``start()`` until
``pool.stats.succeeded`` reaches N, polling every millisecond. Pairs are interleaved (old,
new, old, new, ...) so that the shared host's load falls on both sides alike; every figure is
printed with the load average read just before it.

Transactions per job (PostgreSQL): the distinct writing transactions (``xmin``) of the
events the pool appended (every event but ``job_enqueued``), over N.

    .venv/bin/python bench/bench_pool_turns.py --old /tmp/old-turns
    .venv/bin/python bench/bench_pool_turns.py --old /tmp/old-turns --backends sqlite --rounds 1
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
TYPE = "noop"


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 1)[0]


async def drain(url: str, n: int, concurrency: int, turns: str | None) -> dict[str, Any]:
    """One measurement in this interpreter (the child's side)."""
    from ledger import EnqueueRequest, Ledger
    from ledger.runtime.handlers import JobContext, Registry
    from ledger.runtime.pool import WorkerPool

    registry = Registry()

    @registry.handler(TYPE)
    async def noop(ctx: JobContext) -> None:
        return None

    with Ledger.open(url, create=True) as ledger:
        ledger.define(TYPE)
        for start in range(0, n, 5000):
            batch = range(start, min(n, start + 5000))
            ledger.enqueue_many([EnqueueRequest(job_type=TYPE, payload={"i": i}) for i in batch])
        # The old code knows no batch_turns: it gets the pool's defaults.
        settings: dict[str, Any] = {} if turns is None else {"batch_turns": turns == "on"}
        pool = WorkerPool(ledger, registry, concurrency=concurrency, **settings)
        began = time.perf_counter()
        await pool.start()
        try:
            while pool.stats.succeeded < n:
                await asyncio.sleep(0.001)
            seconds = time.perf_counter() - began
        finally:
            await pool.stop()
        assert ledger.counts() == {"succeeded": n}, ledger.counts()
    return {"jobs_s": n / seconds, "transactions_per_job": transactions_per_job(url, n)}


def transactions_per_job(url: str, n: int) -> float | None:
    if not url.startswith("postgresql"):
        return None  # SQLite keeps no writing transaction id per row
    import psycopg

    query = (
        "SELECT count(DISTINCT xmin::text) FROM jl_events"
        " WHERE split_part(topic, '.', 1) <> 'job_enqueued'"
    )
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0]) / n


def measure(
    code: str, backend: str, server: str, *, n: int, concurrency: int, turns: str | None
) -> dict[str, Any]:
    """One measurement in a child interpreter running the code at ``code``."""
    sys.path.insert(0, str(HERE))
    from scratch import scratch_database

    with scratch_database(backend, server) as made:
        url = f"sqlite:///{made}" if backend == "sqlite" else made
        env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{HERE}"}
        args = [sys.executable, __file__, "--child", url, "--n", str(n), "-c", str(concurrency)]
        args += ["--turns", turns] if turns is not None else []
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child failed ({code}):\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old", required=False, help="path of the old code (PYTHONPATH)")
    parser.add_argument("--new", default=str(HERE.parent), help="path of the new code")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("-c", "--concurrency", default="10,50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="postgres")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--sides",
        default="old,new",
        help="old, new (batch_turns=True), and/or new-noturns (the new code, batch_turns=False)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--turns", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        got = asyncio.run(drain(args.child, args.n, int(args.concurrency), args.turns))
        print(json.dumps(got))
        return
    if not args.old:
        parser.error("--old is required")
    codes = {"old": args.old, "new": args.new, "new-noturns": args.new}
    sides = {side: codes[side] for side in args.sides.split(",")}
    for backend in args.backends.split(","):
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            rates: dict[str, list[float]] = {side: [] for side in sides}
            for round_no in range(1, args.rounds + 1):
                for side, code in sides.items():
                    before = load()
                    turns = {"old": None, "new": "on", "new-noturns": "off"}[side]
                    got = measure(
                        code,
                        backend,
                        args.pg_server,
                        n=args.n,
                        concurrency=concurrency,
                        turns=turns,
                    )
                    rates[side].append(got["jobs_s"])
                    tpj = got["transactions_per_job"]
                    tpj_text = "n/a" if tpj is None else f"{tpj:.4f}"
                    print(
                        f"{backend:8} C={concurrency:<3} round {round_no} {side}: "
                        f"{got['jobs_s']:8,.0f} jobs/s  {tpj_text} transactions/job  "
                        f"load {before}",
                        flush=True,
                    )
            base, *others = sides
            medians = "  ".join(f"{side} {statistics.median(rates[side]):,.0f}" for side in sides)
            print(f"{backend:8} C={concurrency:<3} medians: {medians}", flush=True)
            for side in others:
                ratios = [b / a for a, b in zip(rates[base], rates[side], strict=True)]
                pairs = " ".join(f"{r:.2f}" for r in ratios)
                print(f"{backend:8} C={concurrency:<3} pair ratios {side}/{base}: {pairs}")


if __name__ == "__main__":
    main()
