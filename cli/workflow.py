"""``jobledger workflow``: start, complete, cancel and recover workflow runs; the reads
(``show``, ``list``, ``timeline``, ``graph``) are in :mod:`cli.workflow_reads`.

Each write is one API call (``Ledger.workflows.submit``, ``complete_step``,
``cancel_workflow``, ``recover_workflow``); a refusal is one ``error:`` line carrying the
stable ``workflow.*`` code, and nothing is written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import click
import msgspec

from . import params
from .database import Settings, open_ledger
from .render import echo_json, echo_line, json_option
from .workflow_reads import graph, list_runs, show, timeline
from ledger.api.shaping import plain, workflow_started_json
from ledger.core.values import JSON
from ledger.core.workflows.state import RunState

DEFAULT_CANCEL_REASON = "cancelled by operator"
DEFAULT_RECOVER_REASON = "recovered by operator"


def _spec(ctx: click.Context, param: click.Parameter, value: str) -> dict[str, Any]:
    """The run request: a JSON object read from the file ``value`` or from stdin (``-``)."""
    where = "stdin" if value == "-" else f"file {value!r}"
    try:
        raw = sys.stdin.buffer.read() if value == "-" else Path(value).read_bytes()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        decoded: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise click.BadParameter(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(decoded, dict):
        raise click.BadParameter(f"{where} must hold a JSON object (a workflow request)")
    params.unique_keys(raw, where)
    return decoded


def _json_value(ctx: click.Context, param: click.Parameter, value: str | None) -> JSON | None:
    """Any JSON value given as text (``None`` when the option was not given)."""
    if value is None:
        return None
    try:
        decoded: JSON = msgspec.json.decode(value)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise click.BadParameter(f"not valid JSON ({exc})") from None
    params.unique_keys(value, "the output")
    return decoded


def _run_line(verb: str, state: RunState) -> str:
    return f"{verb}; run {state.run_id} is {state.status.value}"


@click.group()
def workflow() -> None:
    """Workflow runs: DAGs of job steps and external steps (docs/workflows.md)."""


@workflow.command()
@click.argument("spec", metavar="SPEC.json|-", callback=_spec)
@json_option
@click.pass_obj
def start(settings: Settings, *, spec: dict[str, Any], as_json: bool) -> None:
    """Start a run of the request in SPEC.json (or on stdin, with -) and print its id.

    With an idempotency key, the same request again prints the existing run's id (and says
    so on stderr); a different request under the key is workflow.idempotency_conflict.
    """
    with open_ledger(settings.url) as ledger:
        started = ledger.workflows.submit(spec)
    if as_json:
        echo_json(workflow_started_json(started))
        return
    click.echo(str(started.run_id))
    if not started.created:
        click.echo("the existing run: the same request under the same idempotency key", err=True)


@workflow.command()
@click.argument("run", callback=params.run_id)
@click.argument("step")
@click.option(
    "--status",
    type=click.Choice(["succeeded", "failed"]),
    required=True,
    help="How the external step ended.",
)
@click.option("--output", metavar="JSON", callback=_json_value, help="Its output (succeeded only).")
@click.option("--reason", default="", help="Recorded in the completion event.")
@json_option
@click.pass_obj
def complete(
    settings: Settings,
    *,
    run: UUID,
    step: str,
    status: str,
    output: JSON | None,
    reason: str,
    as_json: bool,
) -> None:
    """Complete external step STEP of run RUN (an approval gate), releasing what it allows.

    The identical completion again changes nothing; another is workflow.completion_conflict;
    a job step is workflow.step_not_external.
    """
    with open_ledger(settings.url) as ledger:
        state = ledger.workflows.complete_step(
            run, step, status == "succeeded", output=output, reason=reason
        )
    if as_json:
        echo_json(plain(state))
    else:
        echo_line(_run_line(f"completed {step} ({status})", state))


@workflow.command()
@click.argument("run", callback=params.run_id)
@click.option(
    "--reason",
    default=DEFAULT_CANCEL_REASON,
    show_default=True,
    help="Recorded in the cancel event.",
)
@json_option
@click.pass_obj
def cancel(settings: Settings, *, run: UUID, reason: str, as_json: bool) -> None:
    """Cancel run RUN: its pending steps, and its steps' live jobs (their workers' later
    writes are refused). A cancelled run again changes nothing; a finished one is refused."""
    with open_ledger(settings.url) as ledger:
        state = ledger.workflows.cancel(run, reason)
    if as_json:
        echo_json(plain(state))
    else:
        click.echo(_run_line("cancelled", state))


@workflow.command()
@click.argument("run", callback=params.run_id)
@click.option("--from", "from_step", metavar="STEP", required=True, help="The step to re-run.")
@click.option(
    "--reason",
    default=DEFAULT_RECOVER_REASON,
    show_default=True,
    help="Recorded in the new run's event.",
)
@click.option(
    "--key",
    metavar="KEY",
    help="A request key: the same key again returns the same recovery run "
    "(default: a new key, so a new run each time).",
)
@json_option
@click.pass_obj
def recover(
    settings: Settings,
    *,
    run: UUID,
    from_step: str,
    reason: str,
    key: str | None,
    as_json: bool,
) -> None:
    """Start a new run of finished run RUN that re-runs STEP and everything after it (and
    every step that did not succeed), reusing the other steps' outputs; print its id."""
    with open_ledger(settings.url) as ledger:
        started = ledger.workflows.recover(run, from_step, reason, key or str(uuid4()))
    if as_json:
        echo_json(workflow_started_json(started))
        return
    click.echo(str(started.run_id))
    if not started.created:
        click.echo("the existing recovery run of this key", err=True)


workflow.add_command(show)
workflow.add_command(list_runs)
workflow.add_command(timeline)
workflow.add_command(graph)
