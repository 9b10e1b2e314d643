"""What every adapter of ``bench/compare.py`` shares: arguments, timing, draining, the result line.

An adapter is a script run in a fresh process (``python bench/peers/<system>_adapter.py --url
… --n … --settings '{…}'``) against a database that ``compare.py`` made for it alone. It bulk
enqueues N no-op jobs with the payload ``{"i": i}`` (timed), runs ``ANALYZE`` (untimed),
processes them with the system's own async worker configured by ``--settings`` (timed from
worker start to the last completion seen in the system's own tables), verifies that every job
finished, counts the history and state rows kept, reads its claim depth and footprint
(:mod:`probe`), and prints one line ``COMPARE-RESULT {json}`` on stdout.

This module needs only the standard library and psycopg 3, because the oban-py adapter imports
it from a virtual environment of its own (oban-py needs Python >= 3.12; the project runs 3.11).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

RESULT_MARK = "COMPARE-RESULT "
# A drain that makes no progress for this long has lost jobs (or the system is wedged): fail
# loudly rather than wait for ever. Generous, because some peers pause for seconds on purpose.
STALL_S = 90.0
# How often the in-process handler tally is checked: free (no database round trip).
TALLY_POLL_S = 0.002
# How often the system's own tables are counted once every handler has run. Only the last few
# completions are still in flight by then, so the polls barely load the server.
DB_POLL_S = 0.005


class JobsLostError(RuntimeError):
    """Fewer jobs finished than were enqueued: the run is invalid and must fail loudly."""


def payload(i: int) -> dict[str, int]:
    """Job ``i``'s payload, the same for every system (PgQueuer gets it as JSON bytes)."""
    return {"i": i}


@dataclass(frozen=True)
class AdapterArgs:
    url: str
    n: int
    settings: dict[str, Any]  # the configuration's knobs, as compare.py declares them
    wakeup_samples: int


@dataclass
class Measurement:
    """One configuration's figures for one round. Seconds are wall-clock ``perf_counter`` spans.

    ``history_rows``: rows recording past transitions of the N jobs (events, log rows), the
    row holding a job's current state excluded; ``state_rows``: those current-state rows kept
    after the drain (a queue row, a job row, a terminal record).
    """

    system: str
    version: str
    n: int
    enqueue_s: float
    process_s: float
    steady_s: float  # from the 10% to the 90% handler completion
    finished: int
    handled: int
    history_rows: int
    state_rows: int
    probe: dict[str, Any]
    depth: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["enqueue_jobs_per_s"] = self.n / self.enqueue_s
        out["process_jobs_per_s"] = self.n / self.process_s
        out["steady_jobs_per_s"] = STEADY_SHARE * self.n / self.steady_s
        out["history_rows_per_job"] = self.history_rows / self.n
        out["state_rows_per_job"] = self.state_rows / self.n
        out["table_bytes_per_job"] = self.probe["table_bytes"] / self.n
        out["load_1m"] = self.probe["load_1m"]
        cpu = self.probe.get("cpu") or {}
        if cpu.get("client_s") is not None:
            out["client_cpu_us_per_job"] = cpu["client_s"] / self.n * 1e6
        if cpu.get("host_s") is not None:
            out["host_cpu_us_per_job"] = cpu["host_s"] / self.n * 1e6
            out["host_busy_cores"] = cpu["host_s"] / max(cpu["wall_s"], 1e-9)
        whole = self.depth["covered"] >= self.n  # else: see probe.depth
        out["max_leased"] = self.depth["max_leased"] if whole else None
        out["claim_jobs_mean"] = self.depth["claim"]["mean"] if whole else None
        out["flush_jobs_mean"] = self.depth["flush"]["mean"] if whole else None
        return out


# The steady-state rate: completions between these two fractions of N, over their time span,
# so that worker start-up and the drain's tail weigh on the whole-drain rate only.
STEADY_FROM, STEADY_TO = 0.1, 0.9
STEADY_SHARE = STEADY_TO - STEADY_FROM


def parse_args() -> AdapterArgs:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="database of this run (made for it alone)")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--settings", type=json.loads, default={}, help="the knobs, as JSON")
    parser.add_argument("--wakeup-samples", type=int, default=50)
    ns = parser.parse_args()
    return AdapterArgs(ns.url, ns.n, ns.settings, ns.wakeup_samples)


def emit(measurement: Measurement) -> None:
    """Print the result line the parent looks for (libraries may log freely around it)."""
    print(RESULT_MARK + json.dumps(measurement.as_json()), flush=True)


def log(message: str) -> None:
    # stderr, so that the parent can show it on failure without mistaking it for a result.
    print(message, file=sys.stderr, flush=True)


def analyze(url: str) -> None:
    """Fresh planner statistics for every table, untimed, after every enqueue phase.

    Without them some peers crawl for a minute or pick a bad index mid-run, and the figures
    would measure autovacuum's timing instead of the queues.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def scalar(url: str, sql: str, params: Sequence[Any] | None = None) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


class Tally:
    """Handler invocations, counted and timestamped in process (``perf_counter``, appended in
    call order). Thread-safe: some runtimes call from threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0
        self.times: list[float] = []

    def hit(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self.value += 1
            self.times.append(now)

    def steady_s(self, n: int) -> float:
        """Seconds from the ``STEADY_FROM`` to the ``STEADY_TO`` share of ``n`` completions."""
        times = sorted(self.times[:n])
        first = times[max(0, math.ceil(STEADY_FROM * n) - 1)]
        last = times[max(0, math.ceil(STEADY_TO * n) - 1)]
        return max(last - first, 1e-9)


class DbCounter:
    """Counts finished jobs with one SQL query on a connection of its own (autocommit)."""

    def __init__(self, url: str, sql: str) -> None:
        self._url = url
        self._sql = sql
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def open(self) -> None:
        self._conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)

    async def count(self) -> int:
        assert self._conn is not None, "open() first"
        cur = await self._conn.execute(self._sql)
        row = await cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


async def _wait_progress(
    read: Callable[[], Awaitable[int]], target: int, poll_s: float, what: str
) -> None:
    last, last_change = -1, time.monotonic()
    while True:
        value = await read()
        if value >= target:
            return
        now = time.monotonic()
        if value != last:
            last, last_change = value, now
        elif now - last_change > STALL_S:
            raise JobsLostError(f"{what}: stuck at {value} of {target} for {STALL_S:.0f} s")
        await asyncio.sleep(poll_s)


async def drain(tally: Tally, n: int, finished: Callable[[], Awaitable[int]]) -> None:
    """Return when all ``n`` jobs are finished in the system's own tables.

    First wait for every handler to have run (an in-process counter: no load on the server
    while the worker races), then poll the tables until the last completion is committed.
    """

    async def handled() -> int:
        return tally.value

    await _wait_progress(handled, n, TALLY_POLL_S, "handlers run")
    await _wait_progress(finished, n, DB_POLL_S, "jobs finished in the database")


def verify(system: str, n: int, finished: int, unfinished: int = 0) -> None:
    """Fail loudly unless exactly ``n`` jobs finished and none is left behind."""
    if finished != n or unfinished:
        raise JobsLostError(
            f"{system}: {finished} of {n} jobs finished, {unfinished} left unfinished"
        )


def timed() -> float:
    return time.perf_counter()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
