"""``stats``: queue counts, throughput windows, oldest due job, run-time percentiles.

Computed on read, not a stored projection: every figure is a small aggregate over an indexed
view (counts by status and type from ``jl_queue``; the windows and run times from the tracked
``jl_audit``, through its ``(event, at)`` and ``(job_id, position)`` indexes), and windows
relative to *now* cannot be kept current by events alone. All reads share one snapshot.
:func:`summarise` is the pure part.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

import msgspec

from ledger.core.times import from_us, to_us
from ledger.store.store import Store
from ledger.views.audit import PROJECTION as AUDIT
from ledger.views.stream_events import TailPosition

WINDOWS_S = (300, 3600)
"""Throughput windows: the last 5 minutes and the last hour."""
RUN_TIME_WINDOW_S = 3600
"""Run-time percentiles are over the successes of the last hour."""


class Window(msgspec.Struct, frozen=True):
    """Events in the last ``seconds``: successes, failed attempts, dead-lettered jobs."""

    seconds: int
    succeeded: int
    failed: int
    dead: int


class RunTime(msgspec.Struct, frozen=True):
    """One job type's run time (lease → success of the same attempt), nearest-rank."""

    job_type: str
    count: int
    p50_s: float
    p95_s: float


class Stats(msgspec.Struct, frozen=True):
    """The ledger's figures at ``at`` (audit-derived ones as of ``audit_position``)."""

    at: datetime
    by_status: dict[str, int]
    by_type: dict[str, dict[str, int]]
    windows: list[Window]
    oldest_pending_age_s: float | None
    run_times: list[RunTime]
    run_time_window_s: int
    audit_position: int
    audit_lag: int
    schedules: dict[str, int] = msgspec.field(default_factory=dict)
    """Cron schedules by status (``active``, ``paused``, ``removed``)."""
    next_schedule: str | None = None
    """The active schedule whose slot comes next (``None``: none is active)."""
    next_schedule_slot: datetime | None = None
    """That slot (a due one not fired yet may be in the past)."""


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q ≤ 1) of non-empty ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarise(
    now: datetime,
    *,
    counts: Iterable[tuple[str, str, int]],
    windows: dict[int, dict[str, int]],
    oldest_due_us: int | None,
    run_times_us: Iterable[tuple[str, int]],
    audit_position: int,
    audit_lag: int,
    schedules: Iterable[tuple[str, int]] = (),
    next_schedule: tuple[str, int] | None = None,
) -> Stats:
    """Assemble the figures from the rows read (pure)."""
    by_status: dict[str, int] = {}
    by_type: dict[str, dict[str, int]] = {}
    for status, job_type, n in counts:
        by_status[status] = by_status.get(status, 0) + n
        by_type.setdefault(job_type, {})[status] = n
    durations: dict[str, list[float]] = {}
    for job_type, micros in run_times_us:
        durations.setdefault(job_type, []).append(micros / 1e6)
    return Stats(
        at=now,
        by_status=dict(sorted(by_status.items())),
        by_type={t: dict(sorted(s.items())) for t, s in sorted(by_type.items())},
        windows=[
            Window(
                seconds,
                events.get("job_succeeded", 0),
                events.get("job_failed", 0),
                events.get("job_dead_lettered", 0),
            )
            for seconds, events in sorted(windows.items())
        ],
        oldest_pending_age_s=(
            None if oldest_due_us is None else (to_us(now) - oldest_due_us) / 1e6
        ),
        run_times=[
            RunTime(t, len(v), percentile(v, 0.5), percentile(v, 0.95))
            for t, v in sorted(durations.items())
        ],
        run_time_window_s=RUN_TIME_WINDOW_S,
        audit_position=audit_position,
        audit_lag=audit_lag,
        schedules=dict(sorted(schedules)),
        next_schedule=None if next_schedule is None else next_schedule[0],
        next_schedule_slot=None if next_schedule is None else from_us(next_schedule[1]),
    )


def collect(store: Store, now: datetime, *, org: str | None = None) -> Stats:
    """Read the figures in one snapshot of ``store`` (the audit as far as it is caught up);
    with ``org``, of that org's jobs only (every query filtered by it)."""
    now_us = to_us(now)
    suffix, scope = ("", {}) if org is None else ("_of_org", {"org": org})
    with store.read_snapshot() as tables:
        at = tables.tail_positions().get(AUDIT.name, TailPosition())
        lag = tables.count_after(at)
        counts = [
            (row["status"], row["job_type"], int(row["n"]))
            for row in tables.fetch("queue_counts_by_type" + suffix, scope)
        ]
        windows = {
            seconds: {
                row["event"]: int(row["n"])
                for row in tables.fetch(
                    "audit_throughput" + suffix, {"since": now_us - seconds * 10**6, **scope}
                )
            }
            for seconds in WINDOWS_S
        }
        [oldest] = tables.fetch("queue_oldest_due" + suffix, {"now": now_us, **scope})
        run_times = [
            (row["job_type"], int(row["micros"]))
            for row in tables.fetch(
                "audit_run_times" + suffix,
                {"since": now_us - RUN_TIME_WINDOW_S * 10**6, **scope},
            )
        ]
        schedules = [
            (row["status"], int(row["n"]))
            for row in tables.fetch("schedules_counts" + suffix, scope)
        ]
        coming = [
            (row["name"], int(row["next_slot"]))
            for row in tables.fetch("schedules_next" + suffix, scope)
        ]
    oldest_us = None if oldest["run_at"] is None else int(oldest["run_at"])
    return summarise(
        now,
        counts=counts,
        windows=windows,
        oldest_due_us=oldest_us,
        run_times_us=run_times,
        audit_position=at.position,
        audit_lag=lag,
        schedules=schedules,
        next_schedule=coming[0] if coming else None,
    )
