"""HTTP API latency at scale: a real ``jobledger serve`` over a ledger of about N events.

The ledger is made once and kept (``bench_audit.fill``: 5 job types, 10 orgs, 20 workers,
retried and dead-lettered failures, one simulated hour per round; then the audit view caught
up): PostgreSQL database ``jl_bench_http_<N>`` on ``--pg-server``, SQLite file
``<--cache>/http_<N>.db``, reused while it holds at least 95% of N events; ``--db URL`` uses a
ledger you give instead. Then it starts ``jobledger serve`` on a free port and times, one
client, sequential requests (``--requests`` of each, after 10 not counted):

- ``GET /api/v1/jobs?limit=50`` with an admin token (every org) and with a read token of one
  org (a tenth of the jobs);
- ``GET /api/v1/jobs/{id}`` (the job with its history), ids sampled across the ledger;
- ``GET /metrics`` and ``GET /health``;

and requests/s of ``GET /api/v1/jobs?limit=50`` from ``--clients`` concurrent clients for
``--seconds``. Prints a table, or the figures as JSON with ``--json``.

    .venv/bin/python bench/bench_http.py                               # 1,000,000, postgres
    .venv/bin/python bench/bench_http.py --events 100000 --backends postgres,sqlite --json
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import httpx
import psycopg
from bench_audit import fill

from ledger import FakeClock, Ledger

HERE = Path(__file__).resolve().parent
JOBLEDGER = Path(sys.executable).parent / "jobledger"
REUSE_FRACTION = 0.95
WARM_UP = 10
SAMPLED_JOBS = 300


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pg_head(server: str, name: str) -> int | None:
    """The newest event's position in database ``name`` (``None``: no such database or no
    ledger in it)."""
    try:
        with psycopg.connect(f"{server}/{name}", connect_timeout=5) as conn:
            row = conn.execute("SELECT coalesce(max(notification_id), 0) FROM jl_events").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return None


def cached_ledger(backend: str, server: str, cache: Path, events: int) -> tuple[str, bool]:
    """The URL of a kept ledger of about ``events`` events, made now if missing or too small;
    whether it was made now."""
    if backend == "sqlite":
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"http_{events}.db"
        if path.exists():
            with Ledger.open(str(path)) as ledger:
                if ledger.store.head_position() >= events * REUSE_FRACTION:
                    return str(path), False
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        make(str(path), events)
        return str(path), True
    name = f"jl_bench_http_{events}"
    head = _pg_head(server, name)
    if head is not None and head >= events * REUSE_FRACTION:
        return f"{server}/{name}", False
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{server}/{name}"
    make(url, events)
    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("jl_events", "jl_audit", "jl_queue"):
            conn.execute(f"VACUUM ANALYZE {table}")
    return url, True


def make(url: str, events: int) -> None:
    clock = FakeClock()
    with Ledger.open(url, create=True, clock=clock, pool_size=2) as ledger:
        started = perf_counter()
        head = fill(ledger, clock, events)
        print(f"{url}: {head:,} events in {perf_counter() - started:.1f}s", file=sys.stderr)
        started = perf_counter()
        ledger.catch_up(["audit"])
        print(f"{url}: audit caught up in {perf_counter() - started:.1f}s", file=sys.stderr)


class Served:
    """``jobledger serve`` over ``url`` on a free port, until closed."""

    def __init__(self, url: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(JOBLEDGER), "--db", url, "serve", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{self.base}/health", timeout=5)
                return
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("jobledger serve did not come up") from None
                time.sleep(0.05)  # a real process starting: real time

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def timed(client: httpx.Client, paths: Callable[[int], str], requests: int) -> dict[str, Any]:
    """p50/p95 (ms) of ``requests`` sequential GETs of ``paths(i)`` (each must be 200)."""
    for i in range(WARM_UP):
        client.get(paths(i)).raise_for_status()
    samples = []
    for i in range(requests):
        started = perf_counter()
        client.get(paths(i)).raise_for_status()
        samples.append((perf_counter() - started) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": round(samples[max(0, int(len(samples) * 0.95) - 1)], 1),
        "requests": requests,
    }


def throughput(base: str, token: str, clients: int, seconds: float) -> dict[str, Any]:
    """Requests/s of ``GET /api/v1/jobs?limit=50`` from ``clients`` threads for ``seconds``."""
    done = [0] * clients
    barrier = threading.Barrier(clients)
    headers = {"Authorization": f"Bearer {token}"}

    def run(slot: int) -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            barrier.wait()
            end = perf_counter() + seconds
            while perf_counter() < end:
                client.get("/api/v1/jobs", params={"limit": 50}).raise_for_status()
                done[slot] += 1

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "seconds": seconds, "requests_per_s": round(sum(done) / seconds)}


def sampled_jobs(ledger: Ledger, n: int) -> list[str]:
    """Up to ``n`` job ids spread over the whole ledger (random listing cursors)."""
    [newest] = ledger.jobs(limit=1).jobs
    chosen = random.Random(15)
    ids = []
    for _ in range(n):
        cursor = chosen.randint(1, newest.enqueue_seq)
        ids += [str(job.state.job_id) for job in ledger.jobs(limit=1, cursor=cursor).jobs]
    return ids


def measure(url: str, requests: int, clients: int, seconds: float) -> dict[str, Any]:
    with Ledger.open(url) as ledger:
        events = ledger.store.head_position()
        admin = ledger.tokens.create(org=None, role="admin", label="bench_http").secret
        reader = ledger.tokens.create(org="org-3", role="read", label="bench_http").secret
        ids = sampled_jobs(ledger, SAMPLED_JOBS)
    served = Served(url)
    try:
        as_admin = {"Authorization": f"Bearer {admin}"}
        as_reader = {"Authorization": f"Bearer {reader}"}
        with httpx.Client(base_url=served.base, headers=as_admin, timeout=60) as client:
            figures = {
                "GET /api/v1/jobs?limit=50": timed(
                    client, lambda _: "/api/v1/jobs?limit=50", requests
                ),
                "GET /api/v1/jobs/{id}": timed(
                    client, lambda i: f"/api/v1/jobs/{ids[i % len(ids)]}", requests
                ),
                "GET /metrics": timed(client, lambda _: "/metrics", max(10, requests // 10)),
                "GET /health": timed(client, lambda _: "/health", requests),
            }
        with httpx.Client(base_url=served.base, headers=as_reader, timeout=60) as client:
            figures["GET /api/v1/jobs?limit=50 (org token)"] = timed(
                client, lambda _: "/api/v1/jobs?limit=50", requests
            )
        rate = throughput(served.base, admin, clients, seconds)
    finally:
        served.close()
    return {
        "events": events,
        "latency": figures,
        "throughput": rate,
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"\n{result['backend']}: {result['events']:,} events ({result['url']}); "
        f"load {' '.join(result['loadavg'])}",
        f"{'request':42} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for name, figure in result["latency"].items():
        lines.append(f"{name:42} {figure['p50_ms']:>8} {figure['p95_ms']:>8}")
    rate = result["throughput"]
    lines.append(
        f"GET /api/v1/jobs?limit=50, {rate['clients']} concurrent clients: "
        f"{rate['requests_per_s']:,} requests/s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--backends", default="postgres")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--cache", type=Path, default=HERE / ".cache")
    parser.add_argument("--db", help="measure this ledger instead (made by you, kept)")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = []
    targets = (
        [("given", args.db, False)]
        if args.db
        else [
            (backend, *cached_ledger(backend, args.pg_server, args.cache, args.events))
            for backend in args.backends.split(",")
        ]
    )
    for backend, url, made in targets:
        result = {"backend": backend, "url": url, "made_now": made}
        result.update(measure(url, args.requests, args.clients, args.seconds))
        results.append(result)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for result in results:
            print(table(result))
    return results


if __name__ == "__main__":
    main()
