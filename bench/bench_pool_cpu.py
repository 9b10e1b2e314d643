"""The worker pool's client CPU per job, and jobs/s, old code against new in interleaved pairs.

Each measurement runs in a child interpreter whose ``PYTHONPATH`` picks the code (``--old``,
e.g. ``git archive main | tar -x -C /tmp/ab-main``, and ``--new``, default this checkout). The
child makes a fresh database, enqueues N jobs of a no-op async handler (untimed), then runs a
:class:`WorkerPool` at its defaults (and with ``prefetch=0``) from ``start()`` until
``pool.stats.succeeded`` reaches N. It reports:

- jobs/s over that drain (wall time; moved by the host's load);
- client CPU µs per job: ``time.process_time()`` over the drain / N, every thread of the
  process (load barely moves it: it is CPU this process spent, not time it waited);
- of that, the event loop's thread (``time.thread_time()`` there): the pool's own machinery
  (slots, producer, completer, futures, tasks) plus the handlers; the rest is the I/O threads
  (the store's claims and completions, and the thread hand-offs).

The drain's end is told by the pool's success count (no polling, which would itself cost
CPU on the loop's thread).
Pairs are interleaved (old, new, old, new, ...) so that load falls on both sides alike; every
figure is printed with the load average read just before it. ``--profile DIR`` instead runs
one new-side drain per setting under cProfile (the loop's thread only) and prints the top
functions by own time.

    .venv/bin/python bench/bench_pool_cpu.py --old /tmp/ab-main
    .venv/bin/python bench/bench_pool_cpu.py --profile bench/results --n 20000
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
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


async def drain(
    url: str, n: int, concurrency: int, prefetch: int | None, profile: str | None
) -> dict[str, Any]:
    """One measurement in this interpreter (the child's side)."""
    from ledger import EnqueueRequest, Ledger
    from ledger.runtime.handlers import JobContext, Registry
    from ledger.runtime.health import PoolStats
    from ledger.runtime.pool import WorkerPool

    # Told when the N-th success is counted, so that no polling of ours lands in the loop
    # thread's CPU.
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

    with Ledger.open(url, create=True) as ledger:
        ledger.define(TYPE)
        for start in range(0, n, 5000):
            batch = range(start, min(n, start + 5000))
            ledger.enqueue_many([EnqueueRequest(job_type=TYPE, payload={"i": i}) for i in batch])
        settings: dict[str, Any] = {} if prefetch is None else {"prefetch": prefetch}
        pool = WorkerPool(ledger, registry, concurrency=concurrency, **settings)
        profiler = cProfile.Profile() if profile else None
        cpu_began, loop_began = time.process_time(), time.thread_time()
        began = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        await pool.start()
        try:
            await drained.wait()
            seconds = time.perf_counter() - began
            cpu = time.process_time() - cpu_began
            loop_cpu = time.thread_time() - loop_began
            if profiler is not None:
                profiler.disable()
        finally:
            await pool.stop()
        assert ledger.counts() == {"succeeded": n}, ledger.counts()
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    from bench_pool_turns import transactions_per_job

    return {
        "transactions_per_job": transactions_per_job(url, n),
        "jobs_s": n / seconds,
        "cpu_us": cpu / n * 1e6,
        "loop_cpu_us": loop_cpu / n * 1e6,
        "claims": pool.stats.claimed,
    }


def measure(
    code: str,
    server: str,
    *,
    n: int,
    concurrency: int,
    prefetch: int | None,
    profile: str | None = None,
) -> dict[str, Any]:
    """One measurement in a child interpreter running the code at ``code``."""
    sys.path.insert(0, str(HERE))
    from scratch import scratch_database

    with scratch_database("postgres", server) as url:
        env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{HERE}"}
        args = [sys.executable, __file__, "--child", url, "--n", str(n), "-c", str(concurrency)]
        args += ["--child-prefetch", str(prefetch)] if prefetch is not None else []
        args += ["--profile-file", profile] if profile is not None else []
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child failed ({code}):\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def prefetch_setting(text: str) -> int | None:
    return None if text == "default" else int(text)


def show_profile(path: str, top: int) -> None:
    stats = pstats.Stats(path)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old", help="path of the old code (PYTHONPATH)")
    parser.add_argument("--new", default=str(HERE.parent), help="path of the new code")
    parser.add_argument(
        "--side",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="more code to interleave after old and new (e.g. one per commit)",
    )
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("-c", "--concurrency", default="10")
    parser.add_argument("--prefetch", default="default,0", help="'default' and/or numbers")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--profile", help="profile the new side; write pstats files here")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--profile-file", help=argparse.SUPPRESS)
    parser.add_argument("--child-prefetch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        got = asyncio.run(
            drain(args.child, args.n, int(args.concurrency), args.child_prefetch, args.profile_file)
        )
        print(json.dumps(got))
        return
    settings = [prefetch_setting(p) for p in args.prefetch.split(",")]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        for concurrency in concurrencies:
            for prefetch in settings:
                path = str(Path(args.profile) / f"pool_c{concurrency}_p{prefetch}.pstats")
                got = measure(
                    args.new,
                    args.pg_server,
                    n=args.n,
                    concurrency=concurrency,
                    prefetch=prefetch,
                    profile=path,
                )
                print(f"C={concurrency} prefetch={prefetch}: {json.dumps(got)}", flush=True)
                show_profile(path, args.top)
        return
    if not args.old:
        parser.error("--old is required (or --profile)")
    sides = {"old": args.old, "new": args.new}
    sides.update(side.split("=", 1) for side in args.side)
    for concurrency in concurrencies:
        for prefetch in settings:
            label = f"C={concurrency:<3} prefetch={'default' if prefetch is None else prefetch}"
            rates: dict[str, list[float]] = {side: [] for side in sides}
            cpus: dict[str, list[float]] = {side: [] for side in sides}
            for round_no in range(1, args.rounds + 1):
                for side, code in sides.items():
                    before = load()
                    got = measure(
                        code, args.pg_server, n=args.n, concurrency=concurrency, prefetch=prefetch
                    )
                    rates[side].append(got["jobs_s"])
                    cpus[side].append(got["cpu_us"])
                    print(
                        f"{label} round {round_no} {side}: {got['jobs_s']:7,.0f} jobs/s  "
                        f"client CPU {got['cpu_us']:5.1f} µs/job (loop thread "
                        f"{got['loop_cpu_us']:5.1f})  "
                        f"{got['transactions_per_job']:.4f} transactions/job  load {before}",
                        flush=True,
                    )
            medians = "  ".join(
                f"{side} {statistics.median(rates[side]):,.0f} jobs/s "
                f"{statistics.median(cpus[side]):.1f} µs/job"
                for side in sides
            )
            print(f"{label} medians: {medians}", flush=True)
            for side in list(sides)[1:]:
                ratios = " ".join(
                    f"{b / a:.2f}" for a, b in zip(rates["old"], rates[side], strict=True)
                )
                least = min(cpus[side]) / min(cpus["old"])
                print(
                    f"{label} {side}/old: jobs/s pair ratios {ratios}; "
                    f"least CPU µs/job ratio {least:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
