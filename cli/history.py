"""``jobledger history``: a job's events, oldest first, and with ``--follow`` the new ones as
they are appended."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import click

from . import params
from .database import Settings
from .job_history import job_records
from .read_target import open_reader
from .render import (
    MISSING,
    PAYLOAD_PREVIEW,
    compact_json,
    echo_json,
    json_option,
    printable,
    table,
    when,
)
from ledger.api.shaping import event_fields, record_json, without_nulls
from ledger.core.codec import Record


def _history_row(record: Record) -> list[str]:
    # Text leaves out the job id (the command names it) and unset fields: a job_enqueued
    # line would otherwise be mostly nulls from the request's unused options.
    details = without_nulls(event_fields(record))
    text = " ".join(
        f"{key}={value if isinstance(value, str) else compact_json(value, PAYLOAD_PREVIEW)}"
        for key, value in details.items()
        if key != "job_id"
    )
    return [str(record.originator_version), type(record.event).name, when(record.event.at), text]


HEADERS = ["VERSION", "EVENT", "AT", "FIELDS"]
FOLLOW_WIDTHS = [7, len("job_retry_scheduled"), len("2026-11-29T22:59:07.984Z")]
"""``--follow`` cannot measure rows it has not seen: fixed columns, wide enough for all."""


def _fixed_line(cells: Sequence[str]) -> str:
    cells = [printable(cell) for cell in cells]
    padded = [cell.ljust(width) for cell, width in zip(cells, FOLLOW_WIDTHS, strict=False)]
    return "  ".join([*padded, *cells[len(FOLLOW_WIDTHS) :]]).rstrip()


def _follow(
    settings: Settings,
    job: UUID,
    *,
    as_json: bool,
    poll: float,
    linger: float,
    timeout: float | None,
) -> None:
    with open_reader(settings) as source:
        follower = source.reader.follow_history(
            job, poll_s=poll, linger_s=linger, timeout_s=timeout
        )
        first = True
        try:
            for record in follower.records():
                if as_json:
                    click.echo(compact_json(record_json(record)))
                else:
                    if first:
                        click.echo(_fixed_line(HEADERS))
                    click.echo(_fixed_line(_history_row(record)))
                first = False
        except KeyboardInterrupt:
            click.echo("stopped following (interrupted)", err=True)
            return
    state = follower.state
    status = MISSING if state is None else state.status.value
    if follower.stopped == "timeout":
        click.echo(f"stopped following: --timeout reached (job is {status})", err=True)
    else:
        click.echo(f"stopped following: job is {status} and quiet", err=True)


@click.command()
@click.argument("job", callback=params.job_id)
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing new events until the job is done."
)
@click.option(
    "--poll",
    type=params.Seconds(0.01),
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how often to look (PostgreSQL also wakes on NOTIFY).",
)
@click.option(
    "--linger",
    type=params.Seconds(),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how long a finished job must stay quiet before stopping.",
)
@click.option(
    "--timeout",
    type=params.Seconds(),
    metavar="SECONDS",
    help="With --follow: stop after this long whatever the job does.",
)
@json_option
@click.pass_obj
def history(
    settings: Settings,
    *,
    job: UUID,
    follow: bool,
    poll: float,
    linger: float,
    timeout: float | None,
    as_json: bool,
) -> None:
    """List every event of job JOB, oldest first.

    With --follow, then print each new event as it is appended (JSON Lines with --json),
    until the job is succeeded, dead or cancelled and quiet for --linger seconds, or
    --timeout passes, or Ctrl-C.
    """
    if follow:
        _follow(settings, job, as_json=as_json, poll=poll, linger=linger, timeout=timeout)
        return
    with open_reader(settings, archive=True) as source:
        records = job_records(source.reader, job)
    if as_json:
        echo_json([record_json(record) for record in records])
    else:
        click.echo(table(HEADERS, [_history_row(record) for record in records]))
