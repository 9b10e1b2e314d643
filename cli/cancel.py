"""``jobledger cancel``: an operator ends pending or leased jobs (``Ledger.cancel_many``)."""

from __future__ import annotations

from uuid import UUID

import click

from . import params
from .database import Settings, open_ledger
from .errors import RefusedError
from .render import echo_json, echo_line, json_option
from .reports import per_job_report, raise_if_refused
from ledger.api.shaping import plain
from ledger.jobs.operator_writes import Cancelled, CancelReport

DEFAULT_REASON = "cancelled by operator"


def _was(job: Cancelled) -> str:
    return f"was leased by {job.worker_id}" if job.worker_id is not None else f"was {job.was}"


def _report_text(report: CancelReport) -> str:
    done = [(str(c.job_id), c.job_type, _was(c)) for c in report.cancelled]
    return per_job_report("cancelled", "job(s)", done, report.refused)


@click.command()
@click.argument("jobs", nargs=-1, required=True, callback=params.job_ids)
@click.option(
    "--reason",
    default=DEFAULT_REASON,
    show_default=True,
    help="Recorded in each job_cancelled event.",
)
@json_option
@click.pass_obj
def cancel(settings: Settings, *, jobs: list[UUID], reason: str, as_json: bool) -> None:
    """Cancel pending or leased jobs JOB…, in one transaction.

    A leased job's worker is not interrupted, but whatever it writes afterwards is refused
    (fenced). With one JOB, a refusal (unknown, already finished) is an error; with several,
    each is reported as cancelled or refused and the exit code is 1 if any was refused.
    """
    with open_ledger(settings.url) as ledger:
        report = ledger.cancel_many(jobs, reason=reason)
    if len(jobs) == 1 and report.refused:
        [refusal] = report.refused  # one job: its refusal is the command's error
        raise RefusedError(f"{refusal.code}: {refusal.message}")
    if as_json:
        echo_json(plain(report))
    elif len(jobs) == 1:
        [job] = report.cancelled
        echo_line(f"cancelled {job.job_id} ({job.job_type}, {_was(job)})")
    else:
        click.echo(_report_text(report))
    raise_if_refused("cancel", "job(s)", len(report.cancelled), report.refused)
