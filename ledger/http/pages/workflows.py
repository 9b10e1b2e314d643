"""``/workflows`` (the runs, filtered, a page at a time) and ``/workflows/{run}``: the run's
DAG drawn (layout: :mod:`ledger.http.drawings.dag`), each step coloured by its status and
linking to its job, and the run's timeline (its own and its steps' jobs' events)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode
from uuid import UUID

from litestar import Request, get
from litestar.params import Parameter
from litestar.response import Template

from ledger.api.ledger import Ledger
from ledger.core.tokens import TokenState
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.http.auth import scoped_org, visible
from ledger.http.drawings.dag import layout
from ledger.http.pages.view import page

PAGE_SIZE = 50


@get("/workflows", sync_to_thread=True)
def workflow_list(
    request: Request[Any, Any, Any],
    ledger: Ledger,
    caller: TokenState,
    *,
    workflow_type: Annotated[str | None, Parameter(query="type")] = None,
    status: str | None = None,
    cursor: str | None = None,
) -> Template:
    workflow_type, status = workflow_type or None, status or None
    runs = ledger.workflows.runs(
        workflow_type=workflow_type,
        status=status,
        org=scoped_org(caller, None),
        limit=PAGE_SIZE,
        cursor=cursor or None,
    )
    kept = [(k, v) for k, v in (("type", workflow_type), ("status", status)) if v]
    next_page = None
    if runs.next_cursor is not None:
        next_page = "/workflows?" + urlencode([*kept, ("cursor", runs.next_cursor)])
    return page(
        request,
        "workflows.html",
        caller,
        runs=runs.runs,
        filters={"type": workflow_type, "status": status},
        next_page=next_page,
    )


@get("/workflows/{run_id:uuid}", sync_to_thread=True)
def workflow_page(
    request: Request[Any, Any, Any], ledger: Ledger, caller: TokenState, run_id: UUID
) -> Template:
    """The run's header, its DAG and its timeline (404: no such run, or another org's)."""
    run = ledger.workflows.run(run_id)
    graph = ledger.workflows.graph(run_id)
    if run is None or graph is None or not visible(caller, run.org):
        raise WorkflowNotFoundError(f"no workflow run {run_id}")
    drawing = layout([(step.key, step.depends_on) for step in graph.steps])
    steps = {step.key: step for step in graph.steps}
    return page(
        request,
        "workflow.html",
        caller,
        run=run,
        drawing=drawing,
        steps=steps,
        timeline=ledger.workflows.timeline(run_id),
    )
