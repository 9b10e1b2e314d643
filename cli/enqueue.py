"""``jobledger enqueue``: one job from the command line."""

from __future__ import annotations

from datetime import datetime

import click

from . import params
from .database import Settings, open_ledger
from .render import echo_json, echo_line, json_option
from ledger.core.values import JSON, Subject, SubjectOp


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
    type=params.Seconds(),
    metavar="SECONDS",
    help="Not before this many seconds from now.",
)
@click.option("--max-attempts", type=click.IntRange(min=1), help="[default: the type's]")
@click.option(
    "--timeout",
    type=params.Seconds(0, open_least=True),
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
        enqueued = ledger.enqueue(
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
    if enqueued.outcome != "skipped":
        if as_json:
            echo_json({"job_id": str(enqueued.job_id)})
        else:
            click.echo(str(enqueued.job_id))
        return
    # Not an error: the ledger keeps at most one live job per subject, by design.
    assert subject is not None
    reason = f"source {subject.source_id!r} uri {subject.uri!r} already has a live job"
    if as_json:
        echo_json({"job_id": None, "reason": reason})
    else:
        # On stderr, so that `id=$(jobledger enqueue …)` is empty rather than a sentence.
        echo_line(f"nothing enqueued: {reason}", err=True)
