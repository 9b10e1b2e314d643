"""``jobledger workflow show|list|timeline|graph``: the reads of workflow runs, rendered.

The reads and their JSON shapes are the API's (``Reader.workflows.run``,
``workflow_steps``, ``workflows``, ``workflow_timeline``, ``workflow_graph``;
:mod:`ledger.api.shaping`); this module only lays them out for people.
"""

from __future__ import annotations

from uuid import UUID

import click

from . import params
from .database import Settings
from .read_target import open_reader
from .render import MISSING, compact_json, echo_json, fields, json_option, table, when
from ledger.api.shaping import run_page_json, workflow_json, workflow_timeline_json
from ledger.core.codec import Record
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.core.workflows.status import RunStatus
from ledger.store.workflow_reads import RunView, StepView
from ledger.workflows.workflow_graph import FORMATS, draw
from ledger.workflows.workflow_timeline import RUN, TimelineEntry

MAX_LIMIT = 10_000
DEFAULT_LIMIT = 50
RESULT_PREVIEW = 120
"""Characters of a run's result (or a step's output) a text line shows."""

STEP_HEADERS = ["KEY", "KIND", "STATUS", "JOB", "ATTEMPT", "RELEASED", "FINISHED", "NOTE"]


def _not_found(run: UUID) -> WorkflowNotFoundError:
    return WorkflowNotFoundError(f"no workflow run {run}")


def _note(step: StepView) -> str:
    """Why a step ended as it did: its cancel code, its failure, or its output."""
    if step.code is not None:
        return step.code
    if step.failure is not None and step.status.is_terminal:
        return step.failure.code
    if step.output is not None:
        return compact_json(step.output, RESULT_PREVIEW)
    return MISSING


def _step_row(step: StepView) -> list[str]:
    return [
        step.key,
        step.kind.value,
        step.status.value,
        MISSING if step.job_id is None else str(step.job_id),
        MISSING if step.job_id is None else str(step.attempt),
        when(step.released_at),
        when(step.finished_at),
        _note(step),
    ]


def _run_fields(run: RunView) -> list[tuple[str, str]]:
    counts = ", ".join(f"{count} {status.value}" for status, count in run.counts.items())
    pairs = [
        ("run", str(run.run_id)),
        ("type", run.workflow_type),
        ("org", run.org or MISSING),
        ("status", run.status.value),
        ("steps", f"{run.step_count} ({counts})"),
        ("result", MISSING if run.result is None else compact_json(run.result, RESULT_PREVIEW)),
        ("submitted", when(run.submitted_at)),
        ("finished", when(run.finished_at)),
    ]
    if run.recovered_from is not None:
        pairs.append(("recovered from", f"{run.recovered_from} at step {run.recovered_from_step}"))
        if run.recovery_reason:
            pairs.append(("recovery reason", run.recovery_reason))
    if run.reason:
        pairs.append(("cancel reason", run.reason))
    return pairs


@click.command()
@click.argument("run", callback=params.run_id)
@json_option
@click.pass_obj
def show(settings: Settings, *, run: UUID, as_json: bool) -> None:
    """Show run RUN: its status and result, and its steps as a table (a step whose job is
    leased shows running; the attempt is its job's)."""
    with open_reader(settings) as source:
        view = source.reader.workflows.run(run)
        steps = source.reader.workflows.steps(run) if view is not None else []
    if view is None:
        raise _not_found(run)
    if as_json:
        echo_json(source.tagged(workflow_json(view, steps)))
        return
    click.echo(fields(_run_fields(view)))
    click.echo()
    click.echo(table(STEP_HEADERS, [_step_row(step) for step in steps]))


@click.command(name="list")
@click.option("--type", "workflow_type", metavar="TYPE", help="Only runs of this type.")
@click.option(
    "--status", type=click.Choice([status.value for status in RunStatus]), help="Only runs so."
)
@click.option("--org", help="Only runs of this org.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Runs per page.",
)
@click.option("--cursor", help="The next page: the cursor the previous page printed.")
@json_option
@click.pass_obj
def list_runs(
    settings: Settings,
    *,
    workflow_type: str | None,
    status: str | None,
    org: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
) -> None:
    """List workflow runs in submit order, one page at a time."""
    with open_reader(settings) as source:
        page = source.reader.workflows.runs(
            workflow_type=workflow_type, status=status, org=org, limit=limit, cursor=cursor
        )
    if as_json:
        echo_json(source.tagged(run_page_json(page)))
        return
    headers = ["RUN", "TYPE", "ORG", "STATUS", "STEPS", "SUBMITTED", "FINISHED"]
    rows = [
        [
            str(run.run_id),
            run.workflow_type,
            run.org or MISSING,
            run.status.value,
            str(run.step_count),
            when(run.submitted_at),
            when(run.finished_at),
        ]
        for run in page.runs
    ]
    click.echo(table(headers, rows))
    if page.next_cursor is not None:
        click.echo(f"more: add --cursor {page.next_cursor}", err=True)


def _detail(record: Record) -> str:
    event = record.event
    parts = []
    for name in ("step_key", "status", "code", "reason"):
        value = getattr(event, name, None)
        if value:
            parts.append(f"{name.removesuffix('_key')}={value}")
    return " ".join(parts) or MISSING


def _timeline_row(entry: TimelineEntry) -> list[str]:
    record = entry.record
    return [
        when(record.event.at),
        RUN if entry.step is None else entry.step,
        str(record.originator_version),
        record.event.name,
        _detail(record),
    ]


@click.command()
@click.argument("run", callback=params.run_id)
@json_option
@click.pass_obj
def timeline(settings: Settings, *, run: UUID, as_json: bool) -> None:
    """List every event of run RUN and of its steps' jobs, interleaved: each stream in its
    order, a cause before its effects, otherwise by time (docs/workflows.md)."""
    with open_reader(settings) as source:
        entries = source.reader.workflows.timeline(run)
    if not entries:
        raise _not_found(run)
    if as_json:
        echo_json(workflow_timeline_json(entries))
        return
    headers = ["AT", "STREAM", "VERSION", "EVENT", "DETAIL"]
    click.echo(table(headers, [_timeline_row(entry) for entry in entries]))


@click.command()
@click.argument("run", callback=params.run_id)
@click.option(
    "--format",
    "form",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="How to draw the DAG.",
)
@click.pass_obj
def graph(settings: Settings, *, run: UUID, form: str) -> None:
    """Draw run RUN's DAG with each step's status: as text, Graphviz DOT or Mermaid (edges
    labelled on_terminal where they release on any end)."""
    with open_reader(settings) as source:
        found = source.reader.workflows.graph(run)
    if found is None:
        raise _not_found(run)
    click.echo(draw(found, form, str(run)))
