"""What ``jobledger bench`` reports: the figures, the facts needed to read them, as text."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .render import fields, scalar, table
from ledger.store.server import ANALYZE_QUEUE

WAKEUP = "(idle pool: enqueue commit to handler start)"


@dataclass
class BenchReport:
    """What one run measured, and the facts needed to read it."""

    database: str
    backend: str
    backend_version: str
    cores: int | None
    load_average: list[float]
    python: str
    jobledger: str
    n: int
    concurrency: int
    chunk: int
    follow_projections: bool
    """Whether the timed pool also kept the audit view caught up, from a thread."""
    analyzed: bool
    leftover_jobs: int
    """Bench jobs of an interrupted earlier run, worked (untimed) before this one's."""
    enqueue_s: float
    enqueue_jobs_per_s: float
    process_s: float
    process_jobs_per_s: float
    process_events: int
    process_events_per_s: float
    events_per_job: float
    wakeup_samples: int
    wakeup_p50_ms: float
    wakeup_p95_ms: float
    succeeded: int


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sample, as compare.py's."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def text_report(report: BenchReport) -> str:
    """The facts needed to read the figures, then the figures."""
    load = " ".join(f"{value:.2f}" for value in report.load_average)
    facts = [
        ("database", report.database),
        ("server", report.backend_version),
        (
            "machine",
            f"{report.cores} cores, load {load} before the run, Python {report.python}, "
            f"jobledger {report.jobledger}",
        ),
        (
            "run",
            f"{report.n:,} jobs, concurrency {report.concurrency}, enqueue in chunks of "
            f"{report.chunk:,}, {report.wakeup_samples} wake-up samples, audit followed: "
            f"{scalar(report.follow_projections)}",
        ),
    ]
    if report.analyzed:
        facts.append(("note", f"{ANALYZE_QUEUE} ran after the enqueue phase (untimed)"))
    if report.leftover_jobs:
        facts.append(
            ("note", f"{report.leftover_jobs:,} jobs of an interrupted run worked first (untimed)")
        )
    rows = [
        [
            "bulk enqueue (enqueue_many)",
            f"{report.enqueue_jobs_per_s:,.0f} jobs/s ({report.enqueue_s:.2f}s)",
        ],
        [
            "processing, pool start to all succeeded",
            f"{report.process_jobs_per_s:,.0f} jobs/s ({report.process_s:.2f}s)",
        ],
        [
            "job events appended while processing",
            f"{report.process_events_per_s:,.0f} events/s ({report.events_per_job:.2f} per job)",
        ],
        [f"wake-up p50 {WAKEUP}", f"{report.wakeup_p50_ms:.2f} ms"],
        [f"wake-up p95 {WAKEUP}", f"{report.wakeup_p95_ms:.2f} ms"],
    ]
    total = report.succeeded + report.wakeup_samples
    return (
        f"{fields(facts)}\n\n{table(['FIGURE', 'VALUE'], rows)}\n\n"
        f"all {total:,} bench jobs succeeded"
    )
