"""Latency at light load: enqueue → handler start at a steady rate, across two processes.

Issue 30's goal: at a steady 200 jobs/s, p50 ≤ 5 ms and p99 ≤ 15 ms from the enqueue call to
the handler's first line. The parent makes a fresh PostgreSQL database, starts a child
interpreter running a :class:`WorkerPool` at its defaults (C=10) with one async handler that
notes the host clock's time minus the enqueue time carried in its payload, waits until the pool
says it is up, then enqueues one job every ``1/rate`` seconds (paced to absolute ticks, so a
slow enqueue does not slow the rate) from its own process. The child prints the latencies'
percentiles once it has seen all N. Both processes read the same host clock.

    .venv/bin/python bench/bench_light_load.py                  # 200 jobs/s, 4,000 jobs
    .venv/bin/python bench/bench_light_load.py --rate 50 --n 1000 --json
    .venv/bin/python bench/bench_light_load.py --check          # exit 1 past the bounds

The code measured is the one first on ``PYTHONPATH`` (this checkout's by default), so two
commits compare as ``bench/ab.py`` does: ``PYTHONPATH=/tmp/side-a python bench/...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TYPE = "light"
P50_BOUND_MS = 5.0
P99_BOUND_MS = 15.0


def _clock() -> Any:
    from ledger.clock import SystemClock

    return SystemClock()


CLOCK = _clock()
"""The host's clock, as the ledger reads it: both processes stamp with it."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def child(url: str, n: int, concurrency: int) -> dict[str, Any]:
    """The worker's side: run the pool until N handlers have started; their latencies."""
    from ledger import Ledger
    from ledger.runtime.handlers import JobContext, Registry
    from ledger.runtime.pool import WorkerPool

    latencies: list[float] = []
    done = asyncio.Event()
    registry = Registry()

    @registry.handler(TYPE)
    async def light(ctx: JobContext) -> None:
        latencies.append((CLOCK.now().timestamp() - float(ctx.payload["t"])) * 1000)
        if len(latencies) >= n:
            done.set()

    with Ledger.open(url) as ledger:
        pool = WorkerPool(ledger, registry, concurrency=concurrency)
        await pool.start()
        print("ready", flush=True)
        try:
            await done.wait()
        finally:
            await pool.stop()
    warm = latencies[len(latencies) // 20 :]  # the first 5%: connections and caches warming
    return {
        "n": len(warm),
        "p50_ms": percentile(warm, 0.50),
        "p90_ms": percentile(warm, 0.90),
        "p99_ms": percentile(warm, 0.99),
        "max_ms": max(warm),
    }


def run(server: str, rate: float, n: int, concurrency: int) -> dict[str, Any]:
    """One measurement: a fresh database, the child's pool, N jobs at ``rate``."""
    sys.path.insert(0, str(HERE))
    from scratch import scratch_database

    from ledger import Ledger

    with scratch_database("postgres", server) as url:
        with Ledger.open(url, create=True) as ledger:
            ledger.define(TYPE)
            args = [sys.executable, __file__, "--child", url, "--n", str(n)]
            args += ["-c", str(concurrency)]
            worker = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=os.environ)
            assert worker.stdout is not None
            try:
                if worker.stdout.readline().strip() != "ready":
                    raise RuntimeError("the worker did not start")
                interval = 1.0 / rate
                began = time.perf_counter()
                for i in range(n):
                    delay = began + i * interval - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    ledger.enqueue(TYPE, {"t": CLOCK.now().timestamp()})
                sent_s = time.perf_counter() - began
                out, _ = worker.communicate(timeout=120)
            finally:
                if worker.poll() is None:
                    worker.kill()
        if worker.returncode != 0:
            raise RuntimeError(f"the worker failed ({worker.returncode})")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        result["rate_sent"] = n / sent_s
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rate", type=float, default=200.0, help="jobs/s enqueued")
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("-c", "--concurrency", type=int, default=10)
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 unless p50 <= {P50_BOUND_MS:g} ms and p99 <= {P99_BOUND_MS:g} ms",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.n, args.concurrency))))
        return
    result = run(args.pg_server, args.rate, args.n, args.concurrency)
    result["load"] = Path("/proc/loadavg").read_text().split(" ", 1)[0]
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"enqueue -> handler start at {result['rate_sent']:,.0f} jobs/s "
            f"(C={args.concurrency}, {result['n']:,} jobs after warm-up, load {result['load']}): "
            f"p50 {result['p50_ms']:.2f} ms, p90 {result['p90_ms']:.2f} ms, "
            f"p99 {result['p99_ms']:.2f} ms, max {result['max_ms']:.2f} ms"
        )
    if args.check and (result["p50_ms"] > P50_BOUND_MS or result["p99_ms"] > P99_BOUND_MS):
        sys.exit(1)


if __name__ == "__main__":
    main()
