"""``/dead-letters``: the dead jobs, oldest death first, each with a requeue button for an
operate token (an htmx post that answers the row, replaced in place)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Request, get, post
from litestar.params import Parameter
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidTransitionError
from ledger.core.tokens import TokenState
from ledger.core.values import JobStatus
from ledger.http.auth import OPERATE, actor, scoped_org
from ledger.http.jobs import visible_job
from ledger.http.pages.view import page


@get("/dead-letters", sync_to_thread=True)
def dead_letters(
    request: Request[Any, Any, Any],
    ledger: Ledger,
    caller: TokenState,
    job_type: Annotated[str | None, Parameter(query="type")] = None,
) -> Template:
    letters = ledger.dead_letters(job_type or None, org=scoped_org(caller, None))
    return page(request, "dead_letters.html", caller, letters=letters, job_type=job_type)


@post("/dead-letters/{job_id:uuid}/requeue", guards=OPERATE, sync_to_thread=True, status_code=200)
def requeue(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, job_id: UUID
) -> Template:
    """A new run of the dead job (``job_requeued`` naming the token); the row says so."""
    state = visible_job(ledger, caller, job_id)
    if state.status is not JobStatus.DEAD:
        raise InvalidTransitionError(f"job {job_id} is {state.status.value}, not dead")
    requeued = ledger.requeue(job_id, reason=f"{actor(caller)}: requeued from the dashboard")
    return page(request, "fragments/requeued_row.html", caller, job=requeued)
