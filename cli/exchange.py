"""``jobledger export`` and ``jobledger import``: job histories as versioned JSON Lines.

The format is ``docs/export-format.md``; the work is in :mod:`ledger.store.exporter` and
:mod:`ledger.store.importer`. Lines go to stdout (or ``--output``); progress and the summary go
to stderr, so a redirected export holds nothing but the file.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import IO
from uuid import UUID

import click

from . import params
from .database import POOL_SIZE, Settings, describe, open_ledger
from .progress import StderrCounter
from .read_target import open_reader
from .render import echo_json, json_option
from ledger.api.ledger import Ledger
from ledger.api.reader import Reader
from ledger.api.shaping import plain
from ledger.core.exchange import FileEnd, Selection
from ledger.core.integrity_checkpoints import key_id, short_head
from ledger.core.values import JobStatus
from ledger.integrity.keys import load_public_key
from ledger.store.config import resolve_url
from ledger.store.exporter import ExportReport
from ledger.store.importer import ImportReport, OpenLines, check_seal, validate
from ledger.store.new_file import removed_on_failure


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[JOB]...", callback=params.job_ids)
@click.option("--type", "job_type", help="Only jobs of this type.")
@click.option("--org", help="Only jobs of this tenant.")
@click.option(
    "--status",
    type=click.Choice([status.value for status in JobStatus]),
    help="Only jobs in this status now.",
)
@click.option(
    "--since",
    metavar="ISO8601",
    callback=params.aware_datetime,
    help="Only jobs enqueued at or after this time.",
)
@click.option(
    "--until",
    metavar="ISO8601",
    callback=params.aware_datetime,
    help="Only jobs enqueued before this time.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (replaced only once complete) instead of stdout.",
)
@click.option(
    "--signing-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Seal the file (format version 3): bind its digest to this ledger's hash chain head "
    "with this ed25519 key's signature (`import --verify-signature`; docs/integrity.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (needs --output).")
@click.pass_obj
def export(
    settings: Settings,
    *,
    job_ids: list[UUID],
    job_type: str | None,
    org: str | None,
    status: str | None,
    since: datetime | None,
    until: datetime | None,
    output: Path | None,
    signing_key: str | None,
    as_json: bool,
) -> None:
    """Write the whole histories of JOB… (or of every job the filters admit; all jobs by
    default) and the job-type definitions they use, as JSON Lines."""
    if as_json and output is None:
        raise click.UsageError("--json needs --output (stdout carries the export)")
    if signing_key is not None:
        with open_ledger(settings.url) as ledger:  # the seal names the chain's head: hash all
            ledger.integrity.catch_up()
    selection = Selection(
        job_ids=tuple(job_ids), job_type=job_type, org=org, status=status, since=since, until=until
    )
    progress = StderrCounter()
    with ExitStack() as stack:
        source = stack.enter_context(open_reader(settings, archive=True))
        stack.callback(progress.close)
        if output is None:
            out: IO[bytes] = sys.stdout.buffer
            try:
                report = source.reader.export_history(
                    out.write,
                    selection,
                    progress=lambda jobs, _: progress("export", jobs, 0),
                    signing_key=signing_key,
                )
                out.flush()
            except BrokenPipeError:
                # The reader left (`| head`): stop quietly, and keep Python's own flush at
                # exit from failing on the closed pipe.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise SystemExit(1) from None
        else:
            report = _export_to_file(source.reader, selection, output, progress, signing_key)
    if as_json:
        echo_json(source.tagged({**plain(report), "output": str(output)}))
    runs = f" and {_n(report.runs, 'workflow run')}" if report.runs else ""
    click.echo(
        f"exported {_n(report.jobs, 'job')}{runs} ({_n(report.events, 'event')}, with "
        f"{_n(report.definitions, 'job-type definition')})",
        err=True,
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _export_to_file(
    reader: Reader,
    selection: Selection,
    output: Path,
    progress: StderrCounter,
    signing_key: str | None,
) -> ExportReport:
    """Export into a temporary file beside ``output``, renamed over it once complete, so a
    failed export never leaves a truncated file under the name asked for."""
    directory = output.resolve().parent
    if not directory.is_dir():
        raise click.BadParameter(f"no directory {directory}", param_hint="--output")
    partial = directory / f".{output.name}.partial"
    try:
        with partial.open("wb") as handle:
            report = reader.export_history(
                handle.write,
                selection,
                progress=lambda jobs, _: progress("export", jobs, 0),
                signing_key=signing_key,
            )
        os.replace(partial, output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return report


def _file_lines(path: str) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        yield from handle


def _reopenable(source: str, stack: ExitStack) -> OpenLines:
    """A callable opening the file's lines afresh; stdin is spooled to a temporary file
    first, since the import reads its input more than once."""
    if source != "-":
        return lambda: _file_lines(source)
    spool = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - the stack closes it
    shutil.copyfileobj(sys.stdin.buffer, spool)

    def lines() -> Iterator[bytes]:
        spool.seek(0)
        yield from spool

    return lines


@click.command(name="import")
@click.argument("source", metavar="FILE|-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--db", "db", metavar="URL", help="The target ledger (instead of the group's --db).")
@click.option(
    "--into-live",
    is_flag=True,
    help="Import even though the ledger holds pending or leased jobs.",
)
@click.option(
    "--allow-untrailed",
    is_flag=True,
    help="Import a format-1 file, which has no trailer to prove it whole (warns).",
)
@click.option(
    "--verify-signature",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="KEY.pub",
    help="Refuse the file unless it is sealed (`export --signing-key`) by this ed25519 key.",
)
@json_option
@click.pass_obj
def import_(
    settings: Settings,
    *,
    source: str,
    db: str | None,
    into_live: bool,
    allow_untrailed: bool,
    verify_signature: str | None,
    as_json: bool,
) -> None:
    """Load an export file (or - for stdin) into the ledger, creating it if needed.

    The whole file is checked first, with enqueue's and the workers' own rules: a bad line,
    a file cut short or changed (its trailer missing or not matching), or a stream that the
    ledger holds with a different history, refuses the import before anything is written,
    and the rest is written in one transaction. Streams already present identically are
    skipped, so importing a file twice changes nothing. A ledger with live work (pending or
    leased jobs) is refused unless --into-live. A SQLite file the import created is removed
    again if the import fails.
    """
    url = resolve_url(db) if db is not None else settings.url
    if source != "-" and not Path(source).is_file():
        raise click.BadParameter(f"no file {source!r}", param_hint="FILE")
    progress = StderrCounter()
    with ExitStack() as stack:
        stack.callback(progress.close)
        open_lines = _reopenable(source, stack)
        checked = validate(open_lines, progress=progress, allow_untrailed=allow_untrailed)
        if checked.digest is None:
            progress.close()
            click.echo(f"warning: {_untrailed(source)}", err=True)
        if verify_signature is not None:  # before the target is created or opened
            check_seal(checked, load_public_key(verify_signature))
            progress.close()
            click.echo(_seal_line(checked), err=True)
        stack.enter_context(removed_on_failure(url))
        ledger = stack.enter_context(Ledger.open(url, create=True, pool_size=POOL_SIZE))
        report = ledger.import_history(
            open_lines,
            progress=progress,
            validated=checked,
            into_live=into_live,
            allow_untrailed=allow_untrailed,
            verify_key=verify_signature,
        )
    if as_json:
        echo_json({**plain(report), "database": describe(url)})
    click.echo(_summary(report, describe(url)), err=True)


def _seal_line(end: FileEnd) -> str:
    seal = end.chain
    assert seal is not None
    key = key_id(bytes.fromhex(seal.public_key))
    return (
        f"sealed by key {key}: exported at the source's chain head "
        f"{short_head(seal.events, bytes.fromhex(seal.head))}"
    )


def _untrailed(source: str) -> str:
    name = "stdin" if source == "-" else repr(source)
    return (
        f"{name} is a format-1 export, which has no trailer: a file cut short cannot be told "
        "from a whole one, so it is imported as it stands (--allow-untrailed)"
    )


def _summary(report: ImportReport, where: str) -> str:
    skipped = f"{_n(report.skipped_jobs, 'job')} and {_n(report.skipped_definitions, 'definition')}"
    if report.skipped_runs:
        skipped = f"{_n(report.skipped_runs, 'workflow run')}, {skipped}"
    runs = f" and {_n(report.runs, 'workflow run')}" if report.runs else ""
    if report.events == 0 and report.skipped_events:
        return f"nothing to import into {where}: the file's {skipped} are already there, identical"
    text = (
        f"imported {_n(report.jobs, 'job')}{runs} ({_n(report.events, 'event')}, with "
        f"{_n(report.definitions, 'job-type definition')}) into {where}"
    )
    if report.skipped_events:
        text += f"; skipped {skipped} already there, identical"
    return text
