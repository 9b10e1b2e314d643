"""``POST /api/v1/jobs`` and ``/jobs/batch``: enqueue over the API, each ``job_enqueued``
naming its token in ``actor`` (docs/events.md).

An org-scoped token enqueues into its own org: a body without ``org`` is given the token's,
a body naming another org is 404 ("no org for this token", as every read filtered by
another org), so a token learns nothing of other orgs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec
from litestar import post
from litestar.response import Response

from ledger.api.ledger import Ledger
from ledger.api.shaping import state_json
from ledger.core.errors import InvalidRequestError
from ledger.core.tokens import TokenState
from ledger.core.values import JSON, EnqueueRequest, Subject, SubjectOp
from ledger.http.auth import OPERATE, actor, scoped_org

MAX_BATCH = 1_000
"""The most jobs one ``/jobs/batch`` request holds (one transaction, all or none)."""


class SubjectBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    source_id: str
    uri: str
    op: Literal["upsert", "delete"] = "upsert"
    revision: str | None = None


class EnqueueBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One job to enqueue: ``Ledger.enqueue``'s arguments (``jobledger enqueue``'s options)."""

    type: str
    payload: dict[str, JSON] = {}
    priority: int | None = None
    run_at: datetime | None = None
    delay_s: float | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    org: str | None = None
    queue: str | None = None
    idempotency_key: str | None = None
    subject: SubjectBody | None = None


class BatchBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    jobs: list[EnqueueBody]


def request_of(body: EnqueueBody, caller: TokenState) -> EnqueueRequest:
    subject = body.subject
    return EnqueueRequest(
        job_type=body.type,
        payload=body.payload,
        priority=body.priority,
        run_at=body.run_at,
        delay_s=body.delay_s,
        max_attempts=body.max_attempts,
        timeout_s=body.timeout_s,
        org=scoped_org(caller, body.org),
        queue=body.queue,
        idempotency_key=body.idempotency_key,
        subject=None
        if subject is None
        else Subject(
            source_id=subject.source_id,
            uri=subject.uri,
            op=SubjectOp(subject.op),
            revision=subject.revision,
        ),
    )


def _outcome(ledger: Ledger, job_id: Any, created: bool) -> dict[str, Any]:
    if job_id is None:
        return {"job": None, "created": False, "reason": "its sync subject has a live job"}
    state = ledger.get(job_id)
    return {"job": None if state is None else state_json(state), "created": created}


@post("/jobs", guards=OPERATE, sync_to_thread=True)
def enqueue_job(ledger: Ledger, caller: TokenState, data: EnqueueBody) -> Response[Any]:
    """Enqueue one job: 201 with the new job, 200 with the existing one for an idempotent
    repeat (or ``job: null`` when its sync subject already has a live job)."""
    plan = ledger.enqueue_outcomes([request_of(data, caller)], actor=actor(caller))
    created = plan.created[0]
    return Response(_outcome(ledger, plan.results[0], created), status_code=201 if created else 200)


@post("/jobs/batch", guards=OPERATE, sync_to_thread=True)
def enqueue_jobs(ledger: Ledger, caller: TokenState, data: BatchBody) -> Response[Any]:
    """Enqueue up to 1,000 jobs in one transaction, all or none: 201 if any was created,
    each result as ``POST /jobs`` answers it, in order."""
    if not 1 <= len(data.jobs) <= MAX_BATCH:
        raise InvalidRequestError(f"a batch holds 1 to {MAX_BATCH} jobs, not {len(data.jobs)}")
    requests = [request_of(body, caller) for body in data.jobs]
    plan = ledger.enqueue_outcomes(requests, actor=actor(caller))
    results = [
        {"job_id": None if job_id is None else str(job_id), "created": created}
        for job_id, created in zip(plan.results, plan.created, strict=True)
    ]
    return Response({"jobs": results}, status_code=201 if any(plan.created) else 200)
