"""Core throughput and latency of the ledger, SQLite and PostgreSQL side by side, in one run.

Per backend it measures bulk enqueue, claim+succeed in batches (one thread, then several) and
single-job latency, each on a database of its own so that one phase's dead rows and history
cannot slow the next. It prints a table and writes the same figures as JSON.

    .venv/bin/python bench/bench_core.py [--n 20000] [--batch 100] [--threads 4]
        [--latency-samples 300] [--repeat 3] [--backends sqlite,postgres]
        [--pg-server postgresql://postgres@127.0.0.1:5432] [--json bench/results/core.json]
        [--no-workarounds]

It measures whatever ``ledger`` imports: ``PYTHONPATH=/path/to/other/tree`` benches another
checkout with the same harness (the report names the code's path and commit).

Every database it makes is its own (PostgreSQL: ``jl_bench_<random>``, dropped ``WITH (FORCE)``
even on error; SQLite: a file in a temporary directory), so it never touches real data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

import psycopg

import ledger as ledger_package
from ledger import Completion, EnqueueRequest, Ledger, SystemClock

JOB_TYPE = "bench"
BENCH_DIR = Path(__file__).resolve().parent
# The code measured: wherever ``ledger`` is imported from (PYTHONPATH can point at another tree).
CODE_ROOT = Path(ledger_package.__file__).resolve().parents[1]
DEFAULT_JSON = BENCH_DIR / "results" / "core.json"
BACKENDS = ("sqlite", "postgres")
# Chunk size of the "typical" bulk enqueue; the other row is the whole N in one transaction.
ENQUEUE_CHUNK = 1000
# Untimed rounds before latency sampling: psycopg prepares a statement server-side only after
# it has run it five times on a connection, and the pool opens connections lazily.
LATENCY_WARMUP = 20
# Lease long enough that no job of a run can expire mid-benchmark and be refused at succeed.
LEASE_S = 600.0
CELL = 16  # table column width: "12,345 ±12%"
# Which ledger bugs this run had to work around (see pool_workaround); reported with the figures.
WORKAROUNDS_APPLIED: set[str] = set()


class BenchError(RuntimeError):
    """A phase did not do what it must (lost or duplicated jobs): its figures are meaningless."""


@dataclass(frozen=True)
class Config:
    n: int
    batch: int
    threads: int
    latency_samples: int
    backends: tuple[str, ...]
    pg_server: str
    json_path: Path
    workarounds: bool
    repeat: int = 3


# --- databases ----------------------------------------------------------------------------------


def _pg_admin(server: str) -> psycopg.Connection[Any]:
    return psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5)


@contextmanager
def pg_database(server: str) -> Iterator[str]:
    """A new empty PostgreSQL database for one phase, dropped afterwards whatever happens."""
    name = f"jl_bench_{uuid.uuid4().hex[:12]}"
    with _pg_admin(server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        # FORCE: a thread that died mid-phase may still hold a pooled connection.
        with _pg_admin(server) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="jl_bench_") as tmp:
        yield f"sqlite:///{Path(tmp) / 'ledger.db'}"


def fresh_database(backend: str, cfg: Config) -> AbstractContextManager[str]:
    return pg_database(cfg.pg_server) if backend == "postgres" else sqlite_database()


def pool_workaround(ledger: Ledger) -> bool:
    """Stop eventsourcing re-running ``pool.open(wait=True)`` on every connection checkout.

    ``PostgresStore`` passes ``pool_open_timeout``, so each ``get_connection`` calls psycopg's
    ``ConnectionPool.wait()``, which blocks while fewer than ``pool_size`` connections are idle
    (any checkout by another thread) and fails ``assert not self._pool_full_event`` for a second
    concurrent waiter: threaded workers crash. The pool is already open after ``Ledger.open``,
    so dropping the timeout only skips that wait. The store no longer passes it; this stays so
    that older commits can be measured. Returns whether it changed anything.
    """
    datastore = getattr(ledger.store, "datastore", None)
    if getattr(datastore, "pool_open_timeout", None) is None:
        return False
    datastore.pool_open_timeout = None  # type: ignore[union-attr]
    return True


@contextmanager
def open_ledger(url: str, pool_size: int, workaround: bool = True) -> Iterator[Ledger]:
    ledger = Ledger.open(url, create=True, pool_size=pool_size)
    try:
        if workaround and pool_workaround(ledger):
            WORKAROUNDS_APPLIED.add("pg_pool_open_wait")
        ledger.define(JOB_TYPE)
        yield ledger
    finally:
        ledger.close()


def analyze(url: str) -> None:
    """Refresh PostgreSQL's statistics (untimed): right after a bulk load they still describe
    an empty table, and the claim plan chosen from them is not the one production gets."""
    if url.startswith("postgresql://"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")


def events_recorded(ledger: Ledger) -> int:
    """The highest notification id: deltas of it count events actually appended."""
    # Store declares no ``recorder`` in every version of the code this bench measures.
    recorder: Any = ledger.store.recorder  # type: ignore[attr-defined, unused-ignore]
    return int(recorder.max_notification_id() or 0)


# --- workloads ------------------------------------------------------------------------------------


def requests(start: int, count: int) -> list[EnqueueRequest]:
    # A small but not empty payload, like a real job's reference to its work.
    return [
        EnqueueRequest(JOB_TYPE, {"item": i, "url": f"https://example.test/items/{i}"})
        for i in range(start, start + count)
    ]


def enqueue_all(ledger: Ledger, n: int, chunk: int) -> float:
    """Enqueue ``n`` jobs in transactions of ``chunk``; returns jobs/s (request building
    excluded: it is the caller's cost, not the ledger's)."""
    chunks = [requests(start, min(chunk, n - start)) for start in range(0, n, chunk)]
    began = perf_counter()
    for part in chunks:
        ledger.enqueue_many(part)
    return n / (perf_counter() - began)


def work_until_empty(ledger: Ledger, worker_id: str, batch: int) -> int:
    """One worker: claim a batch, succeed it in one transaction, until nothing is claimable."""
    done = 0
    while claimed := ledger.claim(worker_id, limit=batch, lease_s=LEASE_S):
        leases = [state.lease for state in claimed]
        result = ledger.succeed_many([Completion(lease) for lease in leases if lease])
        if result.rejected or len(result.accepted) != len(claimed):
            raise BenchError(f"{worker_id}: succeed_many refused {result.rejected}")
        done += len(claimed)
    return done


def run_workers(ledger: Ledger, threads: int, batch: int) -> tuple[float, list[int]]:
    """Run ``threads`` workers released together; returns (seconds, jobs done per worker)."""
    done = [0] * threads
    errors: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        start.wait()
        try:
            done[index] = work_until_empty(ledger, f"bench-worker-{index}", batch)
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = perf_counter()
    for thread in pool:
        thread.join()
    elapsed = perf_counter() - began
    if errors:
        raise BenchError(f"a worker failed: {errors[0]!r}") from errors[0]
    return elapsed, done


def check_all_succeeded(ledger: Ledger, n: int, done: list[int]) -> None:
    counts = ledger.counts()
    if counts != {"succeeded": n} or sum(done) != n:
        raise BenchError(f"expected exactly {n} succeeded jobs, got {counts}, workers {done}")


def claim_throughput(ledger: Ledger, n: int, threads: int, batch: int) -> dict[str, float]:
    before = events_recorded(ledger)
    elapsed, done = run_workers(ledger, threads, batch)
    events = events_recorded(ledger) - before
    check_all_succeeded(ledger, n, done)
    return {
        "jobs_per_s": n / elapsed,
        "events_per_s": events / elapsed,
        "events_per_job": events / n,
        "seconds": elapsed,
        "max_worker_share": max(done) / n,
    }


def percentiles_ms(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": cuts[49] * 1e3, "p95": cuts[94] * 1e3, "p99": cuts[98] * 1e3}


def one_job_round(ledger: Ledger, i: int) -> tuple[float, float, float]:
    """Enqueue one job, claim it, succeed it: (enqueue, claim, succeed) seconds."""
    t0 = perf_counter()
    job_id = ledger.enqueue(JOB_TYPE, {"item": i}).job_id
    t1 = perf_counter()
    claimed = ledger.claim("bench-latency", limit=1, lease_s=LEASE_S)
    t2 = perf_counter()
    lease = claimed[0].lease if claimed else None
    if lease is None or lease.job_id != job_id:
        raise BenchError(f"claimed {claimed!r}, expected job {job_id}")
    ledger.succeed(lease)
    t3 = perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def latency(ledger: Ledger, samples: int) -> dict[str, dict[str, float]]:
    for i in range(LATENCY_WARMUP):
        one_job_round(ledger, -1 - i)
    rounds = [one_job_round(ledger, i) for i in range(samples)]
    return {
        "enqueue_ms": percentiles_ms([r[0] for r in rounds]),
        "claim_ms": percentiles_ms([r[1] for r in rounds]),
        "succeed_ms": percentiles_ms([r[2] for r in rounds]),
        "claim_succeed_ms": percentiles_ms([r[1] + r[2] for r in rounds]),
    }


# --- one backend ----------------------------------------------------------------------------------


def phase(
    backend: str, cfg: Config, pool_size: int, body: Callable[[str, Ledger], dict[str, Any]]
) -> dict[str, Any]:
    with (
        fresh_database(backend, cfg) as url,
        open_ledger(url, pool_size, cfg.workarounds) as ledger,
    ):
        return body(url, ledger)


def spread(values: list[float]) -> dict[str, Any]:
    """Median of repeated runs, with the extremes: on a shared 2-core VM fsync and CPU time
    vary from run to run by tens of percent, so one run alone proves little."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": values,
    }


