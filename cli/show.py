"""``jobledger show``: a job's current state, with what only its history tells."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import click

from . import params
from .database import Settings
from .read_target import open_reader
from .render import MISSING, echo_json, fields, json_option, scalar, when
from .state_text import state_lines
from ledger.api.shaping import job_details_json
from ledger.core import diagnostics, facts
from ledger.core.blockers import Blocker
from ledger.core.codec import Record
from ledger.core.diagnostics import Finding
from ledger.core.errors import JobNotFoundError
from ledger.core.state import JobState


def _detail_lines(
    state: JobState,
    records: Sequence[Record],
    findings: Sequence[Finding],
    blockers: Sequence[Blocker],
) -> list[tuple[str, str]]:
    """What ``show`` reads from the history: renewals, the next retry, why a pending job is
    not running, the diagnostics."""
    retry = facts.next_retry_at(state, records)
    lines = [
        ("lease renewals", scalar(facts.lease_renewals(state, records))),
        ("last heartbeat", when(state.last_heartbeat_at)),
        ("next retry", MISSING if retry is None else when(retry)),
    ]
    for index, blocker in enumerate(blockers):
        lines.append(("not running" if index == 0 else "", blocker.message))
    for index, finding in enumerate(findings):
        value = f"{finding.name}: {scalar(finding.value)} ({finding.explanation})"
        lines.append(("diagnostics" if index == 0 else "", value))
    lines.append(("", f"details: jobledger diagnose {state.job_id}"))
    return lines


@click.command()
@click.argument("job", callback=params.job_id)
@json_option
@click.pass_obj
def show(settings: Settings, *, job: UUID, as_json: bool) -> None:
    """Show the current state of job JOB (its id), with its lease renewals, next retry, why
    it is not running if it is pending (run_at to come, queue paused, rate limited, circuit
    breaker open, type disabled) and a summary of its diagnostics (see `jobledger diagnose
    JOB`)."""
    with open_reader(settings) as source:
        state = source.reader.get(job)
        records = source.reader.history(job) if state is not None else []
        now = source.reader.clock.now()
        blockers = source.reader.blockers(job, now) if state is not None else []
    if state is None:
        raise JobNotFoundError(f"no job {job}")
    # The view and the history are two reads: fold what was read, so both describe one moment.
    state = diagnostics.current_state(records) or state
    findings = diagnostics.diagnose(records, now=now)
    if as_json:
        echo_json(source.tagged(job_details_json(state, records, findings, blockers)))
    else:
        details = _detail_lines(state, records, findings, blockers)
        click.echo(fields([*state_lines(state), *details]))
