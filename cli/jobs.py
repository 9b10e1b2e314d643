"""Job commands: ``enqueue``, ``show`` and ``history`` (with ``--follow``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import click

from cli import params
from cli.database import Settings, open_ledger
from cli.render import (
    MISSING,
    compact_json,
    echo_json,
    fields,
    json_option,
    plain,
    seconds,
    table,
    when,
)
from ledger.core import diagnostics
from ledger.core.codec import Record
from ledger.core.diagnostics import Finding
from ledger.core.errors import JobNotFoundError
from ledger.core.events import (
    JSON,
    JobEnqueued,
    JobEvent,
    JobHeartbeated,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStatus,
    Subject,
    SubjectOp,
)
from ledger.core.state import JobState

PAYLOAD_PREVIEW = 200
"""Characters of payload (and other JSON values) ``show`` prints; ``--json`` prints all."""


def _subject(
    source_id: str | None, uri: str | None, op: str | None, revision: str | None
) -> Subject | None:
    """The sync subject the options describe, or ``None`` if they describe none."""
    if source_id is None and uri is None:
        if op is not None or revision is not None:
            raise click.UsageError("--op and --revision need --source-id and --uri")
        return None
    if source_id is None or uri is None:
        raise click.UsageError("--source-id and --uri must be given together")
    return Subject(
        source_id=source_id, uri=uri, op=SubjectOp(op or SubjectOp.UPSERT), revision=revision
    )


@click.command()
@click.argument("job_type")
@click.argument("payload", default="{}", callback=params.payload)
@click.option("--priority", type=int, help="Higher runs first  [default: the type's]")
@click.option(
    "--run-at",
    metavar="ISO8601",
    callback=params.aware_datetime,
    help="Not before this time (must carry a time zone).",
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Not before this many seconds from now.",
)
@click.option("--max-attempts", type=click.IntRange(min=1), help="[default: the type's]")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Time an attempt may take  [default: the type's]",
)
@click.option("--org", help="Tenant; scopes the idempotency key.")
@click.option("--queue", help="Named queue.")
@click.option("--idempotency-key", help="A repeat with the same key returns the same job.")
@click.option("--source-id", help="Sync subject: the source (needs --uri).")
@click.option("--uri", help="Sync subject: the document (needs --source-id).")
@click.option(
    "--op",
    type=click.Choice([op.value for op in SubjectOp]),
    help="Sync subject: what to do  [default: upsert]",
)
@click.option("--revision", help="Sync subject: the revision to sync.")
@click.option("--auto-define", is_flag=True, help="Define an unknown JOB_TYPE with defaults.")
@json_option
@click.pass_obj
def enqueue(
    settings: Settings,
    *,
    job_type: str,
    payload: dict[str, JSON],
    priority: int | None,
    run_at: datetime | None,
    delay: float | None,
    max_attempts: int | None,
    timeout: float | None,
    org: str | None,
    queue: str | None,
    idempotency_key: str | None,
    source_id: str | None,
    uri: str | None,
    op: str | None,
    revision: str | None,
    auto_define: bool,
    as_json: bool,
) -> None:
    """Enqueue a job of type JOB_TYPE and print its id.

    PAYLOAD is a JSON object: literal text, @FILE, or - for stdin (default {}).
    """
    subject = _subject(source_id, uri, op, revision)
    with open_ledger(settings.url, auto_define=auto_define) as ledger:
        job_id = ledger.enqueue(
            job_type,
            payload,
            priority=priority,
            run_at=run_at,
            delay_s=delay,
            max_attempts=max_attempts,
            timeout_s=timeout,
            org=org,
            queue=queue,
            idempotency_key=idempotency_key,
            subject=subject,
        )
    if job_id is not None:
        if as_json:
            echo_json({"job_id": str(job_id)})
        else:
            click.echo(str(job_id))
        return
    # Not an error: the ledger keeps at most one live job per subject, by design.
    assert subject is not None
    reason = f"source {subject.source_id!r} uri {subject.uri!r} already has a live job"
    if as_json:
        echo_json({"job_id": None, "reason": reason})
    else:
        # On stderr, so that `id=$(jobledger enqueue …)` is empty rather than a sentence.
        click.echo(f"nothing enqueued: {reason}", err=True)


def _error_text(state: JobState) -> str:
    error = state.last_error
    return MISSING if error is None else f"{error.kind}: {error.code}: {error.message}"


def _progress_text(state: JobState) -> str:
    done, total = state.progress_done, state.progress_total
    if done is None and total is None:
        return MISSING
    return f"{MISSING if done is None else done}/{MISSING if total is None else total}"


def _subject_text(subject: Subject) -> str:
    revision = subject.revision or MISSING
    return f"source {subject.source_id} uri {subject.uri} op {subject.op} revision {revision}"


def _optional_lines(state: JobState) -> list[tuple[str, str]]:
    """Lines ``show`` prints only when the job has the value."""
    subject = state.subject
    candidates = [
        ("org", state.org),
        ("queue", state.queue),
        ("idempotency key", state.idempotency_key),
        ("subject", None if subject is None else _subject_text(subject)),
        (
            "checkpoint",
            None if state.checkpoint is None else compact_json(state.checkpoint, PAYLOAD_PREVIEW),
        ),
        ("output", None if state.output is None else compact_json(state.output, PAYLOAD_PREVIEW)),
        ("result revision", state.result_revision),
        ("reason", state.reason),
        ("finished", None if state.finished_at is None else when(state.finished_at)),
    ]
    return [(label, value) for label, value in candidates if value is not None]


def _state_lines(state: JobState) -> list[tuple[str, str]]:
    return [
        ("job", str(state.job_id)),
        ("type", f"{state.job_type} (definition version {state.definition_version})"),
        ("status", f"{state.status} (stage {state.stage})"),
        ("run", str(state.run_number)),
        # The attempt in progress if leased, else the number of attempts made in this run.
        ("attempts", f"{state.attempt} of {state.max_attempts}"),
        ("worker", state.worker_id or MISSING),
        ("lease expires", when(state.lease_expires_at)),
        ("run at", when(state.run_at)),
        ("priority", str(state.priority)),
        ("timeout", seconds(state.timeout_s)),
        ("progress", _progress_text(state)),
        ("last error", _error_text(state)),
        ("retries", str(state.retries)),
        ("payload", compact_json(state.payload, PAYLOAD_PREVIEW)),
        *_optional_lines(state),
        ("enqueued", when(state.enqueued_at)),
        ("updated", f"{when(state.updated_at)} (event {state.version})"),
    ]


def state_json(state: JobState) -> dict[str, JSON]:
    """The job's whole state, with the request's fields a reader looks for lifted to the top."""
    lifted = {
        "job_id": str(state.job_id),
        "job_type": state.job_type,
        "status": state.status.value,
        "payload": state.payload,
        "org": state.org,
        "queue": state.queue,
        "idempotency_key": state.idempotency_key,
        "subject": plain(state.subject),
    }
    return {**lifted, **plain(state)}


def lease_renewals(state: JobState, records: Sequence[Record]) -> int | None:
    """Heartbeats of the current attempt (``None`` before the first claim)."""
    if state.attempt == 0:
        return None
    return sum(
        1
        for record in records
        if isinstance(record.event, JobHeartbeated)
        and (record.event.run_number, record.event.attempt) == (state.run_number, state.attempt)
    )


def next_retry_at(state: JobState, records: Sequence[Record]) -> datetime | None:
    """When a pending job waiting out a retry's backoff becomes due (its ``run_at``); ``None``
    if the job is not pending because of a retry (new, released or requeued since)."""
    if state.status is not JobStatus.PENDING:
        return None
    became_pending = (JobEnqueued, JobRetryScheduled, JobReleased, JobRequeued)
    last = next((r.event for r in reversed(records) if isinstance(r.event, became_pending)), None)
    return state.run_at if isinstance(last, JobRetryScheduled) else None


def _finding_value(value: bool | int | float | None) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _detail_lines(
    state: JobState, records: Sequence[Record], findings: Sequence[Finding]
) -> list[tuple[str, str]]:
    """What ``show`` reads from the history: renewals, the next retry, the diagnostics."""
    renewals = lease_renewals(state, records)
    retry = next_retry_at(state, records)
    lines = [
        ("lease renewals", MISSING if renewals is None else str(renewals)),
        ("last heartbeat", when(state.last_heartbeat_at)),
        ("next retry", MISSING if retry is None else when(retry)),
    ]
    for index, finding in enumerate(findings):
        value = f"{finding.name}: {_finding_value(finding.value)} ({finding.explanation})"
        lines.append(("diagnostics" if index == 0 else "", value))
    lines.append(("", f"details: jobledger diagnose {state.job_id}"))
    return lines


def _show_json(
    state: JobState, records: Sequence[Record], findings: Sequence[Finding]
) -> dict[str, JSON]:
    return {
        **state_json(state),
        "lease_renewals": lease_renewals(state, records),
        "next_retry_at": plain(next_retry_at(state, records)),
        "diagnostics": [plain(finding) for finding in findings],
    }


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def show(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """Show the current state of job JOB (its id), with its lease renewals, next retry and
    a summary of its diagnostics (see `jobledger diagnose JOB`)."""
    with open_ledger(settings.url) as ledger:
        state = ledger.get(job)
        records = ledger.history(job) if state is not None else []
        now = ledger.clock.now()
    if state is None:
        raise JobNotFoundError(f"no job {job}")
    # The view and the history are two reads: fold what was read, so both describe one moment.
    state = diagnostics.current_state(records) or state
    findings = diagnostics.diagnose(records, now=now)
    if as_json:
        echo_json(_show_json(state, records, findings))
    else:
        click.echo(fields([*_state_lines(state), *_detail_lines(state, records, findings)]))


def _event_fields(record: Record) -> dict[str, JSON]:
    values: dict[str, JSON] = plain(record.event)
    del values["at"]
    return values


def _without_nulls(value: JSON) -> JSON:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


def _history_row(record: Record) -> list[str]:
    # Text leaves out the job id (the command names it) and unset fields: a job_enqueued
    # line would otherwise be mostly nulls from the request's unused options.
    details = _without_nulls(_event_fields(record))
    text = " ".join(
        f"{key}={value if isinstance(value, str) else compact_json(value, PAYLOAD_PREVIEW)}"
        for key, value in details.items()
        if key != "job_id"
    )
    return [str(record.originator_version), type(record.event).name, when(record.event.at), text]


def _history_json(record: Record) -> dict[str, JSON]:
    return {
        "version": record.originator_version,
        "event": type(record.event).name,
        "at": plain(record.event.at),
        "fields": _event_fields(record),
    }


HEADERS = ["VERSION", "EVENT", "AT", "FIELDS"]
FOLLOW_WIDTHS = [7, len("job_retry_scheduled"), len("2026-11-29T22:59:07.984Z")]
"""``--follow`` cannot measure rows it has not seen: fixed columns, wide enough for all."""


def _fixed_line(cells: Sequence[str]) -> str:
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
    with open_ledger(settings.url) as ledger:
        follower = ledger.follow_history(job, poll_s=poll, linger_s=linger, timeout_s=timeout)
        first = True
        try:
            for record in follower.records():
                if as_json:
                    click.echo(compact_json(_history_json(record)))
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
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how often to look (PostgreSQL also wakes on NOTIFY).",
)
@click.option(
    "--linger",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how long a finished job must stay quiet before stopping.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
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
    with open_ledger(settings.url) as ledger:
        records = ledger.history(job)
    # history() reads any stream: a job type's definition stream id must not pass as a job.
    if not records or not isinstance(records[0].event, JobEvent):
        raise JobNotFoundError(f"no job {job}")
    if as_json:
        echo_json([_history_json(record) for record in records])
    else:
        click.echo(table(HEADERS, [_history_row(record) for record in records]))