def run_backend(backend: str, cfg: Config) -> dict[str, Any]:
    n, batch = cfg.n, cfg.batch
    chunk = min(ENQUEUE_CHUNK, n)

    def enqueue_then_claim(
        threads: int, enqueue_chunk: int
    ) -> Callable[[str, Ledger], dict[str, Any]]:
        def body(url: str, ledger: Ledger) -> dict[str, Any]:
            enqueue_rate = enqueue_all(ledger, n, enqueue_chunk)
            analyze(url)
            return {"enqueue": enqueue_rate, "claim": claim_throughput(ledger, n, threads, batch)}

        return body

    # Chunked enqueue feeds the one-thread claim run; one-transaction enqueue feeds the
    # threaded one, so each claim run starts from N fresh pending jobs. Repeats alternate the
    # two so that a slow spell of the machine does not land on one of them only.
    singles, multis = [], []
    for _ in range(cfg.repeat):
        singles.append(phase(backend, cfg, 2, enqueue_then_claim(1, chunk)))
        multis.append(phase(backend, cfg, cfg.threads + 1, enqueue_then_claim(cfg.threads, n)))
    return {
        "enqueue_chunked_jobs_per_s": spread([run["enqueue"] for run in singles]),
        "enqueue_one_txn_jobs_per_s": spread([run["enqueue"] for run in multis]),
        "claim_1_thread": {
            key: spread([run["claim"][key] for run in singles]) for key in singles[0]["claim"]
        },
        "claim_threads": {
            key: spread([run["claim"][key] for run in multis]) for key in multis[0]["claim"]
        },
        "latency": phase(
            backend, cfg, 2, lambda _url, ledger: latency(ledger, cfg.latency_samples)
        ),
    }


