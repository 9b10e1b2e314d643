"""``/api/v1/projections``: each view's status, and its verify as a background task.

The views span every org, so an org-scoped token is refused (403); the status is for any
token of no org, the verify (a full replay of the history) for an ``admin`` one."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import get, post
from litestar.exceptions import NotFoundException
from litestar.response import Response

from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.http.auth import ADMIN, EVERY_ORG
from ledger.http.verify_tasks import VerifyTasks


@get("/projections", guards=EVERY_ORG, sync_to_thread=True)
def projections(ledger: Ledger) -> list[dict[str, Any]]:
    """Each projection's name, mode, code and recorded version, stale or not, position and
    lag in events (``projections status --json``)."""
    statuses: list[dict[str, Any]] = plain(ledger.projections().status())
    return statuses


@post("/projections/verify", guards=ADMIN)
async def start_verify(verify_tasks: VerifyTasks) -> Response[dict[str, Any]]:
    """Start verifying every view against the history: 202 with the task; while one runs,
    200 with the running one (never a second replay)."""
    task, started = verify_tasks.start()
    return Response(plain(task), status_code=202 if started else 200)


@get("/projections/verify/{task_id:uuid}", guards=ADMIN)
async def verify_result(verify_tasks: VerifyTasks, task_id: UUID) -> dict[str, Any]:
    """A verify task: ``running``, ``ok``, ``differences`` (``report`` says which rows) or
    ``failed`` (``error``)."""
    task = verify_tasks.get(task_id)
    if task is None:
        raise NotFoundException(f"no verify task {task_id}")
    shaped: dict[str, Any] = plain(task)
    return shaped
