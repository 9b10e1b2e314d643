"""``jobledger sources``: each source's sync state, last poll and breaker; ``sources poll
NAME``: poll one now (a ``jobledger.source_poll`` job, or ``--run-now`` in this process)."""

from __future__ import annotations

from typing import Any

import click

from .database import Settings, open_ledger
from .errors import RefusedError
from .read_target import open_reader
from .render import MISSING, echo_json, echo_line, json_option, printable, table


def _detail(poll: dict[str, Any]) -> str:
    """What the last poll found (a success's counts), or why it did not (error, skip)."""
    if poll["result"] == "failed":
        return f"{poll['error_code']}: {poll['error']} ({poll['failures']} in a row)"
    if poll["result"] == "skipped":
        return str(poll["skip_reason"])
    counts = poll["counts"]
    return (
        f"+{counts['upserted']} ={counts['unchanged']} -{counts['deleted']}, "
        f"enqueued {counts['enqueued']}, already live {counts['already_live']}"
    )


def _breaker(poll: dict[str, Any]) -> str:
    state = str(poll["breaker"])
    return f"{state} until {poll['breaker_until']}" if state == "open" else state


def _row(view: dict[str, Any]) -> list[str]:
    jobs = ", ".join(f"{status} {n}" for status, n in sorted(view["jobs"].items())) or MISSING
    poll = view["poll"]
    polled = (
        [MISSING, MISSING, MISSING, MISSING]
        if poll is None
        else [str(poll["last_poll_at"]), poll["result"], _breaker(poll), _detail(poll)]
    )
    return [printable(str(cell)) for cell in (view["source_id"], view["uris"], jobs, *polled)]


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def sources(ctx: click.Context, as_json: bool) -> None:
    """List each source: its URIs in the sync state, its jobs by status, its last poll (when,
    result, counts or error) and its breaker, by source.

    A failed poll shows its error and how many failed in a row; a skipped one the reason
    (an open breaker, until when).
    """
    if ctx.invoked_subcommand is not None:
        return
    settings: Settings = ctx.obj
    with open_reader(settings) as reading:
        views = reading.reader.sources.overview()
    if as_json:
        echo_json(views)
    elif not views:
        click.echo("no sources")
    else:
        headers = ["SOURCE", "URIS", "JOBS", "LAST POLL", "RESULT", "BREAKER", "DETAIL"]
        click.echo(table(headers, [_row(view) for view in views]))


@sources.command()
@click.argument("name")
@click.option(
    "--app",
    metavar="MODULE:ATTR",
    help="The worker's Registry: checks NAME has a lister (required with --run-now).",
)
@click.option(
    "--run-now",
    is_flag=True,
    help="Run the poll in this process with the lister of --app instead of enqueueing it.",
)
@json_option
@click.pass_obj
def poll(settings: Settings, *, name: str, app: str | None, run_now: bool, as_json: bool) -> None:
    """Poll source NAME once: enqueue a jobledger.source_poll job (a worker whose registry
    has NAME's lister runs it), or with --run-now list, diff and enqueue its sync jobs here.

    Exit code 1 when a --run-now poll failed (its failure is recorded all the same).
    """
    # Imported here: the worker's module pulls in the pool, which listing sources never needs.
    from .worker import load_registry
    from ledger.runtime.source_poller import poll_output

    if run_now and app is None:
        raise click.UsageError("--run-now needs --app MODULE:ATTR (the source's lister)")
    spec = None
    if app is not None:
        registry = load_registry(app)
        spec = registry.source_spec(name)
        if spec is None:
            known = ", ".join(s.name for s in registry.sources()) or "none"
            raise click.BadParameter(
                f"{app} registers no lister for source {name!r} (registered: {known})",
                param_hint="NAME",
            )
    with open_ledger(settings.url) as ledger:
        if not run_now:
            job_id = ledger.sources.enqueue_poll(name)
            if as_json:
                echo_json({"source": name, "job_id": str(job_id)})
            else:
                echo_line(f"enqueued poll job {job_id} for source {name}")
            return
        assert spec is not None
        output = poll_output(ledger.sources.poll(name, spec.list, spec.config))
    if as_json:
        echo_json(output)
    else:
        click.echo(printable(" ".join(f"{key}={value}" for key, value in output.items())))
    if output["result"] == "failed":
        raise RefusedError(f"poll of source {name} failed: {output['code']}: {output['error']}")