# --- machine and report ---------------------------------------------------------------------------


def pg_facts(server: str) -> dict[str, Any]:
    with _pg_admin(server) as conn:
        facts = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("server_version", "fsync", "synchronous_commit", "shared_buffers")
        }
        rtts = []
        for _ in range(200):
            began = perf_counter()
            conn.execute("SELECT 1")
            rtts.append(perf_counter() - began)
    # The floor under every statement: one client/server round trip on loopback.
    facts["select_1_round_trip_ms_p50"] = statistics.median(rtts) * 1e3
    return facts


def sqlite_facts() -> str:
    """The journal and sync mode the ledger's connections get: WAL (set by eventsourcing) and
    the library's default ``synchronous``, which the ledger does not change."""
    with tempfile.TemporaryDirectory(prefix="jl_bench_") as tmp:
        conn = sqlite3.connect(Path(tmp) / "probe.db")
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            conn.close()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"journal_mode={mode}, synchronous={names.get(sync, sync)}"


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=CODE_ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def git_commit() -> str | None:
    """HEAD, plus a digest of uncommitted changes to the measured code: figures from a
    modified tree must not pass for the commit's."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
        diff = _git("diff", "HEAD", "--", ":/ledger", ":/projections")
    except (OSError, subprocess.CalledProcessError):
        return None
    if not diff:
        return head
    return f"{head}+dirty-{hashlib.sha1(diff.encode()).hexdigest()[:8]}"


def machine_info(cfg: Config) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_settings": sqlite_facts(),
        "code": str(CODE_ROOT),
        "git_commit": git_commit(),
        "when": SystemClock().now().isoformat(timespec="seconds"),
        # Other work on a shared 2-core machine moves every figure: judge a run by this.
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    if "postgres" in cfg.backends:
        info["postgres"] = pg_facts(cfg.pg_server)
    return info


# (label, path into a backend's result, format, repeated: the path ends at a spread() dict)
Row = tuple[str, tuple[str, ...], str, bool]


def table_rows(cfg: Config) -> list[Row]:
    chunk = min(ENQUEUE_CHUNK, cfg.n)
    rows: list[Row] = [
        (f"enqueue_many, {chunk:,}/txn  jobs/s", ("enqueue_chunked_jobs_per_s",), ",.0f", True),
        (
            f"enqueue_many, {cfg.n:,} in 1 txn  jobs/s",
            ("enqueue_one_txn_jobs_per_s",),
            ",.0f",
            True,
        ),
    ]
    for key, who in (("claim_1_thread", "1 thread"), ("claim_threads", f"{cfg.threads} threads")):
        rows += [
            (f"claim+succeed {who}  jobs/s", (key, "jobs_per_s"), ",.0f", True),
            (f"claim+succeed {who}  events/s", (key, "events_per_s"), ",.0f", True),
            (f"claim+succeed {who}  events/job", (key, "events_per_job"), ".2f", True),
        ]
    for key, what in (
        ("enqueue_ms", "enqueue 1 job"),
        ("claim_succeed_ms", "claim+succeed 1 job"),
        ("claim_ms", "  of which claim"),
        ("succeed_ms", "  of which succeed"),
    ):
        rows += [
            (f"{what}  {p} ms", ("latency", key, p), ".2f", False) for p in ("p50", "p95", "p99")
        ]
    return rows


def dig(tree: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = tree
    for step in path:
        node = node[step]
    return node


def figure(tree: dict[str, Any], row: Row) -> float:
    """The headline number of a row: the median of a repeated figure, or the figure."""
    _, path, _, repeated = row
    return float(dig(tree, (*path, "median")) if repeated else dig(tree, path))


def cell(tree: dict[str, Any], row: Row) -> str:
    _, path, fmt, repeated = row
    text = f"{figure(tree, row):{fmt}}"
    if repeated:
        runs = dig(tree, path)
        half_range = (runs["max"] - runs["min"]) / 2 / runs["median"] if runs["median"] else 0
        text += f" ±{half_range:>3.0%}"
    return f"{text:>{CELL}}"


def ratios(results: dict[str, dict[str, Any]], cfg: Config) -> dict[str, float]:
    """PostgreSQL / SQLite for every figure (>1: PostgreSQL has more of it)."""
    if not all(b in results for b in BACKENDS):
        return {}
    return {
        row[0]: figure(results["postgres"], row) / figure(results["sqlite"], row)
        for row in table_rows(cfg)
        if not row[0].endswith("events/job")
    }


def render(report: dict[str, Any], cfg: Config) -> str:
    results, ratio = report["backends"], report["ratios_pg_over_sqlite"]
    names = [b for b in BACKENDS if b in results]
    width = max(len(label) for label, *_ in table_rows(cfg)) + 2
    head = f"{'':<{width}}" + "".join(f"{name:>{CELL}}" for name in names)
    lines = [head + (f"{'pg/sqlite':>11}" if ratio else ""), "-" * (len(head) + 11)]
    if ratio:
        lines.insert(
            0,
            f"median of {cfg.repeat} runs ± half their range for throughput; pg/sqlite: >1x"
            " means PostgreSQL is faster on jobs/s and events/s rows, slower on ms rows",
        )
    for row in table_rows(cfg):
        label = row[0]
        cells = "".join(cell(results[name], row) for name in names)
        tail = f"{ratio[label]:>10.2f}x" if label in ratio else ""
        lines.append(f"{label:<{width}}{cells}{tail}")
    return "\n".join([*machine_lines(report), "", *lines])


def machine_lines(report: dict[str, Any]) -> list[str]:
    m, p = report["machine"], report["params"]
    lines = [
        f"jobledger core bench  code {m['code']} at {m['git_commit'] or 'no git'}  {m['when']}",
        f"cores {m['cores']}  load {m['load_average_at_start']} -> {m['load_average_at_end']}"
        f"  Python {m['python']}  SQLite {m['sqlite']} ({m['sqlite_settings']})",
    ]
    if "postgres" in m:
        pg = m["postgres"]
        lines.append(
            f"PostgreSQL {pg['server_version']}  fsync={pg['fsync']}  "
            f"synchronous_commit={pg['synchronous_commit']}  shared_buffers={pg['shared_buffers']}"
            f"  SELECT 1 round trip p50 {pg['select_1_round_trip_ms_p50']:.3f} ms"
        )
    lines.append(
        f"N={p['n']:,}  batch={p['batch']}  threads={p['threads']}  "
        f"latency samples={p['latency_samples']}  repeat={p['repeat']}"
    )
    lines += [
        f"WARNING: worked around ledger bug {name} (see pool_workaround in bench_core.py)"
        for name in report["workarounds_applied"]
    ]
    return lines


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="jobs per throughput phase")
    parser.add_argument("--batch", type=int, default=100, help="claim limit = succeed_many size")
    parser.add_argument("--threads", type=int, default=4, help="workers in the threaded run")
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each throughput phase")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, dest="json_path")
    parser.add_argument(
        "--no-workarounds",
        action="store_false",
        dest="workarounds",
        help="run the store exactly as shipped (threaded PostgreSQL fails while the pool bug"
        " is there)",
    )
    args = parser.parse_args(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if not backends or set(backends) - set(BACKENDS):
        parser.error(f"--backends takes a comma list of {', '.join(BACKENDS)}")
    if min(args.n, args.batch, args.threads, args.repeat) < 1 or args.latency_samples < 2:
        parser.error("--n, --batch, --threads, --repeat must be >= 1, --latency-samples >= 2")
    return Config(
        n=args.n,
        batch=args.batch,
        threads=args.threads,
        latency_samples=args.latency_samples,
        backends=backends,
        pg_server=args.pg_server.rstrip("/"),
        json_path=args.json_path,
        workarounds=args.workarounds,
        repeat=args.repeat,
    )


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    report: dict[str, Any] = {"machine": machine_info(cfg), "params": asdict(cfg)}
    report["params"]["json_path"] = str(cfg.json_path)
    results: dict[str, dict[str, Any]] = {}
    for backend in cfg.backends:
        print(f"running {backend} ...", file=sys.stderr, flush=True)
        began = perf_counter()
        try:
            results[backend] = run_backend(backend, cfg)
        except BenchError as exc:
            print(f"FAILED on {backend}: {exc}", file=sys.stderr)
            return 1
        results[backend]["wall_s"] = perf_counter() - began
    report["backends"] = results
    report["ratios_pg_over_sqlite"] = ratios(results, cfg)
    report["workarounds_applied"] = sorted(WORKAROUNDS_APPLIED)
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(render(report, cfg), flush=True)
    cfg.json_path.parent.mkdir(parents=True, exist_ok=True)
    cfg.json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {cfg.json_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
