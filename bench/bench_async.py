"""The async API: enqueue/s from 50 concurrent tasks, the cost of the thread hop, and a
loop-lag probe showing the loop is not blocked; transactional enqueue's cost beside.

    .venv/bin/python bench/bench_async.py [--backends sqlite,postgres] [--n 2000]
        [--server postgresql://postgres@127.0.0.1:5432] [--json bench/results/async.json]

Per backend, on a fresh database each:

- ``sync``: ``Ledger.enqueue`` in a loop, one thread (the floor of one caller).
- ``async_50``: 50 tasks sharing ``--n`` enqueues through ``AsyncLedger`` (10 threads).
- ``blocking_50``: the same 50 tasks calling the sync ``Ledger.enqueue`` inside the
  coroutine (what an app does without an async API): the probe's negative control.
- ``hop_us``: ``await AsyncLedger.run(lambda: None)``, µs per call (the thread hop alone).
- ``joined``: ``Ledger.using(conn).enqueue`` in the application's transaction, one commit
  per job, and (PostgreSQL) ``AsyncLedger.using(AsyncConnection)``, the loop-sent statements.

The probe is a task that asks to sleep 1 ms and records how late it woke; its p99 and max
are reported for each async run. A blocked loop shows as lag the length of an enqueue.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import psycopg

from ledger.api.async_ledger import AsyncLedger

TASKS = 50
JOB_TYPE = "bench.async"


class Probe:
    """Wakes every millisecond and records how late (ms) each wake-up came."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._running = True

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._running:
            asked = loop.time()
            await asyncio.sleep(0.001)
            self.lags.append((loop.time() - asked - 0.001) * 1000)

    def stop(self) -> dict[str, float]:
        self._running = False
        lags = sorted(self.lags) or [0.0]
        return {
            "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1 if len(lags) > 1 else 0], 2),
            "lag_max_ms": round(lags[-1], 2),
            "probe_wakeups": len(self.lags),
        }


async def probed(work: Callable[[], Awaitable[int]]) -> dict[str, float]:
    """Run ``work`` (returning how many jobs it enqueued) beside the probe."""
    probe = Probe()
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(0.01)
    started = perf_counter()
    n = await work()
    wall = perf_counter() - started
    found = probe.stop()
    await task
    return {"jobs_per_s": round(n / wall), **found}


async def bench_backend(url: str, n: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    per_task = n // TASKS
    async with await AsyncLedger.open(url, create=True) as ledger:
        await ledger.define(JOB_TYPE)
        sync = ledger.ledger
        started = perf_counter()
        for i in range(n // 4):
            sync.enqueue(JOB_TYPE, {"i": i})
        results["sync_jobs_per_s"] = round((n // 4) / (perf_counter() - started))

        async def async_tasks() -> int:
            async def one(t: int) -> None:
                for i in range(per_task):
                    await ledger.enqueue(JOB_TYPE, {"t": t, "i": i})

            await asyncio.gather(*(one(t) for t in range(TASKS)))
            return per_task * TASKS

        async def blocking_tasks() -> int:
            async def one(t: int) -> None:
                for i in range(per_task // 4):
                    sync.enqueue(JOB_TYPE, {"t": t, "i": i})  # blocks the loop
                    await asyncio.sleep(0)

            await asyncio.gather(*(one(t) for t in range(TASKS)))
            return (per_task // 4) * TASKS

        results["async_50"] = await probed(async_tasks)
        results["blocking_50"] = await probed(blocking_tasks)
        hops = 2000
        started = perf_counter()
        for _ in range(hops):
            await ledger.run(lambda: None)
        results["hop_us"] = round((perf_counter() - started) / hops * 1e6, 1)
        results["joined"] = await bench_joined(ledger, url, n // 10)
    return results


async def bench_joined(ledger: AsyncLedger, url: str, n: int) -> dict[str, Any]:
    """One job per application transaction: the pooled enqueue, the joined sync one, and
    (PostgreSQL) the AsyncConnection one, in jobs/s."""
    sync = ledger.ledger
    found: dict[str, Any] = {}
    started = perf_counter()
    for _ in range(n):
        sync.enqueue(JOB_TYPE)
    found["pooled_jobs_per_s"] = round(n / (perf_counter() - started))
    conn: Any
    if url.startswith("postgres"):
        conn = psycopg.connect(url)
    else:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    started = perf_counter()
    for _ in range(n):
        if isinstance(conn, sqlite3.Connection):
            conn.execute("BEGIN IMMEDIATE")
        sync.using(conn).enqueue(JOB_TYPE)
        conn.commit()
    found["using_jobs_per_s"] = round(n / (perf_counter() - started))
    conn.close()
    if url.startswith("postgres"):
        async with await psycopg.AsyncConnection.connect(url) as aconn:

            async def joined() -> int:
                for _ in range(n):
                    await ledger.using(aconn).enqueue(JOB_TYPE)
                    await aconn.commit()
                return n

            found["async_using"] = await probed(joined)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", default="bench/results/async.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"n": args.n, "tasks": TASKS}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="jl_bench_") as tmp:
            name = f"jl_bench_{uuid.uuid4().hex[:12]}"
            if backend == "postgres":
                with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
                    admin.execute(f'CREATE DATABASE "{name}"')
                url = f"{args.server}/{name}"
            else:
                url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
            try:
                report[backend] = asyncio.run(bench_backend(url, args.n))
            finally:
                if backend == "postgres":
                    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
                        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        print(backend, json.dumps(report[backend], indent=2))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print("one run (no median): wrote", args.json)


if __name__ == "__main__":
    main()
