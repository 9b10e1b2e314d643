"""Where the time of enqueue_many and the claim+succeed loop goes: per SQL statement, then per
Python function.

Each pass runs on N fresh jobs in a database of its own (as ``bench_core.py`` makes them):

1. statement timing, no profiler: every ``execute``/``executemany``, ``BEGIN`` and ``COMMIT``
   is timed with ``perf_counter`` and grouped by what it does (claim select, ``LOCK TABLE``,
   event insert, view update, commit, ...); the rest of the wall time is Python between
   statements (decode, fold, decide, encode, row building). Done for the chunked enqueue, the
   one-thread claim+succeed loop and, with ``--threads``, the threaded loop, which shows the
   events-table lock turning into waiting. Inside a psycopg pipeline (the PostgreSQL write
   phase) a statement's time is only its sending: the server's work, and any wait for the
   events-table lock, land in "pipeline sync".
2. cProfile of one thread enqueuing N jobs, then of the one-thread claim+succeed loop: own
   time per function, grouped into buckets (waiting on the server, msgspec, fold/decide,
   psycopg's Python side, ...), plus the top functions.

    .venv/bin/python bench/profile_core.py [--backend postgres] [--n 20000] [--batch 100]
        [--threads 4] [--top 25]

The pstats file lands in ``bench/results/`` for ``python -m pstats`` or snakeviz.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import psycopg
from bench_core import (
    BENCH_DIR,
    ENQUEUE_CHUNK,
    Config,
    analyze,
    enqueue_all,
    fresh_database,
    open_ledger,
    run_workers,
    work_until_empty,
)
from eventsourcing.persistence import ConnectionPool as EventsourcingPool
from eventsourcing.sqlite import SQLiteConnection, SQLiteCursor
from psycopg_pool import ConnectionPool as PsycopgPool

# Statement text -> category, first match wins; the texts come from ledger/store/sql/*.sql and
# eventsourcing's recorders.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("SKIP LOCKED", "claim select (FOR UPDATE SKIP LOCKED)"),
    ("FOR UPDATE", "lock select (queue_lock FOR UPDATE)"),
    ("ORDER BY job_id", "lock select (queue_lock)"),
    ("ORDER BY priority", "claim select"),
    ("lock_timeout", "SET LOCAL lock_timeout (recorder)"),
    ("LOCK TABLE", "LOCK TABLE jl_events (recorder)"),
    ("NOTIFY", "NOTIFY (recorder)"),
    ("BEGIN", "BEGIN"),
    ('INSERT INTO "public"."jl_events"', "INSERT events (composite array, RETURNING)"),
    ("INSERT INTO jl_events", "INSERT events"),
    ("INSERT INTO jl_queue", "INSERT view rows"),
    ("UPDATE jl_queue", "UPDATE view rows"),
)


POOL = "pool checkout (SQLite: incl. writer lock wait)"
PIPELINE = "pipeline sync (waits for pipelined results)"
FETCH = "fetchall (in a pipeline: waits for results)"


def categorise(query: Any, cursor: Any) -> str:
    text = query if isinstance(query, str) else query.as_string(cursor)
    for needle, name in CATEGORIES:
        if needle in text:
            return name
    return "other: " + " ".join(text.split())[:50]


@dataclass
class StatementTimer:
    """Seconds and calls per statement category, summed over every thread."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, elapsed: float) -> None:
        with self.lock:
            self.seconds[name] += elapsed
            self.calls[name] += 1

    def wrap_statement(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            name = categorise(query, cursor)  # before the clock: as_string is our cost
            began = perf_counter()
            try:
                return method(cursor, query, *args, **kwargs)
            finally:
                self.add(name, perf_counter() - began)

        return timed

    def wrap_call(self, method: Callable[..., Any], name: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.add(name, perf_counter() - began)

        return timed


@contextmanager
def patched(targets: list[tuple[Any, str, Callable[..., Any]]]) -> Iterator[None]:
    """Swap methods for the length of a measurement, whatever happens."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    try:
        for owner, name, replacement in targets:
            setattr(owner, name, replacement)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def instrumented(timer: StatementTimer) -> AbstractContextManager[None]:
    """Time statements on both drivers: psycopg's Cursor and Transaction (BEGIN/COMMIT are its
    ``__enter__``/``__exit__``), and eventsourcing's Python wrapper around sqlite3. Pool
    checkouts too: on SQLite that is where writers queue for eventsourcing's writer lock."""
    targets: list[tuple[Any, str, Callable[..., Any]]] = [
        (cls, meth, timer.wrap_statement(getattr(cls, meth)))
        for cls in (psycopg.Cursor, SQLiteCursor)
        for meth in ("execute", "executemany")
    ]
    targets += [
        (psycopg.Transaction, "__enter__", timer.wrap_call(psycopg.Transaction.__enter__, "BEGIN")),
        (psycopg.Transaction, "__exit__", timer.wrap_call(psycopg.Transaction.__exit__, "COMMIT")),
        (SQLiteConnection, "commit", timer.wrap_call(SQLiteConnection.commit, "COMMIT")),
        (PsycopgPool, "getconn", timer.wrap_call(PsycopgPool.getconn, POOL)),
        # In pipeline mode statements return at once; their results are waited for here.
        (psycopg.Pipeline, "__exit__", timer.wrap_call(psycopg.Pipeline.__exit__, PIPELINE)),
        (psycopg.Pipeline, "sync", timer.wrap_call(psycopg.Pipeline.sync, PIPELINE)),
        (psycopg.Cursor, "fetchall", timer.wrap_call(psycopg.Cursor.fetchall, FETCH)),
        (
            EventsourcingPool,
            "get_connection",
            timer.wrap_call(EventsourcingPool.get_connection, POOL),
        ),
    ]
    return patched(targets)


# --- passes ---------------------------------------------------------------------------------------


@contextmanager
def loaded_ledger(backend: str, cfg: Config, pool_size: int) -> Iterator[Any]:
    with fresh_database(backend, cfg) as url, open_ledger(url, pool_size) as ledger:
        enqueue_all(ledger, cfg.n, min(ENQUEUE_CHUNK, cfg.n))
        analyze(url)
        yield ledger


def enqueue_pass(backend: str, cfg: Config) -> None:
    timer = StatementTimer()
    with fresh_database(backend, cfg) as url, open_ledger(url, 2) as ledger, instrumented(timer):
        rate = enqueue_all(ledger, cfg.n, min(ENQUEUE_CHUNK, cfg.n))
    title = f"{backend}, enqueue_many {min(ENQUEUE_CHUNK, cfg.n):,}/txn: {rate:,.0f} jobs/s"
    print_breakdown(title, timer, cfg.n / rate, 1)


def statement_pass(backend: str, cfg: Config, threads: int) -> None:
    timer = StatementTimer()
    with loaded_ledger(backend, cfg, threads + 1) as ledger, instrumented(timer):
        wall, _ = run_workers(ledger, threads, cfg.batch)
    title = f"{backend}, claim+succeed, {threads} thread(s): {cfg.n / wall:,.0f} jobs/s"
    print_breakdown(title, timer, wall, threads)


def print_breakdown(title: str, timer: StatementTimer, wall: float, threads: int) -> None:
    # With threads the statement times add up across workers: shares are of thread-seconds.
    budget = wall * threads
    print(f"\n== {title}, wall {wall:.2f} s")
    print(f"{'statement':<42}{'calls':>8}{'mean us':>10}{'total s':>9}{'share':>8}")
    for name, seconds in sorted(timer.seconds.items(), key=lambda kv: -kv[1]):
        calls = timer.calls[name]
        share = seconds / budget
        print(f"{name:<42}{calls:>8}{seconds / calls * 1e6:>10.0f}{seconds:>9.2f}{share:>8.1%}")
    rest = budget - sum(timer.seconds.values())
    print(f"{'Python outside statements':<42}{'':>8}{'':>10}{rest:>9.2f}{rest / budget:>8.1%}")


# Own-time buckets for the cProfile pass: (bucket, test on "file:function").
BUCKETS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("waiting on the server (libpq/socket)", lambda k: "wait" in k and "psycopg" in k),
    ("sqlite3 C calls (SQL execution, commit)", lambda k: "sqlite3" in k and "~" in k),
    ("msgspec encode/decode", lambda k: "msgspec" in k),
    (
        "fold/decide (ledger.core.state, .decide, .requests)",
        lambda k: any(f"ledger/core/{m}" in k for m in ("state", "decide", "requests")),
    ),
    (
        "view rows (projections, ledger.core.times)",
        lambda k: "projections/" in k or "ledger/core/times" in k,
    ),
    ("ledger API + unit of work", lambda k: "ledger/" in k),
    ("eventsourcing recorder/pool", lambda k: "eventsourcing" in k),
    ("psycopg_pool", lambda k: "psycopg_pool" in k),
    ("psycopg Python side (adapt, execute)", lambda k: "psycopg" in k),
    ("datetime/uuid/stdlib", lambda k: "datetime" in k or "uuid" in k),
)


