"""The database-side figures of one measurement, read by every adapter the same way.

- Phase boundaries: an untimed ``CHECKPOINT`` before each timed phase (so no system pays for
  a checkpoint another one triggered, and every one starts with the same full-page-write
  state), and the WAL position (``pg_current_wal_lsn()``) at the start and end of each timed
  phase. ``compare.py`` turns the positions into WAL bytes: the raw difference, and the part
  of it written for this database (``pg_walinspect``).
- Footprint: ``pg_total_relation_size`` (heap, TOAST and indexes) of every table the system
  made, read when the drain ends — before any clean-up a worker might do on shutdown.
- Depth: how many jobs the system actually held leased at once, took per claim and finished
  per completion flush, read afterwards from its own tables (each adapter gives the SQL). A
  job counts as leased from the commit of its claim to the commit of its completion, so jobs
  waiting in a completion buffer count too: that is what the database holds.
- The load average at the end of the timed drain, from ``os.getloadavg()``.
- CPU over the timed drain: the adapter process's own (``time.process_time()``: every thread
  of the system's worker, which runs in this process) and the whole host's busy time
  (``/proc/stat``: everything but idle and iowait, every core). On a quiet host the
  difference is the server's work; per job, the two say where a system's time goes and how
  far 2 cores can take it (host busy cores near the core count: CPU-bound).

Standard library and psycopg only (the oban-py adapter runs this from its own environment).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

# Every table (partitioned ones through their partitions, counted once) outside the catalogs.
FOOTPRINT_SQL = """
SELECT n.nspname || '.' || c.relname, pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%'
  AND n.nspname NOT LIKE 'pg\\_temp%'
ORDER BY 2 DESC
"""


def _execute(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


def current_lsn(url: str) -> str:
    return str(_execute(url, "SELECT pg_current_wal_lsn()")[0][0])


def checkpoint(url: str) -> None:
    _execute(url, "CHECKPOINT")


def host_busy_s() -> float | None:
    """Seconds every core of the host spent busy since boot (``/proc/stat``: not idle, not
    waiting on I/O); ``None`` where there is no ``/proc``."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal (guest time is inside user)
    ticks = [int(value) for value in fields[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def footprint(url: str) -> dict[str, int]:
    """Bytes per table (heap + TOAST + indexes), largest first."""
    return {name: int(size) for name, size in _execute(url, FOOTPRINT_SQL)}


@dataclass
class Probe:
    """Collects one measurement's phase boundaries; :meth:`as_json` is its part of the result."""

    url: str
    lsn: dict[str, str]
    tables: dict[str, int]
    load: tuple[float, float, float] | None = None
    cpu: dict[str, float | None] | None = None
    _cpu_start: tuple[float, float, float | None] = (0.0, 0.0, None)

    @classmethod
    def open(cls, url: str) -> Probe:
        return cls(url, {}, {})

    def before_enqueue(self) -> None:
        checkpoint(self.url)
        self.lsn["enqueue_start"] = current_lsn(self.url)

    def after_enqueue(self) -> None:
        self.lsn["enqueue_end"] = current_lsn(self.url)

    def before_process(self) -> None:
        checkpoint(self.url)
        self.lsn["process_start"] = current_lsn(self.url)
        self._cpu_start = (time.perf_counter(), time.process_time(), host_busy_s())

    def after_process(self) -> None:
        """At the end of the timed drain, before the worker stops."""
        wall, client, host = time.perf_counter(), time.process_time(), host_busy_s()
        self.lsn["process_end"] = current_lsn(self.url)
        self.load = os.getloadavg()
        wall0, client0, host0 = self._cpu_start
        host_s = None if host is None or host0 is None else host - host0
        self.cpu = {
            "wall_s": wall - wall0,
            "client_s": client - client0,
            "host_s": host_s,
            "cores": float(os.cpu_count() or 0),
        }
        self.tables = footprint(self.url)

    def as_json(self) -> dict[str, Any]:
        return {
            "lsn": self.lsn,
            "table_bytes": sum(self.tables.values()),
            "tables": self.tables,
            "load_1m": self.load[0] if self.load else None,
            "load": list(self.load) if self.load else None,
            "cpu": self.cpu,
        }


# --- depth -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DepthSql:
    """Where one system's tables show its claims, its completion flushes and its leases.

    - ``claims``: one row per claim transaction, its job count;
    - ``flushes``: one row per completion transaction, its job count;
    - ``leases``: one row per lease start (+1) and end (-1), in commit order as far as the
      system's tables tell it (a sequence or a timestamp): ``(order_key, delta)``.
    """

    claims: str
    flushes: str
    leases: str


def _sizes(rows: Iterable[tuple[Any, ...]]) -> list[int]:
    return [int(row[0]) for row in rows]


def max_open(deltas: Iterable[int]) -> int:
    """The highest running sum of +1/-1 steps: most jobs leased at once."""
    running = peak = 0
    for delta in deltas:
        running += delta
        peak = max(peak, running)
    return peak


def _summary(sizes: Sequence[int]) -> dict[str, float | int]:
    if not sizes:
        return {"count": 0, "jobs": 0, "mean": 0.0, "median": 0.0, "max": 0}
    return {
        "count": len(sizes),
        "jobs": sum(sizes),
        "mean": sum(sizes) / len(sizes),
        "median": statistics.median(sizes),
        "max": max(sizes),
    }


def depth(url: str, sql: DepthSql) -> dict[str, Any]:
    """Claim depth as reached, not as configured (see the module docstring)."""
    with psycopg.connect(url, autocommit=True) as conn:
        claims = _sizes(conn.execute(sql.claims).fetchall())
        flushes = _sizes(conn.execute(sql.flushes).fetchall())
        deltas = [int(row[1]) for row in conn.execute(sql.leases).fetchall()]
    return {
        "max_leased": max_open(deltas),
        "claim": _summary(claims),
        "flush": _summary(flushes),
        # Jobs whose completion the tables still show: below N, the figures cover only part
        # of the drain (awa prunes drained segments) and are left out of the medians.
        "covered": sum(flushes),
    }
