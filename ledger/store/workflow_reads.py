"""Reads of the workflow view, for :class:`~ledger.api.reader.Reader`: a run, its steps
(each shown with what its job's own history says: a step whose job is leased is
``running``; its attempt and retries are the job's), and pages of runs.

The run's stream records only what releases or ends something (docs/workflows.md), so the
step view joins the two: the run's row for the step's place in the DAG, the job's row for
how far its job got.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.times import from_us
from ledger.core.values import JSON, Failure, JobStatus
from ledger.core.workflows.spec import StepKind
from ledger.core.workflows.state import RunState, StepState
from ledger.core.workflows.status import RunStatus, StepStatus
from ledger.store.store import Store
from ledger.views.workflows import decode_dependents, decode_header, decode_step


class StepView(NamedTuple):
    """A step as shown: its run's record of it, with its job's progress."""

    key: str
    kind: StepKind
    status: StepStatus
    """The run's status of the step, ``running`` while its job is leased."""
    stage: str | None
    depends_on: tuple[str, ...]
    dependents: tuple[str, ...]
    job_id: UUID | None
    attempt: int
    retries: int
    output: JSON | None
    failure: Failure | None
    code: str | None
    reason: str | None
    released_at: datetime | None
    finished_at: datetime | None


class RunView(NamedTuple):
    """A run's header as shown."""

    run_id: UUID
    workflow_type: str
    org: str | None
    idempotency_key: str | None
    status: RunStatus
    result_step: str | None
    result: JSON | None
    step_count: int
    counts: dict[StepStatus, int]
    recovered_from: UUID | None
    recovered_from_step: str | None
    """The step a recovery re-ran from (``None``: not a recovery)."""
    recovery_reason: str | None
    reason: str | None
    submitted_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    version: int


class RunPage(NamedTuple):
    """A page of runs and the cursor of the next (``None``: the last page)."""

    runs: list[RunView]
    next_cursor: str | None


def _run_view(store: Store, row: Any) -> RunView:
    header: RunState = decode_header(bytes(row["header"]))
    return RunView(
        run_id=store.ids.uuid(row["run_id"]),
        workflow_type=row["workflow_type"],
        org=row["org"],
        idempotency_key=row["idempotency_key"],
        status=RunStatus(row["status"]),
        result_step=row["result_step"],
        result=header.result,
        step_count=row["step_count"],
        counts={status: n for status, n in header.counts.items() if n},
        recovered_from=None
        if row["recovered_from"] is None
        else store.ids.uuid(row["recovered_from"]),
        recovered_from_step=None if header.recovered is None else header.recovered.from_step,
        recovery_reason=None if header.recovered is None else header.recovered.reason,
        reason=header.reason,
        submitted_at=from_us(row["submitted_at"]),
        updated_at=from_us(row["updated_at"]),
        finished_at=None if row["finished_at"] is None else from_us(row["finished_at"]),
        version=row["version"],
    )


def run_view(store: Store, run_id: UUID) -> RunView | None:
    rows = store.read("workflow_run_row", {"run_id": store.ids.key(run_id)})
    return _run_view(store, rows[0]) if rows else None


def step_views(store: Store, run_id: UUID) -> list[StepView]:
    """Every step of the run in its order, with its job's attempt and retries."""
    rows = store.read("workflow_steps_of_run", {"run_id": store.ids.key(run_id)})
    steps: list[tuple[StepState, tuple[str, ...]]] = [
        (decode_step(bytes(row["state"])), decode_dependents(bytes(row["dependents"])))
        for row in rows
    ]
    jobs = store.get_jobs([step.job_id for step, _ in steps if step.job_id is not None])
    views = []
    for step, dependents in steps:
        job = jobs.get(step.job_id) if step.job_id is not None else None
        status = step.status
        if job is not None and status is StepStatus.ENQUEUED and job.status is JobStatus.LEASED:
            status = StepStatus.RUNNING
        views.append(
            StepView(
                key=step.key,
                kind=step.kind,
                status=status,
                stage=getattr(step.request, "stage", None),
                depends_on=tuple(d.step for d in step.request.depends_on),
                dependents=dependents,
                job_id=step.job_id,
                attempt=job.attempt if job is not None else 0,
                retries=job.retries if job is not None else 0,
                output=step.output,
                failure=step.failure if step.failure is not None else _job_failure(job),
                code=step.code,
                reason=step.reason,
                released_at=step.released_at,
                finished_at=step.finished_at,
            )
        )
    return views


def _job_failure(job: Any) -> Failure | None:
    return None if job is None else job.last_error


def run_page(
    store: Store,
    *,
    workflow_type: str | None,
    status: str | None,
    org: str | None,
    limit: int,
    cursor: str | None,
) -> RunPage:
    """Runs in submit order after ``cursor`` (an opaque string from a previous page)."""
    after_at, after_id = -1, UUID(int=0)
    if cursor:
        at_text, _, id_text = cursor.partition(":")
        after_at, after_id = int(at_text), UUID(id_text)
    params = {
        "workflow_type": workflow_type,
        "status": status,
        "org": org,
        "after_at": after_at,
        "after_id": store.ids.key(after_id),
        "limit": limit + 1,
    }
    rows = store.read("workflow_runs_page", params)
    views = [_run_view(store, row) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = f"{last['submitted_at']}:{store.ids.uuid(last['run_id'])}"
    return RunPage(views, next_cursor)
