"""``jobledger jobs``: the current jobs, or the queue as it was at a past time (``--at``)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from . import params
from .database import Settings
from .progress import FoldingProgress
from .read_target import open_reader
from .render import MISSING, echo_json, echo_line, json_option, table, when
from ledger.api.shaping import job_page_json
from ledger.core.state import JobState
from ledger.core.times import parse_moment
from ledger.core.values import JobStatus
from ledger.views.job_pages import DEFAULT_LIMIT

MAX_LIMIT = 10_000


def _run_attempt(state: JobState) -> str:
    return f"{state.run_number}/{state.attempt}"


def _row(state: JobState) -> list[str]:
    leased = state.status is JobStatus.LEASED
    error = state.last_error
    return [
        str(state.job_id),
        state.job_type,
        state.org or MISSING,
        state.status.value,
        _run_attempt(state),
        when(state.run_at),
        (state.worker_id or MISSING) if leased else MISSING,
        when(state.lease_expires_at) if leased else MISSING,
        MISSING if error is None else error.code,
    ]


HEADERS = ["ID", "TYPE", "ORG", "STATUS", "RUN/ATT", "RUN AT", "WORKER", "LEASE END", "ERROR"]


@click.command()
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([status.value for status in JobStatus]),
    help="Only jobs in this status (repeat for several).",
)
@click.option("--type", "job_type", help="Only jobs of this type.")
@click.option("--org", help="Only jobs of this org.")
@click.option(
    "--queue", help="Only jobs in this queue ('default': also jobs enqueued without one)."
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Jobs per page.",
)
@click.option(
    "--cursor",
    type=click.IntRange(min=1),
    help="The next page: the cursor the previous page printed.",
)
@click.option(
    "--at",
    metavar="TIME",
    callback=params.moment_text,
    help="The queue as it was then: ISO 8601 (a date is midnight UTC), or a span ago "
    "(45s, 30m, 2h, 1d).",
)
@json_option
@click.pass_obj
def jobs(
    settings: Settings,
    *,
    statuses: tuple[str, ...],
    job_type: str | None,
    org: str | None,
    queue: str | None,
    limit: int,
    cursor: int | None,
    at: str | None,
    as_json: bool,
) -> None:
    """List jobs, newest enqueue first, one page at a time.

    With --at, each job as its history says it was at that time (events stamped later are
    left out; jobs enqueued later are absent), folded from every stored event.
    """
    wanted = [JobStatus(status) for status in statuses]
    moment: datetime | None = None
    with open_reader(settings) as source:
        reader = source.reader
        if at is None:
            page = reader.jobs(
                statuses=wanted,
                job_type=job_type,
                org=org,
                queue=queue,
                limit=limit,
                cursor=cursor,
            )
        else:
            moment = parse_moment(at, reader.clock.now()).astimezone(UTC)
            page = reader.jobs_at(
                moment,
                statuses=wanted,
                job_type=job_type,
                org=org,
                queue=queue,
                limit=limit,
                cursor=cursor,
                progress=FoldingProgress(),
            )
        # The queues paused now (a listing "as at" a time shows them too: they are now's).
        paused = [q.queue for q in reader.limits.queues() if q.paused]
    if as_json:
        echo_json(source.tagged({**job_page_json(page, moment), "paused_queues": paused}))
        return
    if moment is not None:
        click.echo(f"as at {when(moment)}", err=True)
    click.echo(table(HEADERS, [_row(job.state) for job in page.jobs]))
    if page.next_cursor is not None:
        click.echo(f"more: add --cursor {page.next_cursor}", err=True)
    if paused:
        echo_line(f"paused queues (not claimed): {', '.join(paused)}", err=True)
