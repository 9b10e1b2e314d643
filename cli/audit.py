"""``jobledger audit``: search the whole history (the ``audit`` view) by job, workflow run,
type, event, worker, org, current status, failure code and time, a page at a time or every
page."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from typing import Any, Literal
from uuid import UUID

import click
import msgspec

from . import params
from .database import Settings
from .errors import BadUsageError
from .read_target import open_reader
from .render import echo_json, scalar, table, when
from ledger.api.reader import Reader
from ledger.api.shaping import AUDIT_FIELDS, audit_row_json
from ledger.core.errors import InvalidRequestError
from ledger.core.times import parse_moment
from ledger.views.audit_query import (
    EVENT_NAMES,
    MAX_LIMIT,
    STATUSES,
    AuditPage,
    AuditQuery,
    AuditRow,
    Order,
    decode_cursor,
)

Format = Literal["table", "json", "jsonl", "csv"]
HEADERS = (
    "POSITION",
    "AT",
    "EVENT",
    "JOB",
    "TYPE",
    "ORG",
    "WORKER",
    "RUN",
    "ATTEMPT",
    "CODE",
    "STEP",
)
PAGE = 50
EXPORT_PAGE = 1000
"""Rows per read with ``--all`` when ``--limit`` is not given."""
PROGRESS_EVERY = 10_000


def _cells(row: AuditRow) -> list[str]:
    return [
        str(row.position),
        when(row.at),
        row.event,
        str(row.job_id),
        row.job_type,
        scalar(row.org),
        scalar(row.worker_id),
        scalar(row.run_number),
        scalar(row.attempt),
        scalar(row.code),
        scalar(row.step_key),
    ]


def _next_command(query: AuditQuery, cursor: str, *, include_archive: bool = False) -> str:
    """The command line of the page after this one (times as resolved, so it is stable)."""
    words = ["jobledger", "audit", *(["--include-archive"] if include_archive else [])]
    pairs: list[tuple[str, Any]] = [
        ("--job", query.job),
        ("--workflow", query.workflow),
        ("--type", query.job_type),
        *(("--event", event) for event in query.events),
        ("--worker", query.worker),
        ("--org", query.org),
        ("--status", query.status),
        ("--code", query.code),
        ("--since", query.since and when(query.since)),
        ("--until", query.until and when(query.until)),
    ]
    for option, value in pairs:
        if value is not None:
            words += [option, _quote(str(value))]
    if query.limit != PAGE:
        words += ["--limit", str(query.limit)]
    if query.order == "oldest":
        words.append("--oldest")
    return " ".join([*words, "--cursor", cursor])


def _quote(text: str) -> str:
    safe = all(c.isalnum() or c in "-_.:+@/" for c in text)
    return text if safe and text else "'" + text.replace("'", "'\\''") + "'"


def _pages(reader: Reader, query: AuditQuery, every: bool) -> Iterator[AuditPage]:
    """The first page (the audit view caught up first, except on a replica) and, with
    ``every``, the rest. Later pages do not catch up again: an oldest-first export under
    load would chase the head."""
    result = reader.audit(query)
    yield result
    read = len(result.rows)
    while every and result.next_cursor is not None:
        query = msgspec.structs.replace(query, cursor=result.next_cursor)
        result = reader.audit(query, catch_up=False)
        before, read = read, read + len(result.rows)
        if read // PROGRESS_EVERY > before // PROGRESS_EVERY:
            click.echo(f"audit: {read:,} rows", err=True)
        yield result


@click.command()
@click.option("--job", callback=params.optional_job_id, metavar="JOB_ID", help="One job's rows.")
@click.option(
    "--workflow",
    callback=params.optional_job_id,
    metavar="RUN_ID",
    help="One workflow run's rows: its own events and its step jobs'.",
)
@click.option("--type", "job_type", metavar="TYPE", help="Rows of jobs of this type.")
@click.option(
    "--event",
    "events",
    multiple=True,
    type=click.Choice(EVENT_NAMES),
    help="Rows of this event (repeat for any of several).",
)
@click.option("--worker", metavar="WORKER_ID", help="Rows recorded by this worker.")
@click.option("--org", metavar="ORG", help="Rows of jobs of this org.")
@click.option(
    "--status", type=click.Choice(STATUSES), help="Rows of jobs whose status is this *now*."
)
@click.option(
    "--code",
    metavar="CODE",
    help="Failures, dead letters and retries with this failure code.",
)
@click.option(
    "--since",
    callback=params.moment_text,
    metavar="TIME",
    help="At or after: ISO 8601, or 7d/12h/30m ago.",
)
@click.option(
    "--until",
    callback=params.moment_text,
    metavar="TIME",
    help="Before: ISO 8601, or 7d/12h/30m ago.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    help=f"Rows per page  [default: {PAGE}; {EXPORT_PAGE} with --all]",
)
@click.option("--oldest", is_flag=True, help="Oldest first (default: newest first).")
@click.option("--cursor", metavar="CURSOR", help="The page after the one that printed it.")
@click.option("--all", "every", is_flag=True, help="Every page, streamed (for exports).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "jsonl", "csv"]),
    default="table",
    show_default=True,
    help="json: one object {rows, next_cursor}; jsonl/csv: rows only, next cursor on stderr.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--include-archive",
    is_flag=True,
    help="Also the rows of jobs retention moved to the archive (`jobledger retention`).",
)
@click.pass_obj
def audit(
    settings: Settings,
    *,
    job: UUID | None,
    workflow: UUID | None,
    job_type: str | None,
    events: tuple[str, ...],
    worker: str | None,
    org: str | None,
    status: str | None,
    code: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    oldest: bool,
    cursor: str | None,
    every: bool,
    fmt: Format,
    as_json: bool,
    include_archive: bool,
) -> None:
    """Search every job and workflow event ever recorded, newest first, a page at a time.

    Filters combine (AND); --event may repeat (any of them). --status is the job's status
    now. --workflow is a run's own events and its step jobs'; a run's own rows show the run
    as JOB and its workflow type as TYPE. The audit view is caught up to the head first, so
    every committed event is found
    (not on a --read-db replica: it is read as the primary's catch-up left it, and the lag
    line on stderr says how far behind that is). --include-archive adds the rows of the
    jobs retention moved to the archive (`jobledger retention`).
    """
    order: Order = "oldest" if oldest else "newest"
    if cursor is not None:
        try:
            decode_cursor(cursor, order)
        except InvalidRequestError as exc:
            raise BadUsageError(f"invalid value for '--cursor': {exc.message}") from None
    if as_json:
        fmt = "json"
    with open_reader(settings, audit=True, archive=include_archive) as source:
        now = source.reader.clock.now()
        query = AuditQuery(
            job=job,
            workflow=workflow,
            job_type=job_type,
            events=events,
            worker=worker,
            org=org,
            status=status,
            code=code,
            since=None if since is None else parse_moment(since, now),
            until=None if until is None else parse_moment(until, now),
            limit=limit or (EXPORT_PAGE if every else PAGE),
            order=order,
            cursor=cursor,
        )
        pages = _pages(source.reader, query, every)
        _print(pages, query, fmt, source.tagged, include_archive=include_archive)


def _print(
    pages: Iterator[AuditPage],
    query: AuditQuery,
    fmt: Format,
    tagged: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    include_archive: bool = False,
) -> None:
    last: str | None = None
    if fmt == "json":
        rows: list[dict[str, Any]] = []
        for result in pages:
            rows += [audit_row_json(row) for row in result.rows]
            last = result.next_cursor
        echo_json(tagged({"rows": rows, "next_cursor": last}))
        return
    if fmt == "csv":
        writer_buffer = io.StringIO()
        writer = csv.DictWriter(writer_buffer, fieldnames=AUDIT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for result in pages:
            writer.writerows(audit_row_json(row) for row in result.rows)
            click.echo(writer_buffer.getvalue(), nl=False)
            writer_buffer.seek(0)
            writer_buffer.truncate()
            last = result.next_cursor
    elif fmt == "jsonl":
        for result in pages:
            for row in result.rows:
                click.echo(_jsonl(row))
            last = result.next_cursor
    else:
        count = 0
        for result in pages:
            if result.rows:
                text = table(HEADERS, [_cells(row) for row in result.rows])
                click.echo(text if count == 0 else text.split("\n", 1)[1])
            count += len(result.rows)
            last = result.next_cursor
        if count == 0:
            click.echo("no audit rows match")
        if last is not None:
            click.echo(
                f"\nnext page: {_next_command(query, last, include_archive=include_archive)}"
            )
        return
    if last is not None:
        click.echo(f"next cursor: {last}", err=True)


def _jsonl(row: AuditRow) -> str:
    return msgspec.json.encode(audit_row_json(row)).decode()
