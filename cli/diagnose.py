"""``jobledger diagnose``: every history-derived diagnostic of one job, with its evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

import click

from cli import params
from cli.database import Settings, open_ledger
from cli.render import MISSING, echo_json, json_option, plain, table, when
from ledger.core import diagnostics
from ledger.core.codec import Record
from ledger.core.diagnostics import Finding
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JSON

EVIDENCE_INDENT = "    "


def _value_text(value: bool | int | float | None) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _evidence(finding: Finding, by_version: Mapping[int, Record]) -> list[Record]:
    """The records a finding names, in the order it names them."""
    return [by_version[version] for version in finding.evidence]


def _evidence_json(record: Record) -> dict[str, JSON]:
    return {
        "version": record.originator_version,
        "event": type(record.event).name,
        "at": plain(record.event.at),
    }


def _finding_text(finding: Finding, by_version: Mapping[int, Record]) -> str:
    lines = [f"{finding.name}  {_value_text(finding.value)}"]
    lines.append(f"{EVIDENCE_INDENT}{finding.explanation}")
    evidence = _evidence(finding, by_version)
    if evidence:
        rows = [[str(r.originator_version), type(r.event).name, when(r.event.at)] for r in evidence]
        evidence_table = table(["VERSION", "EVENT", "AT"], rows)
        lines += [f"{EVIDENCE_INDENT}{line}" for line in evidence_table.splitlines()]
    else:
        lines.append(f"{EVIDENCE_INDENT}evidence: none")
    return "\n".join(lines)


def _heading(job: UUID, records: Sequence[Record]) -> str:
    state = diagnostics.current_state(records)
    status = MISSING if state is None else f"{state.status} (stage {state.stage})"
    return f"job {job}: {status}, {len(records)} events"


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def diagnose(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """Diagnose job JOB (its id) from its history.

    Prints every diagnostic with the events it was derived from.
    """
    with open_ledger(settings.url) as ledger:
        records = ledger.history(job)
        now = ledger.clock.now()
    if not records:  # history() is empty for an unknown id and for a job type's stream
        raise JobNotFoundError(f"no job {job}")
    findings = diagnostics.diagnose(records, now=now)
    by_version = {record.originator_version: record for record in records}
    if as_json:
        echo_json(
            {
                "job_id": str(job),
                "findings": [
                    {
                        "name": finding.name,
                        "value": finding.value,
                        "explanation": finding.explanation,
                        "evidence": [_evidence_json(r) for r in _evidence(finding, by_version)],
                    }
                    for finding in findings
                ],
            }
        )
    else:
        blocks = [_heading(job, records), *(_finding_text(f, by_version) for f in findings)]
        click.echo("\n\n".join(blocks))
