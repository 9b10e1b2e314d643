"""The overview's charts' data: per minute over the last hour, the outcomes recorded
(successes, failed attempts, dead letters) and the run time (lease to success of the same
attempt) of the successes, from the audit rows of those events.

Pure: audit rows in, columns out (uPlot's shape: the x column in Unix seconds, then one
column per series, ``None`` where a minute has no value)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from ledger.views.audit_query import AuditRow

MINUTES = 60
EVENTS = ("job_leased", "job_succeeded", "job_failed", "job_dead_lettered")
"""The audit events the charts are computed from."""


class Series(NamedTuple):
    minutes: list[int]
    """Each bucket's start, Unix seconds."""
    succeeded: list[int]
    failed: list[int]
    dead: list[int]
    run_p50_s: list[float | None]
    run_p95_s: list[float | None]

    def columns(self) -> dict[str, Any]:
        return self._asdict()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def per_minute(rows: Sequence[AuditRow], now: datetime, minutes: int = MINUTES) -> Series:
    """Bucket ``rows`` (oldest first) into the ``minutes`` whole minutes up to ``now``'s."""
    last = now.replace(second=0, microsecond=0)
    first = last - timedelta(minutes=minutes - 1)
    starts = [first + timedelta(minutes=i) for i in range(minutes)]
    counts = {name: [0] * minutes for name in EVENTS}
    run_times: list[list[float]] = [[] for _ in range(minutes)]
    leased_at: dict[tuple[UUID, int | None, int | None], datetime] = {}
    for row in rows:
        key = (row.job_id, row.run_number, row.attempt)
        if row.event == "job_leased":
            leased_at[key] = row.at
        index = int((row.at - first) // timedelta(minutes=1))
        if not 0 <= index < minutes or row.event not in counts:
            continue
        counts[row.event][index] += 1
        if row.event == "job_succeeded" and key in leased_at:
            run_times[index].append((row.at - leased_at[key]).total_seconds())
    return Series(
        minutes=[int(start.timestamp()) for start in starts],
        succeeded=counts["job_succeeded"],
        failed=counts["job_failed"],
        dead=counts["job_dead_lettered"],
        run_p50_s=[_percentile(v, 0.5) if v else None for v in run_times],
        run_p95_s=[_percentile(v, 0.95) if v else None for v in run_times],
    )
