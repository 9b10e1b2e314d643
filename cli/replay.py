"""``jobledger replay`` and ``jobledger timeline``: a job's past, re-decided, or re-run.

Three meanings, kept apart: *state replay* (``replay JOB --to-event N`` / ``--at TIME``, and
``timeline JOB``) folds a prefix of the history; *decision replay* (``replay --check``) re-runs
the current decisions over recorded histories (:mod:`ledger.core.decision_replay`) and exits
non-zero on any difference, so it can gate a deploy; *re-execution* (``replay JOB --run``)
runs the job's handler locally on its recorded payload and writes nothing to the ledger.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import click

from . import params
from . import progress as progress_display
from .database import Settings
from .errors import CliError
from .job_history import job_records
from .read_target import open_reader
from .reexecute import run_handler
from .render import echo_json, fields, json_option, when
from .state_text import state_lines
from ledger.api.reader import Reader
from ledger.api.shaping import plain, state_json
from ledger.core.codec import Record
from ledger.core.diagnostics import current_state
from ledger.core.errors import InvalidRequestError
from ledger.core.facts import history_prefix
from ledger.core.replay_findings import ReplayFinding, ReplaySummary
from ledger.core.state import JobState


class FindingsError(CliError):
    """Decision replay found events the current code would not have recorded: exit code 3."""

    exit_code = 3


# --- state replay ---------------------------------------------------------------------------


def _state_then(records: list[Record], to_event: int | None, at: datetime | None) -> JobState:
    if to_event is not None:
        if not 1 <= to_event <= len(records):
            raise InvalidRequestError(
                f"job {records[0].originator_id} has {len(records)} events; "
                f"--to-event must be 1..{len(records)}"
            )
        prefix = history_prefix(records, version=to_event)
    else:
        assert at is not None
        prefix = history_prefix(records, at=at)
        if not prefix:
            raise InvalidRequestError(
                f"job {records[0].originator_id} did not exist yet at {when(at)} "
                f"(enqueued at {when(records[0].event.at)})"
            )
    state = current_state(prefix)
    assert state is not None
    return state


# --- decision replay ------------------------------------------------------------------------


_STREAM_KINDS = {"workflow": "run"}
"""How a finding names its stream's kind (a job's is ``job``, a schedule's ``schedule``)."""


def _finding_text(finding: ReplayFinding) -> str:
    return "\n".join(
        [
            f"{_STREAM_KINDS.get(finding.kind, finding.kind)} {finding.job_id} event "
            f"{finding.version} {finding.topic}: {finding.rule}",
            f"  expected  {finding.expected}",
            f"  recorded  {finding.recorded}",
        ]
    )


def _summary_line(summary: ReplaySummary) -> str:
    runs = f" and {summary.runs} workflow run(s)" if summary.runs else ""
    if summary.schedules:
        runs += f" and {summary.schedules} schedule(s)"
    return (
        f"checked {summary.jobs} job(s){runs}, {summary.events} event(s): "
        f"{len(summary.findings)} finding(s)"
    )


def _check(
    reader: Reader, job: UUID | None, job_type: str | None, batch: int, progress: bool
) -> ReplaySummary:
    summary = ReplaySummary()
    if job is not None:
        summary.add(reader.replay_check(job))
        return summary
    for checked in reader.replay_check_all(job_type=job_type, batch_size=batch):
        summary.add(checked)
        if progress and summary.jobs % batch == 0:
            click.echo(_summary_line(summary), err=True)
    if progress and summary.jobs % batch:
        click.echo(_summary_line(summary), err=True)
    return summary


# --- re-execution ---------------------------------------------------------------------------


def _modes(
    to_event: int | None, at: datetime | None, check: bool, run: bool
) -> list[tuple[str, bool]]:
    return [
        ("--to-event", to_event is not None),
        ("--at", at is not None),
        ("--check", check),
        ("--run", run),
    ]


