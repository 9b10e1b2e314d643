"""What ``compare.py`` prints and writes: medians with their ranges, each peer's best, goals.

Every figure is the median over the rounds with the rounds' min-max beside it, so a reader
sees the spread as well as the middle. jobledger is compared with each peer's best
configuration (by median end-to-end jobs/s), at the same declared claim depth
(``compare_configs.matching_reference``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compare_configs import REFERENCE, Config, matching_reference

# Figures kept per configuration in the JSON's medians (the result keys of one round).
FIGURES = (
    "enqueue_jobs_per_s",
    "process_jobs_per_s",
    "steady_jobs_per_s",
    "load_1m",
    "max_leased",
    "claim_jobs_mean",
    "flush_jobs_mean",
    "wal_bytes_per_job",
    "wal_bytes_raw_per_job",
    "table_bytes_per_job",
    "history_rows_per_job",
    "state_rows_per_job",
    "client_cpu_us_per_job",
    "host_cpu_us_per_job",
    "host_busy_cores",
    "wall_s",
)
WAKEUP = ("wakeup_p50_ms", "wakeup_p95_ms")
SPEEDUP_GOAL = 1.5
COST_GOAL = 1.25


@dataclass
class Outcome:
    """Everything one configuration produced over the rounds."""

    config: Config
    rounds: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None

    def values(self, key: str) -> list[float]:
        found = [r[key] for r in self.rounds if r.get(key) is not None]
        return found + [r["extra"][key] for r in self.rounds if key in r.get("extra", {})]

    def median(self, key: str) -> float | None:
        values = self.values(key)
        return statistics.median(values) if values else None

    def span(self, key: str) -> tuple[float, float] | None:
        values = self.values(key)
        return (min(values), max(values)) if values else None


def number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def with_range(outcome: Outcome, key: str, digits: int = 0) -> str:
    """``median (min-max)``; the range only when there is more than one round."""
    span = outcome.span(key)
    text = number(outcome.median(key), digits)
    if span and len(outcome.values(key)) > 1:
        text += f" ({number(span[0], digits)}-{number(span[1], digits)})"
    return text


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}x"


def render(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def measured(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.rounds]


def depth_text(config: Config) -> str:
    return "none" if config.depth is None else f"{config.depth:,}"


def throughput_table(outcomes: Sequence[Outcome]) -> str:
    rows = [
        [
            "configuration",
            "depth",
            "rounds",
            "process jobs/s",
            "steady jobs/s",
            "enqueue jobs/s",
            "load 1m",
        ]
    ]
    for o in measured(outcomes):
        rows.append(
            [
                o.config.label,
                depth_text(o.config),
                str(len(o.rounds)),
                with_range(o, "process_jobs_per_s"),
                with_range(o, "steady_jobs_per_s"),
                with_range(o, "enqueue_jobs_per_s"),
                with_range(o, "load_1m", 1),
            ]
        )
    return render(rows)


def cost_table(outcomes: Sequence[Outcome]) -> str:
    rows = [
        [
            "configuration",
            "depth",
            "max leased",
            "jobs/claim",
            "jobs/flush",
            "WAL B/job",
            "table B/job",
            "history rows/job",
            "state rows/job",
        ]
    ]
    for o in measured(outcomes):
        rows.append(
            [
                o.config.label,
                depth_text(o.config),
                with_range(o, "max_leased"),
                with_range(o, "claim_jobs_mean", 1),
                with_range(o, "flush_jobs_mean", 1),
                with_range(o, "wal_bytes_per_job"),
                with_range(o, "table_bytes_per_job"),
                number(o.median("history_rows_per_job"), 2),
                number(o.median("state_rows_per_job"), 2),
            ]
        )
    return render(rows)


def cpu_table(outcomes: Sequence[Outcome]) -> str:
    """Where each configuration's drain spent CPU: the system's own process, the whole host
    (on a quiet host, the rest is the server), and how many cores were busy on average."""
    rows = [["configuration", "client CPU us/job", "host CPU us/job", "host busy cores"]]
    for o in measured(outcomes):
        rows.append(
            [
                o.config.label,
                with_range(o, "client_cpu_us_per_job"),
                with_range(o, "host_cpu_us_per_job"),
                with_range(o, "host_busy_cores", 2),
            ]
        )
    return render(rows)


@dataclass(frozen=True)
class Pairing:
    """A peer's best configuration and the jobledger ones held against it: ``reference`` at
    the same declared depth (the goal's comparison), ``shallower`` the fastest jobledger one
    that reached no deeper than the peer did (declared depths do not bound the same thing in
    every system: see bench/COMPARE.md)."""

    peer: Outcome
    reference: Outcome | None
    shallower: Outcome | None

    def figure(self, key: str, ours: Outcome | None = None) -> tuple[float | None, float | None]:
        mine = ours or self.reference
        return (mine.median(key) if mine else None), self.peer.median(key)

    def as_json(self) -> dict[str, Any]:
        keys = (
            "process_jobs_per_s",
            "steady_jobs_per_s",
            "wal_bytes_per_job",
            "table_bytes_per_job",
            "max_leased",
        )
        shallower = self.shallower
        return {
            "peer": self.peer.config.system.name,
            "peer_config": self.peer.config.key,
            "jobledger_config": self.reference.config.key if self.reference else None,
            **{f"jobledger_{k}": self.figure(k)[0] for k in keys},
            **{f"peer_{k}": self.figure(k)[1] for k in keys},
            "jobledger_reached_no_deeper_config": shallower.config.key if shallower else None,
            "jobledger_reached_no_deeper_process_jobs_per_s": (
                shallower.median("process_jobs_per_s") if shallower else None
            ),
        }


def _fastest(rows: Sequence[Outcome]) -> Outcome | None:
    return max(rows, key=lambda o: o.median("process_jobs_per_s") or 0, default=None)


def pairings(outcomes: Sequence[Outcome]) -> list[Pairing]:
    done = measured(outcomes)
    references = [o for o in done if o.config.system.name == REFERENCE]
    by_config = {o.config.key: o for o in references}
    found = []
    for system in dict.fromkeys(o.config.system.name for o in done if o not in references):
        best = _fastest([o for o in done if o.config.system.name == system])
        assert best is not None
        reached = best.median("max_leased")
        match = matching_reference(best.config, reached, [o.config for o in references])
        shallower = _fastest(
            [o for o in references if (o.median("max_leased") or 0) <= (reached or 0)]
        )
        found.append(Pairing(best, by_config.get(match.key) if match else None, shallower))
    return found


def best_table(pairs: Sequence[Pairing]) -> str:
    rows = [
        [
            "peer's best configuration",
            "jobs/s",
            "leased",
            "jobledger, same declared depth",
            "leased",
            "jobs/s",
            "jl ÷ peer",
            "steady",
            "WAL",
            "table",
            "jobledger leased ≤ peer's",
            "jl ÷ peer",
        ]
    ]
    for pair in pairs:
        ours, theirs = pair.figure("process_jobs_per_s")
        low = pair.shallower
        rows.append(
            [
                pair.peer.config.label,
                number(theirs),
                number(pair.peer.median("max_leased")),
                pair.reference.config.label if pair.reference else "- (none measured)",
                number(pair.reference.median("max_leased") if pair.reference else None),
                number(ours),
                ratio(ours, theirs),
                ratio(*pair.figure("steady_jobs_per_s")),
                ratio(*pair.figure("wal_bytes_per_job")),
                ratio(*pair.figure("table_bytes_per_job")),
                low.config.label if low else "- (none that shallow)",
                ratio(*pair.figure("process_jobs_per_s", low)) if low else "—",
            ]
        )
    return render(rows)


def pooled(outcomes: Sequence[Outcome], system: str, key: str) -> list[float]:
    return [v for o in measured(outcomes) if o.config.system.name == system for v in o.values(key)]


def enqueue_table(outcomes: Sequence[Outcome]) -> str:
    """Bulk enqueue does not depend on the worker's knobs: every round of a system counts."""
    systems = list(dict.fromkeys(o.config.system.name for o in measured(outcomes)))
    ours = pooled(outcomes, REFERENCE, "enqueue_jobs_per_s")
    reference = statistics.median(ours) if ours else None
    rows = [["system", "measurements", "enqueue jobs/s", "min-max", "jl ÷ system"]]
    for system in systems:
        values = pooled(outcomes, system, "enqueue_jobs_per_s")
        middle = statistics.median(values)
        rows.append(
            [
                system,
                str(len(values)),
                number(middle),
                f"{number(min(values))}-{number(max(values))}",
                "—" if system == REFERENCE else ratio(reference, middle),
            ]
        )
    return render(rows)


def goal_lines(
    outcomes: Sequence[Outcome], pairs: Sequence[Pairing], concurrency: int
) -> list[str]:
    """Issue 13's bar, against this run's medians (only what it measured)."""
    checks: list[tuple[str, bool]] = []
    for pair in pairs:
        ours, theirs = pair.figure("process_jobs_per_s")
        checks.append(
            (
                f"end-to-end ≥ {SPEEDUP_GOAL}x {pair.peer.config.label} at C={concurrency} "
                f"({ratio(ours, theirs)})",
                ours is not None and theirs is not None and ours >= SPEEDUP_GOAL * theirs,
            )
        )
        if pair.peer.config.system.name == "pgqueuer":
            for key, what in (("wal_bytes_per_job", "WAL"), ("table_bytes_per_job", "table")):
                a, b = pair.figure(key)
                checks.append(
                    (
                        f"{what} bytes/job ≤ {COST_GOAL}x PgQueuer's ({ratio(a, b)})",
                        a is not None and b is not None and a <= COST_GOAL * b,
                    )
                )
    enqueued = pooled(outcomes, REFERENCE, "enqueue_jobs_per_s")
    awa = pooled(outcomes, "awa-pg", "enqueue_jobs_per_s")
    if enqueued and awa:
        a, b = statistics.median(enqueued), statistics.median(awa)
        checks.append((f"bulk enqueue ≥ awa-pg's COPY ({ratio(a, b)})", a >= b))
    history = pooled(outcomes, REFERENCE, "history_rows_per_job")
    if history:
        checks.append(("≥ 3 durable events per job, every jobledger round", min(history) >= 3))
    wakeup = pooled(outcomes, REFERENCE, "wakeup_p50_ms")
    if wakeup:
        checks.append(("cross-process wake-up p50 < 20 ms", statistics.median(wakeup) < 20))
    return [f"  [{'met' if ok else 'NOT met'}] {text}" for text, ok in checks]


def wakeup_line(outcomes: Sequence[Outcome], samples: int) -> list[str]:
    p50, p95 = (pooled(outcomes, REFERENCE, key) for key in WAKEUP)
    if not p50 or not p95:
        return []
    return [
        f"jobledger cross-process wake-up: p50 {statistics.median(p50):.1f} ms, "
        f"p95 {statistics.median(p95):.1f} ms (medians of {len(p50)} rounds x {samples} samples)"
    ]


def settings_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """Per system, the settings every one of its configurations shares (the knobs that vary
    are in the configurations' labels)."""
    by_system: dict[str, list[Outcome]] = {}
    for o in measured(outcomes):
        by_system.setdefault(o.config.system.name, []).append(o)
    lines = []
    for system, rows in by_system.items():
        first = rows[0].rounds[0]
        fixed = {
            k: v
            for k, v in first["settings"].items()
            if all(r.rounds[0]["settings"].get(k) == v for r in rows)
        }
        line = f"  {system} {first['version']}: " + ", ".join(f"{k}={v}" for k, v in fixed.items())
        unlogged = sorted({t for r in rows for t in r.rounds[0].get("unlogged_tables") or []})
        if unlogged:
            line += f" (UNLOGGED, no jobs: {', '.join(unlogged)})"
        lines.append(line)
    return lines


def outcome_json(o: Outcome) -> dict[str, Any]:
    keys = FIGURES + WAKEUP
    return {
        "label": o.config.label,
        "system": o.config.system.name,
        "settings": o.config.options,
        "declared_depth": o.config.depth,
        "skipped": o.skipped,
        "failures": o.failures,
        "median": {k: v for k in keys if (v := o.median(k)) is not None},
        "min": {k: span[0] for k in keys if (span := o.span(k))},
        "max": {k: span[1] for k in keys if (span := o.span(k))},
        "rounds": o.rounds,
    }
