"""``/api/v1/jobs``: the job listing and one job, in the shapes of ``jobs --json`` and
``show --json`` (with the history and its workflow link added to the one job)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import get, post
from litestar.params import Parameter

from ledger.api.ledger import Ledger
from ledger.api.shaping import job_details_json, job_page_json, record_json, state_json
from ledger.core import diagnostics
from ledger.core.errors import JobNotFoundError
from ledger.core.state import JobState
from ledger.core.tokens import TokenState
from ledger.core.values import JobStatus
from ledger.http.auth import OPERATE, actor, scoped_org, visible
from ledger.views.job_pages import DEFAULT_LIMIT

MAX_LIMIT = 10_000
"""The most jobs one page holds (the ``jobs`` command's bound)."""


@get("/jobs", sync_to_thread=True)
def list_jobs(
    ledger: Ledger,
    caller: TokenState,
    *,
    status: Annotated[list[JobStatus] | None, Parameter(description="repeat for several")] = None,
    job_type: Annotated[str | None, Parameter(query="type")] = None,
    org: str | None = None,
    queue: str | None = None,
    limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[int | None, Parameter(ge=1)] = None,
) -> dict[str, Any]:
    """Jobs, newest enqueue first, a page at a time (``next_cursor``: pass it as ``cursor``)."""
    page = ledger.jobs(
        statuses=status or (),
        job_type=job_type,
        org=scoped_org(caller, org),
        queue=queue,
        limit=limit,
        cursor=cursor,
    )
    return job_page_json(page, None)


@get("/jobs/{job_id:uuid}", sync_to_thread=True)
def show_job(ledger: Ledger, caller: TokenState, job_id: UUID) -> dict[str, Any]:
    """A job's state (its ``workflow`` link among it), diagnostics and history (404: no such
    job, or one of another org than the token's)."""
    state = visible_job(ledger, caller, job_id)
    records = ledger.history(job_id)
    if not records:
        raise JobNotFoundError(f"no job {job_id}")
    # The view and the history are two reads: fold what was read, so both tell one moment.
    state = diagnostics.current_state(records) or state
    findings = diagnostics.diagnose(records, now=ledger.clock.now())
    return {
        **job_details_json(state, records, findings, ledger.blockers(state)),
        "history": [record_json(record) for record in records],
    }


def visible_job(ledger: Ledger, caller: TokenState, job_id: UUID) -> JobState:
    """The job, if the caller's org may see it: another org's job is "no such job" (404),
    never 403, so a token learns nothing of other orgs' ids."""
    state = ledger.get(job_id)
    if state is None or not visible(caller, state.org):
        raise JobNotFoundError(f"no job {job_id}")
    return state


class Reason(msgspec.Struct, frozen=True):
    """A write's optional body: why (the event's reason, after the token's name)."""

    reason: str | None = None


def reason_of(body: Reason | None, caller: TokenState, default: str) -> str:
    given = body.reason if body is not None and body.reason else default
    return f"{actor(caller)}: {given}"


@post("/jobs/{job_id:uuid}/retry", guards=OPERATE, sync_to_thread=True, status_code=200)
def retry_job(
    ledger: Ledger, caller: TokenState, job_id: UUID, data: Reason | None = None
) -> dict[str, Any]:
    """Start a new run of a dead or cancelled job (``job_requeued``, its reason naming the
    token); 409 for a live job."""
    visible_job(ledger, caller, job_id)
    state = ledger.requeue(job_id, reason=reason_of(data, caller, "requeued over the API"))
    return state_json(state)


@post("/jobs/{job_id:uuid}/cancel", guards=OPERATE, sync_to_thread=True, status_code=200)
def cancel_job(
    ledger: Ledger, caller: TokenState, job_id: UUID, data: Reason | None = None
) -> dict[str, Any]:
    """Cancel a pending or leased job (``job_cancelled``, its reason naming the token); 409
    for a finished one."""
    visible_job(ledger, caller, job_id)
    state = ledger.cancel(job_id, reason=reason_of(data, caller, "cancelled over the API"))
    return state_json(state)