def bucket_of(key: tuple[str, int, str]) -> str:
    text = f"{key[0]}:{key[2]}"
    for name, test in BUCKETS:
        if test(text):
            return name
    return "other (builtins, contextlib, threading)"


def profile_pass(backend: str, cfg: Config, what: str, top: int) -> Path:
    """cProfile one thread doing ``what`` ("enqueue": N jobs in chunks; "claim": the
    claim+succeed loop over N jobs), then print the buckets and the top functions."""
    profiler = cProfile.Profile()
    chunk = min(ENQUEUE_CHUNK, cfg.n)
    with fresh_database(backend, cfg) as url, open_ledger(url, 2) as ledger:
        if what == "claim":
            enqueue_all(ledger, cfg.n, chunk)
            analyze(url)
        began = perf_counter()
        profiler.enable()
        if what == "claim":
            work_until_empty(ledger, "profiled", cfg.batch)
        else:
            enqueue_all(ledger, cfg.n, chunk)
        profiler.disable()
        wall = perf_counter() - began
    out = BENCH_DIR / "results" / f"{what}_{backend}.pstats"
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(out)
    print_profile(out, f"{backend}, {what}, 1 thread: wall {wall:.2f} s under the profiler", top)
    return out


def print_profile(path: Path, title: str, top: int) -> None:
    stats = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    buckets: dict[str, float] = defaultdict(float)
    for key, entry in raw.items():
        buckets[bucket_of(key)] += entry[2]
    print(f"\n== cProfile, {title}")
    for name, seconds in sorted(buckets.items(), key=lambda kv: -kv[1]):
        print(f"{name:<46}{seconds:>8.2f} s{seconds / total:>8.1%}")
    print(f"\ntop {top} by own time:")
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--threads", type=int, default=4, help="0: skip the threaded pass")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args(argv)
    cfg = Config(
        n=args.n,
        batch=args.batch,
        threads=max(args.threads, 1),
        latency_samples=2,
        backends=(args.backend,),
        pg_server=args.pg_server.rstrip("/"),
        json_path=BENCH_DIR / "results" / "unused.json",
        workarounds=True,
    )
    enqueue_pass(args.backend, cfg)
    statement_pass(args.backend, cfg, 1)
    if args.threads > 0:
        statement_pass(args.backend, cfg, args.threads)
    for what in ("enqueue", "claim"):
        out = profile_pass(args.backend, cfg, what, args.top)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
