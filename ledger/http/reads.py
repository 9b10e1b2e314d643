"""``/api/v1``'s other reads: dead letters, stats, audit, definitions, workflows; each the
shape its CLI command prints with ``--json``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import get
from litestar.params import Parameter
from litestar.response import Stream

from ledger.api.ledger import Ledger
from ledger.api.shaping import (
    audit_row_json,
    dead_letter_json,
    plain,
    run_page_json,
    workflow_json,
)
from ledger.core.tokens import TokenState
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.http.auth import scoped_org, visible
from ledger.views.audit_query import DEFAULT_LIMIT as AUDIT_LIMIT
from ledger.views.audit_query import MAX_LIMIT as AUDIT_MAX
from ledger.views.audit_query import AuditQuery

RUNS_LIMIT = 50
RUNS_MAX = 10_000


@get("/dead-letters", sync_to_thread=True)
def dead_letters(
    ledger: Ledger,
    caller: TokenState,
    job_type: Annotated[str | None, Parameter(query="type")] = None,
    org: str | None = None,
) -> list[dict[str, Any]]:
    """Dead jobs (of one type, of one org), oldest death first (``dlq --json``)."""
    letters = ledger.dead_letters(job_type, org=scoped_org(caller, org))
    return [dead_letter_json(letter) for letter in letters]


@get("/stats", sync_to_thread=True)
def stats(ledger: Ledger, caller: TokenState, org: str | None = None) -> dict[str, Any]:
    """Counts, throughput windows, oldest due job and run times (``stats --json``), of one
    org's jobs with ``org`` (an org's token: its own, always)."""
    figures: dict[str, Any] = plain(ledger.stats(org=scoped_org(caller, org)))
    return figures


@get("/audit", sync_to_thread=True)
def audit(
    ledger: Ledger,
    caller: TokenState,
    *,
    job: UUID | None = None,
    workflow: UUID | None = None,
    job_type: Annotated[str | None, Parameter(query="type")] = None,
    event: list[str] | None = None,
    worker: str | None = None,
    org: str | None = None,
    status: str | None = None,
    code: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Parameter(ge=1, le=AUDIT_MAX)] = AUDIT_LIMIT,
    order: Literal["newest", "oldest"] = "newest",
    cursor: str | None = None,
    output: Annotated[Literal["json", "jsonl"], Parameter(query="format")] = "json",
    accept: Annotated[str | None, Parameter(header="accept")] = None,
) -> Any:
    """One page of audit rows (``audit --json``: ``rows``, ``next_cursor``), the audit's
    filters as query parameters (``event`` repeats; ``since``/``until`` ISO 8601).

    ``format=jsonl`` (or ``Accept: application/x-ndjson``) streams every row that matches
    instead, one JSON object a line, page after page of ``limit`` rows until the last."""
    query = AuditQuery(
        job=job,
        workflow=workflow,
        job_type=job_type,
        events=tuple(event or ()),
        worker=worker,
        org=scoped_org(caller, org),
        status=status,
        code=code,
        since=since,
        until=until,
        limit=limit,
        order=order,
        cursor=cursor,
    ).check()
    if output == "jsonl" or NDJSON in (accept or ""):
        # The header too: Litestar lets the route's media type (JSON) win over the Stream's.
        return Stream(
            audit_lines(ledger, query), media_type=NDJSON, headers={"Content-Type": NDJSON}
        )
    page = ledger.audit(query)
    return {"rows": [audit_row_json(row) for row in page.rows], "next_cursor": page.next_cursor}


NDJSON = "application/x-ndjson"


def audit_lines(ledger: Ledger, query: AuditQuery) -> Iterator[bytes]:
    """Every row ``query`` matches, a JSON line each, one page read at a time (the stream
    is produced on a worker thread as the client reads it)."""
    encoder = msgspec.json.Encoder()
    while True:
        page = ledger.audit(query)
        yield b"".join(encoder.encode(audit_row_json(row)) + b"\n" for row in page.rows)
        if page.next_cursor is None:
            return
        query = msgspec.structs.replace(query, cursor=page.next_cursor)


@get("/definitions", sync_to_thread=True)
def definitions(ledger: Ledger) -> list[dict[str, Any]]:
    """Every job type's current definition."""
    return [plain(definition) for definition in ledger.definitions()]


@get("/workflows", sync_to_thread=True)
def workflows(
    ledger: Ledger,
    caller: TokenState,
    *,
    workflow_type: Annotated[str | None, Parameter(query="type")] = None,
    status: str | None = None,
    org: str | None = None,
    limit: Annotated[int, Parameter(ge=1, le=RUNS_MAX)] = RUNS_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """Runs in submit order, a page at a time (``workflow list --json``)."""
    page = ledger.workflows.runs(
        workflow_type=workflow_type,
        status=status,
        org=scoped_org(caller, org),
        limit=limit,
        cursor=cursor,
    )
    return run_page_json(page)


@get("/workflows/{run_id:uuid}", sync_to_thread=True)
def workflow(ledger: Ledger, caller: TokenState, run_id: UUID) -> dict[str, Any]:
    """A run with its steps in order (``workflow show --json``; 404: no such run, or one of
    another org)."""
    view = ledger.workflows.run(run_id)
    if view is None or not visible(caller, view.org):
        raise WorkflowNotFoundError(f"no workflow run {run_id}")
    return workflow_json(view, ledger.workflows.steps(run_id))
