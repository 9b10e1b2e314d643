"""Where bulk enqueue's time goes: ``Ledger.enqueue_many`` of N jobs in chunks, timed, then
under cProfile (own time per function, the top ones), each in a fresh database.

    .venv/bin/python bench/profile_enqueue.py [--backend postgres] [--n 20000] [--chunk 5000]
        [--payload item|compare] [--top 20]

``--payload compare`` sends ``{"i": i}`` (what ``bench/compare.py`` sends); ``item`` the
slightly larger payload of ``bench_core.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from time import perf_counter

from bench_core import (
    BENCH_DIR,
    JOB_TYPE,
    open_ledger,
    pg_database,
    sqlite_database,
)

from ledger import EnqueueRequest


def _requests(n: int, payload: str) -> list[EnqueueRequest]:
    if payload == "compare":
        return [EnqueueRequest(JOB_TYPE, {"i": i}) for i in range(n)]
    return [
        EnqueueRequest(JOB_TYPE, {"item": i, "url": f"https://example.test/items/{i}"})
        for i in range(n)
    ]


def _run(url: str, n: int, chunk: int, payload: str, profile: cProfile.Profile | None) -> float:
    with open_ledger(url, pool_size=2) as ledger:
        ledger.enqueue_many(_requests(10, payload))  # warm: connections, prepared statements
        parts = [_requests(n, payload)[start : start + chunk] for start in range(0, n, chunk)]
        began = perf_counter()
        if profile is not None:
            profile.enable()
        for part in parts:
            ledger.enqueue_many(part)
        if profile is not None:
            profile.disable()
        return n / (perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    parser.add_argument("--payload", choices=("item", "compare"), default="compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()

    def fresh() -> AbstractContextManager[str]:
        return pg_database(args.pg_server) if args.backend == "postgres" else sqlite_database()

    rates = []
    for _ in range(args.rounds):
        with fresh() as url:
            rates.append(_run(url, args.n, args.chunk, args.payload, None))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("enqueue jobs/s:", ", ".join(f"{rate:,.0f}" for rate in rates))
    profile = cProfile.Profile()
    with fresh() as url:
        _run(url, args.n, args.chunk, args.payload, profile)
    out = Path(BENCH_DIR) / "results" / f"profile_enqueue_{args.backend}.pstats"
    out.parent.mkdir(exist_ok=True)
    profile.dump_stats(out)
    stats = pstats.Stats(profile, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
