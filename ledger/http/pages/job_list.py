"""``/jobs``: the job listing with the filters of ``GET /api/v1/jobs`` (status, type, org,
queue) and its cursor paging, each row linking to its job's page."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Request, get
from litestar.params import Parameter
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.core.tokens import TokenState
from ledger.core.values import JobStatus
from ledger.http.auth import scoped_org
from ledger.http.jobs import MAX_LIMIT
from ledger.http.pages.view import page

PAGE_SIZE = 50


@get("/jobs", sync_to_thread=True)
def job_list(
    request: Request[Any, Any, Any],
    ledger: Ledger,
    caller: TokenState,
    *,
    status: list[JobStatus] | None = None,
    job_type: Annotated[str | None, Parameter(query="type")] = None,
    org: str | None = None,
    queue: str | None = None,
    limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = PAGE_SIZE,
    cursor: Annotated[int | None, Parameter(ge=1)] = None,
) -> Template:
    """One page of jobs, newest enqueue first; ``next`` carries the filters and the cursor."""
    # Empty form fields arrive as empty strings: they mean "any".
    job_type, org, queue = (value or None for value in (job_type, org, queue))
    listing = ledger.jobs(
        statuses=status or (),
        job_type=job_type,
        org=scoped_org(caller, org),
        queue=queue,
        limit=limit,
        cursor=cursor,
    )
    filters = {"type": job_type, "org": org, "queue": queue}
    kept = [("status", s.value) for s in status or ()] + [
        (name, value) for name, value in filters.items() if value
    ]
    next_page = None
    if listing.next_cursor is not None:
        next_page = "/jobs?" + urlencode([*kept, ("limit", limit), ("cursor", listing.next_cursor)])
    return page(
        request,
        "jobs.html",
        caller,
        jobs=[entry.state for entry in listing.jobs],
        statuses=[s.value for s in JobStatus],
        chosen={s.value for s in status or ()},
        filters=filters,
        next_page=next_page,
    )
