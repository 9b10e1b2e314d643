"""``jobledger timeline JOB``: each event of a job with the state change it caused (the diff of
consecutive folds, :func:`ledger.core.facts.state_changes`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import click

from . import params
from .database import Settings
from .job_history import job_records
from .read_target import open_reader
from .render import MISSING, compact_json, echo_json, json_option, table, when
from ledger.api.shaping import timeline_json
from ledger.core.facts import TIMELINE_FIELDS, Change, StateChange, state_changes

VALUE_PREVIEW = 80
"""Characters of a JSON value (checkpoint, output, error) a timeline line shows."""

_SHORT = {
    "run_number": "run",
    "worker_id": "worker",
    "lease_expires_at": "lease",
    "last_heartbeat_at": "heartbeat",
    "started_at": "started",
    "progress_done": "done",
    "progress_total": "total",
    "last_error": "error",
    "result_revision": "revision",
    "result_content_hash": "content_hash",
    "finished_at": "finished",
}
LABELS = {name: _SHORT.get(name, name) for name in TIMELINE_FIELDS}
"""The state fields a timeline shows, in order, with their short text labels."""


def _text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, str):
        return value
    return compact_json(value, VALUE_PREVIEW)


def _change_text(changes: dict[str, Change], created: bool) -> str:
    if created:
        return " ".join(f"{LABELS[name]}={_text(new)}" for name, (_, new) in changes.items())
    return " ".join(
        f"{LABELS[name]} {_text(old)}→{_text(new)}" for name, (old, new) in changes.items()
    )


def _line(entry: StateChange) -> list[str]:
    record = entry.record
    return [
        str(record.originator_version),
        when(record.event.at),
        record.event.name,
        _change_text(entry.changes, entry.created),
    ]


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def timeline(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """List each event of job JOB with the state change it caused.

    The changes are the difference between the folds before and after each event.
    """
    with open_reader(settings) as source:
        records = job_records(source.reader, job)
    entries = state_changes(records)
    if as_json:
        echo_json(timeline_json(entries))
    else:
        click.echo(table(["VERSION", "AT", "EVENT", "CHANGES"], [_line(e) for e in entries]))
