"""Worker memory over a long run: the RSS of one ``jobledger worker --burst`` draining N jobs.

Makes its own PostgreSQL database (``jl_bench_<random>``, dropped ``WITH (FORCE)`` even on
error), enqueues ``--jobs`` no-op jobs (default 1,000,000) with ``enqueue_many`` in batches of
``--batch`` (the binary-COPY path), then starts ``jobledger worker --app rss_app:registry
--burst`` in a subprocess and samples its resident set size (``VmRSS`` in
``/proc/<pid>/status``) every ``--every`` seconds until it exits, with the drain's progress
(events appended since the start, over the two each job writes: lease and outcome).

It prints the curve (RSS at 10%, 25%, 50%, 75%, 90% and 100% of the drain, the maximum) and
exits 1 if the worker failed, a job did not succeed, or the RSS grew after warm-up (from the
sample at 10% to the maximum after it) by more than ``--bound-mb``.

    .venv/bin/python bench/bench_rss.py                       # 1,000,000 jobs, ~5 min
    .venv/bin/python bench/bench_rss.py --jobs 100000 --bound-mb 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from rss_app import JOB_TYPE
from scratch import scratch_database

from ledger import EnqueueRequest, Ledger

BENCH = Path(__file__).resolve().parent
MARKS = (0.10, 0.25, 0.50, 0.75, 0.90, 1.00)


def rss_kib(pid: int) -> int | None:
    """The process's resident set size in KiB, or ``None`` once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def enqueue(url: str, jobs: int, batch: int) -> float:
    """Enqueue the jobs; the seconds it took."""
    started = time.perf_counter()
    with Ledger.open(url, create=True, pool_size=2) as ledger:
        ledger.define(JOB_TYPE, max_attempts=1)
        for first in range(0, jobs, batch):
            ledger.enqueue_many(
                [
                    EnqueueRequest(job_type=JOB_TYPE, payload={"i": i})
                    for i in range(first, min(first + batch, jobs))
                ]
            )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jl_queue")
    return time.perf_counter() - started


def head(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT coalesce(max(notification_id), 0) FROM jl_events").fetchone()
    return int(row[0]) if row else 0


def drain(url: str, jobs: int, every: float, concurrency: int) -> dict[str, Any]:
    """Run the worker until it exits; its samples ``(seconds, fraction done, RSS KiB)``."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])
    )
    argv = [sys.executable, "-m", "jobledger_cli.main", "--db", url, "worker"]
    argv += ["--app", "rss_app:registry", "--burst", "--concurrency", str(concurrency)]
    samples: list[tuple[float, float, int]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        start_head = head(conn)
        started = time.perf_counter()
        worker = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while worker.poll() is None:
            kib = rss_kib(worker.pid)
            done = min(1.0, (head(conn) - start_head) / (2 * jobs))
            if kib is not None:
                samples.append((time.perf_counter() - started, done, kib))
            time.sleep(every)
        out, err = worker.communicate()
        seconds = time.perf_counter() - started
        succeeded = conn.execute(
            "SELECT count(*) FROM jl_queue WHERE status = 'succeeded'"
        ).fetchone()
    return {
        "returncode": worker.returncode,
        "stdout": out.decode(errors="replace")[-2000:],
        "stderr": err.decode(errors="replace")[-2000:],
        "seconds": seconds,
        "succeeded": int(succeeded[0]) if succeeded else 0,
        "samples": samples,
    }


def at(samples: list[tuple[float, float, int]], mark: float) -> tuple[float, float, int]:
    """The first sample at or past ``mark`` of the drain (the last one if none is)."""
    return next((s for s in samples if s[1] >= mark), samples[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="jobs per enqueue_many")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument(
        "--bound-mb", type=float, default=20.0, help="allowed growth (MiB) after 10%%"
    )
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", default="bench/results/rss.json")
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    with scratch_database("postgres", args.pg_server) as url:
        enqueue_s = enqueue(url, args.jobs, args.batch)
        print(f"enqueued {args.jobs:,} jobs in {enqueue_s:.1f}s", file=sys.stderr)
        run = drain(url, args.jobs, args.every, args.concurrency)
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    samples = run["samples"]
    failures = []
    if run["returncode"] != 0:
        failures.append(f"worker exited {run['returncode']}: {run['stderr']}")
    if run["succeeded"] != args.jobs:
        failures.append(f"{run['succeeded']:,} of {args.jobs:,} jobs succeeded")
    if not samples:
        failures.append("no RSS sample taken")
        growth_mb = 0.0
    else:
        warm = at(samples, MARKS[0])
        peak_after_warm = max(kib for _, done, kib in samples if done >= warm[1])
        growth_mb = (peak_after_warm - warm[2]) / 1024
        if growth_mb > args.bound_mb:
            failures.append(
                f"RSS grew {growth_mb:.1f} MiB after warm-up (bound {args.bound_mb} MiB)"
            )
    print(
        f"worker RSS over {args.jobs:,} jobs ({run['seconds']:.0f}s = "
        f"{args.jobs / run['seconds']:,.0f} jobs/s), load {' '.join(load_before)} -> "
        f"{' '.join(load_after)}"
    )
    for mark in MARKS:
        if samples:
            t, _done, kib = at(samples, mark)
            print(f"  {mark:>4.0%} of the drain  t={t:6.1f}s  RSS {kib / 1024:7.1f} MiB")
    if samples:
        print(f"  max              RSS {max(s[2] for s in samples) / 1024:7.1f} MiB")
        print(f"  growth after 10%: {growth_mb:+.1f} MiB (bound {args.bound_mb} MiB)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "jobs": args.jobs,
                "enqueue_s": round(enqueue_s, 1),
                "loadavg_before": load_before,
                "loadavg_after": load_after,
                "growth_mb": round(growth_mb, 1),
                **run,
            },
            indent=2,
        )
    )
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
