"""``/api/v1``'s writes beyond one job's retry and cancel: a dead letter's requeue, an
external step's completion, a run's cancel. Each needs an ``operate`` token, is held to its
org (another org's job or run is 404) and names the token in its event's ``reason``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec
from litestar import post

from ledger.api.ledger import Ledger
from ledger.api.shaping import state_json, workflow_json
from ledger.core.errors import InvalidTransitionError
from ledger.core.tokens import TokenState
from ledger.core.values import JSON, JobStatus
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.http.auth import OPERATE, actor, visible
from ledger.http.jobs import Reason, reason_of, visible_job


class StepCompletion(msgspec.Struct, frozen=True):
    succeeded: bool
    output: JSON | None = None
    reason: str | None = None


def _visible_run(ledger: Ledger, caller: TokenState, run_id: UUID) -> None:
    view = ledger.workflows.run(run_id)
    if view is None or not visible(caller, view.org):
        raise WorkflowNotFoundError(f"no workflow run {run_id}")


def _run_json(ledger: Ledger, run_id: UUID) -> dict[str, Any]:
    view = ledger.workflows.run(run_id)
    assert view is not None
    return workflow_json(view, ledger.workflows.steps(run_id))


@post("/dead-letters/{job_id:uuid}/requeue", guards=OPERATE, sync_to_thread=True, status_code=200)
def requeue_dead_letter(
    ledger: Ledger, caller: TokenState, job_id: UUID, data: Reason | None = None
) -> dict[str, Any]:
    """A new run of a dead job (``job_requeued``); a job that is not dead is 409."""
    state = visible_job(ledger, caller, job_id)
    if state.status is not JobStatus.DEAD:
        raise InvalidTransitionError(f"job {job_id} is {state.status.value}, not dead")
    requeued = ledger.requeue(job_id, reason=reason_of(data, caller, "requeued over the API"))
    return state_json(requeued)


@post(
    "/workflows/{run_id:uuid}/steps/{step_key:str}/complete",
    guards=OPERATE,
    sync_to_thread=True,
    status_code=200,
)
def complete_step(
    ledger: Ledger, caller: TokenState, run_id: UUID, step_key: str, data: StepCompletion
) -> dict[str, Any]:
    """Complete a waiting external step (``workflow_external_step_completed``); the run with
    its steps after it."""
    _visible_run(ledger, caller, run_id)
    given = data.reason or "completed over the API"
    ledger.workflows.complete_step(
        run_id, step_key, data.succeeded, output=data.output, reason=f"{actor(caller)}: {given}"
    )
    return _run_json(ledger, run_id)


@post("/workflows/{run_id:uuid}/cancel", guards=OPERATE, sync_to_thread=True, status_code=200)
def cancel_workflow(
    ledger: Ledger, caller: TokenState, run_id: UUID, data: Reason | None = None
) -> dict[str, Any]:
    """Cancel a live run (``workflow_cancelled``) and its live steps' jobs."""
    _visible_run(ledger, caller, run_id)
    ledger.workflows.cancel(run_id, reason_of(data, caller, "cancelled over the API"))
    return _run_json(ledger, run_id)
