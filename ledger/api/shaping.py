"""The JSON shapes of the ledger's objects, shared by every front end.

Each function returns builtins (dicts, lists, strings, numbers, booleans, ``None``) ready for
any JSON encoder: the CLI's ``--json`` output is these shapes, indented; the HTTP API and the
dashboard return the same ones, so a script that reads one reads the others. The shapes are a
public contract (``docs/cli.md`` pins them): add keys, never rename or drop one.

Conventions: times are ISO 8601 in UTC (``Z``; the audit rows' to the millisecond, as the
text), ids are strings, an unset value is ``null`` (never a missing key: a reader must not
have to know the defaults).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.core import facts
from ledger.core.plain import plain as plain  # noqa: PLC0414 (re-exported: every shape starts from it)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from uuid import UUID

    from ledger.api.pools import LedgerHealth, PoolHealth
    from ledger.core.blockers import Blocker
    from ledger.core.codec import Record
    from ledger.core.diagnostics import Finding
    from ledger.core.facts import StateChange
    from ledger.core.state import JobState
    from ledger.core.tokens import TokenState
    from ledger.core.values import JSON
    from ledger.store.workflow_reads import RunPage, RunView, StepView
    from ledger.views.audit_query import AuditRow
    from ledger.views.catalog import Projection
    from ledger.views.dead_letters import DeadLetter
    from ledger.views.diff import VerifyReport
    from ledger.views.job_pages import JobPage
    from ledger.workflows.workflow_timeline import TimelineEntry
    from ledger.workflows.workflow_writes import WorkflowStarted


def iso_millis(moment: datetime) -> str:
    """``moment`` as ISO 8601 to the millisecond, ``Z``-suffixed for UTC (as text output
    shows times, and as audit rows carry them)."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def without_nulls(value: JSON) -> JSON:
    """``value`` with every ``null`` member of its objects left out, at any depth of objects."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    return value


# --- jobs -----------------------------------------------------------------------------------


def state_json(state: JobState) -> dict[str, JSON]:
    """The job's whole state, with the request's fields a reader looks for lifted to the top."""
    lifted = {
        "job_id": str(state.job_id),
        "job_type": state.job_type,
        "status": state.status.value,
        "payload": state.payload,
        "org": state.org,
        "queue": state.queue,
        "idempotency_key": state.idempotency_key,
        "subject": plain(state.subject),
    }
    return {**lifted, **plain(state)}


def job_details_json(
    state: JobState,
    records: Sequence[Record],
    findings: Sequence[Finding],
    blockers: Sequence[Blocker] = (),
) -> dict[str, JSON]:
    """The state plus what only the history tells (``show --json``): the current attempt's
    lease renewals, the next retry, the diagnostics, and why a pending job is not running
    (``blocked_by``, :mod:`ledger.core.blockers`)."""
    return {
        **state_json(state),
        "lease_renewals": facts.lease_renewals(state, records),
        "next_retry_at": plain(facts.next_retry_at(state, records)),
        "diagnostics": [plain(finding) for finding in findings],
        "blocked_by": [plain(blocker) for blocker in blockers],
    }


def job_page_json(page: JobPage, at: datetime | None) -> dict[str, JSON]:
    """One page of a job listing (``jobs --json``); ``at`` is the moment of a time-travel
    listing (``null`` for the current jobs)."""
    return {
        "at": None if at is None else plain(at),
        "jobs": [state_json(job.state) for job in page.jobs],
        "next_cursor": page.next_cursor,
    }


def dead_letter_json(letter: DeadLetter) -> dict[str, JSON]:
    """A dead job (``dlq --json``): what it was, why and when it died, where it had got to."""
    job = letter.snapshot
    return {
        "job_id": str(letter.job_id),
        "job_type": letter.job_type,
        "org": job.org,
        "subject": plain(job.subject),
        "dead_at": plain(letter.dead_at),
        "failure": plain(letter.failure),
        "run_number": job.run_number,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "payload": job.payload,
        "checkpoint": job.checkpoint,
    }


# --- history --------------------------------------------------------------------------------


def record_ref_json(record: Record) -> dict[str, JSON]:
    """Which event a record is: its version in the job's stream, its name, its time."""
    return {
        "version": record.originator_version,
        "event": type(record.event).name,
        "at": plain(record.event.at),
    }


def event_fields(record: Record) -> dict[str, JSON]:
    """The event's own fields (its time is the record's ``at``, so it is left out here)."""
    values: dict[str, JSON] = plain(record.event)
    del values["at"]
    return values


def record_json(record: Record) -> dict[str, JSON]:
    """One event of a job's history (``history --json``, one line of ``--follow --json``)."""
    return {**record_ref_json(record), "fields": event_fields(record)}


