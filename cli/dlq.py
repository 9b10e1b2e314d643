"""``jobledger dlq``: list the dead jobs; ``jobledger dlq requeue``: give them a new run.

``dlq`` is a group whose default (no subcommand) lists, so the everyday question, "what died?",
is the shortest command, and the one that writes, ``requeue``, has to be named.
"""

from __future__ import annotations

from uuid import UUID

import click
import msgspec

from . import params
from .database import Settings, open_ledger
from .read_target import open_reader
from .render import (
    MISSING,
    PAYLOAD_PREVIEW,
    compact_json,
    echo_json,
    echo_line,
    first_line,
    json_option,
    table,
    when,
)
from .reports import per_job_report, raise_if_refused
from ledger.api.ledger import Ledger
from ledger.api.shaping import dead_letter_json, plain
from ledger.core.errors import LedgerError
from ledger.core.values import Subject
from ledger.jobs.operator_writes import Refusal
from ledger.views.dead_letters import DeadLetter

DEFAULT_REASON = "requeued by operator"


def _subject_text(subject: Subject | None) -> str:
    if subject is None:
        return MISSING
    return f"{subject.op} {subject.source_id} {subject.uri}"


def _no_dead_jobs(job_type: str | None) -> str:
    return "no dead jobs" if job_type is None else f"no dead jobs of type {job_type!r}"


def _letter_row(letter: DeadLetter) -> list[str]:
    job = letter.snapshot
    return [
        str(letter.job_id),
        letter.job_type,
        job.org or MISSING,
        _subject_text(job.subject),
        when(letter.dead_at),
        f"{letter.failure.code}: {first_line(letter.failure.message) or MISSING}",
        str(job.run_number),
        f"{job.attempt}/{job.max_attempts}",
        compact_json(job.payload, PAYLOAD_PREVIEW),
    ]


@click.group(invoke_without_command=True)
@click.option("--type", "job_type", metavar="TYPE", help="Only dead jobs of this type.")
@json_option
@click.pass_context
def dlq(ctx: click.Context, *, job_type: str | None, as_json: bool) -> None:
    """List the dead jobs (the dead-letter queue), oldest death first.

    With a subcommand (requeue), that command runs instead; give its options after it.
    """
    if ctx.invoked_subcommand is not None:
        if job_type is not None or as_json:
            raise click.UsageError(
                f"--type and --json go after the subcommand: "
                f"'dlq {ctx.invoked_subcommand} … --type TYPE --json'"
            )
        return
    settings: Settings = ctx.obj
    with open_reader(settings) as source:
        letters = source.reader.dead_letters(job_type)
    if as_json:
        echo_json([dead_letter_json(letter) for letter in letters])
    elif not letters:
        echo_line(_no_dead_jobs(job_type))
    else:
        headers = [
            "JOB", "TYPE", "ORG", "SUBJECT", "DEAD AT", "FAILURE", "RUN", "ATTEMPTS", "PAYLOAD",
        ]  # fmt: skip
        click.echo(table(headers, [_letter_row(letter) for letter in letters]))


class Requeued(msgspec.Struct, frozen=True):
    """A dead job that started a new run."""

    job_id: UUID
    job_type: str
    run_number: int


class RequeueReport(msgspec.Struct):
    requeued: list[Requeued]
    refused: list[Refusal]


def _requeue_all(ledger: Ledger, letters: list[DeadLetter], reason: str) -> RequeueReport:
    """Requeue each dead job in its own transaction, so one refusal stops no other."""
    report = RequeueReport(requeued=[], refused=[])
    for letter in letters:
        try:
            state = ledger.requeue(letter.job_id, reason=reason)
        except LedgerError as error:
            report.refused.append(
                Refusal(letter.job_id, letter.job_type, error.code, error.message)
            )
        else:
            report.requeued.append(Requeued(state.job_id, state.job_type, state.run_number))
    return report


def _report_text(report: RequeueReport) -> str:
    done = [(str(r.job_id), r.job_type, f"run {r.run_number}") for r in report.requeued]
    return per_job_report("requeued", "dead job(s)", done, report.refused)


@dlq.command()
@click.argument("job", required=False, callback=params.optional_job_id)
@click.option(
    "--all", "requeue_all", is_flag=True, help="Requeue every dead job, oldest death first."
)
@click.option("--type", "job_type", metavar="TYPE", help="With --all: only dead jobs of this type.")
@click.option(
    "--reason",
    default=DEFAULT_REASON,
    show_default=True,
    help="Recorded in each job_requeued event.",
)
@json_option
@click.pass_obj
def requeue(
    settings: Settings,
    *,
    job: UUID | None,
    requeue_all: bool,
    job_type: str | None,
    reason: str,
    as_json: bool,
) -> None:
    """Start a new run of dead job JOB, or of every dead job with --all.

    With JOB, a refusal (not dead, unknown, its subject has another live job) is an error.
    With --all, each job is requeued on its own and reported as requeued or refused with its
    error code; the exit code is 1 if any was refused.
    """
    if (job is None) == (not requeue_all):
        raise click.UsageError("give JOB or --all, not both" if job else "give JOB or --all")
    if job_type is not None and not requeue_all:
        raise click.UsageError("--type needs --all")
    with open_ledger(settings.url) as ledger:
        if job is not None:
            state = ledger.requeue(job, reason=reason)  # a refusal is the command's error
            report = RequeueReport([Requeued(state.job_id, state.job_type, state.run_number)], [])
        else:
            report = _requeue_all(ledger, ledger.dead_letters(job_type), reason)
    if as_json:
        echo_json(plain(report))
    elif job is not None:
        echo_line(f"requeued {job} (run {report.requeued[0].run_number})")
    elif not report.requeued and not report.refused:
        echo_line(_no_dead_jobs(job_type))
    else:
        click.echo(_report_text(report))
    raise_if_refused("requeue", "dead job(s)", len(report.requeued), report.refused)
