"""``jobledger stats``: queue counts, throughput, oldest due job and run times."""

from __future__ import annotations

import click

from .database import Settings
from .read_target import open_reader
from .render import MISSING, echo_json, json_option, printable, table, when
from ledger.api.blocker_reads import HeldBack
from ledger.api.shaping import plain
from ledger.core.concurrency import LimitUse
from projections.stats import Stats


def _seconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3f}s"


def _limit_lines(limits: list[LimitUse]) -> list[str]:
    if not limits:
        return []
    rows = [[use.kind, use.name, str(use.limit), str(use.leased)] for use in limits]
    return ["", "concurrency limits", table(["KIND", "NAME", "LIMIT", "LEASED"], rows)]


def _text(stats: Stats, limits: list[LimitUse]) -> str:
    statuses = sorted({s for counts in stats.by_type.values() for s in counts})
    lines = [f"jobs: {sum(stats.by_status.values())}"]
    if stats.by_type:
        rows = [
            [job_type, *(str(counts.get(s, 0)) for s in statuses)]
            for job_type, counts in stats.by_type.items()
        ]
        rows.append(["(all)", *(str(stats.by_status.get(s, 0)) for s in statuses)])
        lines.append(table(["TYPE", *(s.upper() for s in statuses)], rows))
    lines.append("")
    lines.append(
        table(
            ["WINDOW", "SUCCEEDED", "FAILED", "DEAD"],
            [
                [f"{w.seconds // 60} min", str(w.succeeded), str(w.failed), str(w.dead)]
                for w in stats.windows
            ],
        )
    )
    lines.append(f"\noldest due pending job waiting: {_seconds(stats.oldest_pending_age_s)}")
    if stats.run_times:
        lines.append(f"\nrun time (successes in the last {stats.run_time_window_s // 60} min)")
        lines.append(
            table(
                ["TYPE", "COUNT", "P50", "P95"],
                [
                    [r.job_type, str(r.count), _seconds(r.p50_s), _seconds(r.p95_s)]
                    for r in stats.run_times
                ],
            )
        )
    lines += _limit_lines(limits)
    counts = ", ".join(f"{n} {status}" for status, n in stats.schedules.items()) or "none"
    lines.append(f"\nschedules: {counts}")
    if stats.next_schedule is not None:
        name = printable(stats.next_schedule)
        lines.append(f"next fire: {when(stats.next_schedule_slot)} ({name})")
    lines.append(f"\naudit position {stats.audit_position}, lag {stats.audit_lag}")
    return "\n".join(lines)


def _held_text(held: list[HeldBack]) -> str:
    """Why pending jobs are held back: paused queues, rate limits, breakers, disabled types."""
    if not held:
        return "\nheld back: nothing (no paused queue, rate limit, open breaker or disabled type)"
    return "\nheld back\n" + "\n".join(f"  {h.reason}: {h.message}" for h in held)


@click.command()
@json_option
@click.pass_obj
def stats(settings: Settings, as_json: bool) -> None:
    """Jobs by status and type, throughput (5 min, 1 h), oldest due job, p50/p95 run time,
    and each concurrency limit with the leases it counts (for a per-org limit, its busiest
    org's), and what holds pending jobs back (paused queues, rate limits, open breakers,
    disabled types).

    The audit view is caught up to the head first (not on a --read-db replica: it is read as
    the primary's catch-up left it, as its audit lag says).
    """
    with open_reader(settings) as source:
        figures = source.reader.stats()
        limits = source.reader.limits.concurrency()
        held = source.reader.held_back()
    if as_json:
        found = plain(figures)
        echo_json(
            source.tagged(
                {
                    **found,
                    "concurrency_limits": [plain(u) for u in limits],
                    "held_back": [plain(h) for h in held],
                }
            )
        )
    else:
        click.echo(_text(figures, limits))
        click.echo(_held_text(held))
