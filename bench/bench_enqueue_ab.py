"""Bulk enqueue, old code against new, in interleaved pairs: client CPU µs per job and jobs/s.

    .venv/bin/python bench/bench_enqueue_ab.py --old /tmp/abe-main [--pairs 5] [--n 20000]
        [--new DIR] [--chunk 5000] [--backend postgres]

``--old`` is a tree of the code to compare with (``git archive main | tar -x -C DIR``); the
new code is this checkout (or ``--new``, another such tree). Each trial runs in a fresh
interpreter (``PYTHONPATH`` choosing the tree) on a fresh database: ``Ledger.enqueue_many``
of ``{"i": i}`` payloads in chunks, as ``bench/compare.py`` enqueues. Trials alternate old,
new, new, old, … so that a change of the host's load falls on both sides. Reported per trial:
client CPU (``time.process_time()``, which other processes' load barely moves) per job, jobs/s
by the wall clock, and the 1-minute load average when the trial ended.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from time import perf_counter, process_time

HERE = Path(__file__).resolve().parent
NEW_TREE = HERE.parent
JOB_TYPE = "bench.noop"


def trial(backend: str, server: str, n: int, chunk: int) -> dict[str, float]:
    """One measured enqueue in this interpreter (whichever ``ledger`` it imports)."""
    import tempfile

    import psycopg

    import ledger
    from ledger import EnqueueRequest, Ledger

    name = f"jl_bench_{uuid.uuid4().hex[:12]}"
    tmp = tempfile.TemporaryDirectory(prefix="jl_bench_")
    if backend == "postgres":
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = f"{server}/{name}"
    else:
        url = f"sqlite:///{Path(tmp.name) / 'ledger.db'}"
    try:
        book = Ledger.open(url, create=True, pool_size=2)
        try:
            book.define(JOB_TYPE)
            book.enqueue_many([EnqueueRequest(JOB_TYPE, {"i": -i}) for i in range(1, 11)])
            parts = [
                [EnqueueRequest(JOB_TYPE, {"i": i}) for i in range(start, min(n, start + chunk))]
                for start in range(0, n, chunk)
            ]
            cpu, wall = process_time(), perf_counter()
            for part in parts:
                book.enqueue_many(part)
            cpu, wall = process_time() - cpu, perf_counter() - wall
        finally:
            book.close()
    finally:
        if backend == "postgres":
            with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        tmp.cleanup()
    return {
        "cpu_us_per_job": cpu / n * 1e6,
        "jobs_per_s": n / wall,
        "load": os.getloadavg()[0],
        "ledger": str(Path(ledger.__file__).resolve().parent.parent),
    }


def run_side(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, __file__, "--trial", "--backend", args.backend, "--n", str(args.n)]
    argv += ["--chunk", str(args.chunk), "--pg-server", args.pg_server]
    out = subprocess.run(
        argv,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    if Path(str(result["ledger"])) != tree.resolve():
        raise SystemExit(f"the trial imported ledger from {result['ledger']}, not {tree}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path)
    parser.add_argument("--new", type=Path, default=NEW_TREE, help="default: this checkout")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--trial", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        print(json.dumps(trial(args.backend, args.pg_server, args.n, args.chunk)))
        return
    if args.old is None:
        parser.error("--old is required")
    sides = {"old": args.old, "new": args.new}
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for pair in range(args.pairs):
        order = ("old", "new") if pair % 2 == 0 else ("new", "old")
        for side in order:
            r = run_side(sides[side], args)
            results[side].append(r)
            print(
                f"pair {pair + 1} {side}: {r['cpu_us_per_job']:6.1f} µs CPU/job"
                f"  {r['jobs_per_s']:8,.0f} jobs/s  load {r['load']:.2f}",
                flush=True,
            )
    for side in ("old", "new"):
        cpu = statistics.median(r["cpu_us_per_job"] for r in results[side])
        rate = statistics.median(r["jobs_per_s"] for r in results[side])
        print(f"median {side}: {cpu:6.1f} µs CPU/job  {rate:8,.0f} jobs/s")
    pairs = zip(results["old"], results["new"], strict=True)
    ratios = [new["jobs_per_s"] / old["jobs_per_s"] for old, new in pairs]
    print("new/old jobs/s per pair:", ", ".join(f"{x:.2f}" for x in ratios))


if __name__ == "__main__":
    main()
