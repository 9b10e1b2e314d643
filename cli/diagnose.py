"""``jobledger diagnose``: every history-derived diagnostic of one job, with its evidence."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import click

from . import params
from .database import Settings
from .job_history import job_records
from .read_target import open_reader
from .render import MISSING, echo_json, json_option, printable, scalar, table, when
from ledger.api.shaping import diagnosis_json
from ledger.core import diagnostics, facts
from ledger.core.codec import Record
from ledger.core.diagnostics import Finding

EVIDENCE_INDENT = "    "


def _finding_text(finding: Finding, records: Sequence[Record]) -> str:
    lines = [f"{finding.name}  {scalar(finding.value)}"]
    lines.append(f"{EVIDENCE_INDENT}{printable(finding.explanation)}")
    evidence = facts.evidence(finding, records)
    if evidence:
        rows = [[str(r.originator_version), type(r.event).name, when(r.event.at)] for r in evidence]
        evidence_table = table(["VERSION", "EVENT", "AT"], rows)
        lines += [f"{EVIDENCE_INDENT}{line}" for line in evidence_table.splitlines()]
    else:
        lines.append(f"{EVIDENCE_INDENT}evidence: none")
    return "\n".join(lines)


def _heading(job: UUID, records: Sequence[Record]) -> str:
    state = diagnostics.current_state(records)
    status = MISSING if state is None else f"{state.status} (stage {printable(state.stage)})"
    return f"job {job}: {status}, {len(records)} events"


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def diagnose(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """Diagnose job JOB (its id) from its history.

    Prints every diagnostic with the events it was derived from.
    """
    with open_reader(settings) as source:
        records = job_records(source.reader, job)
        now = source.reader.clock.now()
    findings = diagnostics.diagnose(records, now=now)
    if as_json:
        echo_json(source.tagged(diagnosis_json(job, findings, records)))
    else:
        blocks = [_heading(job, records), *(_finding_text(f, records) for f in findings)]
        click.echo("\n\n".join(blocks))