def diagnosis_json(
    job_id: UUID, findings: Sequence[Finding], records: Sequence[Record]
) -> dict[str, JSON]:
    """Every diagnostic of a job with the events it was derived from (``diagnose --json``)."""
    return {
        "job_id": str(job_id),
        "findings": [
            {
                "name": finding.name,
                "value": finding.value,
                "explanation": finding.explanation,
                "evidence": [record_ref_json(r) for r in facts.evidence(finding, records)],
            }
            for finding in findings
        ],
    }


def timeline_json(entries: Sequence[StateChange]) -> list[dict[str, JSON]]:
    """Each event with the state fields it changed, from and to (``timeline --json``)."""
    return [
        {
            "version": entry.record.originator_version,
            "at": plain(entry.record.event.at),
            "event": entry.record.event.name,
            "changes": {
                name: {"from": plain(old), "to": plain(new)}
                for name, (old, new) in entry.changes.items()
            },
        }
        for entry in entries
    ]


# --- audit ---------------------------------------------------------------------------------

AUDIT_FIELDS = (
    "position",
    "at",
    "event",
    "job_id",
    "job_type",
    "org",
    "worker_id",
    "run_number",
    "attempt",
    "code",
    "workflow_run",
    "step_key",
)
"""An audit row's keys, in order (also the CSV export's columns)."""


def audit_row_json(row: AuditRow) -> dict[str, JSON]:
    """One row of the audit view (``audit --json``, ``--format jsonl``, ``--format csv``)."""
    values: dict[str, JSON] = plain(row)
    values["at"] = iso_millis(row.at)
    return {name: values[name] for name in AUDIT_FIELDS}


# --- projections ----------------------------------------------------------------------------


def projection_json(projection: Projection) -> dict[str, JSON]:
    """A projection of the catalogue (``projections list --json``)."""
    return {
        "name": projection.name,
        "mode": projection.mode,
        "version": projection.version,
        "tables": [projection.table],
        "events": list(projection.events),
        "description": projection.description,
    }


def verify_report_json(report: VerifyReport) -> dict[str, JSON]:
    """What a verify found, with its overall verdict (``projections verify --json``)."""
    return {**plain(report), "clean": report.clean}


# --- API tokens -----------------------------------------------------------------------------


def token_json(token: TokenState) -> dict[str, JSON]:
    """A token as ``token list --json`` and the API show it: never its secret or hash."""
    return {
        "token_id": str(token.token_id),
        "org": token.org,
        "role": token.role.value,
        "name": token.label,
        "created_at": plain(token.created_at),
        "revoked_at": plain(token.revoked_at),
        "active": token.active,
    }


# --- workflows ------------------------------------------------------------------------------


def workflow_started_json(started: WorkflowStarted) -> dict[str, JSON]:
    """A started run (``workflow start --json``, ``workflow recover --json``): ``created``
    false when an idempotent repeat found the existing run."""
    return {"run_id": str(started.run_id), "created": started.created}


def run_view_json(run: RunView) -> dict[str, JSON]:
    """A run's header (each run of ``workflow list --json``)."""
    values: dict[str, JSON] = plain(run._asdict())
    values["counts"] = {str(status): count for status, count in run.counts.items()}
    return values


def step_view_json(step: StepView) -> dict[str, JSON]:
    """A step as shown (``workflow show --json``): ``status`` is ``running`` while its job
    is leased; ``attempt`` and ``retries`` are its job's."""
    result: dict[str, JSON] = plain(step._asdict())
    return result


def workflow_json(run: RunView, steps: Sequence[StepView]) -> dict[str, JSON]:
    """A run with its steps in order (``workflow show --json``)."""
    return {**run_view_json(run), "steps": [step_view_json(step) for step in steps]}


def run_page_json(page: RunPage) -> dict[str, JSON]:
    """One page of runs (``workflow list --json``)."""
    return {"runs": [run_view_json(run) for run in page.runs], "next_cursor": page.next_cursor}


def workflow_timeline_json(entries: Sequence[TimelineEntry]) -> list[dict[str, JSON]]:
    """A run's timeline (``workflow timeline --json``): each event with its stream (the run
    id, or the step's job id), the step whose job wrote it (``null``: the run's own), its
    version in its stream, its name, time and fields."""
    return [
        {
            "stream": str(entry.record.originator_id),
            "step": entry.step,
            **record_json(entry.record),
        }
        for entry in entries
    ]


# --- worker pools ---------------------------------------------------------------------------


def pool_health_json(pool: PoolHealth) -> dict[str, JSON]:
    """One pool's report with ``stale`` (silent past three report intervals: counted dead)."""
    shaped: dict[str, JSON] = plain(pool.report)
    shaped["stale"] = pool.stale
    return shaped


def ledger_health_json(health: LedgerHealth) -> dict[str, JSON]:
    """The ledger's health (``status``, ``reasons``, ``at``) and every pool it was judged
    from: what ``jobledger pools --json`` prints and the HTTP server's ``/health`` serves."""
    return {
        "status": health.status,
        "reasons": list(health.reasons),
        "at": plain(health.at),
        "live_pools": health.live_pools,
        "pools": [pool_health_json(pool) for pool in health.pools],
    }
