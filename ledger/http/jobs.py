"""``/api/v1/jobs``: the job listing and one job, in the shapes of ``jobs --json`` and
``show --json`` (with the history and its workflow link added to the one job)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import get
from litestar.params import Parameter

from ledger.api.ledger import Ledger
from ledger.api.shaping import job_details_json, job_page_json, record_json
from ledger.core import diagnostics
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JobStatus
from projections.rules.job_list import DEFAULT_LIMIT

MAX_LIMIT = 10_000
"""The most jobs one page holds (the ``jobs`` command's bound)."""


@get("/jobs", sync_to_thread=True)
def list_jobs(
    ledger: Ledger,
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
        org=org,
        queue=queue,
        limit=limit,
        cursor=cursor,
    )
    return job_page_json(page, None)


@get("/jobs/{job_id:uuid}", sync_to_thread=True)
def show_job(ledger: Ledger, job_id: UUID) -> dict[str, Any]:
    """A job's state (its ``workflow`` link among it), diagnostics and history (404: no such
    job)."""
    state = ledger.get(job_id)
    records = ledger.history(job_id) if state is not None else []
    if state is None or not records:
        raise JobNotFoundError(f"no job {job_id}")
    # The view and the history are two reads: fold what was read, so both tell one moment.
    state = diagnostics.current_state(records) or state
    findings = diagnostics.diagnose(records, now=ledger.clock.now())
    return {
        **job_details_json(state, records, findings),
        "history": [record_json(record) for record in records],
    }