def _validate(
    *,
    job: str | None,
    modes: list[tuple[str, bool]],
    all_jobs: bool,
    job_type: str | None,
    app: str | None,
    checkpoint: bool,
    attempt: int | None,
) -> str:
    chosen = [name for name, given in modes if given]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-event, --at, --check or --run")
    mode = chosen[0]
    if mode == "--check":
        if (job is None) == (not all_jobs):
            raise click.UsageError("--check needs a JOB or --all (not both)")
    elif job is None:
        raise click.UsageError(f"{mode} needs a JOB")
    if (all_jobs or job_type is not None) and mode != "--check":
        raise click.UsageError("--all and --type go with --check")
    if job_type is not None and not all_jobs:
        raise click.UsageError("--type goes with --all")
    if mode == "--run" and app is None:
        raise click.UsageError("--run needs --app MODULE:ATTR")
    if mode != "--run" and (app is not None or checkpoint or attempt is not None):
        raise click.UsageError("--app, --checkpoint and --attempt go with --run")
    return mode


@click.command()
@click.argument("job", required=False, callback=params.optional_job_id)
@click.option(
    "--to-event",
    type=click.IntRange(min=1),
    metavar="N",
    help="State replay: the job after its event N (as `history` numbers them).",
)
@click.option(
    "--at",
    metavar="ISO8601",
    callback=params.aware_datetime,
    help="State replay: the job as it was at this time (must carry a time zone).",
)
@click.option("--check", is_flag=True, help="Decision replay: re-run the current decisions.")
@click.option("--all", "all_jobs", is_flag=True, help="With --check: every job, in batches.")
@click.option("--type", "job_type", metavar="TYPE", help="With --check --all: one job type.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="With --check --all: jobs read per batch.",
)
@click.option("--run", is_flag=True, help="Re-execution: run the handler locally, record nothing.")
@click.option("--app", metavar="MODULE:ATTR", help="With --run: the handlers' Registry.")
@click.option("--checkpoint", is_flag=True, help="With --run: pass the last recorded checkpoint.")
@click.option(
    "--attempt", type=click.IntRange(min=1), help="With --run: the attempt the handler sees."
)
@json_option
@click.pass_obj
def replay(
    settings: Settings,
    *,
    job: UUID | None,
    to_event: int | None,
    at: datetime | None,
    check: bool,
    all_jobs: bool,
    job_type: str | None,
    batch: int,
    run: bool,
    app: str | None,
    checkpoint: bool,
    attempt: int | None,
    as_json: bool,
) -> None:
    """Replay job JOB: its state then, its decisions again, or its handler once.

    \b
    replay JOB --to-event N | --at TIME    the job's state after event N / at TIME
    replay --check (JOB | --all [--type T]) decisions re-run; exit 3 on any finding
    replay JOB --run --app MODULE:ATTR      the handler run locally; exit 1 if it raised
    """
    mode = _validate(
        job=None if job is None else str(job),
        modes=_modes(to_event, at, check, run),
        all_jobs=all_jobs,
        job_type=job_type,
        app=app,
        checkpoint=checkpoint,
        attempt=attempt,
    )
    with open_reader(settings, archive=True) as source:
        if mode == "--check":
            shown = all_jobs and progress_display.bars_drawn()
            summary = _check(source.reader, job, job_type, batch, progress=shown)
        elif mode == "--run":
            assert job is not None and app is not None
            returned = run_handler(
                source.reader,
                job,
                app=app,
                attempt=attempt,
                checkpoint=checkpoint,
                as_json=as_json,
                tagged=source.tagged,
            )
            if not returned:
                click.get_current_context().exit(1)
            return
        else:
            assert job is not None
            state = _state_then(job_records(source.reader, job), to_event, at)
    if mode != "--check":
        if as_json:
            echo_json(source.tagged(state_json(state)))
        else:
            click.echo(fields(state_lines(state)))
        return
    if as_json:
        echo_json(source.tagged(plain(summary)))
    else:
        click.echo("\n\n".join([*map(_finding_text, summary.findings), _summary_line(summary)]))
    if summary.findings:
        raise FindingsError(
            f"replay.findings: {len(summary.findings)} event(s) the current code would "
            "not have recorded the same way"
        )
