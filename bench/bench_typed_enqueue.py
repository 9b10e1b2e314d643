"""Enqueue throughput of a typed job against a plain one, in one run: jobs/s and the ratio.

    .venv/bin/python bench/bench_typed_enqueue.py [--backend sqlite|postgres|both]
        [--rounds 5] [--n 20000] [--chunk 1000] [--singles 2000]

Both sides enqueue the same payloads (three fields) of one job type on a fresh database per
trial: *plain* builds ``EnqueueRequest(type, {...})`` dicts for ``Ledger.enqueue_many`` /
``Ledger.enqueue``; *typed* passes ``msgspec.Struct`` payloads to ``TypedJob.enqueue_many`` /
``TypedJob.enqueue``, which validate and encode them (the path ``@registry.job`` adds).
Building the payloads is timed on both sides, as ``bench/compare.py`` times building its
requests. Two shapes: ``batch`` (``--n`` jobs in transactions of ``--chunk``) and ``single``
(``--singles`` jobs, one transaction each). Trials alternate plain, typed, typed, plain, … so
that a change of the host's load falls on both sides; reported per trial: jobs/s by the wall
clock and client CPU (``time.process_time()``) per job; then per shape the median typed/plain
jobs/s ratio (the typed path must not cost more than 10%: a ratio of 0.90 or more), and the
same ratio by client CPU per job (plain/typed µs), which the host's load barely moves.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter, process_time

import msgspec
import psycopg

from ledger import EnqueueRequest, Ledger, Registry, SyncJobContext

JOB_TYPE = "bench.typed"


class Signup(msgspec.Struct, frozen=True):
    user_id: int
    email: str
    plan: str = "free"


registry = Registry()


@registry.job(JOB_TYPE, max_attempts=3)
def welcome(ctx: SyncJobContext, signup: Signup) -> None:
    """Never run here: the bench measures the enqueue only."""


@contextmanager
def fresh_ledger(backend: str, server: str) -> Iterator[Ledger]:
    """A new, initialised ledger with the bench's type defined (dropped afterwards)."""
    name = f"jl_bench_{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="jl_bench_") as tmp:
        if backend == "postgres":
            with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            url = f"{server}/{name}"
        else:
            url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        try:
            with Ledger.open(url, create=True, pool_size=2) as ledger:
                ledger.define(JOB_TYPE, max_attempts=3)
                yield ledger
        finally:
            if backend == "postgres":
                with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def plain_batch(ledger: Ledger, first: int, count: int) -> None:
    ledger.enqueue_many(
        [
            EnqueueRequest(JOB_TYPE, {"user_id": i, "email": f"u{i}@example.com", "plan": "pro"})
            for i in range(first, first + count)
        ]
    )


def typed_batch(ledger: Ledger, first: int, count: int) -> None:
    welcome.enqueue_many(
        ledger,
        [
            Signup(user_id=i, email=f"u{i}@example.com", plan="pro")
            for i in range(first, first + count)
        ],
    )


def plain_single(ledger: Ledger, i: int) -> None:
    ledger.enqueue(JOB_TYPE, {"user_id": i, "email": f"u{i}@example.com", "plan": "pro"})


def typed_single(ledger: Ledger, i: int) -> None:
    welcome.enqueue(ledger, Signup(user_id=i, email=f"u{i}@example.com", plan="pro"))


def trial(
    backend: str, server: str, shape: str, side: str, args: argparse.Namespace
) -> dict[str, float]:
    """One measured enqueue of ``shape`` by ``side`` on a fresh ledger."""
    with fresh_ledger(backend, server) as ledger:
        warm_single = plain_single if side == "plain" else typed_single
        for i in range(10):  # connections, statements and the declaration's check warmed
            warm_single(ledger, -1 - i)
        cpu, wall = process_time(), perf_counter()
        if shape == "batch":
            enqueue_batch: Callable[[Ledger, int, int], None] = (
                plain_batch if side == "plain" else typed_batch
            )
            for first in range(0, args.n, args.chunk):
                enqueue_batch(ledger, first, min(args.chunk, args.n - first))
            jobs = args.n
        else:
            for i in range(args.singles):
                warm_single(ledger, i)
            jobs = args.singles
        cpu, wall = process_time() - cpu, perf_counter() - wall
    return {"jobs_per_s": jobs / wall, "cpu_us_per_job": cpu / jobs * 1e6}


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, float]:
    """Every round of both shapes on ``backend``; per shape the median typed/plain jobs/s
    ratio, and (``"<shape> cpu"``) the plain/typed ratio of median client CPU per job."""
    ratios: dict[str, float] = {}
    for shape in ("batch", "single"):
        results: dict[str, list[dict[str, float]]] = {"plain": [], "typed": []}
        for round_number in range(args.rounds):
            order = ("plain", "typed") if round_number % 2 == 0 else ("typed", "plain")
            for side in order:
                r = trial(backend, args.pg_server, shape, side, args)
                results[side].append(r)
                print(
                    f"{backend} {shape} round {round_number + 1} {side}: "
                    f"{r['jobs_per_s']:8,.0f} jobs/s  {r['cpu_us_per_job']:6.1f} µs CPU/job",
                    flush=True,
                )
        per_round = [
            typed["jobs_per_s"] / plain["jobs_per_s"]
            for plain, typed in zip(results["plain"], results["typed"], strict=True)
        ]
        medians = {
            side: statistics.median(r["jobs_per_s"] for r in results[side]) for side in results
        }
        cpu = {
            side: statistics.median(r["cpu_us_per_job"] for r in results[side]) for side in results
        }
        ratios[shape] = statistics.median(per_round)
        ratios[f"{shape} cpu"] = cpu["plain"] / cpu["typed"]
        print(
            f"{backend} {shape}: plain {medians['plain']:,.0f} jobs/s "
            f"({cpu['plain']:.1f} µs CPU/job), typed {medians['typed']:,.0f} jobs/s "
            f"({cpu['typed']:.1f} µs CPU/job); typed/plain jobs/s per round "
            + ", ".join(f"{x:.2f}" for x in per_round)
            + f"; median {ratios[shape]:.3f}; by client CPU {ratios[f'{shape} cpu']:.3f}",
            flush=True,
        )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=1_000)
    parser.add_argument("--singles", type=int, default=2_000)
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    summary = {backend: run_backend(backend, args) for backend in backends}
    for backend, ratios in summary.items():
        verdicts = ", ".join(
            f"{shape} {ratio:.3f} ({'ok' if ratio >= 0.90 else 'OVER the 10% budget'})"
            for shape, ratio in ratios.items()
        )
        print(f"typed/plain median jobs/s, {backend}: {verdicts}")


if __name__ == "__main__":
    main()
