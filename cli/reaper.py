"""``jobledger reap``: one reaper pass over the expired leases, and its report."""

from __future__ import annotations

import click

from . import params
from .database import Settings, open_ledger
from .errors import redact
from .render import (
    MISSING,
    PAYLOAD_PREVIEW,
    compact_json,
    echo_json,
    first_line,
    json_option,
    table,
    when,
)
from ledger.api.shaping import plain
from ledger.maintenance.reaper import DeferredError, ReapedLease, Reaper, ReaperConfig, ReapReport

_DEFAULTS = ReaperConfig()


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _summary(report: ReapReport) -> str:
    dead = len(report.dead_lettered)
    return (
        f"processed {report.processed} expired lease(s): "
        f"{report.processed - dead} retry scheduled, {dead} dead-lettered; "
        f"{report.deferred_error_count} deferred error(s)"
    )


def _reaped_row(reaped: ReapedLease) -> list[str]:
    return [
        str(reaped.job_id),
        reaped.job_type,
        reaped.org or MISSING,
        str(reaped.run_number),
        f"{reaped.attempt}/{reaped.max_attempts}",
        reaped.worker_id or MISSING,
        reaped.disposition,
        "dead" if reaped.next_run_at is None else when(reaped.next_run_at),
        _yes_no(reaped.started_without_renewal_heartbeat),
    ]


def _dead_row(reaped: ReapedLease) -> list[str]:
    return [str(reaped.job_id), reaped.job_type, compact_json(reaped.payload, PAYLOAD_PREVIEW)]


def _deferred_row(error: DeferredError) -> list[str]:
    return [
        str(error.job_id),
        str(error.run_number),
        str(error.attempt),
        error.code,
        error.sqlstate or MISSING,
        when(error.deferred_until),
        first_line(redact(error.message)) or MISSING,
    ]


def _text(report: ReapReport) -> str:
    sections = [_summary(report)]
    if report.reaped:
        headers = [
            "JOB", "TYPE", "ORG", "RUN", "ATTEMPT", "WORKER", "DISPOSITION", "NEXT RUN",
            "STARTED WITHOUT RENEWAL",
        ]  # fmt: skip
        sections.append(table(headers, [_reaped_row(r) for r in report.reaped]))
    if report.dead_lettered:
        rows = [_dead_row(r) for r in report.dead_lettered]
        sections.append("dead-lettered:\n" + table(["JOB", "TYPE", "PAYLOAD"], rows))
    if report.deferred_error_count:
        shown, count = len(report.deferred_errors), report.deferred_error_count
        sample = f", first {shown} shown" if shown < count else ""
        heading = f"deferred errors ({count}{sample}):"
        headers = ["JOB", "RUN", "ATTEMPT", "CODE", "SQLSTATE", "DEFERRED UNTIL", "MESSAGE"]
        rows = [_deferred_row(e) for e in report.deferred_errors]
        sections.append(f"{heading}\n{table(headers, rows)}")
    return "\n\n".join(sections)


def report_json(report: ReapReport) -> dict[str, object]:
    """The whole report; ``dead_lettered`` is a property, so it is added by hand."""
    return {**plain(report), "dead_lettered": plain(report.dead_lettered)}


@click.command()
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=_DEFAULTS.limit,
    show_default=True,
    metavar="N",
    help="Expired leases taken in this pass, oldest expiry first.",
)
@click.option(
    "--retry-delay",
    type=params.Seconds(),
    default=_DEFAULTS.retry_delay_s,
    show_default=True,
    metavar="SECONDS",
    help="Fixed delay before a reaped job runs again.",
)
@click.option(
    "--lock-timeout",
    type=params.Seconds(0.001),
    metavar="SECONDS",
    help="PostgreSQL: how long one job's reap may wait for a lock before it is deferred  "
    "[default: no limit]",
)
@json_option
@click.pass_obj
def reap(
    settings: Settings,
    *,
    limit: int,
    retry_delay: float,
    lock_timeout: float | None,
    as_json: bool,
) -> None:
    """Run one reaper pass over the expired leases.

    Each job whose lease has expired is failed as lease_expired: retried after the retry
    delay, or dead-lettered when its attempts are used up. Prints what was done.
    """
    config = ReaperConfig(limit=limit, retry_delay_s=retry_delay, lock_timeout_s=lock_timeout)
    with open_ledger(settings.url) as ledger:
        report = Reaper(ledger, config).run_once()
    if as_json:
        echo_json(report_json(report))
    else:
        click.echo(_text(report))
