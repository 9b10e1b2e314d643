"""``/jobs/{id}``: one job's story. Its state, its event timeline drawn (the layout is
:mod:`ledger.http.drawings.job_timeline`), every event in a table, the diagnostics in
words, the decision-replay verdict, its workflow link, and retry/cancel for an operate token.

``/jobs/{id}/body`` is the same body alone: the page's script fetches it again when the event
stream (filtered by ``job=``) says the job moved, and the buttons' posts answer it."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from litestar import Request, get, post
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.api.shaping import event_fields
from ledger.core import diagnostics
from ledger.core.errors import JobNotFoundError
from ledger.core.tokens import TokenState
from ledger.core.values import JobStatus
from ledger.http.auth import OPERATE, actor
from ledger.http.drawings.job_timeline import KINDS, layout
from ledger.http.jobs import visible_job
from ledger.http.pages.view import page

RETRYABLE = (JobStatus.DEAD, JobStatus.CANCELLED)
CANCELLABLE = (JobStatus.PENDING, JobStatus.LEASED)


def _field_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def job_context(ledger: Ledger, caller: TokenState, job_id: UUID) -> dict[str, Any]:
    """The job's state, drawing, events, diagnostics and replay verdict (404: no such job,
    or another org's)."""
    visible_job(ledger, caller, job_id)
    records = ledger.history(job_id)
    state = diagnostics.current_state(records)
    if state is None:
        raise JobNotFoundError(f"no job {job_id}")
    now = ledger.clock.now()
    findings = diagnostics.diagnose(records, now=now)
    drawing = layout(records, findings, now)
    kinds = {mark.version: mark.kind for mark in drawing.marks}
    events = [
        {
            "version": record.originator_version,
            "at": record.event.at,
            "event": record.event.name,
            "kind": kinds.get(record.originator_version, KINDS.get(record.event.name, "other")),
            "fields": [(k, _field_text(v)) for k, v in event_fields(record).items()],
        }
        for record in records
    ]
    return {
        "job": state,
        "drawing": drawing,
        "events": events,
        "findings": findings,
        "replay": ledger.replay_check(job_id),
        "may_retry": state.status in RETRYABLE,
        "may_cancel": state.status in CANCELLABLE,
    }


@get("/jobs/{job_id:uuid}", sync_to_thread=True)
def job_page(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, job_id: UUID
) -> Template:
    return page(request, "job.html", caller, **job_context(ledger, caller, job_id))


@get("/jobs/{job_id:uuid}/body", sync_to_thread=True)
def job_body(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, job_id: UUID
) -> Template:
    return page(request, "fragments/job_body.html", caller, **job_context(ledger, caller, job_id))


@post("/jobs/{job_id:uuid}/retry", guards=OPERATE, sync_to_thread=True, status_code=200)
def retry(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, job_id: UUID
) -> Template:
    """A new run of a dead or cancelled job (``job_requeued`` naming the token)."""
    visible_job(ledger, caller, job_id)
    ledger.requeue(job_id, reason=f"{actor(caller)}: requeued from the dashboard")
    return page(request, "fragments/job_body.html", caller, **job_context(ledger, caller, job_id))


@post("/jobs/{job_id:uuid}/cancel", guards=OPERATE, sync_to_thread=True, status_code=200)
def cancel(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, job_id: UUID
) -> Template:
    """Cancel a pending or leased job (``job_cancelled`` naming the token)."""
    visible_job(ledger, caller, job_id)
    ledger.cancel(job_id, reason=f"{actor(caller)}: cancelled from the dashboard")
    return page(request, "fragments/job_body.html", caller, **job_context(ledger, caller, job_id))
