"""Worker pools' reports of themselves (``jl_pools``) and the ledger's health judged from them.

A pool's reporter (:mod:`ledger.maintenance.pool_reporter`) writes one :class:`PoolReport` on
an interval and removes it when the pool stops. The table is operational state, like
``jl_tracking``: it says what running processes are doing, not what happened, so no event
explains its rows and no projection covers it (``projections verify`` and the rebuilds never
read it).

Whether a pool is alive is judged by the reader at its own ``now`` (:func:`assess_pools`): a
pool whose last report is older than :data:`STALE_INTERVALS` of its own interval counts as
dead — stopped (SIGSTOP, a paused VM), killed, or cut off from the database. The report's
``last_seen_at`` is the reporting process's clock and ``now`` the reader's, so the hosts'
clocks must agree to well within an interval (NTP does); the margin of three intervals is
there for that and for a pass delayed by a busy database.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

import msgspec

from ledger.core.times import from_us, to_us
from ledger.store.store import Store

STALE_INTERVALS = 3
"""A pool silent for longer than this many of its report intervals counts as dead."""


class PoolReport(msgspec.Struct, frozen=True):
    """One pool's latest report (its ``jl_pools`` row)."""

    pool_id: str
    """The pool's worker id, ``<name>@<host>:<pid>``: the prefix of its claims' worker ids."""
    host: str
    pid: int
    name: str
    started_at: datetime
    last_seen_at: datetime
    interval_s: float
    """How often this pool reports: the unit its staleness is judged in."""
    concurrency: int
    in_flight: int
    """Jobs claimed and not yet recorded (buffered, running or being recorded)."""
    status: Literal["ok", "degraded"]
    """The pool's own verdict (:func:`ledger.runtime.health.assess`) when it reported."""
    reasons: list[str]
    version: str
    """The jobledger release the pool runs."""

    def stale(self, now: datetime) -> bool:
        """Whether the pool has been silent too long to count as alive at ``now``."""
        return now - self.last_seen_at > timedelta(seconds=STALE_INTERVALS * self.interval_s)


class PoolHealth(msgspec.Struct, frozen=True):
    """A pool's report and whether it was stale when judged."""

    report: PoolReport
    stale: bool


class LedgerHealth(msgspec.Struct, frozen=True):
    """``ok``, or ``degraded`` with every reason, judged at ``at`` from the pools' reports."""

    status: Literal["ok", "degraded"]
    reasons: list[str]
    at: datetime
    pools: list[PoolHealth]

    @property
    def live_pools(self) -> int:
        return sum(1 for pool in self.pools if not pool.stale)


def report_pool(store: Store, report: PoolReport) -> None:
    """Replace ``report.pool_id``'s row with ``report``."""
    store.write_operational(
        "pools_report",
        {
            "pool_id": report.pool_id,
            "host": report.host,
            "pid": report.pid,
            "name": report.name,
            "started_at": to_us(report.started_at),
            "last_seen_at": to_us(report.last_seen_at),
            "interval_s": report.interval_s,
            "concurrency": report.concurrency,
            "in_flight": report.in_flight,
            "status": report.status,
            "reasons": msgspec.json.encode(report.reasons).decode(),
            "version": report.version,
        },
    )


def remove_pool(store: Store, pool_id: str) -> bool:
    """Delete one pool's row; whether there was one."""
    return store.write_operational("pools_remove", {"pool_id": pool_id}) > 0


def prune_pools(store: Store, before: datetime) -> int:
    """Delete the rows of pools silent since before ``before``; how many."""
    return store.write_operational("pools_prune", {"before": to_us(before)})


def read_pools(store: Store) -> list[PoolReport]:
    """Every pool's latest report, by id."""
    return [
        PoolReport(
            pool_id=row["pool_id"],
            host=row["host"],
            pid=int(row["pid"]),
            name=row["name"],
            started_at=from_us(int(row["started_at"])),
            last_seen_at=from_us(int(row["last_seen_at"])),
            interval_s=float(row["interval_s"]),
            concurrency=int(row["concurrency"]),
            in_flight=int(row["in_flight"]),
            status="ok" if row["status"] == "ok" else "degraded",
            reasons=msgspec.json.decode(row["reasons"], type=list[str]),
            version=row["version"],
        )
        for row in store.read("pools_all")
    ]


def assess_pools(pools: list[PoolReport], now: datetime) -> LedgerHealth:
    """``degraded`` when no pool is alive, for each stale pool (counted dead), and for each
    live pool that reports itself degraded (with its reasons); else ``ok``."""
    judged = [PoolHealth(pool, pool.stale(now)) for pool in pools]
    reasons: list[str] = []
    if not any(not pool.stale for pool in judged):
        reasons.append("no live worker pool")
    for pool in judged:
        report = pool.report
        if pool.stale:
            silent_s = (now - report.last_seen_at).total_seconds()
            reasons.append(
                f"pool {report.pool_id} silent for {silent_s:.1f}s "
                f"(more than {STALE_INTERVALS} report intervals of {report.interval_s:g}s): "
                "counted dead"
            )
        elif report.status != "ok":
            reasons.append(f"pool {report.pool_id} degraded: {'; '.join(report.reasons)}")
    return LedgerHealth("degraded" if reasons else "ok", reasons, now, judged)
