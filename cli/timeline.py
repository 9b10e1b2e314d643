"""``jobledger timeline JOB``: each event of a job with the state change it caused (the diff of
consecutive folds)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import click

from cli import params
from cli.database import Settings, open_ledger
from cli.job_history import job_records
from cli.render import MISSING, compact_json, echo_json, json_option, plain, table, when
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve

VALUE_PREVIEW = 80
"""Characters of a JSON value (checkpoint, output, error) a timeline line shows."""

LABELS = {
    "status": "status",
    "stage": "stage",
    "run_number": "run",
    "attempt": "attempt",
    "worker_id": "worker",
    "lease_expires_at": "lease",
    "last_heartbeat_at": "heartbeat",
    "started_at": "started",
    "run_at": "run_at",
    "priority": "priority",
    "max_attempts": "max_attempts",
    "timeout_s": "timeout_s",
    "progress_done": "done",
    "progress_total": "total",
    "checkpoint": "checkpoint",
    "last_error": "error",
    "retries": "retries",
    "output": "output",
    "result_revision": "revision",
    "result_content_hash": "content_hash",
    "finished_at": "finished",
    "reason": "reason",
}
"""The state fields a timeline shows, in order, with their short text labels."""

_CREATED = ("status", "stage", "run_number", "attempt", "run_at", "priority", "max_attempts")
"""What the first line (the job coming into being) shows."""


def _changes(before: JobState | None, after: JobState) -> dict[str, tuple[Any, Any]]:
    if before is None:
        return {name: (None, getattr(after, name)) for name in _CREATED}
    return {
        name: (getattr(before, name), value)
        for name in LABELS
        if (value := getattr(after, name)) != getattr(before, name)
    }


def _text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, str):
        return value
    return compact_json(value, VALUE_PREVIEW)


def _change_text(changes: dict[str, tuple[Any, Any]], created: bool) -> str:
    if created:
        return " ".join(f"{LABELS[name]}={_text(new)}" for name, (_, new) in changes.items())
    return " ".join(
        f"{LABELS[name]} {_text(old)}→{_text(new)}" for name, (old, new) in changes.items()
    )


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def timeline(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """List each event of job JOB with the state change it caused.

    The changes are the difference between the folds before and after each event.
    """
    with open_ledger(settings.url) as ledger:
        records = job_records(ledger, job)
    rows: list[dict[str, Any]] = []
    state: JobState | None = None
    for record in records:
        assert isinstance(record.event, JobEvent)
        after = evolve(state, record.event)
        rows.append({"record": record, "created": state is None, "changes": _changes(state, after)})
        state = after
    if as_json:
        echo_json(
            [
                {
                    "version": row["record"].originator_version,
                    "at": plain(row["record"].event.at),
                    "event": row["record"].event.name,
                    "changes": {
                        name: {"from": plain(old), "to": plain(new)}
                        for name, (old, new) in row["changes"].items()
                    },
                }
                for row in rows
            ]
        )
        return
    lines = [
        [
            str(row["record"].originator_version),
            when(row["record"].event.at),
            row["record"].event.name,
            _change_text(row["changes"], row["created"]),
        ]
        for row in rows
    ]
    click.echo(table(["VERSION", "AT", "EVENT", "CHANGES"], lines))
